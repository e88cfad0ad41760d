package sqlstate

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/tributary-dev/tributary/statestore"
)

// A database/sql connector over go-mysql's client (already the binlog reader's), opened with
// sql.OpenDB so that no driver name is registered: a program may also import another MySQL
// driver. Statements with arguments are prepared, executed and closed (binary protocol);
// a cancelled context closes the connection under the statement, which fails it.

// mysqlDSN is a go-sql-driver/mysql style DSN: user:password@tcp(host:port)/[db][?params].
type mysqlDSN struct {
	user, password, addr string
	timeout              time.Duration
}

// parseMySQLDSN parses dsn without ever quoting it (it holds the password). The only
// parameter is timeout (connecting; default 10s); TLS is not supported yet.
func parseMySQLDSN(dsn string) (mysqlDSN, error) {
	bad := fmt.Errorf("%w: the MySQL connection string is not user:password@tcp(host:port)/[database]", statestore.ErrInvalid)
	at := strings.LastIndex(dsn, "@")
	if at < 0 {
		return mysqlDSN{}, bad
	}
	var d mysqlDSN
	d.user, d.password, _ = strings.Cut(dsn[:at], ":")
	rest, ok := strings.CutPrefix(dsn[at+1:], "tcp(")
	if !ok {
		return mysqlDSN{}, bad
	}
	d.addr, rest, ok = strings.Cut(rest, ")")
	if !ok || d.user == "" || d.addr == "" || (rest != "" && !strings.HasPrefix(rest, "/")) {
		return mysqlDSN{}, bad
	}
	d.timeout = 10 * time.Second
	if _, params, ok := strings.Cut(rest, "?"); ok {
		q, err := url.ParseQuery(params)
		if err != nil {
			return mysqlDSN{}, bad
		}
		for k := range q {
			if k != "timeout" {
				// Refused rather than ignored: a tls parameter ignored would connect in clear.
				return mysqlDSN{}, fmt.Errorf("%w: the MySQL connection string's parameter %q is not supported (only timeout)", statestore.ErrInvalid, k)
			}
		}
		if t := q.Get("timeout"); t != "" {
			if d.timeout, err = time.ParseDuration(t); err != nil || d.timeout <= 0 {
				return mysqlDSN{}, bad
			}
		}
	}
	return d, nil
}

type mysqlConnector struct {
	dsn mysqlDSN
	mu  sync.Mutex
	db  string // the database connections use ("" before it exists)

	// Connections are numbered; when one is lost (not cut by its context), every connection
	// opened before it is suspect too (a server restart ends them all) and is discarded
	// before its next use instead of failing one call each.
	opened atomic.Uint64
	lostTo atomic.Uint64
}

func (c *mysqlConnector) setDB(db string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.db = db
}

func (c *mysqlConnector) Connect(ctx context.Context) (driver.Conn, error) {
	c.mu.Lock()
	db := c.db
	c.mu.Unlock()
	conn, err := client.ConnectWithContext(ctx, c.dsn.addr, c.dsn.user, c.dsn.password, db, c.dsn.timeout)
	if err != nil {
		return nil, err
	}
	return &mysqlConn{c: conn, from: c, n: c.opened.Add(1)}, nil
}

func (c *mysqlConnector) Driver() driver.Driver { return mysqlDriver{} }

type mysqlDriver struct{}

func (mysqlDriver) Open(string) (driver.Conn, error) {
	return nil, errors.New("sqlstate: open the MySQL store with OpenMySQL")
}

type mysqlConn struct {
	c    *client.Conn
	from *mysqlConnector
	n    uint64 // its number among the connector's connections
	bad  bool   // the connection failed or was cut: database/sql discards it
}

// lost marks c and every connection opened before it as suspect.
func (c *mysqlConn) lost() {
	c.bad = true
	for {
		to := c.from.lostTo.Load()
		if to >= c.n || c.from.lostTo.CompareAndSwap(to, c.n) {
			return
		}
	}
}

func (c *mysqlConn) suspect() bool { return c.bad || c.n <= c.from.lostTo.Load() }

