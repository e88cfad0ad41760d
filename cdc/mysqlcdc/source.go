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
	"time"

	"github.com/go-mysql-org/go-mysql/client"

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

// TableName names a captured table.
type TableName struct {
	Database string `json:"db"`
	Table    string `json:"table"`
}

// Options configures a Source. The zero value of each field means its default.
type Options struct {
	// Tables are the captured tables; at least one is required. Changes of other tables are
	// read from the binlog and dropped. Names are exact: Open refuses a table that does not
	// exist as spelled (see Open).
	Tables []TableName
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
	// ConnectTimeout bounds each connection attempt. Default 10s.
	ConnectTimeout time.Duration
	// QueryTimeout bounds each read and write on query connections. Default 2m.
	QueryTimeout time.Duration
	// Heartbeat is the period the server is asked to send heartbeats at while the binlog is
	// idle; a binlog connection silent for four periods is considered dead. Default 10s.
	Heartbeat time.Duration
	// MaxRetries is how many consecutive failed binlog connection attempts a stream makes
	// before it fails. Default 8.
	MaxRetries int
	// Now is the clock for snapshot rates. Default time.Now.
	Now func() time.Time
}

// Source reads a MySQL or MariaDB server's binlog. It implements cdc.Source and
// cdc.SchemaLoader.
type Source struct {
	addr     string
	host     string
	port     uint16
	user     string
	password string
	opts     Options
	log      *slog.Logger
	captured map[TableName]bool
}

var (
	_ cdc.Source       = (*Source)(nil)
	_ cdc.SchemaLoader = (*Source)(nil)
)

// New returns a source for the server at addr (host:port) with the given credentials. The
// account needs REPLICATION SLAVE and REPLICATION CLIENT (MariaDB: BINLOG MONITOR), SELECT on
// the captured tables and, for a MySQL snapshot, RELOAD. New does not connect.
func New(addr, user, password string, opts Options) (*Source, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("mysqlcdc: address %q: %w", addr, err)
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("mysqlcdc: address %q: bad port", addr)
	}
	if len(opts.Tables) == 0 {
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
		opts.Heartbeat = 10 * time.Second
	}
	if opts.MaxRetries <= 0 {
		opts.MaxRetries = 8
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	captured := make(map[TableName]bool, len(opts.Tables))
	for _, t := range opts.Tables {
		if t.Database == "" || t.Table == "" {
			return nil, errors.New("mysqlcdc: a captured table lacks its database or name")
		}
		captured[t] = true
	}
	opts.Tables = append([]TableName(nil), opts.Tables...)
	return &Source{
		addr: addr, host: host, port: uint16(port), user: user, password: password,
		opts: opts, log: opts.Logger, captured: captured,
	}, nil
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

// connect opens a query connection with bounded reads and writes.
func (s *Source) connect(ctx context.Context) (*client.Conn, error) {
	conn, err := client.ConnectWithContext(ctx, s.addr, s.user, s.password, "", s.opts.ConnectTimeout)
	if err != nil {
		return nil, fmt.Errorf("mysqlcdc: connect to %s: %w", s.addr, err)
	}
	conn.ReadTimeout = s.opts.QueryTimeout
	conn.WriteTimeout = s.opts.QueryTimeout
	return conn, nil
}

// quit ends a connection politely (COM_QUIT), so the server does not count an aborted client.
func quit(conn *client.Conn) {
	if err := conn.Quit(); err != nil {
		_ = conn.Close()
	}
}

// Open starts a stream: after cp when it is set; otherwise with a snapshot or from the server's
// current position, as Options.Snapshot says. A captured table that does not exist as spelled
// fails Open with a *cdc.StartError naming each such table (and the table of another case,
// when there is one), before anything else happens. The stream implements cdc.TableLister.
func (s *Source) Open(ctx context.Context, cp cdc.Checkpoint) (cdc.Stream, error) {
	if err := s.checkTables(ctx); err != nil {
		return nil, err
	}
	st := newStream(s)
	r := newReader(st)
	var snap *snapshot
	var err error
	switch {
	case cp != nil:
		var c checkpoint
		c, err = decodeCheckpoint(cp)
		if err != nil {
			return nil, err
		}
		if c.UseGTID != (s.opts.Positioning == PositionGTID) {
			return nil, errors.New("mysqlcdc: the checkpoint was made with another positioning; versions would not compare")
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
			return nil, err
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
	// Schemas as of now, so that rows streamed later are read with the columns they were
	// written with rather than with a later DDL's.
	if err := r.preload(ctx); err != nil {
		if snap != nil {
			snap.abort()
		}
		r.cat.close()
		return nil, err
	}
	for _, name := range s.opts.Tables {
		if t := r.tables[name]; t != nil {
			st.tables = append(st.tables, t.schema)
		}
	}
	st.start(func(ctx context.Context) error {
		defer r.cat.close()
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

// binlogStatus returns the binlog's end: file, offset and (MySQL) the executed GTID set. The
// statement's name changed across versions, so each spelling is tried.
func binlogStatus(conn *client.Conn) (file string, pos uint32, executed string, err error) {
	for _, q := range []string{"SHOW BINLOG STATUS", "SHOW BINARY LOG STATUS", "SHOW MASTER STATUS"} {
		r, qerr := conn.Execute(q)
		if qerr != nil {
			err = qerr
			continue
		}
		if r.RowNumber() == 0 {
			return "", 0, "", errors.New("mysqlcdc: the server has no binlog (log_bin is off)")
		}
		file, _ = r.GetStringByName(0, "File")
		p, _ := r.GetUintByName(0, "Position")
		executed, _ = r.GetStringByName(0, "Executed_Gtid_Set")
		return file, uint32(p), executed, nil
	}
	return "", 0, "", fmt.Errorf("mysqlcdc: read binlog status: %w", err)
}
