package mysqlcdc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/tributary-dev/tributary/cdc"
)

// snapshot is an open consistent read and the binlog position it corresponds to.
type snapshot struct {
	src     *Source
	conn    *client.Conn
	at      checkpoint // the binlog position of the read view
	start   checkpoint // where streaming continues after the snapshot: at, unless resumed
	version int64      // every snapshot row's version, derived from at
	done    []TableName
	tables  []TableName // the captured tables that exist in the read view, in capture order
}

// resume continues the interrupted snapshot whose checkpoint is c: the tables it completed are
// skipped and streaming starts at its position. This read view is later than that position,
// and its rows carry its own, higher version, so the changes between the two positions that
// the stream delivers again are below these rows and above the earlier tables' rows.
func (s *snapshot) resume(c checkpoint) {
	s.done = append([]TableName(nil), c.Snapshot.Done...)
	s.start = c
	s.start.Snapshot = nil
}

// beginSnapshot opens a consistent read and records the binlog position it sees.
//
// MariaDB: START TRANSACTION WITH CONSISTENT SNAPSHOT makes the binlog_snapshot_file and
// binlog_snapshot_position status variables report the binlog position matching the read view
// (no lock needed); BINLOG_GTID_POS turns it into a GTID position. @@gtid_binlog_pos is not
// usable: it moves on with commits made after the read view was taken.
//
// MySQL has no such variables: a global read lock is held just long enough to open the read
// view and read the binlog status.
func beginSnapshot(ctx context.Context, src *Source) (*snapshot, error) {
	conn, err := src.connect(ctx)
	if err != nil {
		return nil, err
	}
	s, err := startSnapshot(ctx, src, conn)
	if err != nil {
		quit(conn)
		return nil, err
	}
	return s, nil
}

// startSnapshot opens the consistent read on conn (beginSnapshot; a re-snapshot's chunks reuse
// their connection).
func startSnapshot(ctx context.Context, src *Source, conn *client.Conn) (*snapshot, error) {
	defer closeOnDone(ctx, conn)()
	// Results in each column's own character set (as the binlog has them), TIMESTAMP functions
	// in UTC, and room for a slow consumer between rows.
	for _, q := range []string{
		"SET SESSION character_set_results = NULL, time_zone = '+00:00', net_write_timeout = 3600",
		"SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ",
	} {
		if _, err := conn.Execute(q); err != nil {
			return nil, fmt.Errorf("mysqlcdc: snapshot session: %w", err)
		}
	}
	s := &snapshot{src: src, conn: conn}
	s.start.UseGTID = src.opts.Positioning == PositionGTID
	if src.opts.Flavor == MariaDB {
		if _, err := conn.Execute("START TRANSACTION WITH CONSISTENT SNAPSHOT"); err != nil {
			return nil, fmt.Errorf("mysqlcdc: start snapshot: %w", err)
		}
		r, err := conn.Execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
		if err != nil {
			return nil, fmt.Errorf("mysqlcdc: read snapshot position: %w", err)
		}
		for i := 0; i < r.RowNumber(); i++ {
			name, _ := r.GetString(i, 0)
			switch strings.ToLower(name) {
			case "binlog_snapshot_file":
				s.start.File, _ = r.GetString(i, 1)
			case "binlog_snapshot_position":
				p, _ := r.GetUint(i, 1)
				s.start.Pos = uint32(p)
			}
		}
		if s.start.File == "" {
			return nil, errors.New("mysqlcdc: the server reports no snapshot binlog position (log_bin is off)")
		}
		g, err := conn.Execute("SELECT BINLOG_GTID_POS(?, ?)", s.start.File, s.start.Pos)
		if err != nil {
			return nil, fmt.Errorf("mysqlcdc: GTID of the snapshot position: %w", err)
		}
		// NULL means the server could not map the position; streaming from an empty GTID set
		// would then replay the whole binlog, so refuse.
		if v, _ := g.GetValue(0, 0); v == nil {
			return nil, errors.New("mysqlcdc: the server maps the snapshot position to no GTID position")
		}
		s.start.GTID, _ = g.GetString(0, 0)
	} else {
		if _, err := conn.Execute("FLUSH TABLES WITH READ LOCK"); err != nil {
			return nil, fmt.Errorf("mysqlcdc: lock for the snapshot: %w", err)
		}
		_, err := conn.Execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
		if err == nil {
			s.start.File, s.start.Pos, s.start.GTID, err = binlogStatus(conn)
		}
		if _, uerr := conn.Execute("UNLOCK TABLES"); err == nil && uerr != nil {
			err = uerr
		}
		if err != nil {
			return nil, fmt.Errorf("mysqlcdc: start snapshot: %w", err)
		}
	}
	if !s.start.UseGTID {
		s.start.GTID = ""
	}
	var err error
	if s.version, err = snapshotVersion(src, s.start); err != nil {
		return nil, err
	}
	s.at = s.start
	return s, nil
}

// snapshotVersion is above every change committed before the snapshot and below every change
// streamed after it.
func snapshotVersion(src *Source, c checkpoint) (int64, error) {
	if c.UseGTID && src.opts.Flavor == MariaDB {
		var seq uint64
		for _, part := range strings.Split(c.GTID, ",") {
			if part = strings.TrimSpace(part); part == "" {
				continue
			}
			g, err := mysql.ParseMariadbGTID(part)
			if err != nil {
				return 0, fmt.Errorf("mysqlcdc: snapshot GTID position: %w", err)
			}
			seq = max(seq, g.SequenceNumber)
		}
		v, _ := gtidVersion(seq, maxGTIDOrdinal)
		return v, nil
	}
	idx, err := binlogIndex(c.File)
	if err != nil {
		return 0, err
	}
	// Every later rows event ends beyond the snapshot offset, so its version is larger.
	v, _ := fileVersion(idx, c.Pos, 0)
	return v, nil
}

