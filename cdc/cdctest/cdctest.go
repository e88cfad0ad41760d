package cdctest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
)

// Harness is what a source supplies to the suite.
type Harness struct {
	// Exec runs SQL statements, each in its own transaction, in order.
	Exec func(ctx context.Context, stmts ...string) error
	// ExecTx runs SQL statements in one transaction.
	ExecTx func(ctx context.Context, stmts ...string) error
	// Quote quotes an identifier for the source's SQL dialect.
	Quote func(name string) string
	// NewSource returns a source capturing exactly the named tables (created by the suite
	// beforehand in the harness's database and schema), starting as mode says when it is
	// opened without a checkpoint. The source's resources are released by t.Cleanup.
	NewSource func(t *testing.T, mode cdc.SnapshotMode, tables ...string) cdc.Source
	// Types returns the source's type matrix for the Types behaviour; suffix is unique to the
	// run, for the names of types the matrix creates. Nil skips the behaviour.
	Types func(suffix string) TypeMatrix
}

// Run runs every behaviour against h.
func Run(t *testing.T, h Harness) {
	for _, b := range behaviours {
		t.Run(b.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			b.run(ctx, t, &env{h: h, suffix: randomSuffix()})
		})
	}
}

type env struct {
	h      Harness
	suffix string
}

func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// table returns a unique table name for this run.
func (e *env) table(base string) string { return base + "_" + e.suffix }

func (e *env) exec(ctx context.Context, t *testing.T, stmts ...string) {
	t.Helper()
	if err := e.h.Exec(ctx, stmts...); err != nil {
		t.Fatalf("exec: %v", err)
	}
}

func (e *env) execTx(ctx context.Context, t *testing.T, stmts ...string) {
	t.Helper()
	if err := e.h.ExecTx(ctx, stmts...); err != nil {
		t.Fatalf("exec in one transaction: %v", err)
	}
}

// open opens src from cp and closes the stream at the end of the test.
func open(ctx context.Context, t *testing.T, src cdc.Source, cp cdc.Checkpoint) cdc.Stream {
	t.Helper()
	st, err := src.Open(ctx, cp)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// NextEvent returns the stream's next event; the test fails when the stream ends, the event is
// malformed, or ctx ends first. Sources' own tests use it too.
func NextEvent(ctx context.Context, t testing.TB, st cdc.Stream) cdc.Event {
	t.Helper()
	ev := NextAnyEvent(ctx, t, st)
	if ev.Malformed != nil {
		t.Fatalf("malformed event on %v: %v", ev.Table, ev.Malformed)
	}
	return ev
}

// NextAnyEvent is NextEvent for a test that expects malformed events: it returns them too.
func NextAnyEvent(ctx context.Context, t testing.TB, st cdc.Stream) cdc.Event {
	t.Helper()
	select {
	case ev, ok := <-st.Events():
		if !ok {
			t.Fatalf("stream ended: %v", st.Err())
		}
		return ev
	case <-ctx.Done():
		t.Fatalf("no event before the deadline: %v", ctx.Err())
	}
	panic("unreachable")
}

// quiet asserts that no event arrives within d: the source produced everything it should.
func quiet(t *testing.T, st cdc.Stream, d time.Duration) {
	t.Helper()
	select {
	case ev, ok := <-st.Events():
		if ok {
			t.Fatalf("unexpected event %v on %v at %v", ev.Op, ev.Table, ev.Position)
		}
	case <-time.After(d):
	}
}

// value returns the named column's value in row (which follows schema).
func value(t *testing.T, s *cdc.TableSchema, row []cdc.Value, col string) cdc.Value {
	t.Helper()
	i := s.ColumnIndex(col)
	if i < 0 {
		t.Fatalf("schema of %v has no column %q", s.ID, col)
	}
	if i >= len(row) {
		t.Fatalf("row has %d values, schema %d columns", len(row), len(s.Columns))
	}
	return row[i]
}

// wantInt fails unless v is an integer equal to want.
func wantInt(t *testing.T, what string, v cdc.Value, want int64) {
	t.Helper()
	switch n := v.(type) {
	case int64:
		if n == want {
			return
		}
	case uint64:
		if want >= 0 && n == uint64(want) {
			return
		}
	}
	t.Fatalf("%s = %#v, want %d", what, v, want)
}

func wantString(t *testing.T, what string, v cdc.Value, want string) {
	t.Helper()
	if s, ok := v.(string); !ok || s != want {
		t.Fatalf("%s = %#v, want %q", what, v, want)
	}
}

func wantOp(t *testing.T, ev cdc.Event, op cdc.Op, table string) {
	t.Helper()
	if ev.Op != op || ev.Table.Table != table {
		t.Fatalf("event %v on %q, want %v on %q", ev.Op, ev.Table.Table, op, table)
	}
}

func ddl(e *env, table string) string {
	q := e.h.Quote
	return fmt.Sprintf("CREATE TABLE %s (%s INT NOT NULL PRIMARY KEY, %s VARCHAR(64), %s BIGINT)", q(table), q("id"), q("name"), q("n"))
}
