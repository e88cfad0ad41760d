package mysqlcdc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/tributary-dev/tributary/cdc"
)

// table is a cached table: its schema and how to normalize each column's values.
type table struct {
	schema *cdc.TableSchema
	codecs []colCodec
	// verified is the last table map found to agree with the schema; each transaction brings
	// a new one, so this saves the check for the rest of the transaction.
	verified *replication.TableMapEvent
	// plan is how the images of planTM's rows events are read (nil: by go-mysql); like
	// verified, it serves the rest of a transaction.
	planTM *replication.TableMapEvent
	plan   []colPlan
	// ambiguous, when set (ErrAmbiguousType), says a column's type came from a MariaDB table
	// map alone and may be one only the catalog tells: its rows go out Malformed, values kept.
	ambiguous error
}

// errNoTable says the catalog does not know a table (dropped, or never created).
var errNoTable = fmt.Errorf("mysqlcdc: %w", cdc.ErrTableNotFound)

// catalog loads table schemas from INFORMATION_SCHEMA over one lazily opened connection. It is
// safe for concurrent use; loads are rare (first sight of a table, and after DDL).
type catalog struct {
	src     *Source
	mu      sync.Mutex
	conn    *client.Conn
	bounded *client.Conn // conn once its lock_wait_timeout is set (see load)
}

func (c *catalog) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		quit(c.conn)
		c.conn = nil
	}
}

// catalogLockWait bounds how long one load waits for the table's metadata lock: the catalog
// connection's lock_wait_timeout (whole seconds). A DDL statement holding the lock, or queued
// for it behind a long transaction, then costs the reader catalogLockTries waits and a
// retryable error, never an unbounded stall. A variable for tests.
var catalogLockWait = 5 * time.Second

// catalogLockTries is how many lock waits a load makes before it returns a retryable error.
const catalogLockTries = 3

// Server errors of a load that waited for a table's metadata lock in vain.
const (
	errLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT
	errLockDeadlock    = 1213 // ER_LOCK_DEADLOCK: the MDL deadlock detector chose this load
)

// The server's error for a table that does not exist, also for a table of a missing database.
const errNoSuchTable = 1146 // ER_NO_SUCH_TABLE

// load reads a table's schema (see query for why it is consistent under concurrent DDL). A
// failed attempt drops the connection and is tried once more on a fresh one, since the usual
// cause is a connection the server closed while idle; a lock wait that timed out is tried
// again on the same connection, catalogLockTries times in all.
func (c *catalog) load(ctx context.Context, id cdc.TableID) (*table, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var err error
	for attempt, waits := 0, 0; attempt < 2; {
		if c.conn == nil {
			if c.conn, err = c.src.connect(ctx); err != nil {
				return nil, err
			}
		}
		socket := c.conn.Conn.Conn
		stop := context.AfterFunc(ctx, func() { _ = socket.Close() })
		var t *table
		if err = c.boundLockWait(); err == nil {
			t, err = c.query(id)
		}
		stop()
		if err == nil || errors.Is(err, errNoTable) {
			return t, err
		}
		if lockWaited(err) && ctx.Err() == nil {
			if waits++; waits < catalogLockTries {
				continue
			}
			return nil, fmt.Errorf("mysqlcdc: load the schema of %v: a DDL statement holds or waits for the table's "+
				"metadata lock (waited %d times %v): %w", id, waits, catalogLockWait, err)
		}
		quit(c.conn)
		c.conn = nil
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		attempt++
	}
	return nil, err
}

// boundLockWait sets the connection's lock_wait_timeout to catalogLockWait, once per
// connection (whichever of the catalog's methods opened it).
func (c *catalog) boundLockWait() error {
	if c.bounded == c.conn {
		return nil
	}
	secs := int64(catalogLockWait / time.Second)
	if secs < 1 {
		secs = 1
	}
	if _, err := c.conn.Execute(fmt.Sprintf("SET SESSION lock_wait_timeout = %d", secs)); err != nil {
		return fmt.Errorf("mysqlcdc: set the catalog connection's lock_wait_timeout: %w", err)
	}
	c.bounded = c.conn
	return nil
}

