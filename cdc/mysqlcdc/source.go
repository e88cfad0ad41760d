package mysqlcdc

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tributary-dev/tributary/cdc"
)

// Flavor is the server's kind; it decides the GTID dialect and the snapshot procedure.
type Flavor string

// Flavors.
const (
	MariaDB Flavor = "mariadb"
	MySQL   Flavor = "mysql"
)

// Positioning says how a stream finds its place in the binlog, and so how versions are derived
// (see the package documentation).
type Positioning uint8

// Positionings.
const (
	// PositionDefault is PositionGTID for MariaDB and PositionFile for MySQL.
	PositionDefault Positioning = iota
	// PositionGTID resumes by GTID set. With MariaDB, versions come from GTID sequence numbers
	// and survive a failover to a replica that logs the same GTIDs; with MySQL, versions still
	// come from file positions.
	PositionGTID
	// PositionFile resumes by binlog file and offset; versions come from them.
	PositionFile
)

// TableName names a captured table, or with Table AllTables every table of a database.
type TableName struct {
	Database string `json:"db"`
	Table    string `json:"table"`
}

// AllTables as a TableName's Table captures every table of its database: those that exist at
// Open and those created later.
const AllTables = "*"

// String is "db.table", or "db.*" for a database captured whole.
func (t TableName) String() string { return t.Database + "." + t.Table }

// Options configures a Source. The zero value of each field means its default.
type Options struct {
	// Flavor is the server's kind. Default MariaDB.
	Flavor Flavor
	// ServerID is the replica id this reader registers with; every reader of one server needs
	// its own, or the server disconnects the older one. Default: derived from SourceName, in
	// [1<<24, 1<<31).
	ServerID uint32
	// Snapshot is what Open does without a checkpoint. Default cdc.SnapshotInitial.
	Snapshot cdc.SnapshotMode
	// SourceName is TableID.Source in every event. Default "mysql".
	SourceName string
	// Positioning chooses GTID or file+offset positioning. Default PositionDefault.
	Positioning Positioning
	// Logger receives operational messages (never row data). Default: discard.
	Logger *slog.Logger
	// Buffer is the number of events a stream reads ahead of its consumer. Default 1024.
	Buffer int
	// ConnectTimeout bounds each connection attempt, handshake and login included. Default 10s.
	ConnectTimeout time.Duration
	// QueryTimeout bounds each read and write on query connections. Default 2m.
	QueryTimeout time.Duration
	// Heartbeat is the period the server is asked to send heartbeats at while the binlog is
	// idle; a binlog connection silent for three periods is dead and ends the stream.
	// Default 5s.
	Heartbeat time.Duration
	// Now is the clock for snapshot rates. Default time.Now.
	Now func() time.Time
	// SignalTable is the table re-snapshot requests and watermarks are written to (MariaDB,
	// see Re-snapshots in the package documentation); it is never captured. Default
	// DefaultSignalTable in the database of the first captured table.
	SignalTable TableName
	// SnapshotChunk is how many rows a re-snapshot reads per query (the initial snapshot reads
	// each table in one query). Default 1024.
	SnapshotChunk int
}

// Source reads a MySQL or MariaDB server's binlog. It implements cdc.Source and
// cdc.SchemaLoader.
type Source struct {
	addr     string
	host     string
	port     uint16
	user     string
	password string
	tables   []TableName // New's tables, in their order
	opts     Options
	log      *slog.Logger
	captured map[TableName]bool // tables named in tables
	wholeDBs map[string]bool    // databases captured whole (AllTables)
	// signalName is the signal table (Options.SignalTable), never captured.
	signalName TableName

	// current is the stream of the latest Open while it runs, for Lag (stream.caughtUp).
	current atomic.Pointer[stream]
}

var (
	_ cdc.Source       = (*Source)(nil)
	_ cdc.SchemaLoader = (*Source)(nil)
)

