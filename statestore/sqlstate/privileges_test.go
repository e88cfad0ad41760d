package sqlstate

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/statestore"
)

// exercise runs every kind of statement the store sends as a deployment does -- open (the
// layout), a lease acquired, renewed and released, a checkpoint saved and loaded, a record put,
// read, listed and deleted through the lease's fenced view, the pipeline's state deleted -- and
// returns the first error. Each call uses a pipeline (and lease) of its own, so a call that
// failed midway leaves nothing in the next one's way.
func exercise(open func(ctx context.Context) (*Store, error)) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := open(ctx)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer s.Close()
	var b [4]byte
	_, _ = rand.Read(b[:])
	p := fmt.Sprintf("p-%x", b)
	l, err := s.Acquire(ctx, p, "least", 30*time.Second)
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	f := s.Fenced(p, l.Epoch)
	steps := []struct {
		what string
		run  func() error
	}{
		{"save checkpoint", func() error { return f.SaveCheckpoint(ctx, p, cdc.Checkpoint("cp")) }},
		{"load checkpoint", func() error { _, err := f.LoadCheckpoint(ctx, p); return err }},
		{"checkpoint saved", func() error { _, err := f.CheckpointSaved(ctx, p); return err }},
		{"put, get, list, delete", func() error {
			rev, err := f.Put(ctx, p, "ns", "k", []byte("v"), 0)
			if err != nil {
				return err
			}
			if _, err := f.Get(ctx, p, "ns", "k"); err != nil {
				return err
			}
			if _, err := f.List(ctx, p, "ns"); err != nil {
				return err
			}
			return f.Delete(ctx, p, "ns", "k", rev)
		}},
		{"renew", func() error { var err error; l, err = s.Renew(ctx, l, 30*time.Second); return err }},
		{"read lease", func() error { _, err := s.ReadLease(ctx, p); return err }},
		{"delete pipeline", func() error { return f.DeletePipeline(ctx, p) }},
		{"release", func() error { return s.Release(ctx, l) }},
	}
	for _, st := range steps {
		if err := st.run(); err != nil {
			return fmt.Errorf("%s: %w", st.what, err)
		}
	}
	return nil
}

// refused checks that err is the server's refusal of a privilege: permanent (not
// ErrUnavailable), naming what was refused, at the step want.
func refused(t *testing.T, err error, want, msg string) {
	t.Helper()
	if err == nil || errors.Is(err, statestore.ErrUnavailable) || !strings.HasPrefix(err.Error(), want+":") || !strings.Contains(err.Error(), msg) {
		t.Errorf("got %v; want a permanent refusal (%q) at %s", err, msg, want)
	}
}

