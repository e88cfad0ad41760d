package pgcdc

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// slotFixture is a table (id int PRIMARY KEY, n int) with a publication and a pgoutput slot of
// its own, for the re-snapshot tests that read what the slot decodes through
// pg_logical_slot_peek_binary_changes. Everything is dropped when the test ends, after the
// connections the fixture opened are closed: a transaction a failing test left open would
// otherwise block the drop, and every other test's slot creation with it.
type slotFixture struct {
	t                *testing.T
	ctx              context.Context
	dsn              string
	table, pub, slot string
	admin            *pgx.Conn
}

func newSlotFixture(t *testing.T, prefix string) *slotFixture {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	sfx := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	f := &slotFixture{t: t, ctx: ctx, dsn: dsn, table: prefix + sfx, pub: prefix + "pub_" + sfx, slot: prefix + "slot_" + sfx}
	t.Cleanup(func() { // registered before the connections: runs after they are closed
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer ccancel()
		c, err := pgx.Connect(cctx, dsn)
		if err != nil {
			return
		}
		defer c.Close(cctx)
		_, _ = c.Exec(cctx, "SELECT pg_drop_replication_slot($1)", f.slot)
		_, _ = c.Exec(cctx, "DROP PUBLICATION IF EXISTS "+f.pub)
		_, _ = c.Exec(cctx, "DROP TABLE IF EXISTS "+f.table)
	})
	f.admin = f.conn()
	f.exec(f.admin, "CREATE TABLE "+f.table+" (id int PRIMARY KEY, n int)")
	f.exec(f.admin, "CREATE PUBLICATION "+f.pub+" FOR TABLE "+f.table)
	f.exec(f.admin, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", f.slot)
	return f
}

// conn opens a connection closed when the test ends.
func (f *slotFixture) conn() *pgx.Conn {
	f.t.Helper()
	c, err := pgx.Connect(f.ctx, f.dsn)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func (f *slotFixture) exec(c *pgx.Conn, q string, args ...any) {
	f.t.Helper()
	if _, err := c.Exec(f.ctx, q, args...); err != nil {
		f.t.Fatalf("%s: %v", q, err)
	}
}

// peeked is one pgoutput message the slot decoded, at its LSN.
type peeked struct {
	lsn pglogrepl.LSN
	msg pglogrepl.Message
}

// peek returns what the slot decodes so far, without consuming it.
func (f *slotFixture) peek() []peeked {
	f.t.Helper()
	rows, err := f.admin.Query(f.ctx, `SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL,
		'proto_version', '1', 'publication_names', $2, 'messages', 'true')`, f.slot, f.pub)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	var out []peeked
	for rows.Next() {
		var lsnText string
		var data []byte
		if err := rows.Scan(&lsnText, &data); err != nil {
			f.t.Fatal(err)
		}
		lsn, err := pglogrepl.ParseLSN(lsnText)
		if err != nil {
			f.t.Fatal(err)
		}
		msg, err := pglogrepl.Parse(data)
		if err != nil {
			f.t.Fatalf("pgoutput message at %s: %v", lsnText, err)
		}
		out = append(out, peeked{lsn: lsn, msg: msg})
	}
	if err := rows.Err(); err != nil {
		f.t.Fatal(err)
	}
	return out
}
