package mysqlcdc

import (
	"context"
	"strings"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/tributary-dev/tributary/cdc"
)

// The reader's side of a re-snapshot (resnap.go): signal rows, the open window, and the
// chunk's rows at its watermark.

// signalRow is a row of the signal table written in the open transaction.
type signalRow struct{ id, kind, body string }

// signalRows collects the signal table's rows of a rows event; they take effect at the
// transaction's commit.
func (r *reader) signalRows(e *replication.RowsEvent, images undecoded, deferred bool, step int) error {
	if deferred {
		if err := decodeWithGoMySQL(e, images); err != nil {
			return err
		}
	}
	r.txRows += len(e.Rows) / step
	if e.Type() == replication.EnumRowsEventTypeDelete {
		return nil
	}
	for i := step - 1; i < len(e.Rows); i += step {
		row := e.Rows[i]
		if len(row) < 3 {
			continue
		}
		r.txSignals = append(r.txSignals, signalRow{id: textValue(row[0]), kind: textValue(row[1]), body: textValue(row[2])})
	}
	return nil
}

// textValue is a character column's value as go-mysql decodes it (VARCHAR a string, TEXT bytes).
func textValue(v any) string {
	switch x := v.(type) {
	case string:
		return strings.Clone(x)
	case []byte:
		return string(x)
	}
	return ""
}

// signals carries out the committed transaction's signal rows: a request queues a job, the
// open window's watermark emits its chunk.
func (r *reader) signals(ctx context.Context) error {
	sigs := r.txSignals
	r.txSignals = nil
	for _, s := range sigs {
		switch s.kind {
		case signalResnapshot:
			if r.src.opts.Flavor != MariaDB {
				if !r.warnedSignal {
					r.warnedSignal = true
					r.src.log.Warn("mysqlcdc: a re-snapshot request in the signal table is ignored: re-snapshots need MariaDB",
						"source", r.src.opts.SourceName, "id", s.id)
				}
				continue
			}
			job, err := r.src.parseRequest(s.id, s.body)
			if err != nil {
				r.src.log.Warn("mysqlcdc: a re-snapshot request in the signal table is refused", "source", r.src.opts.SourceName,
					"id", s.id, "error", err)
				continue
			}
			if job != nil {
				r.startResnapper(ctx, nil).addJob(job)
			}
		case signalWatermark:
			if err := r.watermark(ctx, s.body); err != nil {
				return err
			}
		}
	}
	return nil
}

// watermark decides the open window whose mark this is: its rows whose key the stream changed
// after the chunk's snapshot are dropped, the others emitted here, and the state moves past
// the chunk (the checkpoint of this transaction carries it). Another mark (an earlier
// stream's, replayed, another source's) is passed over.
func (r *reader) watermark(ctx context.Context, mark string) error {
	rs := r.rs
	if rs == nil {
		return nil
	}
	w := rs.win.Load()
	if w == nil || w.mark != mark {
		return nil
	}
	rs.mu.Lock()
	if rs.win.Load() != w || !w.ready {
		rs.mu.Unlock()
		return nil
	}
	rs.win.Store(nil)
	var events []cdc.Event
	switch {
	case w.invalid != "":
		w.outcome = w.invalid
	case rs.state == nil || len(rs.state.Jobs) == 0 || len(rs.state.Jobs[0].Tables) == 0 || rs.state.Jobs[0].Tables[0] != w.table:
		w.outcome = "the job moved on" // cannot happen: the resnapper waits for this decision
	default:
		for _, row := range w.rows {
			if v, ok := w.touched[row.key]; ok && row.key != "" && v > w.version {
				continue
			}
			events = append(events, row.ev)
		}
		// A job that ended is reported so once this transaction's events are sent.
		rs.book.ChunkDoneLocked(len(w.rows), w.more, w.last)
	}
	rs.mu.Unlock()
	close(w.done)
	// The stream's schema value when the chunk's is the same, so that a consumer keying on it
	// sees one table.
	t := r.tables[w.table]
	for i := range events {
		if t != nil && events[i].Schema != t.schema && sameSchema(t.schema, events[i].Schema) {
			events[i].Schema = t.schema
		}
		if err := r.emit(ctx, events[i]); err != nil {
			return err
		}
	}
	return nil
}

// observe records a streamed change of the open window's table.
func (r *reader) observe(w *chunkWindow, ev *cdc.Event) {
	if ev.Op == cdc.Read || ev.Table.Database != w.table.Database || ev.Table.Table != w.table.Table {
		return
	}
	if ev.Op == cdc.Truncate {
		w.invalid = "the table was truncated while the chunk was read"
		return
	}
	if ev.Malformed != nil || ev.Schema == nil {
		w.invalid = "a change of the table whose key could not be read"
		return
	}
	v := ev.Position.Version()
	for _, row := range [][]cdc.Value{ev.Before, ev.After} {
		if row == nil {
			continue
		}
		key, ok := keyOf(ev.Schema, row)
		if !ok {
			w.invalid = "a change of the table whose key could not be read"
			return
		}
		if old, seen := w.touched[key]; !seen || v > old {
			w.touched[key] = v
		}
	}
}

// ddlOnWindow marks the open window invalid when a DDL statement may concern its table (its
// name appears in the statement): the chunk's rows may follow another schema than the stream's.
func (r *reader) ddlOnWindow(q string) {
	if r.rs == nil {
		return
	}
	if w := r.rs.win.Load(); w != nil && strings.Contains(strings.ToLower(q), strings.ToLower(w.table.Table)) {
		w.invalid = "a DDL statement on the table while the chunk was read"
	}
}