// TestPostgresLeastPrivilege proves docs/privileges.md ("The shared state store") for
// PostgreSQL with a role holding exactly the grants it lists, and each grant needed: CREATE on
// the database alone (the role makes and owns the schema); USAGE, CREATE on a schema an
// administrator made, without CREATE on the database; tables an administrator made, with
// SELECT, INSERT, UPDATE, DELETE on them and USAGE on the sequence.
func TestPostgresLeastPrivilege(t *testing.T) {
	admin := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var database string
	if err := c.QueryRow(ctx, "SELECT current_database()").Scan(&database); err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	role := fmt.Sprintf("sqlstate_least_%x", b)
	password := fmt.Sprintf("pw-%x", b)
	exec := func(stmt string) {
		t.Helper()
		if _, err := c.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	r, db := pgx.Identifier{role}.Sanitize(), pgx.Identifier{database}.Sanitize()
	exec("CREATE ROLE " + r + " LOGIN PASSWORD '" + password + "'")
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cc, err := pgx.Connect(cctx, admin)
		if err != nil {
			t.Error(err)
			return
		}
		defer cc.Close(cctx)
		for _, stmt := range []string{"DROP OWNED BY " + r + " CASCADE", "DROP ROLE " + r} {
			if _, err := cc.Exec(cctx, stmt); err != nil {
				t.Errorf("%s: %v", stmt, err)
			}
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, password)
	dsn := u.String()
	open := func(schema string) func(ctx context.Context) (*Store, error) {
		return func(ctx context.Context) (*Store, error) { return OpenPostgres(ctx, dsn, &Options{Schema: schema}) }
	}

	t.Run("CreateOnDatabase", func(t *testing.T) {
		schema := testSchema(t, admin)
		refused(t, exercise(open(schema)), "open", "permission denied for database")
		exec("GRANT CREATE ON DATABASE " + db + " TO " + r)
		defer exec("REVOKE CREATE ON DATABASE " + db + " FROM " + r)
		if err := exercise(open(schema)); err != nil {
			t.Fatalf("with CREATE on the database: %v", err)
		}
		if err := exercise(open(schema)); err != nil {
			t.Fatalf("the second start: %v", err)
		}
	})

	t.Run("PreMadeSchema", func(t *testing.T) {
		schema := testSchema(t, admin)
		s := pgx.Identifier{schema}.Sanitize()
		exec("CREATE SCHEMA " + s)
		exec("GRANT USAGE ON SCHEMA " + s + " TO " + r)
		refused(t, exercise(open(schema)), "open", "permission denied for schema")
		exec("GRANT CREATE ON SCHEMA " + s + " TO " + r)
		if err := exercise(open(schema)); err != nil {
			t.Fatalf("with USAGE, CREATE on the schema: %v", err)
		}
	})

	t.Run("PreMadeTables", func(t *testing.T) {
		schema := testSchema(t, admin)
		_ = openPG(t, admin, schema) // the administrator's first start makes the layout
		s := pgx.Identifier{schema}.Sanitize()
		tables := s + ".statestore_meta, " + s + ".statestore_checkpoints, " + s + ".statestore_records, " + s + ".statestore_leases"
		exec("GRANT USAGE, CREATE ON SCHEMA " + s + " TO " + r)
		exec("GRANT USAGE ON SEQUENCE " + s + ".statestore_revision TO " + r)
		exec("GRANT SELECT, INSERT, UPDATE, DELETE ON " + tables + " TO " + r)
		if err := exercise(open(schema)); err != nil {
			t.Fatalf("with the grants on the administrator's tables: %v", err)
		}
		// Each grant is needed: without it, the first statement that needs it is refused.
		for _, tc := range []struct{ grant, on, step string }{
			{"DELETE", tables, "put, get, list, delete"},
			{"UPDATE", tables, "acquire"},
			{"INSERT", tables, "open"},
			{"SELECT", tables, "open"},
			{"USAGE", "SEQUENCE " + s + ".statestore_revision", "put, get, list, delete"},
			{"CREATE", "SCHEMA " + s, "open"},
		} {
			exec("REVOKE " + tc.grant + " ON " + tc.on + " FROM " + r)
			refused(t, exercise(open(schema)), tc.step, "permission denied")
			exec("GRANT " + tc.grant + " ON " + tc.on + " TO " + r)
		}
	})
}

// TestMySQLLeastPrivilege proves docs/privileges.md ("The shared state store") for MariaDB:
// a user with CREATE, SELECT, INSERT, UPDATE, DELETE on the store's database (and nothing
// else) creates the database and its tables and runs every statement, at the first start and
// the next; without any one of the five the statement that needs it is refused, also when the
// database and its tables already exist.
func TestMySQLLeastPrivilege(t *testing.T) {
	admin := testenv.Require(t, testenv.MySQLDSN)
	d, err := parseMySQLDSN(admin)
	if err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	user := fmt.Sprintf("sqlstate_least_%x", b)
	password := fmt.Sprintf("pw-%x", b)
	// Both hosts: a connection over 127.0.0.1 may be matched as localhost.
	accounts := []string{"'" + user + "'@'%'", "'" + user + "'@'localhost'"}
	each := func(stmt string) {
		t.Helper()
		for _, a := range accounts {
			mysqlExec(t, admin, strings.ReplaceAll(stmt, "{account}", a))
		}
	}
	each("CREATE USER {account} IDENTIFIED BY '" + password + "'")
	t.Cleanup(func() { each("DROP USER IF EXISTS {account}") })
	database := testDatabase(t, admin)
	dsn := user + ":" + password + "@tcp(" + d.addr + ")/"
	open := func(ctx context.Context) (*Store, error) { return OpenMySQL(ctx, dsn, &Options{Schema: database}) }

	refused(t, exercise(open), "open", "denied")
	all := "CREATE, SELECT, INSERT, UPDATE, DELETE"
	each("GRANT " + all + " ON `" + database + "`.* TO {account}")
	if err := exercise(open); err != nil {
		t.Fatalf("with %s on the database (missing): %v", all, err)
	}
	if err := exercise(open); err != nil {
		t.Fatalf("the second start: %v", err)
	}
	for _, tc := range []struct{ grant, step string }{
		{"CREATE", "open"},
		{"SELECT", "open"},
		{"INSERT", "open"},
		{"UPDATE", "acquire"},
		{"DELETE", "put, get, list, delete"},
	} {
		each("REVOKE " + tc.grant + " ON `" + database + "`.* FROM {account}")
		refused(t, exercise(open), tc.step, "denied")
		each("GRANT " + tc.grant + " ON `" + database + "`.* TO {account}")
	}
}
