package pgcdc_test

import (
	"context"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// TestSlotInfo follows a slot through its life: missing, held by an open stream (active, with
// the walsender's pid), released when the stream closes, gone after Drop.
func TestSlotInfo(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sfx := suffix(t)
	table := "mir_slotinfo_" + sfx
	if err := execSQL(ctx, dsn, false, "CREATE TABLE "+table+" (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = execSQL(context.Background(), dsn, false, "DROP TABLE IF EXISTS "+table) })
	src, err := pgcdc.New(dsn, &pgcdc.Options{Name: "mir_" + sfx, Slot: "mir_" + sfx, Publication: "mir_" + sfx,
		Tables: []pgcdc.Table{{Name: table}}, Snapshot: cdc.SnapshotNever})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = src.Drop(dctx)
	})

	info, err := src.SlotInfo(ctx)
	if err != nil || info.SlotExists || info.PublicationExists || info.Slot != "mir_"+sfx {
		t.Fatalf("before Open: %+v, %v", info, err)
	}
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() }) // before the Drop above: cleanups run last first
	// The stream starts replicating on its own goroutine: the slot turns active shortly after Open.
	for deadline := time.Now().Add(time.Minute); ; {
		if info, err = src.SlotInfo(ctx); err != nil {
			t.Fatal(err)
		}
		if info.Active || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !info.SlotExists || !info.PublicationExists || !info.Active || info.ActivePID == 0 ||
		info.RestartLSN == "" || info.ConfirmedLSN == "" {
		t.Fatalf("with a stream open: %+v", info)
	}
	st.Close()
	for deadline := time.Now().Add(time.Minute); ; {
		if info, err = src.SlotInfo(ctx); err != nil {
			t.Fatal(err)
		}
		if !info.Active {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the slot is still active a minute after the stream closed: %+v", info)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := src.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	if info, err = src.SlotInfo(ctx); err != nil || info.SlotExists || info.PublicationExists {
		t.Fatalf("after Drop: %+v, %v", info, err)
	}
}