var (
	_ driver.ExecerContext   = (*mysqlConn)(nil)
	_ driver.QueryerContext  = (*mysqlConn)(nil)
	_ driver.ConnBeginTx     = (*mysqlConn)(nil)
	_ driver.Validator       = (*mysqlConn)(nil)
	_ driver.SessionResetter = (*mysqlConn)(nil)
)

// run executes one statement, bounded by ctx: a cancelled context closes the connection.
func (c *mysqlConn) run(ctx context.Context, query string, args []driver.NamedValue) (*mysql.Result, error) {
	if c.suspect() {
		c.bad = true
		return nil, driver.ErrBadConn // never sent: database/sql retries on another connection
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	a := make([]any, len(args))
	for i, v := range args {
		a[i] = v.Value
	}
	// Close the network connection itself: client.Conn.Close would race with the statement.
	nc := c.c.Conn.Conn
	stop := context.AfterFunc(ctx, func() { _ = nc.Close() })
	r, err := c.c.Execute(query, a...)
	if !stop() {
		c.bad = true
		return nil, fmt.Errorf("the connection was closed under the statement: %w", ctx.Err())
	}
	if err != nil {
		var me *mysql.MyError
		if !errors.As(err, &me) || retryable(err) {
			c.lost() // not the server refusing the statement: the connection is suspect
		}
		return nil, err
	}
	return r, nil
}

func (c *mysqlConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	r, err := c.run(ctx, query, args)
	if err != nil {
		return nil, err
	}
	return mysqlResult{r}, nil
}

func (c *mysqlConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	r, err := c.run(ctx, query, args)
	if err != nil {
		return nil, err
	}
	if r.Resultset == nil {
		return nil, errors.New("sqlstate: the statement returned no rows")
	}
	return &mysqlRows{rs: r.Resultset}, nil
}

func (c *mysqlConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if opts.Isolation != driver.IsolationLevel(sql.LevelDefault) && opts.Isolation != driver.IsolationLevel(sql.LevelReadCommitted) {
		return nil, errors.New("sqlstate: only READ COMMITTED transactions")
	}
	if _, err := c.run(ctx, "SET TRANSACTION ISOLATION LEVEL READ COMMITTED", nil); err != nil {
		return nil, err
	}
	if _, err := c.run(ctx, "START TRANSACTION", nil); err != nil {
		return nil, err
	}
	return mysqlTx{c}, nil
}

func (c *mysqlConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *mysqlConn) Prepare(string) (driver.Stmt, error) {
	return nil, errors.New("sqlstate: prepared statements are not used")
}

func (c *mysqlConn) Close() error { return c.c.Close() }

func (c *mysqlConn) IsValid() bool { return !c.suspect() }

func (c *mysqlConn) ResetSession(context.Context) error {
	if c.suspect() {
		return driver.ErrBadConn
	}
	return nil
}

type mysqlTx struct{ c *mysqlConn }

func (t mysqlTx) Commit() error {
	_, err := t.c.run(context.Background(), "COMMIT", nil)
	return err
}

func (t mysqlTx) Rollback() error {
	if t.c.bad {
		return nil // the server rolled back when the connection went
	}
	_, err := t.c.run(context.Background(), "ROLLBACK", nil)
	return err
}

type mysqlResult struct{ r *mysql.Result }

func (r mysqlResult) LastInsertId() (int64, error) { return int64(r.r.InsertId), nil }
func (r mysqlResult) RowsAffected() (int64, error) { return int64(r.r.AffectedRows), nil }

type mysqlRows struct {
	rs  *mysql.Resultset
	row int
}

func (r *mysqlRows) Columns() []string {
	cols := make([]string, len(r.rs.Fields))
	for i, f := range r.rs.Fields {
		cols[i] = string(f.Name)
	}
	return cols
}

func (r *mysqlRows) Close() error { return nil }

func (r *mysqlRows) Next(dest []driver.Value) error {
	if r.row >= r.rs.RowNumber() {
		return io.EOF
	}
	for i := range dest {
		v, err := r.rs.GetValue(r.row, i)
		if err != nil {
			return err
		}
		if b, ok := v.([]byte); ok {
			v = append([]byte{}, b...)
		}
		dest[i] = v
	}
	r.row++
	return nil
}
