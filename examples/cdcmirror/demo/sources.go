package main

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"os"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/jackc/pgx/v5"
	"go.yaml.in/yaml/v3"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/sink"
)

// demoConfig is what the demo reads from a cdcmirror configuration to find the table, the
// index and the files (cdcmirror itself validates the whole file).
type demoConfig struct {
	Source struct {
		Tables      []string
		Slot        string
		Publication string
	}
	Sinks []struct {
		Config struct{ Index string }
	}
	State, DLQ string

	table string // the one captured table, as written
}

func readDemoConfig(path string) (*demoConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c demoConfig
	if err := yaml.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(c.Source.Tables) != 1 || len(c.Sinks) != 1 || c.State == "" || c.DLQ == "" {
		return nil, fmt.Errorf("%s: the demo needs one table, one sink, state: and dlq:", path)
	}
	c.table = c.Source.Tables[0]
	return &c, nil
}

// row is the part of a row the demo compares with its document.
type row struct {
	customer string
	qty      int64
	price    *big.Rat
	note     *string
}

// source is one demo database.
type source interface {
	kind() string  // postgres | mysql: the configuration file's name
	title() string // for the output
	connect(ctx context.Context, cfg *demoConfig) error
	close()
	index(ctx context.Context, cfg *demoConfig) (string, error)
	drop(ctx context.Context) error
	create(ctx context.Context, rows int) error
	// change updates, deletes and inserts a few rows in one transaction and returns their ids.
	change(ctx context.Context, rows int) ([]int64, error)
	count(ctx context.Context) (int64, error)
	rows(ctx context.Context, ids []int64) (map[int64]row, error)
}

// The changes every demo makes, after `rows` rows were inserted.
func changedIDs(rows int) (updated, deleted, inserted []int64) {
	n := int64(rows)
	return []int64{1, 2, 3}, []int64{4, 5}, []int64{n + 1, n + 2}
}

func idList(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ", ")
}

// postgres is the PostgreSQL test server.
type postgres struct {
	dsn                       string
	conn                      *pgx.Conn
	schema, table, slot, publ string
}

func (p *postgres) kind() string  { return "postgres" }
func (p *postgres) title() string { return "PostgreSQL" }

func (p *postgres) connect(ctx context.Context, cfg *demoConfig) error {
	if p.dsn == "" {
		return errors.New("TRIBUTARY_PG_DSN is unset")
	}
	p.schema, p.table, _ = strings.Cut(cfg.table, ".")
	if p.table == "" {
		p.schema, p.table = "public", cfg.table
	}
	p.slot, p.publ = cfg.Source.Slot, cfg.Source.Publication
	var err error
	p.conn, err = pgx.Connect(ctx, p.dsn)
	return err
}

func (p *postgres) close() { _ = p.conn.Close(context.Background()) }

func (p *postgres) qualified() string {
	return pgx.Identifier{p.schema, p.table}.Sanitize()
}

func (p *postgres) index(ctx context.Context, cfg *demoConfig) (string, error) {
	var db string
	if err := p.conn.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		return "", err
	}
	return sink.IndexName(cfg.Sinks[0].Config.Index, cdc.TableID{Database: db, Schema: p.schema, Table: p.table})
}

func (p *postgres) drop(ctx context.Context) error {
	// The slot and the publication cdcmirror created: a pipeline's server-side state.
	src, err := pgcdc.New(p.dsn, &pgcdc.Options{Slot: p.slot, Publication: p.publ})
	if err != nil {
		return err
	}
	if err := src.Drop(ctx); err != nil {
		return err
	}
	_, err = p.conn.Exec(ctx, "DROP TABLE IF EXISTS "+p.qualified())
	return err
}