// New returns a source for the server at addr (host:port) with the given credentials. The
// account needs REPLICATION SLAVE and REPLICATION CLIENT (MariaDB: BINLOG MONITOR), SELECT on
// the captured tables and, for a MySQL snapshot, RELOAD. New does not connect.
//
// tables are the captured tables, at least one. An entry whose Table is AllTables ("db.*")
// captures every table of the database, including tables created later. Changes of other
// tables are read from the binlog and dropped. Names are exact: Open refuses a table or a
// database that does not exist as spelled (see Open); a database without tables is not an
// error. opts may be nil (every default); New copies tables and *opts.
func New(addr, user, password string, tables []TableName, optsIn *Options) (*Source, error) {
	var opts Options
	if optsIn != nil {
		opts = *optsIn
	}
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("mysqlcdc: address %q: %w", addr, err)
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("mysqlcdc: address %q: bad port", addr)
	}
	if len(tables) == 0 {
		return nil, errors.New("mysqlcdc: no captured tables")
	}
	if opts.Flavor == "" {
		opts.Flavor = MariaDB
	}
	if opts.Flavor != MariaDB && opts.Flavor != MySQL {
		return nil, fmt.Errorf("mysqlcdc: unknown flavor %q", opts.Flavor)
	}
	if opts.Snapshot != cdc.SnapshotInitial && opts.Snapshot != cdc.SnapshotNever {
		return nil, fmt.Errorf("mysqlcdc: unknown snapshot mode %d", opts.Snapshot)
	}
	if opts.SourceName == "" {
		opts.SourceName = "mysql"
	}
	if opts.Positioning == PositionDefault {
		opts.Positioning = PositionGTID
		if opts.Flavor == MySQL {
			opts.Positioning = PositionFile
		}
	}
	if opts.Positioning != PositionGTID && opts.Positioning != PositionFile {
		return nil, fmt.Errorf("mysqlcdc: unknown positioning %d", opts.Positioning)
	}
	if opts.ServerID == 0 {
		h := fnv.New32a()
		_, _ = io.WriteString(h, opts.SourceName)
		opts.ServerID = 1<<24 + h.Sum32()%(1<<31-1<<24)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Buffer <= 0 {
		opts.Buffer = 1024
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 10 * time.Second
	}
	if opts.QueryTimeout <= 0 {
		opts.QueryTimeout = 2 * time.Minute
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = 5 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.SnapshotChunk <= 0 {
		opts.SnapshotChunk = 1024
	}
	captured := make(map[TableName]bool, len(tables))
	wholeDBs := map[string]bool{}
	for _, t := range tables {
		if t.Database == "" || t.Table == "" {
			return nil, errors.New("mysqlcdc: a captured table lacks its database or name")
		}
		if t.Table == AllTables {
			wholeDBs[t.Database] = true
		} else {
			captured[t] = true
		}
	}
	signal := opts.SignalTable
	if signal.Table == "" {
		signal = TableName{Database: tables[0].Database, Table: DefaultSignalTable}
	} else if signal.Database == "" || signal.Table == AllTables {
		return nil, errors.New("mysqlcdc: the signal table needs a database and a table name")
	}
	if captured[signal] {
		return nil, fmt.Errorf("mysqlcdc: the signal table %s is a captured table", signal)
	}
	return &Source{
		addr: addr, host: host, port: uint16(port), user: user, password: password,
		tables: append([]TableName(nil), tables...), opts: opts, log: opts.Logger, captured: captured, wholeDBs: wholeDBs,
		signalName: signal,
	}, nil
}

// captures reports whether a table's changes are captured: named in New's tables, or in a
// database captured whole. Names compare exactly, as the binlog spells them.
// The signal table is never captured, even in a database captured whole.
func (s *Source) captures(t TableName) bool {
	return s.captured[t] || (s.wholeDBs[t.Database] && t != s.signalName)
}

// tableID is the cdc identity of a captured table.
func (s *Source) tableID(t TableName) cdc.TableID {
	return cdc.TableID{Connector: "mysql", Source: s.opts.SourceName, Database: t.Database, Table: t.Table}
}

// LoadSchema loads a table's schema from INFORMATION_SCHEMA over a short-lived connection.
func (s *Source) LoadSchema(ctx context.Context, id cdc.TableID) (*cdc.TableSchema, error) {
	cat := &catalog{src: s}
	defer cat.close()
	t, err := cat.load(ctx, id)
	if err != nil {
		return nil, err
	}
	return t.schema, nil
}

// LoadCurrentSchema implements cdc.CurrentSchemaLoader: LoadSchema, which always reads the
// catalog as it is now.
func (s *Source) LoadCurrentSchema(ctx context.Context, id cdc.TableID) (*cdc.TableSchema, error) {
	return s.LoadSchema(ctx, id)
}

// Open starts a stream: after cp when it is set; otherwise with a snapshot or from the server's
// current position, as Options.Snapshot says. Before anything else it checks what no retry
// can change: a server without a ROW binlog of FULL images fails Open with a permanent error,
// and a captured table or database that does not exist as spelled with a *cdc.StartError
// naming each (and the name of another case, when there is one). The stream implements
// cdc.TableLister. Open's and the stream's failures are permanent (cdc.IsPermanent) when no
// reopening can cure them (see the package documentation); the others are retryable.
func (s *Source) Open(ctx context.Context, cp cdc.Checkpoint) (cdc.Stream, error) {
	st, err := s.open(ctx, cp)
	if err != nil {
		return nil, s.classify(err)
	}
	return st, nil
}

func (s *Source) open(ctx context.Context, cp cdc.Checkpoint) (*stream, error) {
	tables, err := s.preflight(ctx)
	if err != nil {
		return nil, err
	}
	st := newStream(s)
	s.current.Store(st)
	r := newReader(st)
	var snap *snapshot
	var resnap *resnapState
	switch {
	case cp != nil:
		var c checkpoint
		c, err = decodeCheckpoint(cp)
		if err != nil {
			return nil, cdc.Permanent(err)
		}
		resnap, c.Resnap = c.Resnap, nil
		if c.UseGTID != (s.opts.Positioning == PositionGTID) {
			return nil, cdc.Permanent(errors.New("mysqlcdc: the checkpoint was made with another positioning; versions would not compare"))
		}
		if c.Snapshot != nil {
			// An interrupted snapshot: the remaining tables are read in a new read view, and
			// streaming still starts where the first one was taken (see the package doc).
			if snap, err = beginSnapshot(ctx, s); err != nil {
				return nil, err
			}
			snap.resume(c)
			c.Snapshot = nil
		}
		if err := r.startAt(c); err != nil {
			if snap != nil {
				snap.abort()
			}
			return nil, cdc.Permanent(err)
		}
	case s.opts.Snapshot == cdc.SnapshotInitial:
		if snap, err = beginSnapshot(ctx, s); err != nil {
			return nil, err
		}
		if err := r.startAt(snap.start); err != nil {
			snap.abort()
			return nil, err
		}
	default:
		start, err := s.currentPosition(ctx)
		if err != nil {
			return nil, err
		}
		if err := r.startAt(start); err != nil {
			return nil, err
		}
	}
	if snap != nil {
		// The tables as of the read view: a table created between the check above and the
		// view has rows before the view that only the snapshot can deliver.
		stop := closeOnDone(ctx, snap.conn)
		tables, err = s.resolveTables(ctx, snap.conn, false)
		stop()
		if err != nil {
			snap.abort()
			return nil, err
		}
		snap.tables = tables
	}
	// Schemas as of now, so that rows streamed later are read with the columns they were
	// written with rather than with a later DDL's.
	if err := r.preload(ctx, tables); err != nil {
		if snap != nil {
			snap.abort()
		}
		r.cat.close()
		return nil, err
	}
	for _, name := range tables {
		if t := r.tables[name]; t != nil {
			st.tables = append(st.tables, t.schema)
		}
	}
	st.start(func(ctx context.Context) error {
		defer r.cat.close()
		defer func() {
			if r.rs != nil {
				r.rs.stop()
			}
		}()
		if resnap != nil {
			r.startResnapper(ctx, resnap)
		}
		if snap != nil {
			if err := snap.run(ctx, st, r); err != nil {
				return err
			}
		}
		return r.run(ctx)
	})
	return st, nil
}

// currentPosition asks the server where its binlog ends now.
func (s *Source) currentPosition(ctx context.Context) (checkpoint, error) {
	conn, err := s.connect(ctx)
	if err != nil {
		return checkpoint{}, err
	}
	defer quit(conn)
	defer closeOnDone(ctx, conn)()
	c := checkpoint{UseGTID: s.opts.Positioning == PositionGTID}
	file, pos, executed, err := binlogStatus(conn)
	if err != nil {
		return c, err
	}
	c.File, c.Pos = file, pos
	if c.UseGTID {
		if s.opts.Flavor == MariaDB {
			r, err := conn.Execute("SELECT @@GLOBAL.gtid_binlog_pos")
			if err != nil {
				return c, fmt.Errorf("mysqlcdc: read gtid_binlog_pos: %w", err)
			}
			c.GTID, _ = r.GetString(0, 0)
		} else {
			c.GTID = executed
		}
	}
	return c, nil
}
