package pgcdc

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/tributary-dev/tributary/cdc"
)

// snapshotPlan is an initial snapshot to read before streaming.
type snapshotPlan struct {
	exported string         // the slot's exported snapshot, "" for a fresh one
	floor    pglogrepl.LSN  // the version of every snapshot row
	state    *snapshotState // where an interrupted snapshot stopped; empty for a new one
}

// beginSnapshot opens the read-only REPEATABLE READ transaction the snapshot is read in,
// importing the slot's exported snapshot when there is one. It runs in Open, before the
// replication connection does anything else, because the export dies with its next command.
func beginSnapshot(ctx context.Context, conn *pgx.Conn, exported string) error {
	if _, err := conn.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); err != nil {
		return fmt.Errorf("pgcdc: begin snapshot transaction: %w", err)
	}
	if exported != "" {
		if _, err := conn.Exec(ctx, "SET TRANSACTION SNAPSHOT "+quoteLiteral(exported)); err != nil {
			return fmt.Errorf("pgcdc: import the slot's snapshot: %w", err)
		}
	}
	return nil
}

// snapshotReader reads the captured tables in the open snapshot transaction, chunk by chunk
// in primary key order, holding back one row so that the row ending a chunk, a table or the
// whole snapshot can carry the matching checkpoint.
type snapshotReader struct {
	st      *stream
	plan    *snapshotPlan
	done    []tableRef
	rows    int64
	pending *cdc.Event
}

func (st *stream) runSnapshot(ctx context.Context) error {
	sp := st.plan.snapshot
	r := &snapshotReader{st: st, plan: sp, done: slices.Clone(sp.state.Done), rows: sp.state.Rows}
	cat := st.src.catalog(st.sql)
	tables, err := st.snapshotTables(ctx)
	if err != nil {
		return err
	}

	var todo []Table
	for _, t := range tables {
		if !slices.Contains(r.done, tableRef(t)) {
			todo = append(todo, t)
		}
	}
	var estimate float64
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = quoteIdent(t.Schema) + "." + quoteIdent(t.Name)
	}
	if len(names) > 0 {
		// reltuples is -1 for a table never vacuumed or analyzed.
		err := st.sql.QueryRow(ctx, `SELECT coalesce(sum(greatest(c.reltuples, 0)), 0)::float8
			FROM pg_catalog.pg_class c WHERE c.oid = ANY($1::text[]::regclass[])`, names).Scan(&estimate)
		if err != nil {
			return fmt.Errorf("pgcdc: estimate snapshot rows: %w", err)
		}
	}
	st.progressStart(len(tables), len(r.done), r.rows, int64(estimate))
	st.opts().Logger.Info("pgcdc: snapshot", "tables", len(todo), "resumed", sp.state.Table != nil || len(r.done) > 0, "floor", sp.floor.String())

	for _, t := range todo {
		id := st.src.tableID(st.plan.database, t)
		st.progressTable(id, len(r.done))
		ti, err := cat.loadTable(ctx, id)
		if err != nil {
			return err
		}
		published, err := publishedColumns(ctx, st.sql, st.opts().Publication, id)
		if err != nil {
			return err
		}
		if ti, err = cat.restrictTo(ctx, ti, published); err != nil {
			return err
		}
		var after []string
		if sp.state.Table != nil && *sp.state.Table == tableRef(t) {
			after = sp.state.Key
		}
		if err := r.readTable(ctx, t, ti, after); err != nil {
			return err
		}
		r.done = append(r.done, tableRef(t))
	}
	if _, err := st.sql.Exec(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("pgcdc: end snapshot transaction: %w", err)
	}
	if r.pending != nil {
		// The snapshot is complete: its last row resumes straight into streaming.
		r.pending.Checkpoint = st.streamCheckpoint(st.plan.start)
		if err := r.emit(ctx, *r.pending); err != nil {
			return err
		}
	}
	st.progressEnd()
	return nil
}

