package sqlstate

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/statestore"
	"github.com/tributary-dev/tributary/statestore/statestoretest"
)

// testSchema returns a fresh schema name, dropped (with everything in it) when the test ends.
func testSchema(t *testing.T, dsn string) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := fmt.Sprintf("ha39_sqlstate_%x", b)
	t.Cleanup(func() { adminExec(t, dsn, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE") })
	return schema
}

func adminExec(t *testing.T, dsn, stmt string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, stmt, args...); err != nil {
		t.Fatal(err)
	}
}

// withAppName returns dsn with application_name set, so a test can find its store's backends.
func withAppName(t *testing.T, dsn, name string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", name)
	u.RawQuery = q.Encode()
	return u.String()
}

func openPG(t *testing.T, dsn, schema string) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := OpenPostgres(ctx, dsn, &Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestPostgresSuite runs the whole statestore behaviour suite, and the lease behaviours
// (including the suite again through a fenced view), against PostgreSQL.
func TestPostgresSuite(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	t.Run("Store", func(t *testing.T) {
		statestoretest.Run(t, func(t *testing.T) statestore.Store { return openPG(t, dsn, testSchema(t, dsn)) })
	})
	t.Run("Leases", func(t *testing.T) {
		statestoretest.RunLeases(t, func(t *testing.T) statestore.Leaser { return openPG(t, dsn, testSchema(t, dsn)) })
	})
}

// TestPostgresOpen: the identity is fixed at creation and shared by every store opened on the
// schema (concurrent creators included); another schema is another deployment; an unknown
// format is refused; names of MaxNameBytes fit.
func TestPostgresOpen(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx := context.Background()
	schema := testSchema(t, dsn)
	stores := make([]*Store, 4)
	var wg sync.WaitGroup
	errs := make([]error, len(stores))
	for i := range stores {
		wg.Go(func() { stores[i], errs[i] = OpenPostgres(ctx, dsn, &Options{Schema: schema}) })
	}
	wg.Wait()
	for i, s := range stores {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		t.Cleanup(func() { _ = s.Close() })
		if s.Identity() != stores[0].Identity() {
			t.Fatalf("concurrent opens of one schema got identities %q and %q", s.Identity(), stores[0].Identity())
		}
	}
	if err := stores[0].SaveCheckpoint(ctx, "p", cdc.Checkpoint("cp")); err != nil {
		t.Fatal(err)
	}
	if err := stores[0].Close(); err != nil {
		t.Fatal(err)
	}
	again := openPG(t, dsn, schema)
	if again.Identity() != stores[1].Identity() {
		t.Fatal("reopening changed the identity")
	}
	if cp, err := again.LoadCheckpoint(ctx, "p"); err != nil || string(cp) != "cp" {
		t.Fatalf("checkpoint after reopen = %q, %v", cp, err)
	}
	if other := openPG(t, dsn, testSchema(t, dsn)); other.Identity() == again.Identity() {
		t.Fatal("two schemas share an identity")
	}

	long := strings.Repeat("\x00\xff", statestore.MaxNameBytes/2)
	rev, err := again.Put(ctx, long, long, long, []byte("v"), 0)
	if err != nil {
		t.Fatalf("Put with names of MaxNameBytes: %v", err)
	}
	if rs, err := again.List(ctx, long, long); err != nil || len(rs) != 1 || rs[0].Key != long || rs[0].Revision != rev {
		t.Fatalf("List with long names = %d records, %v", len(rs), err)
	}

	adminExec(t, dsn, "UPDATE "+pgx.Identifier{schema, "statestore_meta"}.Sanitize()+" SET value = '2' WHERE name = 'format'")
	if _, err := OpenPostgres(ctx, dsn, &Options{Schema: schema}); !errors.Is(err, statestore.ErrFormat) {
		t.Fatalf("open of format 2: %v, want ErrFormat", err)
	}
	refused, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := OpenPostgres(refused, "postgres://u:secret@127.0.0.1:1/db?connect_timeout=5", nil); !errors.Is(err, statestore.ErrUnavailable) || strings.Contains(err.Error(), "secret") {
		t.Fatalf("open of an unreachable server: %v, want ErrUnavailable without the password", err)
	}
	if _, err := OpenPostgres(ctx, "postgres://u:secret@[::1", nil); !errors.Is(err, statestore.ErrInvalid) || strings.Contains(err.Error(), "secret") {
		t.Fatalf("bad DSN: %v, want ErrInvalid without the password", err)
	}
}

// terminate ends the backends of application name app (all of them when pid is 0) and waits
// until they are gone.
func terminate(t *testing.T, dsn, app string, pid int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	const sel = "FROM pg_stat_activity WHERE application_name = $1 AND ($2 = 0 OR pid = $2) AND pid <> pg_backend_pid()"
	if _, err := c.Exec(ctx, "SELECT pg_terminate_backend(pid) "+sel, app, pid); err != nil {
		t.Fatal(err)
	}
	for {
		var n int
		if err := c.QueryRow(ctx, "SELECT count(*) "+sel, app, pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("backends of %s still alive", app)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestPostgresCrashMidTransaction cuts the connection between the statements of a write
// transaction (DeletePipeline's two deletes; a fenced write's lease check and its write): the
// call fails with ErrUnavailable and nothing of it is stored.
func TestPostgresCrashMidTransaction(t *testing.T) {
	base := testenv.Require(t, testenv.PostgresDSN)
	ctx := context.Background()
	app := fmt.Sprintf("ha39_crash_%d", time.Now().UnixNano())
	dsn := withAppName(t, base, app)
	s := openPG(t, dsn, testSchema(t, base))
	if err := s.SaveCheckpoint(ctx, "p", cdc.Checkpoint("cp")); err != nil {
		t.Fatal(err)
	}
	rev, err := s.Put(ctx, "p", "esfence", "idx", []byte("v"), 0)
	if err != nil {
		t.Fatal(err)
	}
	lease, err := s.Acquire(ctx, "p", "A", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	s.between = func(ctx context.Context, tx *sql.Tx) {
		var pid int
		if err := tx.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			return // already cut (fenced DeletePipeline passes here twice)
		}
		terminate(t, base, app, pid)
	}
	f := s.Fenced("p", lease.Epoch)
	cut := map[string]error{
		"DeletePipeline":        s.DeletePipeline(ctx, "p"),
		"fenced SaveCheckpoint": f.SaveCheckpoint(ctx, "p", cdc.Checkpoint("new")),
		"fenced Put":            func() error { _, err := f.Put(ctx, "p", "esfence", "idx", []byte("new"), rev); return err }(),
		"fenced DeletePipeline": f.DeletePipeline(ctx, "p"),
	}
	s.between = nil
	for what, err := range cut {
		if !errors.Is(err, statestore.ErrUnavailable) {
			t.Errorf("%s cut mid-transaction: %v, want ErrUnavailable", what, err)
		}
	}
	if cp, err := s.LoadCheckpoint(ctx, "p"); err != nil || string(cp) != "cp" {
		t.Fatalf("checkpoint after cut transactions = %q, %v; want cp", cp, err)
	}
	if r, err := s.Get(ctx, "p", "esfence", "idx"); err != nil || r.Revision != rev || string(r.Value) != "v" {
		t.Fatalf("record after cut transactions = %+v, %v", r, err)
	}
}

// TestPostgresConnectionLoss ends every connection of the store (what a server restart does
// to it): calls fail only with ErrUnavailable, and the store recovers by itself.
func TestPostgresConnectionLoss(t *testing.T) {
	base := testenv.Require(t, testenv.PostgresDSN)
	ctx := context.Background()
	app := fmt.Sprintf("ha39_loss_%d", time.Now().UnixNano())
	s := openPG(t, withAppName(t, base, app), testSchema(t, base))
	lease, err := s.Acquire(ctx, "p", "A", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f := s.Fenced("p", lease.Epoch)
	for round := range 3 {
		// Fill the pool, then cut every connection.
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() { _, _ = s.LoadCheckpoint(ctx, "p") })
		}
		wg.Wait()
		terminate(t, base, app, 0)
		deadline := time.Now().Add(time.Minute)
		unavailable := 0
		for i := 0; ; i++ {
			cp := cdc.Checkpoint(fmt.Sprintf("r%d-%d", round, i))
			err := f.SaveCheckpoint(ctx, "p", cp)
			if err == nil {
				got, err := s.LoadCheckpoint(ctx, "p")
				if err != nil || string(got) != string(cp) {
					t.Fatalf("after recovery: checkpoint %q, %v; want %q", got, err, cp)
				}
				if _, err := s.Renew(ctx, lease, time.Hour); err != nil {
					t.Fatalf("Renew after recovery: %v", err)
				}
				t.Logf("round %d: recovered after %d ErrUnavailable", round, unavailable)
				break
			}
			if !errors.Is(err, statestore.ErrUnavailable) {
				t.Fatalf("round %d: a lost connection gave %v, want ErrUnavailable", round, err)
			}
			unavailable++
			if time.Now().After(deadline) {
				t.Fatalf("round %d: no recovery within a minute: %v", round, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// TestPostgresContextBounds: a call blocked on the server (a table locked by another session)
// returns at its context's deadline with the context's error, and the store works afterwards.
func TestPostgresContextBounds(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx := context.Background()
	schema := testSchema(t, dsn)
	s := openPG(t, dsn, schema)
	rev, err := s.Put(ctx, "p", "ns", "k", []byte("v"), 0)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE "+pgx.Identifier{schema, "statestore_records"}.Sanitize()+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	for what, call := range map[string]func(context.Context) error{
		"Get": func(ctx context.Context) error { _, err := s.Get(ctx, "p", "ns", "k"); return err },
		"Put": func(ctx context.Context) error { _, err := s.Put(ctx, "p", "ns", "k", []byte("w"), rev); return err },
	} {
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		err := call(cctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s blocked by a lock: %v, want context.DeadlineExceeded", what, err)
		}
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Get(ctx, "p", "ns", "k"); err != nil || r.Revision != rev {
		t.Fatalf("Get after the lock = %+v, %v", r, err)
	}
}