func (p *postgres) create(ctx context.Context, rows int) error {
	_, err := p.conn.Exec(ctx, `CREATE TABLE `+p.qualified()+` (
		id bigint PRIMARY KEY,
		customer text NOT NULL,
		qty integer NOT NULL,
		price numeric(10,2) NOT NULL,
		paid boolean NOT NULL,
		ordered_at timestamptz NOT NULL,
		note varchar(200),
		attrs jsonb)`)
	if err != nil {
		return err
	}
	if _, err := p.conn.Exec(ctx, `INSERT INTO `+p.qualified()+`
		SELECT i, 'customer ' || (i % 997), 1 + i % 10, (i % 1000) + 0.99, i % 3 = 0,
			timestamptz '2026-01-01 00:00:00+00' + i * interval '1 minute', NULL,
			jsonb_build_object('channel', CASE WHEN i % 2 = 0 THEN 'web' ELSE 'store' END)
		FROM generate_series(1, $1::bigint) i`, rows); err != nil {
		return err
	}
	// The snapshot's progress estimate is the catalog's row count.
	_, err = p.conn.Exec(ctx, "ANALYZE "+p.qualified())
	return err
}

func (p *postgres) change(ctx context.Context, rows int) ([]int64, error) {
	up, del, ins := changedIDs(rows)
	tx, err := p.conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, q := range []string{
		"UPDATE " + p.qualified() + " SET qty = qty + 100, note = 'updated by the demo' WHERE id IN (" + idList(up) + ")",
		"DELETE FROM " + p.qualified() + " WHERE id IN (" + idList(del) + ")",
		fmt.Sprintf(`INSERT INTO %s VALUES (%d, 'new customer', 7, 123.45, true, now(), 'inserted', '{"channel":"web"}'),
			(%d, 'new customer', 1, 0.5, false, now(), NULL, NULL)`, p.qualified(), ins[0], ins[1]),
	} {
		fmt.Println("  " + strings.Join(strings.Fields(q), " "))
		if _, err := tx.Exec(ctx, q); err != nil {
			return nil, err
		}
	}
	return append(append(up, del...), ins...), tx.Commit(ctx)
}

func (p *postgres) count(ctx context.Context) (int64, error) {
	var n int64
	err := p.conn.QueryRow(ctx, "SELECT count(*) FROM "+p.qualified()).Scan(&n)
	return n, err
}

func (p *postgres) rows(ctx context.Context, ids []int64) (map[int64]row, error) {
	rs, err := p.conn.Query(ctx, "SELECT id, customer, qty, price::text, note FROM "+p.qualified()+" WHERE id = ANY($1)", ids)
	if err != nil {
		return nil, err
	}
	out := map[int64]row{}
	for rs.Next() {
		var id int64
		var r row
		var price string
		if err := rs.Scan(&id, &r.customer, &r.qty, &price, &r.note); err != nil {
			return nil, err
		}
		r.price, _ = new(big.Rat).SetString(price)
		out[id] = r
	}
	return out, rs.Err()
}

// mysql is the MariaDB test server.
type mysql struct {
	dsnText              string
	conn                 *client.Conn
	user, pass, addr, db string
	table                string
}

func (m *mysql) kind() string  { return "mysql" }
func (m *mysql) title() string { return "MariaDB" }

func (m *mysql) connect(ctx context.Context, cfg *demoConfig) error {
	// user:password@tcp(host:port)/db, as .testenv/env writes it.
	at := strings.LastIndex(m.dsnText, "@")
	if at < 0 {
		return errors.New("TRIBUTARY_MYSQL_DSN is unset or not user:password@tcp(host:port)/db")
	}
	m.user, m.pass, _ = strings.Cut(m.dsnText[:at], ":")
	rest, _ := strings.CutPrefix(m.dsnText[at+1:], "tcp(")
	m.addr, rest, _ = strings.Cut(rest, ")")
	m.db, _, _ = strings.Cut(strings.TrimPrefix(rest, "/"), "?")
	m.table = cfg.table
	if db, t, ok := strings.Cut(cfg.table, "."); ok {
		m.db, m.table = db, t
	}
	var err error
	m.conn, err = client.ConnectWithContext(ctx, m.addr, m.user, m.pass, m.db, 10*time.Second)
	return err
}

func (m *mysql) close() { _ = m.conn.Close() }

