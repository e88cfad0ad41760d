package mysqlcdc

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/resnapjob"
)

// Re-snapshots on MariaDB (doc.go, Re-snapshots). A request and each chunk's watermark are rows
// of the signal table, so they reach the reader through the binlog like any change: a request
// survives a crash (the binlog is read again from the checkpoint), and a chunk's rows enter the
// stream right where its watermark commits. A chunk is read in a consistent snapshot whose
// binlog position P MariaDB reports exactly (binlog_snapshot_file/position), so no low
// watermark is needed: every change before P is in the rows, none after it. The reader keeps,
// from before the snapshot is taken until the watermark, the newest version of every key of
// the chunk's table it decodes; at the watermark the rows whose key changed after P are
// dropped (the stream carries their newer state, a delete included) and the others are emitted
// with P's snapshot version, which is above every change before P and below every change after
// it. Emitted at the watermark, after every change decoded before it, a row never follows a
// newer change of its key, so it neither overwrites one nor brings back a deleted row.

// signalDDL creates the signal table.
const signalDDL = "CREATE TABLE IF NOT EXISTS %s (id VARCHAR(128) NOT NULL PRIMARY KEY, kind VARCHAR(16) NOT NULL, body TEXT NOT NULL)"

// Signal kinds.
const (
	signalResnapshot = "resnapshot"
	signalWatermark  = "watermark"
)

// DefaultSignalTable is the signal table's name in the database of the first captured table
// when Options.SignalTable is not set.
const DefaultSignalTable = "tributary_signal"

// resnapRequest is a request row's body (JSON): tables "db.table" (empty: every captured
// table), an SQL condition, and the source that should carry it out (empty: every source
// reading the signal table that captures the tables).
type resnapRequest struct {
	Source string   `json:"source,omitempty"`
	Tables []string `json:"tables,omitempty"`
	Where  string   `json:"where,omitempty"`
}

// resnapState is the re-snapshot part of a checkpoint while a job is not done
// (internal/resnapjob). Key is the last key read of Jobs[0].Tables[0]: each key column's value
// in the server's text form, hex-encoded (nil: the table's first chunk is next).
type resnapState resnapjob.State[TableName]

// resnapJob is one request being carried out: the tables left, in order (All: every captured
// table with a primary key, resolved when the job starts).
type resnapJob = resnapjob.Job[TableName]

// clone is a deep copy of s; nil when s has no job.
func (s *resnapState) clone() *resnapState {
	if s == nil || len(s.Jobs) == 0 {
		return nil
	}
	return (*resnapState)((*resnapjob.State[TableName])(s).Clone())
}

// keyOf renders a row's primary key values as one string, the same from the binlog and from a
// chunk read (both give the normalized values of cdc/value.go); ok is false when a key value
// is missing.
func keyOf(s *cdc.TableSchema, row []cdc.Value) (key string, ok bool) {
	if s == nil || len(s.PrimaryKey) == 0 {
		return "", false
	}
	var b []byte
	for _, k := range s.PrimaryKey {
		if k >= len(row) || row[k] == nil {
			return "", false
		}
		var v string
		switch x := row[k].(type) {
		case string:
			v = "s" + x
		case int64:
			v = "i" + strconv.FormatInt(x, 10)
		case uint64:
			v = "u" + strconv.FormatUint(x, 10)
		case cdc.Base64:
			v = "b" + string(x)
		case cdc.EpochMicros:
			v = "t" + strconv.FormatInt(int64(x), 10)
		case cdc.Unchanged:
			return "", false
		default:
			v = fmt.Sprintf("%T:%v", x, x)
		}
		b = strconv.AppendInt(b, int64(len(v)), 10)
		b = append(b, ':')
		b = append(b, v...)
	}
	return string(b), true
}

// rangeable says whether a key column's values can bound a chunk exactly (a literal that
// compares and orders as the column does).
func rangeable(c *colCodec) bool {
	switch c.class {
	case classInt, classUint, classDecimal, classString, classText, classBinary, classTemporal, classTimestamp, classUUID:
		return true
	}
	return false
}

// checkKeyed refuses a table a re-snapshot cannot read by key ranges.
func checkKeyed(t *table, name TableName) error {
	if len(t.schema.PrimaryKey) == 0 {
		return fmt.Errorf("mysqlcdc: %w: %s has no primary key (a re-snapshot reads by key ranges)", cdc.ErrResnapshotRefused, name)
	}
	for _, k := range t.schema.PrimaryKey {
		if !rangeable(&t.codecs[k]) {
			return fmt.Errorf("mysqlcdc: %w: %s: key column %q has a type (%s) a re-snapshot cannot range over",
				cdc.ErrResnapshotRefused, name, t.schema.Columns[k].Name, t.schema.Columns[k].SourceType)
		}
	}
	return nil
}

