package sqlstate

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/statestore"
)

// Options configure OpenPostgres. The zero value (or nil) gives the documented defaults.
type Options struct {
	// Schema holds the store's tables; created when missing. Default "tributary".
	Schema string
	// MaxConns bounds the store's connections. Default 4.
	MaxConns int
	// Rand is where a new store's identity comes from. Default crypto/rand.
	Rand io.Reader
}

// formatVersion is the layout version in the meta table; see the package documentation.
const formatVersion = "1"

// Store is a statestore.Store and statestore.Leaser kept in PostgreSQL tables.
type Store struct {
	db       *sql.DB
	q        queries
	identity string
	closed   atomic.Bool

	// between, when set (tests), runs inside multi-statement write transactions between two
	// statements, to cut the connection there.
	between func(ctx context.Context, tx *sql.Tx)
}

var (
	_ statestore.Store  = (*Store)(nil)
	_ statestore.Leaser = (*Store)(nil)
)

// OpenPostgres connects to the PostgreSQL server at dsn (a pgx connection string or URL) and
// opens the store in Options.Schema, creating the schema, its tables and a new deployment
// identity in one transaction when they do not exist. ctx bounds the opening only.
func OpenPostgres(ctx context.Context, dsn string, opts *Options) (*Store, error) {
	o := defaults(opts)
	if len(o.Schema) > 63 {
		return nil, fmt.Errorf("%w: schema names have at most 63 bytes", statestore.ErrInvalid)
	}
	if _, err := pgx.ParseConfig(dsn); err != nil {
		// pgx's parse errors quote the string, which may hold a password.
		return nil, fmt.Errorf("%w: the PostgreSQL connection string does not parse", statestore.ErrInvalid)
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: the PostgreSQL connection string does not parse", statestore.ErrInvalid)
	}
	return newStore(ctx, db, postgresQueries(o.Schema), o)
}

// OpenMySQL connects to the MySQL or MariaDB server at dsn (go-sql-driver/mysql's form,
// user:password@tcp(host:port)/[database][?timeout=10s]; the database part is ignored, other
// parameters are refused: no TLS yet) and
// opens the store in the database Options.Schema (InnoDB tables), creating the database, its
// tables and a new deployment identity when they do not exist. ctx bounds the opening only.
func OpenMySQL(ctx context.Context, dsn string, opts *Options) (*Store, error) {
	o := defaults(opts)
	if len(o.Schema) > 64 {
		return nil, fmt.Errorf("%w: database names have at most 64 bytes", statestore.ErrInvalid)
	}
	d, err := parseMySQLDSN(dsn)
	if err != nil {
		return nil, err
	}
	c := &mysqlConnector{dsn: d}
	db := sql.OpenDB(c)
	s, err := newStore(ctx, db, mysqlQueries(o.Schema), o)
	if err != nil {
		return nil, err
	}
	// The connections opened before the database existed have none; later ones use it (so a
	// server's process list shows which connections are the store's).
	db.SetMaxIdleConns(0)
	c.setDB(o.Schema)
	db.SetMaxIdleConns(o.MaxConns)
	return s, nil
}

