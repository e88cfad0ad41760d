package faultsuite

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/mirror"
	"github.com/tributary-dev/tributary/sink"
)

// sourceDB is one source server as the suite drives it: the tables' DDL, literals, writes
// over connections of the test's own (never through a proxy: faults are between the pipeline
// and its servers), and the read-back the comparison starts from.
type sourceDB interface {
	name() string // "postgres" or "mariadb"
	// addr is the server's host:port, the target of the pipeline's proxy.
	addr() string
	exec(ctx context.Context, stmts ...string) error
	dial(ctx context.Context) (txConn, error)
	createTables(tables []*tableDef) []string
	dropTables(tables []*tableDef) []string
	lit(k colKind, v value) string
	quote(s string) string
	// upsert inserts a row or, when its key exists (a commit whose answer was lost), updates it.
	upsert(t *tableDef, vals []value) string
	// readRows returns every row of t by _id: per column its text (nil for NULL).
	readRows(ctx context.Context, t *tableDef) (map[string][]*string, error)
	// sourceConfig is the pipeline's source reaching the server at addr.
	sourceConfig(sfx string, tables []*tableDef, addr string) mirror.SourceConfig
}

// txConn is one writer's connection.
type txConn interface {
	tx(ctx context.Context, stmts []string) error
	close()
}

func newSourceDB(t testing.TB, name string) sourceDB {
	t.Helper()
	switch name {
	case "postgres":
		dsn := testenv.Require(t, testenv.PostgresDSN)
		u, err := url.Parse(dsn)
		if err != nil || u.Host == "" {
			t.Fatalf("%s is not a postgres:// URL", testenv.PostgresDSN)
		}
		return &postgres{dsn: dsn, u: u}
	case "mariadb":
		m, err := testenv.ParseMySQLDSN(testenv.Require(t, testenv.MySQLDSN))
		if err != nil {
			t.Fatalf("%s: %v", testenv.MySQLDSN, err)
		}
		return &mariadb{m: m}
	}
	t.Fatalf("unknown source %q", name)
	return nil
}

// --- PostgreSQL ---

type postgres struct {
	dsn string
	u   *url.URL
}

func (*postgres) name() string   { return "postgres" }
func (p *postgres) addr() string { return p.u.Host }

func (*postgres) quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func (p *postgres) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(p.dsn)
	if err != nil {
		return nil, err
	}
	cfg.ConnectTimeout = 10 * time.Second
	cfg.RuntimeParams["DateStyle"] = "ISO, MDY"
	return pgx.ConnectConfig(ctx, cfg)
}

func (p *postgres) exec(ctx context.Context, stmts ...string) error {
	c, err := p.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	for _, s := range stmts {
		if _, err := c.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

type pgConn struct{ c *pgx.Conn }

func (p *postgres) dial(ctx context.Context) (txConn, error) {
	c, err := p.connect(ctx)
	if err != nil {
		return nil, err
	}
	return pgConn{c}, nil
}

func (c pgConn) tx(ctx context.Context, stmts []string) error {
	tx, err := c.c.Begin(ctx)
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

func (c pgConn) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.c.Close(ctx)
}

var pgTypes = map[colKind]string{kInt: "bigint", kText: "text", kDecimal: "numeric(12,2)", kBool: "boolean",
	kFloat: "double precision", kDateTime: "timestamp(6)", kDate: "date"}

func (p *postgres) createTables(tables []*tableDef) []string {
	var out []string
	for i, t := range tables {
		var defs, keys []string
		for j, c := range t.cols {
			typ := pgTypes[c.kind]
			if c.name == "n" || c.name == "seq" {
				typ = "integer"
			}
			if c.name == "tenant" {
				typ = "varchar(20)"
			}
			defs = append(defs, p.quote(c.name)+" "+typ)
			if j < t.nKey {
				keys = append(keys, p.quote(c.name))
			}
		}
		out = append(out, fmt.Sprintf("CREATE TABLE %s (%s, PRIMARY KEY (%s))", p.quote(t.name), strings.Join(defs, ", "), strings.Join(keys, ", ")))
		if i%2 == 1 {
			// One table under each replica identity: DEFAULT sends only the key of a deleted
			// row, FULL the whole old row.
			out = append(out, "ALTER TABLE "+p.quote(t.name)+" REPLICA IDENTITY FULL")
		}
	}
	return out
}

func (p *postgres) dropTables(tables []*tableDef) []string {
	var out []string
	for _, t := range tables {
		out = append(out, "DROP TABLE IF EXISTS "+p.quote(t.name))
	}
	return out
}

func (*postgres) lit(k colKind, v value) string {
	switch {
	case v.null:
		return "NULL"
	case k == kText || k == kDateTime || k == kDate:
		return "'" + strings.ReplaceAll(v.s, "'", "''") + "'"
	}
	return v.s
}

func (p *postgres) upsert(t *tableDef, vals []value) string {
	names, lits, sets := make([]string, len(t.cols)), make([]string, len(t.cols)), []string(nil)
	for i, c := range t.cols {
		names[i], lits[i] = p.quote(c.name), p.lit(c.kind, vals[i])
		if i >= t.nKey {
			sets = append(sets, names[i]+" = EXCLUDED."+names[i])
		}
	}
	return fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s) ON CONFLICT (%s) DO UPDATE SET %s", p.quote(t.name),
		strings.Join(names, ", "), strings.Join(lits, ", "), strings.Join(names[:t.nKey], ", "), strings.Join(sets, ", "))
}