// lockWaited says whether err is a metadata lock wait that timed out or lost a deadlock.
func lockWaited(err error) bool {
	var me *mysql.MyError
	return errors.As(err, &me) && (me.Code == errLockWaitTimeout || me.Code == errLockDeadlock)
}

// foldsNames says whether the server stores table names in lower case
// (lower_case_table_names 1): names in DDL statements are then folded to compare with the
// binlog's. With 2 (macOS) names are stored, and logged, as created.
func (c *catalog) foldsNames(ctx context.Context) (bool, error) {
	return retryOnce(ctx, c, "read lower_case_table_names", func() (bool, error) {
		r, err := c.conn.Execute("SELECT @@lower_case_table_names")
		if err != nil {
			return false, err
		}
		v, _ := r.GetInt(0, 0)
		return v == 1, nil
	})
}

// retryOnce runs query on the catalog's connection under its lock, bounded by ctx (which
// closes the socket), and once more on a fresh connection when it fails.
func retryOnce[T any](ctx context.Context, c *catalog, what string, query func() (T, error)) (T, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var zero T
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		if c.conn == nil {
			if c.conn, err = c.src.connect(ctx); err != nil {
				return zero, err
			}
		}
		socket := c.conn.Conn.Conn
		stop := context.AfterFunc(ctx, func() { _ = socket.Close() })
		var v T
		v, err = query()
		stop()
		if err == nil {
			return v, nil
		}
		quit(c.conn)
		c.conn = nil
		if ctx.Err() != nil {
			return zero, ctx.Err()
		}
	}
	return zero, fmt.Errorf("mysqlcdc: %s: %w", what, err)
}

// query reads a table's schema in one transaction that first takes a shared metadata lock on
// the table (SELECT ... LIMIT 0 reads no row; the lock is held to the end of the transaction):
// RENAME, DROP, ALTER and CREATE OR REPLACE of the name wait for it, so the columns, the
// primary key and the check constraints all describe one relation. Read one by one without it,
// a RENAME between two reads gave columns of one relation and the key of another, or none
// (issue 32). A table that does not exist is errNoTable. The transaction always ends; when it
// cannot, the error says so and load drops the connection.
func (c *catalog) query(id cdc.TableID) (t *table, err error) {
	if _, err := c.conn.Execute("START TRANSACTION"); err != nil {
		return nil, fmt.Errorf("mysqlcdc: load the schema of %v: %w", id, err)
	}
	defer func() {
		end := "COMMIT"
		if err != nil {
			end = "ROLLBACK"
		}
		if _, e := c.conn.Execute(end); e != nil {
			// Not errNoTable nor a lock wait: load drops the connection.
			t, err = nil, fmt.Errorf("mysqlcdc: load the schema of %v: %s: %w", id, end, e)
		}
	}()
	if _, err := c.conn.Execute("SELECT 1 FROM " + quoteIdent(id.Database) + "." + quoteIdent(id.Table) + " LIMIT 0"); err != nil {
		var me *mysql.MyError
		if errors.As(err, &me) && me.Code == errNoSuchTable {
			return nil, fmt.Errorf("%w: %v", errNoTable, id)
		}
		return nil, fmt.Errorf("mysqlcdc: lock %v to load its schema: %w", id, err)
	}
	return c.read(id)
}

