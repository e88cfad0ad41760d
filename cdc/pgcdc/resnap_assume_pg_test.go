package pgcdc_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/tributary-dev/tributary/internal/testenv"
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
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sfx := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	table, pub, slot := "resnap_assume_"+sfx, "resnap_assume_pub_"+sfx, "resnap_assume_slot_"+sfx
	conn := func() *pgx.Conn {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		return c
	}
	// Registered before the connections: cleanups run last-in first-out, so the connections
	// (and T1, should the test fail with it open) are closed before the table is dropped.
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer ccancel()
		c, err := pgx.Connect(cctx, dsn)
		if err != nil {
			return
		}
		defer c.Close(cctx)
		_, _ = c.Exec(cctx, "SELECT pg_drop_replication_slot($1)", slot)
		_, _ = c.Exec(cctx, "DROP PUBLICATION IF EXISTS "+pub)
		_, _ = c.Exec(cctx, "DROP TABLE IF EXISTS "+table)
	})
	admin, writer, reader := conn(), conn(), conn()
	exec := func(c *pgx.Conn, q string, args ...any) {
		t.Helper()
		if _, err := c.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(admin, "CREATE TABLE "+table+" (id int PRIMARY KEY, n int)")
	exec(admin, "CREATE PUBLICATION "+pub+" FOR TABLE "+table)
	exec(admin, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", slot)
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

	rows, err := admin.Query(ctx, `SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL,
		'proto_version', '1', 'publication_names', $2, 'messages', 'true')`, slot, pub)
	if err != nil {
		t.Fatal(err)
	}
	var seq []string
	var updateLSN, low, high pglogrepl.LSN
	var beginXid, txXid uint32
	var last string // the content of the message of the transaction being decoded
	for rows.Next() {
		var lsnText string
		var data []byte
		if err := rows.Scan(&lsnText, &data); err != nil {
			t.Fatal(err)
		}
		lsn, err := pglogrepl.ParseLSN(lsnText)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := pglogrepl.Parse(data)
		if err != nil {
			t.Fatalf("pgoutput message at %s: %v", lsnText, err)
		}
		switch m := msg.(type) {
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
			updateLSN, beginXid = lsn, txXid // the update is T1's
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
	if err := rows.Err(); err != nil {
		t.Fatal(err)
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