// newStore sizes db's pool by o and opens the store on it with q (create); on an error it
// closes db.
func newStore(ctx context.Context, db *sql.DB, q queries, o Options) (*Store, error) {
	db.SetMaxOpenConns(o.MaxConns)
	db.SetMaxIdleConns(o.MaxConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	s := &Store{db: db, q: q}
	if err := s.create(ctx, o.Rand); err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

func defaults(opts *Options) Options {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Schema == "" {
		o.Schema = "tributary"
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 4
	}
	if o.Rand == nil {
		o.Rand = rand.Reader
	}
	return o
}

// create makes the layout if missing and reads the format and identity. In PostgreSQL all of
// it is one transaction, serialized among openers by an advisory lock on the schema's name;
// in MySQL (where DDL commits) each statement is idempotent and the format and identity are
// inserted together by one statement, so concurrent openers agree on the first identity.
func (s *Store) create(ctx context.Context, r io.Reader) error {
	id, err := newIdentity(r)
	if err != nil {
		return err
	}
	layout := func(x interface {
		ExecContext(context.Context, string, ...any) (sql.Result, error)
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}) error {
		if s.q.lock != "" {
			if _, err := x.ExecContext(ctx, s.q.lock, "tributary.statestore."+s.q.schema); err != nil {
				return err
			}
		}
		stmts := s.q.create
		if s.q.schemaExists != "" {
			var exists bool
			if err := x.QueryRowContext(ctx, s.q.schemaExists, s.q.schema).Scan(&exists); err != nil {
				return err
			}
			if exists {
				stmts = stmts[1:]
			}
		}
		for _, stmt := range stmts {
			if _, err := x.ExecContext(ctx, stmt); err != nil {
				return err
			}
		}
		if _, err := x.ExecContext(ctx, s.q.initMeta, formatVersion, id); err != nil {
			return err
		}
		var format, identity sql.NullString
		if err := x.QueryRowContext(ctx, s.q.readMeta).Scan(&format, &identity); err != nil {
			return err
		}
		if format.String != formatVersion {
			return fmt.Errorf("%w: schema %q has state store format %q, this version reads %q", statestore.ErrFormat, s.q.schema, format.String, formatVersion)
		}
		if identity.String == "" {
			return fmt.Errorf("%w: schema %q has no deployment identity", statestore.ErrFormat, s.q.schema)
		}
		s.identity = identity.String
		return nil
	}
	if s.q.mysql {
		return s.classify(ctx, "open", layout(s.db))
	}
	return s.tx(ctx, "open", func(tx *sql.Tx) error { return layout(tx) })
}

// Identity implements statestore.Store.
func (s *Store) Identity() string { return s.identity }

// Close implements statestore.Store.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	return s.db.Close()
}

// start checks a call's context, names and the store's state.
func (s *Store) start(ctx context.Context, names ...string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkNames(names...); err != nil {
		return err
	}
	if s.closed.Load() {
		return statestore.ErrClosed
	}
	return nil
}

func checkNames(names ...string) error {
	for _, n := range names {
		if n == "" || len(n) > statestore.MaxNameBytes {
			return fmt.Errorf("%w: names must have 1 to %d bytes", statestore.ErrInvalid, statestore.MaxNameBytes)
		}
	}
	return nil
}

// h is a name's key column: its SHA-256, so three names of MaxNameBytes fit an index entry.
func h(name string) []byte {
	d := sha256.Sum256([]byte(name))
	return d[:]
}

// fence is a write's condition: the lease name must have the epoch (nil: unconditional).
type fence struct {
	name  string
	epoch uint64
}

// tx runs fn in one transaction, checking the fence first (under a share lock on the lease
// row, so a takeover waits for the write and every later write sees the new epoch).
func (s *Store) tx(ctx context.Context, what string, fn func(*sql.Tx) error, f ...fence) error {
	t, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return s.classify(ctx, what, err)
	}
	defer func() { _ = t.Rollback() }()
	for _, f := range f {
		var epoch int64
		err := t.QueryRowContext(ctx, s.q.fence, h(f.name)).Scan(&epoch)
		if errors.Is(err, sql.ErrNoRows) {
			epoch = 0
		} else if err != nil {
			return s.classify(ctx, what, err)
		}
		if f.epoch == 0 || uint64(epoch) != f.epoch {
			return fmt.Errorf("%w: %s refused: lease %q is at epoch %d, this writer holds epoch %d", statestore.ErrNotLeader, what, f.name, epoch, f.epoch)
		}
		if s.between != nil {
			s.between(ctx, t)
		}
	}
	if err := fn(t); err != nil {
		return s.classify(ctx, what, err)
	}
	return s.classify(ctx, what, t.Commit())
}

// LoadCheckpoint implements cdc.CheckpointStore.
func (s *Store) LoadCheckpoint(ctx context.Context, pipeline string) (cdc.Checkpoint, error) {
	if err := s.start(ctx, pipeline); err != nil {
		return nil, err
	}
	var cp []byte
	err := s.db.QueryRowContext(ctx, s.q.loadCheckpoint, h(pipeline)).Scan(&cp)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, s.classify(ctx, "load checkpoint", err)
	}
	if cp == nil {
		cp = []byte{}
	}
	return cp, nil
}

// SaveCheckpoint implements cdc.CheckpointStore.
func (s *Store) SaveCheckpoint(ctx context.Context, pipeline string, cp cdc.Checkpoint) error {
	return s.saveCheckpoint(ctx, pipeline, cp)
}

func (s *Store) saveCheckpoint(ctx context.Context, pipeline string, cp cdc.Checkpoint, f ...fence) error {
	if len(cp) == 0 {
		return fmt.Errorf("%w: empty checkpoint for pipeline %q", statestore.ErrInvalid, pipeline)
	}
	if err := s.start(ctx, pipeline); err != nil {
		return err
	}
	return s.tx(ctx, "save checkpoint of "+quote(pipeline), func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, s.q.saveCheckpoint, h(pipeline), []byte(pipeline), []byte(cp))
		return err
	}, f...)
}

