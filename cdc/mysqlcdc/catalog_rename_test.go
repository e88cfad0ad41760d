package mysqlcdc

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// catalogFixture is a database of its own with two tables of different columns and keys,
// m1_a and m1_b, that the tests rename into each other's names.
type catalogFixture struct {
	addr, user, pass, db string
	src                  *Source
}

func newCatalogFixture(t *testing.T) *catalogFixture {
	t.Helper()
	m, err := testenv.ParseMySQLDSN(testenv.Require(t, testenv.MySQLDSN))
	if err != nil {
		t.Fatalf("%s: %v", testenv.MySQLDSN, err)
	}
	f := &catalogFixture{addr: m.Addr, user: m.User, pass: m.Password, db: fmt.Sprintf("m1_cat_%08x", rand.Uint32())}
	t.Cleanup(func() {
		if err := f.exec("DROP DATABASE IF EXISTS " + quoteIdent(f.db)); err != nil {
			t.Logf("cleanup: drop database %s: %v", f.db, err)
		}
	})
	// The key's columns differ between the tables (a mix of one's columns and the other's key
	// has no key), and so does the kind of j (a mix of one's columns and the other's check
	// constraints has the wrong kind): a mixed load cannot pass for either table.
	if err := f.exec("CREATE DATABASE "+quoteIdent(f.db),
		"CREATE TABLE "+f.q("m1_a")+" (id INT NOT NULL PRIMARY KEY, v VARCHAR(20), j LONGTEXT)",
		"CREATE TABLE "+f.q("m1_b")+" (k1 BIGINT NOT NULL, w INT, k2 VARCHAR(10) NOT NULL, j JSON, PRIMARY KEY (k2, k1))"); err != nil {
		t.Fatal(err)
	}
	if f.src, err = New(f.addr, f.user, f.pass, []TableName{{Database: f.db, Table: "m1_a"}}, nil); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *catalogFixture) q(table string) string { return quoteIdent(f.db) + "." + quoteIdent(table) }

func (f *catalogFixture) id(table string) cdc.TableID {
	return f.src.tableID(TableName{Database: f.db, Table: table})
}

func (f *catalogFixture) conn() (*client.Conn, error) {
	c, err := client.ConnectWithContext(context.Background(), f.addr, f.user, f.pass, "", 10*time.Second)
	if err != nil {
		return nil, err
	}
	c.ReadTimeout, c.WriteTimeout = 5*time.Minute, 5*time.Minute
	return c, nil
}