func (s *snapshot) abort() { quit(s.conn) }

// run reads every captured table in the consistent read and sends the rows as cdc.Read events.
// The last row of each table carries a checkpoint naming the tables done, from which an
// interrupted snapshot resumes; the last row of all carries the plain checkpoint of the
// position streaming starts from.
func (s *snapshot) run(ctx context.Context, st *stream, r *reader) error {
	defer s.abort()
	// The client library's reads do not watch ctx; closing the socket ends a blocked one.
	socket := s.conn.Conn.Conn
	defer context.AfterFunc(ctx, func() { _ = socket.Close() })()
	pos := Position{File: s.at.File, Pos: s.at.Pos, GTID: s.at.GTID, Read: true, version: s.version}
	tables := s.tables
	done := make(map[TableName]bool, len(s.done))
	for _, t := range s.done {
		done[t] = true
	}
	var todo []TableName
	for _, t := range tables {
		if !done[t] {
			todo = append(todo, t)
		}
	}
	estimate := s.estimate(todo)
	began := s.src.opts.Now()
	st.setProgress(func(p *cdc.SnapshotProgress) {
		*p = cdc.SnapshotProgress{Active: true, TablesTotal: len(tables), TablesDone: len(tables) - len(todo), RowsEstimated: estimate}
	})
	doneList := append([]TableName(nil), s.done...)
	var held *cdc.Event
	var rows int64
	for i, name := range todo {
		if t := r.tables[name]; t != nil { // nil: absent when the snapshot began, nothing to read
			id := s.src.tableID(name)
			st.setProgress(func(p *cdc.SnapshotProgress) { p.Table = id })
			if err := s.readTable(ctx, st, t, name, pos, &held, &rows, began); err != nil {
				return err
			}
		}
		doneList = append(doneList, name)
		st.setProgress(func(p *cdc.SnapshotProgress) { p.TablesDone++ })
		if held != nil && i < len(todo)-1 {
			c := s.start
			c.Snapshot = &snapshotMark{Done: append([]TableName(nil), doneList...)}
			held.Checkpoint = c.encode()
			if err := st.send(ctx, *held); err != nil {
				return err
			}
			held = nil
		}
	}
	if _, err := s.conn.Execute("COMMIT"); err != nil {
		s.src.log.Warn("mysqlcdc: ending the snapshot transaction", "source", s.src.opts.SourceName, "error", err)
	}
	s.report(st, rows, began)
	st.setProgress(func(p *cdc.SnapshotProgress) { // the figures stay, with Active false
		p.Active, p.Table, p.TablesDone = false, cdc.TableID{}, p.TablesTotal
	})
	if held != nil {
		held.Checkpoint = s.start.encode()
		return st.send(ctx, *held)
	}
	return nil
}

// readTable streams one table's rows, always holding the latest back in *held so that the
// caller can put a checkpoint on a table's last row.
func (s *snapshot) readTable(ctx context.Context, st *stream, t *table, name TableName, pos Position,
	held **cdc.Event, rows *int64, began time.Time) error {
	id := s.src.tableID(name)
	exprs := make([]string, len(t.codecs))
	for k := range t.codecs {
		exprs[k] = t.codecs[k].selectExpr(t.schema.Columns[k].Name)
	}
	q := "SELECT " + strings.Join(exprs, ", ") + " FROM " + quoteIdent(name.Database) + "." + quoteIdent(name.Table)
	var result mysql.Result
	var sendErr error
	err := s.conn.ExecuteSelectStreaming(q, &result, func(row []mysql.FieldValue) error {
		ev := cdc.Event{Op: cdc.Read, Table: id, Schema: t.schema, Position: pos}
		after := make([]cdc.Value, len(row))
		for k := range row {
			v, err := t.codecs[k].fromText(&row[k])
			if err != nil {
				ev.Malformed = fmt.Errorf("column %q: %w", t.schema.Columns[k].Name, err)
				after = nil
				break
			}
			after[k] = v
		}
		ev.After = after
		if *held != nil {
			if sendErr = st.send(ctx, **held); sendErr != nil {
				return sendErr
			}
		}
		*held = &ev
		*rows++
		if *rows%1024 == 0 {
			s.report(st, *rows, began)
		}
		return nil
	}, nil)
	if sendErr != nil {
		return sendErr
	}
	if err != nil {
		return fmt.Errorf("mysqlcdc: snapshot of %v: %w", id, err)
	}
	return nil
}

// report publishes the rows sent so far and the rate since began.
func (s *snapshot) report(st *stream, rows int64, began time.Time) {
	rate := 0.0
	if d := s.src.opts.Now().Sub(began).Seconds(); d > 0 {
		rate = float64(rows) / d
	}
	st.setProgress(func(p *cdc.SnapshotProgress) { p.RowsDone, p.RowsPerSecond = rows, rate })
}

// estimate sums the catalog's row estimates of the captured tables (0 when unknown).
func (s *snapshot) estimate(tables []TableName) int64 {
	var n int64
	for _, t := range tables {
		r, err := s.conn.Execute("SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", t.Database, t.Table)
		if err != nil || r.RowNumber() == 0 {
			continue
		}
		v, _ := r.GetInt(0, 0)
		n += v
	}
	return n
}
