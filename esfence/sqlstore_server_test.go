package esfence

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/statestore"
	"github.com/tributary-dev/tributary/statestore/sqlstate"
)

// The fencing conformance subset -- clones and restores (TestCloneAndRestore), copies of a
// table's generations (TestGenerationsFenceCopies), claim rounds (TestReclaimTablesRound),
// resets cut short (TestResetResumes) -- runs over every kind of state store a deployment can
// have: the in-memory store (the file store's semantics) and the shared SQL store of an
// active/standby pair (package sqlstate, on the shared PostgreSQL; skipped without
// TRIBUTARY_PG_DSN). The test bodies take their stores from server.newStore and
// server.copyStore.

// storeKind makes the state stores of one kind.
type storeKind struct {
	name string
	// open returns an empty store with a fresh identity.
	open func(t *testing.T) statestore.Store
	// copy returns an independent store with st's identity and contents: a clone of the
	// deployment, or a backup to be restored later.
	copy func(t *testing.T, st statestore.Store) statestore.Store
}

var memoryStores = storeKind{
	name: "memory",
	open: func(*testing.T) statestore.Store { return statestore.NewMemory() },
	copy: func(t *testing.T, st statestore.Store) statestore.Store {
		m, ok := st.(*statestore.Memory)
		if !ok {
			t.Fatalf("copy of a %T", st)
		}
		return m.Copy()
	},
}

// newStore is an empty store of the test's kind (memory when the test runs over one kind).
func (s *server) newStore(t *testing.T) statestore.Store {
	if s.stores.open == nil {
		return memoryStores.open(t)
	}
	return s.stores.open(t)
}

// copyStore is a copy of st (same identity and contents), of the test's kind.
func (s *server) copyStore(t *testing.T, st statestore.Store) statestore.Store {
	if s.stores.copy == nil {
		return memoryStores.copy(t, st)
	}
	return s.stores.copy(t, st)
}

// enginesAndStores runs fn per engine and per kind of state store, as subtests
// <engine>/<kind>; the indices of each kind have their own prefix. The SQL store runs on
// Elasticsearch only: what it stores is the same whichever engine the indices are on, and the
// engines' differences are run by the memory kind (this keeps the added time modest).
func enginesAndStores(t *testing.T, fn func(t *testing.T, s *server)) {
	engines(t, func(t *testing.T, s *server) {
		kinds := []storeKind{memoryStores}
		if s.Engine == estest.Elasticsearch {
			kinds = append(kinds, postgresStores())
		}
		for _, k := range kinds {
			t.Run(k.name, func(t *testing.T) {
				if k.open == nil {
					testenv.Require(t, testenv.PostgresDSN) // skips, saying why
				}
				fn(t, &server{Node: s.Node, prefix: s.prefix + "-" + k.name[:1], stores: k})
			})
		}
	})
}

// postgresStores are sqlstate stores on the shared PostgreSQL, each in its own schema
// hf_<random> (copies too), dropped when the test ends. Without TRIBUTARY_PG_DSN its open is
// nil: the kind is skipped.
func postgresStores() storeKind {
	k := storeKind{name: "sqlstate"}
	dsn := os.Getenv(testenv.PostgresDSN)
	if dsn == "" {
		return k
	}
	schemas := map[statestore.Store]string{}
	k.open = func(t *testing.T) statestore.Store {
		schema := pgTestSchema(t, dsn)
		st := openPGStore(t, dsn, schema)
		schemas[st] = schema
		return st
	}
	k.copy = func(t *testing.T, st statestore.Store) statestore.Store {
		from, ok := schemas[st]
		if !ok {
			t.Fatalf("copy of a store this kind did not open")
		}
		to := pgTestSchema(t, dsn)
		// The layout first (a store opened on the empty schema creates it, with an identity
		// of its own), then every row and the revision sequence copied over it.
		_ = openPGStore(t, dsn, to).Close()
		f, tt := pgx.Identifier{from}.Sanitize(), pgx.Identifier{to}.Sanitize()
		stmts := []string{"BEGIN"}
		for _, table := range []string{"statestore_meta", "statestore_checkpoints", "statestore_records", "statestore_leases"} {
			stmts = append(stmts, "DELETE FROM "+tt+"."+table, "INSERT INTO "+tt+"."+table+" SELECT * FROM "+f+"."+table)
		}
		stmts = append(stmts,
			"SELECT setval('"+tt+".statestore_revision', last_value, is_called) FROM "+f+".statestore_revision",
			"COMMIT")
		pgAdmin(t, dsn, stmts...)
		c := openPGStore(t, dsn, to)
		if c.Identity() != st.Identity() {
			t.Fatalf("the copy has identity %s, want %s", c.Identity(), st.Identity())
		}
		schemas[c] = to
		return c
	}
	return k
}

// pgTestSchema is a fresh schema name hf_<random>, dropped with everything in it when the
// test ends.
func pgTestSchema(t *testing.T, dsn string) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := fmt.Sprintf("hf_esfence_%x", b)
	t.Cleanup(func() { pgAdmin(t, dsn, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE") })
	return schema
}

// openPGStore opens a sqlstate store on schema (created when missing), closed when the test
// ends.
func openPGStore(t *testing.T, dsn, schema string) *sqlstate.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := sqlstate.OpenPostgres(ctx, dsn, &sqlstate.Options{Schema: schema, MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// pgAdmin runs statements on one connection of its own.
func pgAdmin(t *testing.T, dsn string, stmts ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for _, stmt := range stmts {
		if _, err := c.Exec(ctx, stmt); err != nil {
			t.Fatalf("%.60s: %v", stmt, err)
		}
	}
}
