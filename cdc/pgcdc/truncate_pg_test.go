package pgcdc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/cdctest"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/statestore"
)

// TestTruncateEvents: one TRUNCATE naming two captured tables, with CASCADE reaching a third
// and RESTART IDENTITY, inside a transaction with row changes before and after it, becomes one
// Truncate event per captured table (none for the uncaptured one), in WAL order between the
// row changes, with the transaction's identity and only its last event checkpointed.
func TestTruncateEvents(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sfx := suffix(t)
	parent, child, other, free := "tparent_"+sfx, "tchild_"+sfx, "tother_"+sfx, "tfree_"+sfx
	if err := execSQL(ctx, dsn, false,
		fmt.Sprintf("CREATE TABLE %s (id serial PRIMARY KEY, n int)", quote(parent)),
		fmt.Sprintf("CREATE TABLE %s (id int PRIMARY KEY, p int REFERENCES %s)", quote(child), quote(parent)),
		fmt.Sprintf("CREATE TABLE %s (id int PRIMARY KEY, n int)", quote(other)),
		fmt.Sprintf("CREATE TABLE %s (id int PRIMARY KEY, n int)", quote(free)),
	); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = execSQL(context.Background(), dsn, false, "DROP TABLE IF EXISTS "+quote(free)) })
	// newSource's cleanup drops the captured tables in this order: the child before its parent.
	src := newSource(t, dsn, pgcdc.Options{Snapshot: cdc.SnapshotNever,
		Tables: []pgcdc.Table{{Name: child}, {Name: other}, {Name: parent}}})
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	if err := execSQL(ctx, dsn, false,
		fmt.Sprintf("INSERT INTO %s (n) VALUES (1)", quote(parent)),
		fmt.Sprintf("INSERT INTO %s VALUES (1, 1)", quote(child)),
		fmt.Sprintf("INSERT INTO %s VALUES (1, 1)", quote(free)),
	); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		cdctest.NextEvent(ctx, t, st)
	}
	if err := execSQL(ctx, dsn, true,
		fmt.Sprintf("INSERT INTO %s VALUES (7, 7)", quote(other)),
		fmt.Sprintf("TRUNCATE %s, %s, %s RESTART IDENTITY CASCADE", quote(parent), quote(other), quote(free)),
		fmt.Sprintf("INSERT INTO %s (n) VALUES (2)", quote(parent)),
	); err != nil {
		t.Fatal(err)
	}
	var evs []cdc.Event
	for range 5 {
		evs = append(evs, cdctest.NextEvent(ctx, t, st))
	}
	if evs[0].Op != cdc.Insert || evs[0].Table.Table != other {
		t.Fatalf("first event %v on %s, want the insert into %s", evs[0].Op, evs[0].Table.Table, other)
	}
	truncated := map[string]cdc.Event{}
	for _, ev := range evs[1:4] {
		if ev.Op != cdc.Truncate {
			t.Fatalf("event %v on %s, want a truncate", ev.Op, ev.Table.Table)
		}
		if ev.Before != nil || ev.After != nil {
			t.Fatalf("truncate of %s carries a row", ev.Table.Table)
		}
		if ev.Schema == nil || ev.Schema.ID != ev.Table {
			t.Fatalf("truncate of %s carries schema %v", ev.Table.Table, ev.Schema)
		}
		truncated[ev.Table.Table] = ev
	}
	for _, tb := range []string{parent, child, other} {
		if _, ok := truncated[tb]; !ok {
			t.Fatalf("no truncate event for %s; got %v", tb, keys(truncated))
		}
	}
	last := evs[4]
	if last.Op != cdc.Insert || last.Table.Table != parent || last.After[0] != int64(1) {
		t.Fatalf("last event %v on %s with row %v, want the insert into %s with the restarted id 1", last.Op, last.Table.Table, last.After, parent)
	}
	for i, ev := range evs {
		if (ev.Checkpoint != nil) != (i == len(evs)-1) {
			t.Fatalf("event %d (%v on %s): checkpoint set = %v, want only on the last", i, ev.Op, ev.Table.Table, ev.Checkpoint != nil)
		}
		if ev.TxID != evs[0].TxID || !ev.CommitTime.Equal(evs[0].CommitTime) || ev.CommitTime.IsZero() {
			t.Fatalf("event %d does not carry the transaction's id and commit time", i)
		}
		if i > 0 && ev.Position.Version() < evs[i-1].Position.Version() {
			t.Fatalf("event %d version %d below its predecessor's %d", i, ev.Position.Version(), evs[i-1].Position.Version())
		}
	}
	if !(evs[0].Position.Version() < evs[1].Position.Version() && evs[3].Position.Version() < last.Position.Version()) {
		t.Fatal("the truncates are not ordered between the transaction's row changes")
	}
}

