package debezium_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/mysqlcdc"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// The server tests' shared set-up: a session on each source server, and the native source
// the Debezium path is compared with.

// pgSession connects to the PostgreSQL server at dsn for the rest of the test and returns
// exec, which runs its statements in one transaction (the test fails on any error). drop, if
// not "", runs when the test ends, on a connection of its own.
func pgSession(ctx context.Context, t *testing.T, dsn, drop string) (exec func(stmts ...string)) {
	t.Helper()
	db, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if drop != "" {
		t.Cleanup(func() { pgDrop(dsn, drop) })
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	return func(stmts ...string) {
		t.Helper()
		tx, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// pgDrop runs a clean-up statement on a connection of its own: the test's connection is closed
// by the time t.Cleanup runs.
func pgDrop(dsn, stmt string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if c, err := pgx.Connect(ctx, dsn); err == nil {
		_, _ = c.Exec(ctx, stmt)
		c.Close(ctx)
	}
}

// mySession is pgSession for the MariaDB server m: exec runs prelude (session settings), then
// its statements in one transaction; the table named drop, if not "", is dropped when the
// test ends.
func mySession(ctx context.Context, t *testing.T, m testenv.MySQL, drop string, prelude ...string) (exec func(stmts ...string)) {
	t.Helper()
	db, err := client.ConnectWithContext(ctx, m.Addr, m.User, m.Password, m.DB, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if drop != "" {
		t.Cleanup(func() {
			if c, err := client.ConnectWithContext(context.Background(), m.Addr, m.User, m.Password, m.DB, 10*time.Second); err == nil {
				_, _ = c.Execute("DROP TABLE IF EXISTS " + drop)
				c.Close()
			}
		})
	}
	t.Cleanup(func() { db.Close() })
	return func(stmts ...string) {
		t.Helper()
		all := append(append(append(make([]string, 0, len(prelude)+len(stmts)+2), prelude...), "START TRANSACTION"), stmts...)
		for _, s := range append(all, "COMMIT") {
			if _, err := db.Execute(s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
	}
}

// nativePostgres opens pgcdc on public.table without a snapshot, with a slot and a publication
// of its own (table_native); closeNative closes the stream and drops both (the caller defers
// it, so that the stream ends before the test's context).
func nativePostgres(ctx context.Context, t *testing.T, dsn, table string) (st cdc.Stream, closeNative func()) {
	t.Helper()
	native, err := pgcdc.New(dsn, &pgcdc.Options{Name: "pg", Slot: table + "_native", Publication: table + "_native",
		Tables: []pgcdc.Table{{Schema: "public", Name: table}}, Snapshot: cdc.SnapshotNever})
	if err != nil {
		t.Fatal(err)
	}
	if st, err = native.Open(ctx, nil); err != nil {
		t.Fatal(err)
	}
	return st, func() {
		st.Close()
		if err := native.Drop(context.Background()); err != nil {
			t.Errorf("dropping the native slot: %v", err)
		}
	}
}

// nativeMariaDB opens mysqlcdc on m's table without a snapshot, under a server id no other
// test run uses; the caller defers the stream's Close.
func nativeMariaDB(ctx context.Context, t *testing.T, m testenv.MySQL, table string) cdc.Stream {
	t.Helper()
	native, err := mysqlcdc.New(m.Addr, m.User, m.Password, []mysqlcdc.TableName{{Database: m.DB, Table: table}},
		&mysqlcdc.Options{SourceName: "my", Snapshot: cdc.SnapshotNever, ServerID: 1<<24 + rand.Uint32N(1<<30)})
	if err != nil {
		t.Fatal(err)
	}
	st, err := native.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
