package mysqlcdc_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/cdctest"
	"github.com/tributary-dev/tributary/cdc/mysqlcdc"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// TestFaultMariaDBRestartEndsStream restarts the server under an open stream, in each of
// its stop modes: the stream ends with a retryable error (no reconnect of its own), and a
// stream reopened from its last checkpoint once the server is back delivers the changes
// made since, from the transaction after the checkpoint on.
func TestFaultMariaDBRestartEndsStream(t *testing.T) {
	srv := testenv.RequireFaults(t)
	s := testServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	table := "mysu_restart_" + suffix()
	if err := s.exec("CREATE TABLE " + quote(table) + " (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	src := s.newSource(t, cdc.SnapshotNever, mysqlcdc.Options{Heartbeat: time.Second}, table)
	insert := func(n int) {
		t.Helper()
		if err := s.exec(fmt.Sprintf("INSERT INTO %s VALUES (%d)", quote(table), n)); err != nil {
			t.Fatal(err)
		}
	}
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	next := 1
	insert(next)
	last := cdctest.NextEvent(ctx, t, st).Checkpoint
	for _, mode := range []string{"graceful", "kill"} {
		srv.Run("restart", "mariadb", "--mode", mode)
		drainUntilClosed(ctx, t, st, nil)
		if err := st.Err(); err == nil || cdc.IsPermanent(err) {
			t.Fatalf("restart %q: the stream ended with %v, want a retryable error", mode, err)
		}
		t.Logf("restart %s: the stream ended with: %v", mode, st.Err())
		_ = st.Close()
		next++
		insert(next)
		if st, err = src.Open(ctx, last); err != nil {
			t.Fatalf("reopen after restart %q: %v", mode, err)
		}
		ev := cdctest.NextEvent(ctx, t, st)
		if ev.After[0].(int64) != int64(next) {
			t.Fatalf("after restart %q the reopened stream delivered row %v first, want %d", mode, ev.After[0], next)
		}
		last = ev.Checkpoint
	}
}
