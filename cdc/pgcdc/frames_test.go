package pgcdc

import (
	"bytes"
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/tributary-dev/tributary/cdc"
)

// TestFramesNeverWaitForMoreTraffic: the reader hands a batch over as soon as nothing more is
// buffered, so a transaction whose frames are followed by silence is delivered during the
// silence, not when the next message arrives. The fake server sends one transaction and then
// neither sends nor closes until the test has the event.
func TestFramesNeverWaitForMoreTraffic(t *testing.T) {
	src, err := New("postgres://nobody@127.0.0.1:1/db", &Options{Name: "frames", Tables: []Table{{Schema: "public", Name: "t"}}})
	if err != nil {
		t.Fatal(err)
	}
	table := Table{Schema: "public", Name: "t"}
	cachedTestTable(src, table, 1)
	frames := [][]byte{
		xlogData(0x100, msgBegin(0x300, 77)),
		xlogData(0x100, msgRelation(1, "public", "t")),
		xlogData(0x200, msgInsert(1, tuple(fullRow...))),
		xlogData(0x300, msgCommit(0x300, 0x310)),
	}
	hold := make(chan struct{})
	w := startWalsender(t, &walsender{hold: hold}, frames)
	ctx := context.Background()
	conn, err := w.connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	st := newStream(src, nil, conn, &plan{database: "db", tables: []Table{table}})
	ended := make(chan error, 1)
	go func() { ended <- st.receive(ctx) }()

	select {
	case ev := <-st.events:
		close(hold)
		if ev.Op != cdc.Insert || ev.TxID != "77" || ev.Checkpoint == nil || !reflect.DeepEqual(ev.After, fullRowValues()) {
			t.Errorf("event %+v", ev)
		}
		if pos, ok := ev.Position.(Position); !ok || pos.LSN != 0x200 || pos.Commit != 0x300 {
			t.Errorf("position %#v", ev.Position)
		}
	case err := <-ended:
		close(hold)
		t.Fatalf("stream ended first: %v", err)
	case <-time.After(30 * time.Second):
		close(hold)
		t.Fatal("the transaction was not delivered while the server was silent")
	}
	if err := <-ended; err == nil || err.Error() != "pgcdc: the server ended the replication stream" {
		t.Errorf("end: %v", err)
	}
}

// TestStatusUpdateMatchesPglogrepl: the status update the stream writes straight to the
// connection is byte for byte the one pglogrepl sends through pgconn.
func TestStatusUpdateMatchesPglogrepl(t *testing.T) {
	got := make(chan []byte, 2)
	w := startWalsender(t, &walsender{copyIn: got}, nil)
	ctx := context.Background()
	conn, err := w.connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	pos := pglogrepl.LSN(0x1_2345_6789)
	now := time.Date(2026, 1, 2, 3, 4, 5, 678901000, time.UTC)
	if err := pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: pos, WALFlushPosition: pos, WALApplyPosition: pos, ClientTime: now,
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Conn().Write(statusUpdate(pos, pos, now, false)); err != nil {
		t.Fatal(err)
	}
	want, ours := <-got, <-got
	if !bytes.Equal(ours, want) {
		t.Errorf("status update\n%x\nwant\n%x", ours, want)
	}
}