func (m *mysql) qualified() string { return "`" + m.db + "`.`" + m.table + "`" }

func (m *mysql) exec(q string) error {
	_, err := m.conn.Execute(q)
	return err
}

func (m *mysql) index(_ context.Context, cfg *demoConfig) (string, error) {
	return sink.IndexName(cfg.Sinks[0].Config.Index, cdc.TableID{Database: m.db, Table: m.table})
}

func (m *mysql) drop(context.Context) error { return m.exec("DROP TABLE IF EXISTS " + m.qualified()) }

func (m *mysql) create(_ context.Context, rows int) error {
	if err := m.exec(`CREATE TABLE ` + m.qualified() + ` (
		id BIGINT PRIMARY KEY,
		customer VARCHAR(100) NOT NULL,
		qty INT NOT NULL,
		price DECIMAL(10,2) NOT NULL,
		paid BOOLEAN NOT NULL,
		ordered_at DATETIME(3) NOT NULL,
		note TEXT,
		attrs JSON)`); err != nil {
		return err
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for from := 1; from <= rows; from += 1000 {
		var vals []string
		for i := from; i < from+1000 && i <= rows; i++ {
			channel := "store"
			if i%2 == 0 {
				channel = "web"
			}
			vals = append(vals, fmt.Sprintf(`(%d, 'customer %d', %d, %d.99, %t, '%s', NULL, '{"channel":"%s"}')`,
				i, i%997, 1+i%10, i%1000, i%3 == 0, start.Add(time.Duration(i)*time.Minute).Format("2006-01-02 15:04:05"), channel))
		}
		if err := m.exec("INSERT INTO " + m.qualified() + " VALUES " + strings.Join(vals, ", ")); err != nil {
			return err
		}
	}
	// The snapshot's progress estimate is the catalog's row count.
	return m.exec("ANALYZE TABLE " + m.qualified())
}

func (m *mysql) change(_ context.Context, rows int) ([]int64, error) {
	up, del, ins := changedIDs(rows)
	if err := m.exec("BEGIN"); err != nil {
		return nil, err
	}
	for _, q := range []string{
		"UPDATE " + m.qualified() + " SET qty = qty + 100, note = 'updated by the demo' WHERE id IN (" + idList(up) + ")",
		"DELETE FROM " + m.qualified() + " WHERE id IN (" + idList(del) + ")",
		fmt.Sprintf(`INSERT INTO %s VALUES (%d, 'new customer', 7, 123.45, true, NOW(3), 'inserted', '{"channel":"web"}'),
			(%d, 'new customer', 1, 0.5, false, NOW(3), NULL, NULL)`, m.qualified(), ins[0], ins[1]),
	} {
		fmt.Println("  " + strings.Join(strings.Fields(q), " "))
		if err := m.exec(q); err != nil {
			_ = m.exec("ROLLBACK")
			return nil, err
		}
	}
	return append(append(up, del...), ins...), m.exec("COMMIT")
}

func (m *mysql) count(context.Context) (int64, error) {
	res, err := m.conn.Execute("SELECT COUNT(*) FROM " + m.qualified())
	if err != nil {
		return 0, err
	}
	defer res.Close()
	return res.GetInt(0, 0)
}

func (m *mysql) rows(_ context.Context, ids []int64) (map[int64]row, error) {
	res, err := m.conn.Execute("SELECT id, customer, qty, CAST(price AS CHAR), note FROM " + m.qualified() + " WHERE id IN (" + idList(ids) + ")")
	if err != nil {
		return nil, err
	}
	defer res.Close()
	out := map[int64]row{}
	for i := range res.RowNumber() {
		id, _ := res.GetInt(i, 0)
		var r row
		r.customer, _ = res.GetString(i, 1)
		r.qty, _ = res.GetInt(i, 2)
		price, _ := res.GetString(i, 3)
		r.price, _ = new(big.Rat).SetString(price)
		if null, _ := res.IsNull(i, 4); !null {
			note, _ := res.GetString(i, 4)
			r.note = &note
		}
		out[id] = r
	}
	return out, nil
}