// Resnapshot implements cdc.Resnapshotter on MariaDB: it asks the running stream (or the next
// one) to read tables again while it keeps streaming. req.Tables are "db.table" (a bare name
// is in the first captured table's database; empty: every captured table with a primary
// key); req.Where an SQL condition on each table's rows. The request is a row of the signal
// table (Options.SignalTable, created when missing), so the stream takes it up from the
// binlog and resumes it after a crash. Each table must be captured, exist and have a primary
// key of rangeable types, and the server must accept the condition: otherwise
// cdc.ErrResnapshotRefused. On MySQL it is errors.ErrUnsupported: a MySQL consistent snapshot
// does not tell its binlog position.
func (s *Source) Resnapshot(ctx context.Context, req cdc.ResnapshotRequest) (string, error) {
	if s.opts.Flavor != MariaDB {
		return "", fmt.Errorf("mysqlcdc: re-snapshots need MariaDB (a MySQL snapshot does not tell its binlog position): %w", errors.ErrUnsupported)
	}
	if len(req.ID) > 100 {
		return "", fmt.Errorf("mysqlcdc: %w: the id is longer than 100 bytes", cdc.ErrResnapshotRefused)
	}
	conn, err := s.connect(ctx)
	if err != nil {
		return "", err
	}
	defer quit(conn)
	defer closeOnDone(ctx, conn)()
	var tables []TableName
	for _, name := range req.Tables {
		db, table, ok := strings.Cut(name, ".")
		if !ok {
			db, table = s.tables[0].Database, name
		}
		if db == "" || table == "" {
			return "", fmt.Errorf("mysqlcdc: %w: table %q: want db.table", cdc.ErrResnapshotRefused, name)
		}
		if t := (TableName{Database: db, Table: table}); !slices.Contains(tables, t) {
			tables = append(tables, t)
		}
	}
	cat := &catalog{src: s}
	defer cat.close()
	for _, t := range tables {
		if !s.captures(t) || t.Table == AllTables {
			return "", fmt.Errorf("mysqlcdc: %w: %s is not captured by this source", cdc.ErrResnapshotRefused, t)
		}
		ti, err := cat.load(ctx, s.tableID(t))
		if errors.Is(err, errNoTable) {
			return "", fmt.Errorf("mysqlcdc: %w: %s does not exist (%w)", cdc.ErrResnapshotRefused, t, cdc.ErrTableNotFound)
		}
		if err != nil {
			return "", err
		}
		if err := checkKeyed(ti, t); err != nil {
			return "", err
		}
	}
	if req.Where != "" {
		check := tables
		if len(check) == 0 {
			if check, err = s.resolveTables(ctx, conn, false); err != nil {
				return "", err
			}
		}
		for _, t := range check {
			if _, err := conn.Execute("EXPLAIN SELECT 1 FROM " + quoteIdent(t.Database) + "." + quoteIdent(t.Table) + " WHERE (" + req.Where + ")"); err != nil {
				return "", fmt.Errorf("mysqlcdc: %w: the condition on %s: %s", cdc.ErrResnapshotRefused, t, withoutStack(err))
			}
		}
	}
	id := req.ID
	if id == "" {
		id = resnapID(s.opts.Now())
	}
	r := resnapRequest{Source: s.opts.SourceName, Where: req.Where}
	for _, t := range tables {
		r.Tables = append(r.Tables, t.String())
	}
	body, _ := json.Marshal(r)
	if err := s.writeSignal(conn, id, signalResnapshot, string(body)); err != nil {
		return "", fmt.Errorf("mysqlcdc: write the re-snapshot request: %s", withoutStack(err))
	}
	s.log.Info("mysqlcdc: re-snapshot requested", "source", s.opts.SourceName, "id", id, "tables", len(tables), "where", req.Where != "")
	return id, nil
}

// writeSignal writes (or rewrites) a signal row, creating the table when missing. Values are
// hex literals: one round trip, nothing to escape.
func (s *Source) writeSignal(conn *client.Conn, id, kind, body string) error {
	name := quoteIdent(s.signalName.Database) + "." + quoteIdent(s.signalName.Table)
	q := "INSERT INTO " + name + " (id, kind, body) VALUES (" + hexText(id) + ", " + hexText(kind) + ", " + hexText(body) +
		") ON DUPLICATE KEY UPDATE kind = VALUES(kind), body = VALUES(body)"
	_, err := conn.Execute(q)
	if err == nil {
		return nil
	}
	if _, cerr := conn.Execute(fmt.Sprintf(signalDDL, name)); cerr != nil {
		return err
	}
	_, err = conn.Execute(q)
	return err
}

// hexText is a string literal of UTF-8 text that needs no escaping.
func hexText(s string) string {
	if s == "" {
		return "''"
	}
	return "CONVERT(X'" + hex.EncodeToString([]byte(s)) + "' USING utf8mb4)"
}

// parseRequest reads a request row; nil (no error) for another source's request.
func (s *Source) parseRequest(id, body string) (*resnapJob, error) {
	var r resnapRequest
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		return nil, fmt.Errorf("mysqlcdc: %w (%s): the body is not a JSON request", cdc.ErrResnapshotRefused, id)
	}
	if r.Source != "" && r.Source != s.opts.SourceName {
		return nil, nil
	}
	job := &resnapJob{ID: id, Where: r.Where, All: len(r.Tables) == 0}
	for _, name := range r.Tables {
		db, table, ok := strings.Cut(name, ".")
		if !ok || db == "" || table == "" {
			return nil, fmt.Errorf("mysqlcdc: %w (%s): table %q: want db.table", cdc.ErrResnapshotRefused, id, name)
		}
		t := TableName{Database: db, Table: table}
		if !s.captures(t) || t.Table == AllTables {
			if r.Source == "" {
				return nil, nil // a request for another source's tables
			}
			return nil, fmt.Errorf("mysqlcdc: %w (%s): %s is not captured", cdc.ErrResnapshotRefused, id, t)
		}
		if !slices.Contains(job.Tables, t) {
			job.Tables = append(job.Tables, t)
		}
	}
	job.Total = len(job.Tables)
	return job, nil
}

// resnapID makes up a request id.
func resnapID(now time.Time) string { return "rs-" + now.UTC().Format("20060102T150405.000000") }
