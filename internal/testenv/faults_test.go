package testenv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestFaultPostgresRestartKeepsData restarts PostgreSQL through scripts/testenv in every stop
// mode and checks that each committed row survives (an immediate shutdown included: crash
// recovery replays it), that the script returns only once the server answers, and that status
// reports it; then a stop, which status must report, and a start on the same data.
func TestFaultPostgresRestartKeepsData(t *testing.T) {
	srv := RequireFaults(t)
	dsn := Require(t, PostgresDSN)
	table := fmt.Sprintf("tt_fault_restart_%08x", rand.Uint32())

	t.Cleanup(func() {
		// Whatever failed, the server is left running for the tests after this one.
		srv.Run("start", "postgres")
		pgExec(t, dsn, "DROP TABLE IF EXISTS "+table)
	})
	pgExec(t, dsn, "CREATE TABLE "+table+" (id int PRIMARY KEY, mode text NOT NULL)")
	want := []string{}
	insert := func(mode string) {
		t.Helper()
		want = append(want, mode)
		pgExec(t, dsn, fmt.Sprintf("INSERT INTO %s VALUES (%d, '%s')", table, len(want), mode))
	}
	check := func(after string) {
		t.Helper()
		// One connection attempt, no retry: the script returns only once the server answers.
		if got := pgModes(t, dsn, table); !slices.Equal(got, want) {
			t.Fatalf("after %s: rows %v, want %v", after, got, want)
		}
		out, err := srv.Output("status", "postgres")
		if err != nil || !strings.HasPrefix(out, "postgres: running:") {
			t.Fatalf("after %s: status postgres = %q, %v; want running", after, out, err)
		}
	}

	for _, mode := range []string{"fast", "immediate", "smart"} {
		insert(mode)
		srv.Run("restart", "postgres", "--mode", mode)
		check("restart --mode " + mode)
	}

	insert("stop")
	srv.Run("stop", "postgres", "--mode", "immediate")
	if out, err := srv.Output("status", "postgres"); err == nil || !strings.HasPrefix(out, "postgres: stopped") {
		t.Fatalf("after stop: status postgres = %q, %v; want stopped and a failure (exit 3)", out, err)
	}
	srv.Run("start", "postgres")
	check("stop --mode immediate, start")
}

func pgExec(t *testing.T, dsn, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func pgModes(t *testing.T, dsn, table string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, "SELECT mode FROM "+table+" ORDER BY id")
	if err != nil {
		t.Fatalf("select: %v", err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("select: %v", err)
	}
	return got
}
