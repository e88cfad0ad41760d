package sqlstate

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/statestore"
	"github.com/tributary-dev/tributary/statestore/statestoretest"
)

func mysqlAdmin(t *testing.T, dsn string) *client.Conn {
	t.Helper()
	d, err := parseMySQLDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Connect(d.addr, d.user, d.password, "")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mysqlExec(t *testing.T, dsn, stmt string, args ...any) {
	t.Helper()
	c := mysqlAdmin(t, dsn)
	defer c.Close()
	if _, err := c.Execute(stmt, args...); err != nil {
		t.Fatal(err)
	}
}

// testDatabase returns a fresh database name, dropped when the test ends.
func testDatabase(t *testing.T, dsn string) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	db := fmt.Sprintf("ha39_sqlstate_%x", b)
	t.Cleanup(func() { mysqlExec(t, dsn, "DROP DATABASE IF EXISTS `"+db+"`") })
	return db
}

func openMy(t *testing.T, dsn, db string) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := OpenMySQL(ctx, dsn, &Options{Schema: db})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestMySQLSuite runs the whole statestore behaviour suite and the lease behaviours against
// MariaDB (InnoDB).
func TestMySQLSuite(t *testing.T) {
	dsn := testenv.Require(t, testenv.MySQLDSN)
	t.Run("Store", func(t *testing.T) {
		statestoretest.Run(t, func(t *testing.T) statestore.Store { return openMy(t, dsn, testDatabase(t, dsn)) })
	})
	t.Run("Leases", func(t *testing.T) {
		statestoretest.RunLeases(t, func(t *testing.T) statestore.Leaser { return openMy(t, dsn, testDatabase(t, dsn)) })
	})
}

// TestMySQLOpen is TestPostgresOpen for MariaDB.
func TestMySQLOpen(t *testing.T) {
	dsn := testenv.Require(t, testenv.MySQLDSN)
	ctx := context.Background()
	db := testDatabase(t, dsn)
	stores := make([]*Store, 4)
	errs := make([]error, len(stores))
	var wg sync.WaitGroup
	for i := range stores {
		wg.Go(func() { stores[i], errs[i] = OpenMySQL(ctx, dsn, &Options{Schema: db}) })
	}
	wg.Wait()
	for i, s := range stores {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		t.Cleanup(func() { _ = s.Close() })
		if s.Identity() != stores[0].Identity() {
			t.Fatalf("concurrent opens of one database got identities %q and %q", s.Identity(), stores[0].Identity())
		}
	}
	if err := stores[0].SaveCheckpoint(ctx, "p", cdc.Checkpoint("cp")); err != nil {
		t.Fatal(err)
	}
	_ = stores[0].Close()
	again := openMy(t, dsn, db)
	if again.Identity() != stores[1].Identity() {
		t.Fatal("reopening changed the identity")
	}
	if cp, err := again.LoadCheckpoint(ctx, "p"); err != nil || string(cp) != "cp" {
		t.Fatalf("checkpoint after reopen = %q, %v", cp, err)
	}
	if other := openMy(t, dsn, testDatabase(t, dsn)); other.Identity() == again.Identity() {
		t.Fatal("two databases share an identity")
	}
	long := strings.Repeat("\x00\xff", statestore.MaxNameBytes/2)
	rev, err := again.Put(ctx, long, long, long, []byte("v"), 0)
	if err != nil {
		t.Fatalf("Put with names of MaxNameBytes: %v", err)
	}
	if rs, err := again.List(ctx, long, long); err != nil || len(rs) != 1 || rs[0].Key != long || rs[0].Revision != rev {
		t.Fatalf("List with long names = %d records, %v", len(rs), err)
	}
	mysqlExec(t, dsn, "UPDATE `"+db+"`.statestore_meta SET value = '2' WHERE name = 'format'")
	if _, err := OpenMySQL(ctx, dsn, &Options{Schema: db}); !errors.Is(err, statestore.ErrFormat) {
		t.Fatalf("open of format 2: %v, want ErrFormat", err)
	}
	refused, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := OpenMySQL(refused, "u:secret@tcp(127.0.0.1:1)/db?timeout=5s", nil); !errors.Is(err, statestore.ErrUnavailable) || strings.Contains(err.Error(), "secret") {
		t.Fatalf("open of an unreachable server: %v, want ErrUnavailable without the password", err)
	}
	for _, bad := range []string{"u:secret@127.0.0.1/db", "u:secret@tcp(127.0.0.1:3306)/db?tls=true"} {
		if _, err := OpenMySQL(ctx, bad, nil); !errors.Is(err, statestore.ErrInvalid) || strings.Contains(err.Error(), "secret") {
			t.Fatalf("bad DSN: %v, want ErrInvalid without the password", err)
		}
	}
}

// mysqlKill kills connection id (every connection using database db when id is 0) and waits
// until they are gone.
func mysqlKill(t *testing.T, dsn, db string, id uint64) {
	t.Helper()
	c := mysqlAdmin(t, dsn)
	defer c.Close()
	deadline := time.Now().Add(time.Minute)
	for {
		r, err := c.Execute("SELECT ID FROM information_schema.PROCESSLIST WHERE (? = 0 AND DB = ? OR ID = ?) AND ID <> CONNECTION_ID()", id, db, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.RowNumber() == 0 {
			return
		}
		for i := range r.RowNumber() {
			pid, _ := r.GetInt(i, 0)
			_, _ = c.Execute(fmt.Sprintf("KILL CONNECTION %d", pid))
		}
		if time.Now().After(deadline) {
			t.Fatalf("connections still alive")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestMySQLCrashMidTransaction is TestPostgresCrashMidTransaction for MariaDB.
func TestMySQLCrashMidTransaction(t *testing.T) {
	dsn := testenv.Require(t, testenv.MySQLDSN)
	ctx := context.Background()
	db := testDatabase(t, dsn)
	s := openMy(t, dsn, db)
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
		var id uint64
		if err := tx.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			return // already cut
		}
		mysqlKill(t, dsn, db, id)
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

// TestMySQLConnectionLoss is TestPostgresConnectionLoss for MariaDB.
func TestMySQLConnectionLoss(t *testing.T) {
	dsn := testenv.Require(t, testenv.MySQLDSN)
	ctx := context.Background()
	db := testDatabase(t, dsn)
	s := openMy(t, dsn, db)
	lease, err := s.Acquire(ctx, "p", "A", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f := s.Fenced("p", lease.Epoch)
	for round := range 3 {
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() { _, _ = s.LoadCheckpoint(ctx, "p") })
		}
		wg.Wait()
		mysqlKill(t, dsn, db, 0)
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

// TestMySQLContextBounds is TestPostgresContextBounds for MariaDB.
func TestMySQLContextBounds(t *testing.T) {
	dsn := testenv.Require(t, testenv.MySQLDSN)
	ctx := context.Background()
	db := testDatabase(t, dsn)
	s := openMy(t, dsn, db)
	rev, err := s.Put(ctx, "p", "ns", "k", []byte("v"), 0)
	if err != nil {
		t.Fatal(err)
	}
	admin := mysqlAdmin(t, dsn)
	defer admin.Close()
	if _, err := admin.Execute("LOCK TABLES `" + db + "`.statestore_records WRITE"); err != nil {
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
	if _, err := admin.Execute("UNLOCK TABLES"); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Get(ctx, "p", "ns", "k"); err != nil || r.Revision != rev {
		t.Fatalf("Get after the lock = %+v, %v", r, err)
	}
}
