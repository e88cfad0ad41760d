package pgcdc_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/cdctest"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/internal/testenv"
)

func TestConformance(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		dsn := testenv.Require(t, testenv.PostgresDSN)
		cdctest.Run(t, cdctest.Harness{
			Exec: func(ctx context.Context, stmts ...string) error {
				return execSQL(ctx, dsn, false, stmts...)
			},
			ExecTx: func(ctx context.Context, stmts ...string) error {
				return execSQL(ctx, dsn, true, stmts...)
			},
			Quote: quote,
			NewSource: func(t *testing.T, mode cdc.SnapshotMode, tables ...string) cdc.Source {
				var ts []pgcdc.Table
				for _, name := range tables {
					ts = append(ts, pgcdc.Table{Name: name})
				}
				return newSource(t, dsn, pgcdc.Options{Snapshot: mode, Tables: ts})
			},
		})
	})
}

func quote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// execSQL runs statements each in its own transaction, or all in one.
func execSQL(ctx context.Context, dsn string, oneTx bool, stmts ...string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if !oneTx {
		for _, s := range stmts {
			if _, err := conn.Exec(ctx, s); err != nil {
				return err
			}
		}
		return nil
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	for _, s := range stmts {
		if _, err := tx.Exec(ctx, s); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

func suffix(t testing.TB) string {
	var b [5]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// newSource makes a source with a unique slot and publication. Cleanup (which runs after the
// tests' stream cleanups) drops slot, publication and the captured tables.
func newSource(t *testing.T, dsn string, opts pgcdc.Options) *pgcdc.Source {
	t.Helper()
	sfx := suffix(t)
	opts.Name = "test_" + sfx
	opts.Slot = "pgcdc_test_" + sfx
	opts.Publication = "pgcdc_test_" + sfx
	if opts.StatusInterval == 0 {
		opts.StatusInterval = 200 * time.Millisecond
	}
	src, err := pgcdc.New(dsn, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := src.Drop(ctx); err != nil {
			t.Errorf("drop slot and publication: %v", err)
		}
		var stmts []string
		for _, tb := range opts.Tables {
			stmts = append(stmts, "DROP TABLE IF EXISTS "+quote(tb.Name))
		}
		if err := execSQL(ctx, dsn, false, stmts...); err != nil {
			t.Errorf("drop tables: %v", err)
		}
	})
	return src
}
