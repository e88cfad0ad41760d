package pgcdc

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"
	"github.com/tributary-dev/tributary/cdc"
)

// TestMeasureLag: what Lag makes of the server's answer, for every kind of checkpoint and slot
// state (doc.go, Lag).
func TestMeasureLag(t *testing.T) {
	src, err := New("postgres://u:hunter2@127.0.0.1:1/db", &Options{Slot: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	str := func(l pglogrepl.LSN) *string { s := l.String(); return &s }
	slot := func(restart, confirmed pglogrepl.LSN, status string) *slotRow {
		return &slotRow{exists: true, kind: "logical", plugin: "pgoutput", database: "db", wantedDatabase: "db",
			restart: str(restart), confirmed: str(confirmed), walStatus: status}
	}
	stream := func(l pglogrepl.LSN) *decodedCheckpoint { return &decodedCheckpoint{lsn: l} }
	snapshot := func(l pglogrepl.LSN) *decodedCheckpoint {
		return &decodedCheckpoint{lsn: l, snap: &snapshotState{}, floor: l - 1}
	}
	const head = pglogrepl.LSN(0x10000)
	creating := slot(0x4000, 0, "reserved")
	creating.confirmed = nil
	cases := []struct {
		name   string
		row    *slotRow
		resume *decodedCheckpoint
		want   cdc.SourceLag
	}{
		{"no slot, no checkpoint", &slotRow{}, nil, cdc.SourceLag{Head: 0x10000, Retained: -1}},
		{"no checkpoint: the retained WAL lies ahead", slot(0x4000, 0x5000, "reserved"), nil,
			cdc.SourceLag{Head: 0x10000, Bytes: 0xc000, Retained: 0xc000}},
		{"checkpoint ahead of the slot (acknowledged, not yet reported)", slot(0x4000, 0x5000, "reserved"), stream(0x8000),
			cdc.SourceLag{Head: 0x10000, Applied: 0x8000, Bytes: 0x8000, Retained: 0xc000}},
		{"slot moved past the checkpoint by an idle note", slot(0x4000, 0xf000, "extended"), stream(0x8000),
			cdc.SourceLag{Head: 0x10000, Applied: 0xf000, Bytes: 0x1000, Retained: 0xc000}},
		{"caught up", slot(0x4000, 0x5000, "reserved"), stream(head),
			cdc.SourceLag{Head: 0x10000, Applied: 0x10000, Bytes: 0, Retained: 0xc000}},
		{"checkpoint beyond the WAL written out yet", slot(0x4000, 0x5000, "reserved"), stream(head + 10),
			cdc.SourceLag{Head: 0x10000, Applied: 0x1000a, Bytes: 0, Retained: 0xc000}},
		{"snapshot: applied is its start, whatever the slot says", slot(0x4000, 0x9000, "unreserved"), snapshot(0x6000),
			cdc.SourceLag{Head: 0x10000, Applied: 0x6000, Bytes: 0xa000, Retained: 0xc000}},
		// Seen in make check: a slot waiting for a transaction in progress before it has a
		// consistent point was reported as having lost its WAL (permanent).
		{"slot being created, no checkpoint", creating, nil, cdc.SourceLag{Head: 0x10000, Bytes: 0xc000, Retained: 0xc000}},
	}
	for _, c := range cases {
		got, err := src.measureLag(head, c.row, c.resume)
		if err != nil || got != c.want {
			t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}

	lost := slot(0x4000, 0x5000, "lost")
	lost.restart = nil
	refusals := []struct {
		name   string
		row    *slotRow
		resume *decodedCheckpoint
		is     error
	}{
		{"no slot for a checkpoint", &slotRow{}, stream(0x8000), ErrSlotMissing},
		{"lost, with a checkpoint", lost, stream(0x8000), ErrSlotLost},
		{"lost, without one", lost, nil, ErrSlotLost},
		{"another plugin", &slotRow{exists: true, kind: "logical", plugin: "wal2json", database: "db", wantedDatabase: "db",
			restart: str(1), confirmed: str(1)}, nil, nil},
		{"another database", &slotRow{exists: true, kind: "logical", plugin: "pgoutput", database: "other", wantedDatabase: "db",
			restart: str(1), confirmed: str(1)}, stream(0x8000), nil},
	}
	if _, err := src.measureLag(head, creating, stream(0x8000)); err == nil || cdc.IsPermanent(err) {
		t.Errorf("a slot being created behind a checkpoint: %v, want a retryable error", err)
	}
	for _, c := range refusals {
		_, err := src.measureLag(head, c.row, c.resume)
		if !cdc.IsPermanent(err) || (c.is != nil && !errors.Is(err, c.is)) {
			t.Errorf("%s: %v, want a permanent error (%v)", c.name, err, c.is)
		}
	}
}

// TestLagOfForeignCheckpointIsPermanent: a checkpoint this package did not write is refused as
// permanent before anything connects (the DSN points nowhere).
func TestLagOfForeignCheckpointIsPermanent(t *testing.T) {
	src, err := New("postgres://u:hunter2@127.0.0.1:1/db", &Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = src.Lag(context.Background(), cdc.Checkpoint(`{"v":9}`))
	if !cdc.IsPermanent(err) || !errors.Is(err, ErrBadCheckpoint) || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("Lag of a foreign checkpoint: %v", err)
	}
}

// TestLagFailureIsRetryableAndHidesThePassword: a server that cannot be reached is a failure a
// runner retries (not permanent), and neither it nor a cancelled measurement carries the password.
func TestLagFailureIsRetryableAndHidesThePassword(t *testing.T) {
	src, err := New("postgres://u:hunter2@127.0.0.1:1/db?connect_timeout=5", &Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = src.Lag(context.Background(), nil)
	if err == nil || cdc.IsPermanent(err) || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("Lag against a closed port: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := src.Lag(ctx, nil); err == nil || cdc.IsPermanent(err) || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("Lag with a cancelled context: %v", err)
	}
}

// New with nil options takes every default, as New with the zero Options does.
func TestNewNilOptions(t *testing.T) {
	src, err := New("postgres://u:hunter2@127.0.0.1:1/db", nil)
	if err != nil {
		t.Fatalf("New(dsn, nil): %v", err)
	}
	if src.opts.Name != "postgres" {
		t.Errorf("Name = %q, want the default %q", src.opts.Name, "postgres")
	}
}

// TestKeepaliveCreditedOnceAcknowledged: a keepalive's WAL end met outside a transaction
// counts for Lag at once when every delivered checkpoint is acknowledged, else once Ack
// reaches the checkpoint delivered last before it (issue 31), never before.
func TestKeepaliveCreditedOnceAcknowledged(t *testing.T) {
	st := &stream{}
	deliver := func(lsn uint64) { st.delivered.Store(lsn) }
	ack := func(lsn uint64) {
		t.Helper()
		if err := st.Ack(context.Background(), encodeCheckpoint(pglogrepl.LSN(lsn), nil, nil, nil)); err != nil {
			t.Fatal(err)
		}
	}
	check := func(want uint64, when string) {
		t.Helper()
		if got := st.caughtUp.Load(); got != want {
			t.Fatalf("%s: caughtUp %d, want %d", when, got, want)
		}
	}
	st.passed(100)
	check(100, "a keepalive with nothing delivered")
	deliver(200)
	st.passed(300)
	check(100, "a keepalive with a checkpoint delivered and not acknowledged")
	st.passed(400)
	ack(150)
	check(100, "acknowledged short of the checkpoint delivered before it")
	ack(200)
	check(400, "acknowledged up to it")
	st.passed(50)
	check(400, "an earlier WAL end")
}