// exec runs statements on a fresh connection.
func (f *catalogFixture) exec(stmts ...string) error {
	c, err := f.conn()
	if err != nil {
		return err
	}
	defer c.Close()
	for _, s := range stmts {
		if _, err := c.Execute(s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// shape is a schema's columns (name, kind, nullability) and primary key.
func shape(s *cdc.TableSchema) string {
	var b strings.Builder
	for _, c := range s.Columns {
		fmt.Fprintf(&b, "%s:%v:%v ", c.Name, c.Kind, c.Nullable)
	}
	fmt.Fprintf(&b, "key %v", s.PrimaryKey)
	return b.String()
}

// same says whether two loads describe the same relation exactly: columns, key and codecs.
func same(x, y *table) bool {
	return reflect.DeepEqual(x.schema.Columns, y.schema.Columns) && reflect.DeepEqual(x.schema.PrimaryKey, y.schema.PrimaryKey) &&
		reflect.DeepEqual(x.codecs, y.codecs)
}

// TestCatalogLoadUnderRename loads a captured name's schema thousands of times while another
// connection keeps renaming two tables of different columns and keys into each other's names
// (atomic swaps, and the same in three statements, between which the name does not exist).
// Every load is errNoTable or exactly one of the two tables: never columns of one with the key
// or check constraints of the other, never columns without their key (issue 32: the catalog's
// reads were separate statements, and a RENAME between them mixed relations).
func TestCatalogLoadUnderRename(t *testing.T) {
	f := newCatalogFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cat := &catalog{src: f.src}
	defer cat.close()

	wantA, err := cat.load(ctx, f.id("m1_a"))
	if err != nil {
		t.Fatal(err)
	}
	wantB, err := cat.load(ctx, f.id("m1_b"))
	if err != nil {
		t.Fatal(err)
	}
	// The true definitions, independent of the catalog.
	for _, c := range []struct {
		got  *table
		want string
	}{
		{wantA, "id:int:false v:text:true j:text:true key [0]"},
		{wantB, "k1:int:false w:int:true k2:text:false j:json:true key [2 0]"},
	} {
		if got := shape(c.got.schema); got != c.want {
			t.Fatalf("%v: %s, want %s", c.got.schema.ID, got, c.want)
		}
	}

	const loads, minRenames = 2000, 200
	var renames atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	var renameErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := f.conn()
		if err != nil {
			renameErr = err
			stop.Store(true)
			return
		}
		defer c.Close()
		a, b, tmp := f.q("m1_a"), f.q("m1_b"), f.q("m1_tmp")
		for i := 0; !stop.Load(); i++ {
			stmts := []string{"RENAME TABLE " + a + " TO " + tmp + ", " + b + " TO " + a + ", " + tmp + " TO " + b}
			if i%2 == 1 {
				stmts = []string{"RENAME TABLE " + a + " TO " + tmp, "RENAME TABLE " + b + " TO " + a, "RENAME TABLE " + tmp + " TO " + b}
			}
			for _, s := range stmts {
				if _, err := c.Execute(s); err != nil {
					renameErr = fmt.Errorf("%s: %w", s, err)
					stop.Store(true)
					return
				}
			}
			renames.Add(1)
		}
	}()

	var asA, asB, gone, waited int
	// Bounded by counts: loads loads, and on until minRenames renames ran alongside (the
	// renamer stops the loop early only when it fails).
	for n := 0; !stop.Load() && (n < loads || renames.Load() < minRenames); n++ {
		got, err := cat.load(ctx, f.id("m1_a"))
		switch {
		case errors.Is(err, errNoTable):
			gone++
			continue
		case lockWaited(err):
			waited++ // the bounded wait's retryable error: a RENAME slower than catalogLockWait
			continue
		case err != nil:
			stop.Store(true)
			wg.Wait()
			t.Fatalf("load %d: %v", n, err)
		}
		switch {
		case same(got, wantA):
			asA++
		case same(got, wantB):
			asB++
		default:
			stop.Store(true)
			wg.Wait()
			t.Fatalf("load %d: %s: neither table (%s | %s)", n, shape(got.schema), shape(wantA.schema), shape(wantB.schema))
		}
	}
	stop.Store(true)
	wg.Wait()
	if renameErr != nil {
		t.Fatal(renameErr)
	}
	t.Logf("%d renames; loads: %d as m1_a, %d as m1_b, %d not found, %d lock waits timed out", renames.Load(), asA, asB, gone, waited)
}

// TestCatalogLoadLockWaitBounded: a load of a table whose metadata lock a RENAME waits for
// (queued behind an open transaction) gives up after catalogLockTries waits of
// lock_wait_timeout with a retryable lock-wait error, never a schema or a stall; once the
// RENAME ran, the name loads the relation it now has.
func TestCatalogLoadLockWaitBounded(t *testing.T) {
	f := newCatalogFixture(t)
	restore := catalogLockWait
	catalogLockWait = time.Second
	defer func() { catalogLockWait = restore }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	holder, err := f.conn()
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	for _, s := range []string{"START TRANSACTION", "SELECT * FROM " + f.q("m1_a")} {
		if _, err := holder.Execute(s); err != nil {
			t.Fatal(err)
		}
	}
	renamer, err := f.conn()
	if err != nil {
		t.Fatal(err)
	}
	defer renamer.Close()
	if _, err := renamer.Execute("SET SESSION lock_wait_timeout = 600"); err != nil {
		t.Fatal(err)
	}
	renamed := make(chan error, 1)
	go func() {
		_, err := renamer.Execute("RENAME TABLE " + f.q("m1_a") + " TO " + f.q("m1_tmp") + ", " + f.q("m1_b") + " TO " + f.q("m1_a") + ", " + f.q("m1_tmp") + " TO " + f.q("m1_b"))
		renamed <- err
	}()
	// Wait until the RENAME is queued for the lock.
	for {
		r, err := holder.Execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE LIKE 'Waiting for table metadata lock' AND INFO LIKE ?", "RENAME TABLE %"+f.db+"%")
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := r.GetInt(0, 0); n > 0 {
			break
		}
		select {
		case err := <-renamed:
			t.Fatalf("RENAME ran while another transaction read the table: %v", err)
		case <-ctx.Done():
			t.Fatal("the RENAME never waited for the metadata lock")
		case <-time.After(50 * time.Millisecond):
		}
	}

	cat := &catalog{src: f.src}
	defer cat.close()
	got, err := cat.load(ctx, f.id("m1_a"))
	if err == nil || !lockWaited(err) || errors.Is(err, errNoTable) || cdc.IsPermanent(f.src.classify(err)) {
		t.Fatalf("load behind a queued RENAME: %v, %v; want a retryable lock wait error", got, err)
	}
	t.Logf("load behind a queued RENAME: %v", err)

	if _, err := holder.Execute("COMMIT"); err != nil {
		t.Fatal(err)
	}
	if err := <-renamed; err != nil {
		t.Fatal(err)
	}
	got, err = cat.load(ctx, f.id("m1_a"))
	if err != nil {
		t.Fatal(err)
	}
	if s, want := shape(got.schema), "k1:int:false w:int:true k2:text:false j:json:true key [2 0]"; s != want {
		t.Fatalf("after the swap: %s, want %s", s, want)
	}
	if _, err := cat.load(ctx, f.id("m1_none")); !errors.Is(err, errNoTable) {
		t.Fatalf("load of a missing table: %v, want errNoTable", err)
	}
	if _, err := cat.load(ctx, cdc.TableID{Database: f.db + "_none", Table: "m1_a"}); !errors.Is(err, errNoTable) {
		t.Fatalf("load of a table of a missing database: %v, want errNoTable", err)
	}
}