// TestTruncateNotPublished: an existing publication that does not publish TRUNCATE is used
// with a warning, and a TRUNCATE under it produces nothing (the server never sends it).
func TestTruncateNotPublished(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tb := "tnopub_" + suffix(t)
	createTable(ctx, t, dsn, tb)
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	src := newSource(t, dsn, pgcdc.Options{Snapshot: cdc.SnapshotNever, Tables: []pgcdc.Table{{Name: tb}},
		NoCreatePublication: true, Logger: logger})
	if err := execSQL(ctx, dsn, false, fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE %s WITH (publish = 'insert, update, delete')",
		quote(src.Publication()), quote(tb))); err != nil {
		t.Fatal(err)
	}
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !strings.Contains(logs.String(), "does not publish TRUNCATE") {
		t.Errorf("no warning about the unpublished TRUNCATE; log: %q", logs.String())
	}
	if err := execSQL(ctx, dsn, false,
		fmt.Sprintf("INSERT INTO %s VALUES (1, 1)", quote(tb)),
		fmt.Sprintf("TRUNCATE %s", quote(tb)),
		fmt.Sprintf("INSERT INTO %s VALUES (2, 2)", quote(tb)),
	); err != nil {
		t.Fatal(err)
	}
	for _, want := range []int64{1, 2} {
		if ev := cdctest.NextEvent(ctx, t, st); ev.Op != cdc.Insert || ev.After[0] != want {
			t.Fatalf("%v of %v, want the insert of %d (and no truncate between)", ev.Op, ev.After, want)
		}
	}
}

// TestTruncateThroughRunner: a Runner hands a truncate to the sink like any change and
// stores the checkpoint of its transaction.
func TestTruncateThroughRunner(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tb := "trunner_" + suffix(t)
	createTable(ctx, t, dsn, tb)
	src := newSource(t, dsn, pgcdc.Options{Snapshot: cdc.SnapshotNever, Tables: []pgcdc.Table{{Name: tb}}})
	sink := &recordingSink{seen: make(chan cdc.Event, 16)}
	state := statestore.NewMemory()
	r, err := cdc.NewRunner("truncate", src, sink, state, noDLQ{}, &cdc.RunnerOptions{BatchMaxWait: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
	}()
	// The runner opens the source asynchronously; a change made before the slot exists
	// would not be seen, so insert until the first one arrives.
	var ins cdc.Event
	for id := 1; ins.Op == 0; id++ {
		if err := execSQL(ctx, dsn, false, fmt.Sprintf("INSERT INTO %s VALUES (%d, %d)", quote(tb), id, id)); err != nil {
			t.Fatal(err)
		}
		select {
		case ins = <-sink.seen:
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal("the runner delivered nothing")
		}
	}
	if err := execSQL(ctx, dsn, false, "TRUNCATE "+quote(tb)); err != nil {
		t.Fatal(err)
	}
	var tr cdc.Event
	for tr.Op != cdc.Truncate {
		select {
		case tr = <-sink.seen:
		case <-ctx.Done():
			t.Fatal("the sink never got the truncate")
		}
	}
	if tr.Checkpoint == nil {
		t.Fatal("a one-statement truncate transaction carries no checkpoint")
	}
	for {
		cp, err := state.LoadCheckpoint(ctx, "truncate")
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(cp, tr.Checkpoint) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("stored checkpoint %s, want the truncate's %s", cp, tr.Checkpoint)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// recordingSink passes every event it applies to seen.
type recordingSink struct{ seen chan cdc.Event }

func (s *recordingSink) Write(ctx context.Context, batch []cdc.Event) ([]cdc.DeadLetter, error) {
	for _, ev := range batch {
		select {
		case s.seen <- ev:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return nil, nil
}

type noDLQ struct{}

func (noDLQ) WriteDeadLetters(context.Context, []cdc.DeadLetterRecord) error {
	return errors.New("no dead letters expected")
}

func keys(m map[string]cdc.Event) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// syncBuffer is a bytes.Buffer safe for the logger's and the test's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
