package pgcdc

import (
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"
)

// TestResnapshotAssumptions proves on the real server what the re-snapshot chunk protocol
// (resnap_window.go) assumes of PostgreSQL, by reading a pgoutput slot with
// pg_logical_slot_peek_binary_changes:
//   - a watermark -- a transactional logical message in a transaction of its own -- is decoded
//     at its commit, between the transactions committed before it and those committed after
//     it, also when one of the latter began (and changed a row) before it; and it is decoded
//     at once, its commit flushing the WAL (a non-transactional message is not flushed on PG
//     15: found by this test, the high one never arrived on a quiet server);
//   - such a transaction's change has an LSN below the low watermark's commit although it
//     commits after it -- the case the protocol's wait for W exists for;
//   - a transaction in progress at a REPEATABLE READ snapshot S is in W = pg_snapshot_xip(S)
//     plus [pg_snapshot_xmax(S), N), N a pg_current_xact_id() taken after S -- NOT always in
//     pg_snapshot_xip(S): xmax is latestCompletedXid+1, so the newest transactions in progress
//     are invisible by xmax alone (found by this test: T1 was xmin = xmax, xip empty);
//     pgoutput's BEGIN carries its xid's low 32 bits, and pg_xact_status says 'committed' once
//     it committed.
func TestResnapshotAssumptions(t *testing.T) {
	f := newSlotFixture(t, "resnap_assume_")
	ctx, table := f.ctx, f.table
	admin, writer, reader := f.admin, f.conn(), f.conn()
	exec := f.exec
	emit := func(content string) {
		t.Helper()
		exec(admin, "BEGIN")
		exec(admin, "SELECT pg_logical_emit_message(true, 'tributary.assume', $1::text)", content)
		exec(admin, "COMMIT")
	}

	exec(admin, "INSERT INTO "+table+" VALUES (1, 1)") // committed before the low watermark
	// T1 begins and changes a row before the low watermark, and commits after it.
	exec(writer, "BEGIN")
	exec(writer, "UPDATE "+table+" SET n = 2 WHERE id = 1")
	var t1 uint64
	if err := writer.QueryRow(ctx, "SELECT pg_current_xact_id()::text::bigint").Scan(&t1); err != nil {
		t.Fatal(err)
	}
	emit("low")
	// The chunk's snapshot: T1 is in progress there, and its change invisible.
	exec(reader, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
	var xip string
	var xmax uint64
	if err := reader.QueryRow(ctx, `SELECT coalesce((SELECT string_agg(x::text, ',') FROM pg_snapshot_xip(s) x), ''),
		pg_snapshot_xmax(s)::text::bigint FROM pg_current_snapshot() s`).Scan(&xip, &xmax); err != nil {
		t.Fatal(err)
	}
	var next uint64 // every xid assigned before S is below it
	if err := admin.QueryRow(ctx, "SELECT pg_current_xact_id()::text::bigint").Scan(&next); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := reader.QueryRow(ctx, "SELECT n FROM "+table+" WHERE id = 1").Scan(&n); err != nil {
		t.Fatal(err)
	}
	exec(reader, "COMMIT")
	inW := strings.Contains(","+xip+",", ","+strconv.FormatUint(t1, 10)+",") || (xmax <= t1 && t1 < next)
	if !inW || n != 1 {
		t.Fatalf("snapshot: xip %q, xmax %d, next %d, n = %d; want T1 (%d) in W and n = 1", xip, xmax, next, n, t1)
	}
	t.Logf("T1 %d: xip %q, xmax %d, next %d", t1, xip, xmax, next)
	exec(writer, "COMMIT")
	var status string
	if err := admin.QueryRow(ctx, "SELECT pg_xact_status($1::text::xid8)", strconv.FormatUint(t1, 10)).Scan(&status); err != nil {
		t.Fatal(err)
	}
	if status != "committed" {
		t.Fatalf("pg_xact_status of T1 after its commit: %q", status)
	}
	emit("high")

	var seq []string
	var updateLSN, low, high pglogrepl.LSN
	var beginXid, txXid uint32
	var last string // the content of the message of the transaction being decoded
	for _, p := range f.peek() {
		switch m := p.msg.(type) {
		case *pglogrepl.LogicalDecodingMessage:
			if m.Prefix == "tributary.assume" && m.Transactional {
				seq = append(seq, string(m.Content))
				last = string(m.Content)
			}
		case *pglogrepl.BeginMessage:
			seq = append(seq, "begin")
			txXid, last = m.Xid, ""
		case *pglogrepl.InsertMessage:
			seq = append(seq, "insert")
		case *pglogrepl.UpdateMessage:
			seq = append(seq, "update")
			updateLSN, beginXid = p.lsn, txXid // the update is T1's
		case *pglogrepl.CommitMessage:
			seq = append(seq, "commit")
			switch last {
			case "low":
				low = m.CommitLSN
			case "high":
				high = m.CommitLSN
			}
		}
	}
	if got, want := strings.Join(seq, " "), "begin insert commit begin low commit begin update commit begin high commit"; got != want {
		t.Fatalf("decoded order %q, want %q", got, want)
	}
	if beginXid != uint32(t1) {
		t.Fatalf("BEGIN's xid %d, want T1's low 32 bits %d", beginXid, uint32(t1))
	}
	if !(updateLSN != 0 && updateLSN < low && low < high) {
		t.Fatalf("T1's change at %s, low watermark's commit %s, high's %s: want the change below the low watermark", updateLSN, low, high)
	}
	t.Logf("T1's change at %s below the low watermark %s, decoded after it", updateLSN, low)
}
