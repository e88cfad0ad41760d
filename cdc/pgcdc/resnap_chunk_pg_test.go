package pgcdc

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
)

// TestResnapshotChunkOnServer runs the chunk protocol's steps (readChunk, verifyChunk) against
// the real server while a transaction changes a row of the chunk, feeds the window with what a
// pgoutput slot decoded between the watermarks (pg_logical_slot_peek_binary_changes), and
// checks its decision: the row the transaction changed is dropped, the others are kept at the
// low watermark's commit LSN; the check snapshot S2 sees the transaction's change; a
// transaction that stays open makes the chunk busy.
func TestResnapshotChunkOnServer(t *testing.T) {
	f := newSlotFixture(t, "resnap_chunk_")
	ctx, table := f.ctx, f.table
	admin, writer, reader := f.admin, f.conn(), f.conn()
	exec := f.exec
	exec(admin, "INSERT INTO "+table+" SELECT g, g FROM generate_series(1, 10) g")
	spec := &chunkSpec{schema: "public", table: table, cols: []string{"id", "n"}, key: []int{0}, keyOIDs: []uint32{23},
		after: []string{"1"}, limit: 5, mark: "test " + table, wait: 20 * time.Second}

	// T1 holds row 3 changed while the chunk is read, and commits while readChunk waits for W.
	exec(writer, "BEGIN")
	exec(writer, "UPDATE "+table+" SET n = 30 WHERE id = 3")
	var t1 uint64
	if err := writer.QueryRow(ctx, "SELECT pg_current_xact_id()::text::bigint").Scan(&t1); err != nil {
		t.Fatal(err)
	}
	type result struct {
		cr  *chunkRead
		err error
	}
	done := make(chan result, 1)
	go func() {
		cr, err := readChunk(ctx, reader, spec)
		done <- result{cr, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("readChunk returned while a transaction of W was open: %+v %v", r.cr, r.err)
	case <-time.After(500 * time.Millisecond):
	}
	exec(writer, "COMMIT")
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	cr := r.cr
	var ids []string
	for i, k := range cr.keys {
		ids = append(ids, k[0]+"="+string(cr.rows[i][1]))
	}
	if got := strings.Join(ids, ","); got != "2=2,3=3,4=4,5=5,6=6" || !cr.more {
		t.Fatalf("chunk after key 1: %s (more %v), want rows 2..6 as the snapshot saw them, more", got, cr.more)
	}
	inW := false
	for _, x := range cr.w {
		inW = inW || x == uint32(t1)
	}
	if !inW || !cr.committed[uint32(t1)] {
		t.Fatalf("W %v, committed %v: want T1 (%d) in W, committed", cr.w, cr.committed, t1)
	}

	// The window, fed with what the slot decoded.
	w := newResnapWindow()
	var xid uint32
	var mark string
	var low pglogrepl.LSN
	highSeen := false
	for _, p := range f.peek() {
		switch m := p.msg.(type) {
		case *pglogrepl.BeginMessage:
			xid, mark = m.Xid, ""
		case *pglogrepl.LogicalDecodingMessage:
			if m.Prefix == resnapPrefix {
				mark = string(m.Content)
			}
		case *pglogrepl.UpdateMessage:
			w.change(keyString([]string{string(m.NewTuple.Columns[0].Data)}))
		case *pglogrepl.CommitMessage:
			switch mark {
			case spec.mark + " low":
				low = m.CommitLSN
				w.lowWatermark(low)
			case spec.mark + " high":
				highSeen = true
			default:
				w.commit(xid)
			}
		}
	}
	if low == 0 || !highSeen {
		t.Fatalf("watermarks decoded: low %s, high %v", low, highSeen)
	}
	keys := make([]string, len(cr.keys))
	for i, k := range cr.keys {
		keys[i] = keyString(k)
	}
	w.read(cr.w, keys)
	out := w.highWatermark(func(x uint32) bool { return cr.committed[x] })
	var kept []string
	for i, k := range cr.keys {
		if out.Keep[i] {
			kept = append(kept, k[0])
		}
	}
	// Verify may be set: transactions of other sessions (make check runs packages side by
	// side) can be in W, and their commits, of tables this publication does not hold, are
	// never decoded here. T1's commit was decoded, so T1 alone never sets it.
	if got := strings.Join(kept, ","); got != "2,4,5,6" || out.Version != low {
		t.Fatalf("decision: kept %s at %s, want 2,4,5,6 at the low watermark's commit %s", got, out.Version, low)
	}
	if !w.seen[uint32(t1)] {
		t.Fatalf("T1's commit in the window was not recorded")
	}

	// S2 sees T1's commit: row 3 differs from the chunk's.
	s2, err := verifyChunk(ctx, reader, spec, cr.keys, cr.done)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(s2[keyString([]string{"3"})][1]); got != "30" || len(s2) != 5 {
		t.Fatalf("S2: row 3 n = %q, %d rows; want 30 and the chunk's 5 rows", got, len(s2))
	}

	// A transaction of W that stays open makes the chunk busy.
	exec(writer, "BEGIN")
	exec(writer, "UPDATE "+table+" SET n = 40 WHERE id = 4")
	busy := *spec
	busy.wait = 300 * time.Millisecond
	if _, err := readChunk(ctx, reader, &busy); !errors.Is(err, errChunkBusy) {
		t.Fatalf("readChunk with a transaction open beyond the wait: %v, want errChunkBusy", err)
	}
	exec(writer, "ROLLBACK")
}
