package pgcdc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/resnapjob"
)

// ResnapshotPrefix is the logical decoding message prefix of re-snapshot requests. A request is
// a transactional message (pg_logical_emit_message(true, ...)) whose content is JSON:
//
//	{"tables": ["public.orders", {"schema": "s", "name": "t.1"}], "where": "id < 1000", "slot": "...", "id": "..."}
//
// tables names the tables to read again ("schema.table", "table" for public, or an object for
// names with dots; empty or absent: every captured table), where is an optional SQL condition
// every chunk query of every table of the request adds, slot limits the request to the
// stream of that slot (absent: every stream of this package on the database that captures the
// tables), id names the request in logs and progress (absent: its WAL position). Source.Resnapshot
// writes one; so can anyone with SQL access and EXECUTE on pg_logical_emit_message.
const ResnapshotPrefix = "tributary.resnapshot"

// ErrResnapshotRequest is the error of a re-snapshot request that cannot be carried out as
// given: a table that is not captured, has no primary key or does not exist, or a WHERE
// condition the server refuses. It is cdc.ErrResnapshotRefused.
var ErrResnapshotRequest = cdc.ErrResnapshotRefused

// resnapRequest is a request message's content.
type resnapRequest struct {
	Slot   string         `json:"slot,omitempty"`
	ID     string         `json:"id,omitempty"`
	Tables []requestTable `json:"tables,omitempty"`
	Where  string         `json:"where,omitempty"`
}

// requestTable is a table of a request: "schema.table", "table" or {"schema", "name"}.
type requestTable Table

func (t *requestTable) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*t = parseRequestTable(s)
		return nil
	}
	var o struct{ Schema, Name string }
	if err := json.Unmarshal(b, &o); err != nil {
		return errors.New(`a table is "schema.table" or {"schema": ..., "name": ...}`)
	}
	if o.Schema == "" {
		o.Schema = "public"
	}
	*t = requestTable{Schema: o.Schema, Name: o.Name}
	return nil
}

// parseRequestTable reads "schema.table", or "table" in public.
func parseRequestTable(s string) requestTable {
	schema, name, found := strings.Cut(s, ".")
	if !found {
		schema, name = "public", s
	}
	return requestTable{Schema: schema, Name: name}
}

func (t requestTable) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Schema string `json:"schema"`
		Name   string `json:"name"`
	}{t.Schema, t.Name})
}

// resnapState is the re-snapshot part of a checkpoint: the jobs not finished, the first being
// read, and how far it came (internal/resnapjob). Key is a primary key in text form;
// checkpoints are never logged.
type resnapState resnapjob.State[tableRef]

// resnapJob is one request being carried out.
type resnapJob = resnapjob.Job[tableRef]

func (s *resnapState) clone() *resnapState {
	return (*resnapState)((*resnapjob.State[tableRef])(s).Clone())
}