// CheckpointSaved implements statestore.Store: the store server's time of the last save.
func (s *Store) CheckpointSaved(ctx context.Context, pipeline string) (time.Time, error) {
	if err := s.start(ctx, pipeline); err != nil {
		return time.Time{}, err
	}
	var us int64
	err := s.db.QueryRowContext(ctx, s.q.checkpointSaved, h(pipeline)).Scan(&us)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, s.classify(ctx, "read checkpoint time", err)
	}
	return time.UnixMicro(us), nil
}

// ResetCheckpoint deletes the pipeline's checkpoint and nothing else, like
// statestore.DB.ResetCheckpoint.
func (s *Store) ResetCheckpoint(ctx context.Context, pipeline string) error {
	return s.resetCheckpoint(ctx, pipeline)
}

func (s *Store) resetCheckpoint(ctx context.Context, pipeline string, f ...fence) error {
	if err := s.start(ctx, pipeline); err != nil {
		return err
	}
	return s.tx(ctx, "reset checkpoint of "+quote(pipeline), func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, s.q.deleteCheckpoint, h(pipeline))
		return err
	}, f...)
}

// Get implements statestore.Store.
func (s *Store) Get(ctx context.Context, pipeline, namespace, key string) (statestore.Record, error) {
	if err := s.start(ctx, pipeline, namespace, key); err != nil {
		return statestore.Record{}, err
	}
	r := statestore.Record{Key: key}
	var rev int64
	err := s.db.QueryRowContext(ctx, s.q.get, h(pipeline), h(namespace), h(key)).Scan(&r.Value, &rev)
	if errors.Is(err, sql.ErrNoRows) {
		return statestore.Record{Key: key}, nil
	}
	if err != nil {
		return statestore.Record{}, s.classify(ctx, "get "+recordName(pipeline, namespace, key), err)
	}
	if r.Value == nil {
		r.Value = []byte{}
	}
	r.Revision = statestore.Revision(rev)
	return r, nil
}

// Put implements statestore.Store.
func (s *Store) Put(ctx context.Context, pipeline, namespace, key string, value []byte, expect statestore.Revision) (statestore.Revision, error) {
	return s.put(ctx, pipeline, namespace, key, value, expect)
}

func (s *Store) put(ctx context.Context, pipeline, namespace, key string, value []byte, expect statestore.Revision, f ...fence) (statestore.Revision, error) {
	if err := s.start(ctx, pipeline, namespace, key); err != nil {
		return 0, err
	}
	if value == nil {
		value = []byte{} // a value, distinct from absence; the column is NOT NULL
	}
	var rev int64
	err := s.tx(ctx, "put "+recordName(pipeline, namespace, key), func(tx *sql.Tx) error {
		if s.q.mysql {
			return s.putMySQL(ctx, tx, pipeline, namespace, key, value, expect, &rev)
		}
		var err error
		if expect == 0 {
			err = tx.QueryRowContext(ctx, s.q.insert, h(pipeline), h(namespace), h(key),
				[]byte(pipeline), []byte(namespace), []byte(key), value).Scan(&rev)
		} else {
			err = tx.QueryRowContext(ctx, s.q.update, value, h(pipeline), h(namespace), h(key), int64(expect)).Scan(&rev)
		}
		if errors.Is(err, sql.ErrNoRows) {
			return s.conflict(ctx, tx, pipeline, namespace, key, expect)
		}
		return err
	}, f...)
	if err != nil {
		return 0, err
	}
	return statestore.Revision(rev), nil
}

// putMySQL draws the revision from the counter row (locked until the commit, so revisions are
// committed in order and a rolled-back draw is drawn again, never used twice), then inserts
// (a duplicate key is a conflict) or updates conditionally.
func (s *Store) putMySQL(ctx context.Context, tx *sql.Tx, pipeline, namespace, key string, value []byte, expect statestore.Revision, rev *int64) error {
	res, err := tx.ExecContext(ctx, s.q.nextRevision)
	if err != nil {
		return err
	}
	if *rev, err = res.LastInsertId(); err != nil {
		return err
	}
	if expect == 0 {
		_, err = tx.ExecContext(ctx, s.q.insert, h(pipeline), h(namespace), h(key),
			[]byte(pipeline), []byte(namespace), []byte(key), value, *rev)
		if isDuplicateKey(err) {
			return s.conflict(ctx, tx, pipeline, namespace, key, expect)
		}
		return err
	}
	res, err = tx.ExecContext(ctx, s.q.update, value, *rev, h(pipeline), h(namespace), h(key), int64(expect))
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		if err != nil {
			return err
		}
		return s.conflict(ctx, tx, pipeline, namespace, key, expect)
	}
	return nil
}