// read runs query's catalog reads.
func (c *catalog) read(id cdc.TableID) (*table, error) {
	r, err := c.conn.Execute(`SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, CHARACTER_SET_NAME,
		CHARACTER_MAXIMUM_LENGTH, NUMERIC_PRECISION, NUMERIC_SCALE, DATETIME_PRECISION
		FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`,
		id.Database, id.Table)
	if err != nil {
		return nil, fmt.Errorf("mysqlcdc: load columns of %v: %w", id, err)
	}
	if r.RowNumber() == 0 {
		return nil, fmt.Errorf("%w: %v", errNoTable, id)
	}
	t := &table{schema: &cdc.TableSchema{ID: id}}
	for i := 0; i < r.RowNumber(); i++ {
		name, _ := r.GetString(i, 0)
		dataType, _ := r.GetString(i, 1)
		colType, _ := r.GetString(i, 2)
		nullable, _ := r.GetString(i, 3)
		charset, _ := r.GetString(i, 4)
		length, _ := r.GetInt(i, 5)
		precision, _ := r.GetInt(i, 6)
		scale, _ := r.GetInt(i, 7)
		fsp, _ := r.GetInt(i, 8)
		col, codec := describeColumn(name, strings.ToLower(dataType), colType, charset, length, precision, scale, fsp)
		col.Nullable = nullable == "YES"
		t.schema.Columns = append(t.schema.Columns, col)
		t.codecs = append(t.codecs, codec)
	}

	r, err = c.conn.Execute(`SELECT COLUMN_NAME FROM information_schema.STATISTICS
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX`,
		id.Database, id.Table)
	if err != nil {
		return nil, fmt.Errorf("mysqlcdc: load primary key of %v: %w", id, err)
	}
	for i := 0; i < r.RowNumber(); i++ {
		name, _ := r.GetString(i, 0)
		if k := t.schema.ColumnIndex(name); k >= 0 {
			t.schema.PrimaryKey = append(t.schema.PrimaryKey, k)
		}
	}

	// MariaDB's JSON is LONGTEXT with a json_valid() check; only the constraint tells it apart.
	if c.src.opts.Flavor == MariaDB {
		r, err = c.conn.Execute(`SELECT CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS
			WHERE CONSTRAINT_SCHEMA = ? AND TABLE_NAME = ?`, id.Database, id.Table)
		if err != nil {
			return nil, fmt.Errorf("mysqlcdc: load check constraints of %v: %w", id, err)
		}
		for i := 0; i < r.RowNumber(); i++ {
			clause, _ := r.GetString(i, 0)
			for _, name := range jsonValidColumns(clause) {
				k := t.schema.ColumnIndex(name)
				if k >= 0 && t.codecs[k].class == classText {
					t.schema.Columns[k].Kind = cdc.KindJSON
					t.codecs[k] = colCodec{kind: cdc.KindJSON, class: classJSON}
				}
			}
		}
	}
	return t, nil
}

// jsonValidColumns finds the columns a check clause validates with json_valid(`name`).
func jsonValidColumns(clause string) []string {
	var names []string
	const fn = "json_valid(`"
	lower := strings.ToLower(clause)
	for {
		i := strings.Index(lower, fn)
		if i < 0 {
			return names
		}
		rest := clause[i+len(fn):]
		name, n := unquoteBacktick(rest)
		if n > 0 && strings.HasPrefix(rest[n:], ")") {
			names = append(names, name)
		}
		clause, lower = clause[i+len(fn):], lower[i+len(fn):]
	}
}

// unquoteBacktick reads a backtick-quoted identifier's body (the opening quote already
// consumed) and returns it with the number of bytes consumed including the closing quote.
func unquoteBacktick(s string) (string, int) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '`' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '`' {
			b.WriteByte('`')
			i++
			continue
		}
		return b.String(), i + 1
	}
	return "", 0
}

// quoteIdent quotes a MySQL identifier.
func quoteIdent(name string) string {
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}

// parseLabels reads the labels of an enum('a','b”c') or set(...) column type.
func parseLabels(colType string) []string {
	open := strings.IndexByte(colType, '(')
	if open < 0 {
		return nil
	}
	s := colType[open+1:]
	var labels []string
	for len(s) > 0 && s[0] == '\'' {
		var b strings.Builder
		i := 1
		for ; i < len(s); i++ {
			if s[i] == '\'' {
				if i+1 < len(s) && s[i+1] == '\'' {
					b.WriteByte('\'')
					i++
					continue
				}
				break
			}
			if s[i] == '\\' && i+1 < len(s) {
				i++
			}
			b.WriteByte(s[i])
		}
		labels = append(labels, b.String())
		if i+1 >= len(s) {
			break
		}
		s = s[i+1:]
		if s[0] == ',' {
			s = s[1:]
		}
	}
	return labels
}