// Resnapshot asks this source's stream (the one running on the slot now, or the next one) to
// read tables again while it keeps streaming: req.Tables in the source's spelling
// ("schema.table", or "table" in public; empty: every captured table), with req.Where, when
// set, as an SQL condition on each table's rows (a key range, a filter). The request is a
// logical decoding message committed in the WAL (ResnapshotPrefix), so it survives a crash and
// a restart of the pipeline: the stream takes it up when it decodes it, and the re-snapshot's
// position is in every checkpoint until it is done. It returns the request's id.
//
// The tables are checked first: each must exist, be captured and have a primary key, and
// Where must be a valid condition on each (the server plans the query). Such a refusal is
// ErrResnapshotRequest; connection failures are returned as they are.
func (s *Source) Resnapshot(ctx context.Context, req cdc.ResnapshotRequest) (string, error) {
	r := resnapRequest{Slot: s.opts.Slot, Where: req.Where, ID: req.ID}
	for _, name := range req.Tables {
		t := parseRequestTable(name)
		if t.Name == "" {
			return "", fmt.Errorf("pgcdc: %w: table %q: want schema.table", ErrResnapshotRequest, name)
		}
		r.Tables = append(r.Tables, t)
	}
	conn, err := pgx.ConnectConfig(ctx, s.sqlCfg)
	if err != nil {
		return "", fmt.Errorf("pgcdc: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var database string
	if err := conn.QueryRow(ctx, `SELECT current_database()`).Scan(&database); err != nil {
		return "", fmt.Errorf("pgcdc: current database: %w", err)
	}
	tables := make([]Table, len(r.Tables))
	for i, t := range r.Tables {
		tables[i] = Table(t)
	}
	if len(tables) == 0 {
		if tables, err = s.keyedCaptured(ctx, conn, database); err != nil {
			return "", err
		}
	}
	for _, t := range tables {
		if err := s.checkResnapTable(ctx, conn, database, t, r.Where); err != nil {
			return "", err
		}
	}
	if r.ID == "" {
		r.ID = "rs-" + time.Now().UTC().Format("20060102T150405") + "-" + newNonce()[:6]
	}
	content, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("pgcdc: re-snapshot request: %w", err)
	}
	if err := emitTransactional(ctx, conn, ResnapshotPrefix, string(content)); err != nil {
		return "", fmt.Errorf("pgcdc: write the re-snapshot request: %w", err)
	}
	s.opts.Logger.Info("pgcdc: re-snapshot requested", "slot", s.opts.Slot, "id", r.ID, "tables", len(tables))
	return r.ID, nil
}

// checkResnapTable refuses a table a re-snapshot cannot read: not captured, missing, without a
// primary key, or with a condition the server does not accept on it.
func (s *Source) checkResnapTable(ctx context.Context, conn *pgx.Conn, database string, t Table, where string) error {
	if !s.captures(t) {
		return fmt.Errorf("pgcdc: %w: %s.%s is not captured by this source", ErrResnapshotRequest, t.Schema, t.Name)
	}
	ti, err := newCatalog(conn).loadTable(ctx, s.tableID(database, t))
	if errors.Is(err, errNoTable) {
		return fmt.Errorf("pgcdc: %w: %s.%s does not exist (%w)", ErrResnapshotRequest, t.Schema, t.Name, cdc.ErrTableNotFound)
	}
	if err != nil {
		return err
	}
	if len(ti.schema.PrimaryKey) == 0 {
		return fmt.Errorf("pgcdc: %w: %s.%s has no primary key (a re-snapshot reads by key ranges)", ErrResnapshotRequest, t.Schema, t.Name)
	}
	if where == "" {
		return nil
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("pgcdc: check the re-snapshot condition: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	rows, err := tx.Query(ctx, "EXPLAIN SELECT 1 FROM "+quoteIdent(t.Schema)+"."+quoteIdent(t.Name)+" WHERE ("+where+")")
	if err == nil {
		for rows.Next() {
		}
		rows.Close()
		err = rows.Err()
	}
	if err != nil {
		// The server's message names what is wrong with the condition, never row data.
		return fmt.Errorf("pgcdc: %w: condition on %s.%s: %w", ErrResnapshotRequest, t.Schema, t.Name, err)
	}
	return nil
}

// publishedCaptured lists the captured tables the publication publishes now.
func (s *Source) publishedCaptured(ctx context.Context, q querier) ([]Table, error) {
	rows, err := q.Query(ctx, `SELECT schemaname::text, tablename::text FROM pg_catalog.pg_publication_tables
		WHERE pubname = $1 ORDER BY 1, 2`, s.opts.Publication)
	if err != nil {
		return nil, fmt.Errorf("pgcdc: read publication tables: %w", err)
	}
	published, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Table, error) {
		var t Table
		return t, r.Scan(&t.Schema, &t.Name)
	})
	if err != nil {
		return nil, fmt.Errorf("pgcdc: read publication tables: %w", err)
	}
	return slices.DeleteFunc(published, func(t Table) bool { return !s.captures(t) }), nil
}

// keyedCaptured lists the captured tables published now that have a primary key: what a
// request naming no table reads (the others are logged and left out).
func (s *Source) keyedCaptured(ctx context.Context, conn *pgx.Conn, database string) ([]Table, error) {
	tables, err := s.publishedCaptured(ctx, conn)
	if err != nil {
		return nil, err
	}
	ids := make([]cdc.TableID, len(tables))
	for i, t := range tables {
		ids[i] = s.tableID(database, t)
	}
	infos, err := newCatalog(conn).loadTables(ctx, ids)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(tables, func(t Table) bool {
		ti := infos[s.tableID(database, t)]
		if ti == nil || len(ti.schema.PrimaryKey) == 0 {
			s.opts.Logger.Warn("pgcdc: a re-snapshot of every table leaves out one without a primary key", "table", t.Schema+"."+t.Name)
			return true
		}
		return false
	}), nil
}

// emitTransactional commits a transactional logical decoding message in a transaction of its
// own.
func emitTransactional(ctx context.Context, conn *pgx.Conn, prefix, content string) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SELECT pg_catalog.pg_logical_emit_message(true, $1, $2::text)", prefix, content); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// parseResnapRequest reads a request message decoded at commit (its commit LSN names it when
// it has no id). It returns nil for a request for another slot.
func (st *stream) parseResnapRequest(content []byte, at string) (*resnapJob, error) {
	var r resnapRequest
	if err := json.Unmarshal(content, &r); err != nil {
		return nil, fmt.Errorf("pgcdc: %w: not a JSON request: %v", ErrResnapshotRequest, err)
	}
	if r.Slot != "" && r.Slot != st.opts().Slot {
		return nil, nil
	}
	job := &resnapJob{ID: r.ID, Where: r.Where, All: len(r.Tables) == 0}
	if job.ID == "" {
		job.ID = "rs-" + at
	}
	for _, t := range r.Tables {
		if t.Name == "" {
			return nil, fmt.Errorf("pgcdc: %w (%s): a table without a name", ErrResnapshotRequest, job.ID)
		}
		if !st.src.captures(Table(t)) {
			if r.Slot == "" {
				return nil, nil // a request for another source's tables
			}
			return nil, fmt.Errorf("pgcdc: %w (%s): %s.%s is not captured by this source", ErrResnapshotRequest, job.ID, t.Schema, t.Name)
		}
		if ref := tableRef(t); !slices.Contains(job.Tables, ref) {
			job.Tables = append(job.Tables, ref)
		}
	}
	job.Total = len(job.Tables)
	return job, nil
}