// conflict reads the record's current revision for ErrConflict's message.
func (s *Store) conflict(ctx context.Context, tx *sql.Tx, pipeline, namespace, key string, want statestore.Revision) error {
	var have int64
	err := tx.QueryRowContext(ctx, s.q.revision, h(pipeline), h(namespace), h(key)).Scan(&have)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	return fmt.Errorf("%w: pipeline %q, %s/%s: expected revision %d, found %d", statestore.ErrConflict, pipeline, namespace, key, want, have)
}

// Delete implements statestore.Store.
func (s *Store) Delete(ctx context.Context, pipeline, namespace, key string, expect statestore.Revision) error {
	return s.delete(ctx, pipeline, namespace, key, expect)
}

func (s *Store) delete(ctx context.Context, pipeline, namespace, key string, expect statestore.Revision, f ...fence) error {
	if expect == 0 {
		return fmt.Errorf("%w: delete needs the record's revision", statestore.ErrInvalid)
	}
	if err := s.start(ctx, pipeline, namespace, key); err != nil {
		return err
	}
	return s.tx(ctx, "delete "+recordName(pipeline, namespace, key), func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.q.delete, h(pipeline), h(namespace), h(key), int64(expect))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err != nil {
				return err
			}
			return s.conflict(ctx, tx, pipeline, namespace, key, expect)
		}
		return nil
	}, f...)
}

// List implements statestore.Store: ordered by key, byte-wise.
func (s *Store) List(ctx context.Context, pipeline, namespace string) ([]statestore.Record, error) {
	if err := s.start(ctx, pipeline, namespace); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, s.q.list, h(pipeline), h(namespace))
	if err != nil {
		return nil, s.classify(ctx, "list "+quote(pipeline)+" "+namespace, err)
	}
	defer rows.Close()
	var out []statestore.Record
	for rows.Next() {
		var key, value []byte
		var rev int64
		if err := rows.Scan(&key, &value, &rev); err != nil {
			return nil, s.classify(ctx, "list "+quote(pipeline)+" "+namespace, err)
		}
		if value == nil {
			value = []byte{}
		}
		out = append(out, statestore.Record{Key: string(key), Value: value, Revision: statestore.Revision(rev)})
	}
	if err := rows.Err(); err != nil {
		return nil, s.classify(ctx, "list "+quote(pipeline)+" "+namespace, err)
	}
	return out, nil
}

// DeletePipeline implements statestore.Store: the checkpoint and every record in one
// transaction. The pipeline's lease (if any) stays: leadership is not state.
func (s *Store) DeletePipeline(ctx context.Context, pipeline string) error {
	return s.deletePipeline(ctx, pipeline)
}

func (s *Store) deletePipeline(ctx context.Context, pipeline string, f ...fence) error {
	if err := s.start(ctx, pipeline); err != nil {
		return err
	}
	return s.tx(ctx, "delete pipeline "+quote(pipeline), func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, s.q.deleteCheckpoint, h(pipeline)); err != nil {
			return err
		}
		if s.between != nil {
			s.between(ctx, tx)
		}
		_, err := tx.ExecContext(ctx, s.q.deleteRecords, h(pipeline))
		return err
	}, f...)
}

func quote(name string) string { return fmt.Sprintf("%q", name) }

func recordName(pipeline, namespace, key string) string {
	return fmt.Sprintf("pipeline %q, %s/%s", pipeline, namespace, key)
}

// newIdentity draws a version 4 UUID from r (as statestore does for files).
func newIdentity(r io.Reader) (string, error) {
	var b [16]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return "", fmt.Errorf("statestore: drawing the deployment identity: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}

// CheckDSN reports, without connecting, whether OpenPostgres (kind "postgres") or OpenMySQL
// (kind "mysql") would accept dsn: nil, or an error wrapping statestore.ErrInvalid that never
// quotes the string. A configuration is checked with it before anything runs.
func CheckDSN(kind, dsn string) error {
	switch kind {
	case "postgres":
		if _, err := pgx.ParseConfig(dsn); err != nil {
			return fmt.Errorf("%w: the PostgreSQL connection string does not parse", statestore.ErrInvalid)
		}
		return nil
	case "mysql":
		_, err := parseMySQLDSN(dsn)
		return err
	}
	return fmt.Errorf("%w: unknown kind of store %q (postgres or mysql)", statestore.ErrInvalid, kind)
}