// readTable reads one table from after (a primary key in text form, nil for the start). A
// table without a primary key is read in one query and checkpointed only at its end.
func (r *snapshotReader) readTable(ctx context.Context, t Table, ti *tableInfo, after []string) error {
	s := ti.schema
	cols := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		cols[i] = quoteIdent(c.Name)
	}
	from := quoteIdent(t.Schema) + "." + quoteIdent(t.Name)
	pk := s.PrimaryKey
	if len(pk) == 0 {
		n, _, err := r.readChunk(ctx, ti, pk, "SELECT "+strings.Join(cols, ", ")+" FROM "+from, nil, nil)
		if err != nil {
			return err
		}
		if n > 0 {
			r.pending.Checkpoint = r.checkpoint(append(slices.Clone(r.done), tableRef(t)), nil, nil)
		}
		return nil
	}
	keyCols := make([]string, len(pk))
	params := make([]string, len(pk))
	oids := make([]uint32, len(pk))
	for i, k := range pk {
		keyCols[i] = quoteIdent(s.Columns[k].Name)
		params[i] = "$" + strconv.Itoa(i+1)
		oids[i] = ti.oids[k]
	}
	chunk := r.st.opts().SnapshotChunk
	base := "SELECT " + strings.Join(cols, ", ") + " FROM " + from
	tail := " ORDER BY " + strings.Join(keyCols, ", ") + " LIMIT " + strconv.Itoa(chunk+1)
	for {
		query := base + tail
		var args [][]byte
		var argOIDs []uint32
		if after != nil {
			argOIDs = oids
			query = base + " WHERE (" + strings.Join(keyCols, ", ") + ") > (" + strings.Join(params, ", ") + ")" + tail
			for _, k := range after {
				args = append(args, []byte(k))
			}
		}
		n, last, err := r.readChunk(ctx, ti, pk, query, args, argOIDs)
		if err != nil {
			return err
		}
		if n <= chunk {
			if n > 0 {
				r.pending.Checkpoint = r.checkpoint(append(slices.Clone(r.done), tableRef(t)), nil, nil)
			}
			return nil
		}
		ref := tableRef(t)
		r.pending.Checkpoint = r.checkpoint(r.done, &ref, last)
		after = last
	}
}

// readChunk runs one query and turns its rows into Read events, delivering all but the last
// row it keeps pending. With a key it stops after SnapshotChunk rows and reports whether there
// were more (n = chunk+1) and the key of the last row it kept.
func (r *snapshotReader) readChunk(ctx context.Context, ti *tableInfo, pk []int, query string, args [][]byte, oids []uint32) (int, []string, error) {
	limit := r.st.opts().SnapshotChunk
	rr := r.st.sql.PgConn().ExecParams(ctx, query, args, oids, nil, nil)
	n := 0
	var last []string
	for rr.NextRow() {
		n++
		if len(pk) > 0 && n > limit {
			continue // the look-ahead row: only says the table goes on
		}
		vals := rr.Values()
		ev := r.st.rowEvent(cdc.Read, ti, Position{LSN: r.plan.floor, Snapshot: true})
		row, err := decodeRow(ti, vals)
		if err != nil {
			ev.Malformed = err
		}
		ev.After = row
		if len(pk) > 0 {
			last = last[:0]
			for _, k := range pk {
				last = append(last, string(vals[k]))
			}
		}
		if r.pending != nil {
			if err := r.emit(ctx, *r.pending); err != nil {
				rr.Close()
				return 0, nil, err
			}
		}
		r.rows++
		r.pending = &ev
	}
	if _, err := rr.Close(); err != nil {
		return 0, nil, fmt.Errorf("pgcdc: snapshot read of %s: %w", ti.schema.ID, err)
	}
	return n, slices.Clone(last), nil
}

func (r *snapshotReader) emit(ctx context.Context, ev cdc.Event) error {
	if err := r.st.emit(ctx, ev); err != nil {
		return err
	}
	r.st.snapSent.Add(1)
	return nil
}

func (r *snapshotReader) checkpoint(done []tableRef, table *tableRef, key []string) cdc.Checkpoint {
	return r.st.snapshotCheckpoint(&snapshotState{
		Floor: r.plan.floor.String(), Done: slices.Clone(done), Table: table, Key: slices.Clone(key), Rows: r.rows,
	})
}

// decodeRow decodes text values (nil = NULL) with the table's decoders. A value that does not
// decode leaves nil in its place and makes the row malformed, naming the column, never the value.
func decodeRow(ti *tableInfo, vals [][]byte) ([]cdc.Value, error) {
	if len(vals) != len(ti.decoders) {
		return nil, fmt.Errorf("pgcdc: row has %d values, schema %d columns", len(vals), len(ti.decoders))
	}
	row := make([]cdc.Value, len(vals))
	text, off := rowText(ti, vals), 0
	var firstErr error
	for i, v := range vals {
		if v == nil {
			continue
		}
		var d cdc.Value
		var err error
		if dec := ti.sharedDecoder(i); dec != nil {
			d, err = dec(text[off : off+len(v)])
			off += len(v)
		} else {
			d, err = ti.decoders[i](v)
		}
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("pgcdc: column %q of %s: %w", ti.schema.Columns[i].Name, ti.schema.ID, err)
		}
		row[i] = d
	}
	return row, firstErr
}