func (p *postgres) readRows(ctx context.Context, t *tableDef) (map[string][]*string, error) {
	c, err := p.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close(context.WithoutCancel(ctx))
	exprs := make([]string, len(t.cols))
	for i, col := range t.cols {
		exprs[i] = p.quote(col.name) + "::text"
	}
	rows, err := c.Query(ctx, "SELECT "+strings.Join(exprs, ", ")+" FROM "+p.quote(t.name))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]*string{}
	for rows.Next() {
		vals := make([]*string, len(t.cols))
		ptrs := make([]any, len(t.cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		if err := addRow(out, t, vals); err != nil {
			return nil, err
		}
	}
	return out, rows.Err()
}

func (p *postgres) sourceConfig(sfx string, tables []*tableDef, addr string) mirror.SourceConfig {
	u := *p.u
	u.Host = addr
	sc := mirror.SourceConfig{Type: "postgres", DSN: sink.Secret(u.String()), Slot: "flt_" + sfx, Publication: "flt_" + sfx}
	for _, t := range tables {
		sc.Tables = append(sc.Tables, "public."+t.name)
	}
	return sc
}

// terminateWalsender ends the walsender serving slot, if one does; it reports whether one did.
func (p *postgres) terminateWalsender(ctx context.Context, slot string) (bool, error) {
	c, err := p.connect(ctx)
	if err != nil {
		return false, err
	}
	defer c.Close(context.WithoutCancel(ctx))
	var n int
	err = c.QueryRow(ctx, "SELECT count(pg_terminate_backend(active_pid)) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL", slot).Scan(&n)
	return n > 0, err
}

// --- MariaDB ---

type mariadb struct{ m testenv.MySQL }

func (*mariadb) name() string   { return "mariadb" }
func (d *mariadb) addr() string { return d.m.Addr }

func (*mariadb) quote(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

func (d *mariadb) connect(ctx context.Context) (*client.Conn, error) {
	c, err := client.ConnectWithContext(ctx, d.m.Addr, d.m.User, d.m.Password, d.m.DB, 10*time.Second)
	if err != nil {
		return nil, err
	}
	c.ReadTimeout, c.WriteTimeout = time.Minute, time.Minute
	if _, err := c.Execute("SET SESSION time_zone = '+00:00'"); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (d *mariadb) exec(ctx context.Context, stmts ...string) error {
	c, err := d.connect(ctx)
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

type myConn struct{ c *client.Conn }

func (d *mariadb) dial(ctx context.Context) (txConn, error) {
	c, err := d.connect(ctx)
	if err != nil {
		return nil, err
	}
	return myConn{c}, nil
}

func (c myConn) tx(_ context.Context, stmts []string) error {
	if err := c.c.Begin(); err != nil {
		return err
	}
	for _, s := range stmts {
		if _, err := c.c.Execute(s); err != nil {
			_ = c.c.Rollback()
			return err
		}
	}
	return c.c.Commit()
}

func (c myConn) close() { _ = c.c.Close() }

var myTypes = map[colKind]string{kInt: "BIGINT", kText: "TEXT CHARACTER SET utf8mb4", kDecimal: "DECIMAL(12,2)",
	kBool: "TINYINT", kFloat: "DOUBLE", kDateTime: "DATETIME(6)", kDate: "DATE"}

func (d *mariadb) createTables(tables []*tableDef) []string {
	var out []string
	for _, t := range tables {
		var defs, keys []string
		for j, c := range t.cols {
			typ := myTypes[c.kind]
			switch c.name {
			case "n", "seq":
				typ = "INT"
			case "tenant":
				// A binary collation: keys that differ in case or accents are different rows,
				// as they are different _ids.
				typ = "VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
			}
			defs = append(defs, d.quote(c.name)+" "+typ)
			if j < t.nKey {
				keys = append(keys, d.quote(c.name))
			}
		}
		out = append(out, fmt.Sprintf("CREATE TABLE %s (%s, PRIMARY KEY (%s)) DEFAULT CHARSET=utf8mb4", d.quote(t.name),
			strings.Join(defs, ", "), strings.Join(keys, ", ")))
	}
	return out
}

func (d *mariadb) dropTables(tables []*tableDef) []string {
	var out []string
	for _, t := range tables {
		out = append(out, "DROP TABLE IF EXISTS "+d.quote(t.name))
	}
	return out
}

func (*mariadb) lit(k colKind, v value) string {
	switch {
	case v.null:
		return "NULL"
	case k == kText:
		if v.s == "" {
			return "''"
		}
		return "_utf8mb4 X'" + hex.EncodeToString([]byte(v.s)) + "'"
	case k == kDateTime || k == kDate:
		return "'" + v.s + "'"
	case k == kBool:
		if v.s == "true" {
			return "1"
		}
		return "0"
	}
	return v.s
}

func (d *mariadb) upsert(t *tableDef, vals []value) string {
	names, lits, sets := make([]string, len(t.cols)), make([]string, len(t.cols)), []string(nil)
	for i, c := range t.cols {
		names[i], lits[i] = d.quote(c.name), d.lit(c.kind, vals[i])
		if i >= t.nKey {
			sets = append(sets, names[i]+" = VALUES("+names[i]+")")
		}
	}
	return fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s) ON DUPLICATE KEY UPDATE %s", d.quote(t.name),
		strings.Join(names, ", "), strings.Join(lits, ", "), strings.Join(sets, ", "))
}

func (d *mariadb) readRows(ctx context.Context, t *tableDef) (map[string][]*string, error) {
	c, err := d.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	// Every value travels as HEX() of its text, so no connection character set takes part.
	exprs := make([]string, len(t.cols))
	for i, col := range t.cols {
		exprs[i] = "HEX(CAST(" + d.quote(col.name) + " AS CHAR CHARACTER SET utf8mb4))"
	}
	res, err := c.Execute("SELECT " + strings.Join(exprs, ", ") + " FROM " + d.quote(t.name))
	if err != nil {
		return nil, err
	}
	defer res.Close()
	out := map[string][]*string{}
	for row := range res.RowNumber() {
		vals := make([]*string, len(t.cols))
		for i := range t.cols {
			null, err := res.IsNull(row, i)
			if err != nil {
				return nil, err
			}
			if null {
				continue
			}
			h, err := res.GetString(row, i)
			if err != nil {
				return nil, err
			}
			b, err := hex.DecodeString(h)
			if err != nil {
				return nil, err
			}
			s := string(b)
			vals[i] = &s
		}
		if err := addRow(out, t, vals); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (d *mariadb) sourceConfig(sfx string, tables []*tableDef, addr string) mirror.SourceConfig {
	sc := mirror.SourceConfig{Type: "mysql", DSN: sink.Secret(fmt.Sprintf("%s:%s@tcp(%s)/%s", d.m.User, d.m.Password, addr, d.m.DB))}
	for _, t := range tables {
		sc.Tables = append(sc.Tables, d.m.DB+"."+t.name)
	}
	return sc
}

// addRow files a read-back row under its _id.
func addRow(out map[string][]*string, t *tableDef, vals []*string) error {
	keys := make([]string, t.nKey)
	for i := range keys {
		if vals[i] == nil {
			return errors.New("a NULL key column")
		}
		keys[i] = *vals[i]
	}
	out[docID(keys)] = vals
	return nil
}
