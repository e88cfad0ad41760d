package mysqlcdc

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/tributary-dev/tributary/cdc"
)

// rows turns a rows event of a captured table into events; rows of other tables only advance
// the transaction's row ordinal.
func (r *reader) rows(ctx context.Context, h *replication.EventHeader, e *replication.RowsEvent) error {
	var op cdc.Op
	step := 1
	switch e.Type() {
	case replication.EnumRowsEventTypeInsert:
		op = cdc.Insert
	case replication.EnumRowsEventTypeUpdate:
		op, step = cdc.Update, 2
	case replication.EnumRowsEventTypeDelete:
		op = cdc.Delete
	default:
		return nil
	}
	if e.Table == nil {
		return nil
	}
	name := TableName{Database: string(e.Table.Schema), Table: string(e.Table.Table)}
	first := r.txRows
	r.txRows += len(e.Rows) / step
	if !r.src.captured[name] {
		return nil
	}
	if !r.inTx {
		r.begin(h)
	}
	id := r.src.tableID(name)
	t, schemaErr := r.table(ctx, name, id, e.Table)
	if schemaErr != nil && !errors.Is(schemaErr, errSchemaMismatch) && !errors.Is(schemaErr, errNoTable) {
		return schemaErr
	}
	for i := 0; i+step <= len(e.Rows); i += step {
		ordinal := i / step
		if r.useGTID && r.src.opts.Flavor == MariaDB {
			ordinal = first + i/step
		}
		ev := cdc.Event{Op: op, Table: id, CommitTime: r.txTime, TxID: r.txID,
			Position: r.position(h, ordinal)}
		if schemaErr != nil {
			ev.Malformed = schemaErr
		} else {
			ev.Schema = t.schema
			var err error
			switch op {
			case cdc.Insert:
				ev.After, err = t.decodeBinlog(e.Rows[i])
			case cdc.Delete:
				ev.Before, err = t.decodeBinlog(e.Rows[i])
			case cdc.Update:
				if ev.Before, err = t.decodeBinlog(e.Rows[i]); err == nil {
					ev.After, err = t.decodeBinlog(e.Rows[i+1])
				}
			}
			if err != nil {
				ev.Before, ev.After, ev.Malformed = nil, nil, err
			}
		}
		if err := r.emit(ctx, ev); err != nil {
			return err
		}
	}
	return nil
}

// position derives a streamed row's position and version.
func (r *reader) position(h *replication.EventHeader, ordinal int) Position {
	p := Position{File: r.curFile, Pos: h.LogPos, Row: ordinal}
	var ok bool
	if r.useGTID && r.src.opts.Flavor == MariaDB {
		p.GTID = r.txGTID.String()
		p.version, ok = gtidVersion(r.txGTID.SequenceNumber, ordinal)
	} else {
		p.GTID = r.txMySQL
		idx, err := binlogIndex(r.curFile)
		if err != nil {
			r.src.log.Error("mysqlcdc: cannot derive versions", "source", r.src.opts.SourceName, "error", err)
		}
		p.version, ok = fileVersion(idx, h.LogPos, ordinal)
	}
	if !ok && !r.warnedWidth {
		r.warnedWidth = true
		r.src.log.Warn("mysqlcdc: a position exceeds the version layout; versions saturate and may repeat",
			"source", r.src.opts.SourceName, "position", p.String())
	}
	return p
}

var errSchemaMismatch = errors.New("mysqlcdc: the row image does not match the table's schema")

// table returns the schema a rows event's images follow: the cached one when the table map
// agrees with it, else a fresh catalog load, else -- for an image written before a later DDL --
// one rebuilt from the table map and the catalog.
func (r *reader) table(ctx context.Context, name TableName, id cdc.TableID, tm *replication.TableMapEvent) (*table, error) {
	if t := r.tables[name]; t != nil && t.agrees(tm) {
		return t, nil
	}
	key := tableMapKey(id, tm)
	if t := r.projections[key]; t != nil {
		return t, nil
	}
	t, err := r.cat.load(ctx, id)
	if err != nil {
		return nil, err
	}
	r.tables[name] = t
	if t.agrees(tm) {
		return t, nil
	}
	if p := fromTableMap(t, tm); p != nil {
		r.src.log.Info("mysqlcdc: row image older than the catalog; schema rebuilt from the table map",
			"source", r.src.opts.SourceName, "table", id.String())
		r.projections[key] = p
		return p, nil
	}
	return nil, fmt.Errorf("%w: the binlog has %d columns, the catalog %d", errSchemaMismatch, tm.ColumnCount, len(t.codecs))
}

// decodeBinlog normalizes one row image.
func (t *table) decodeBinlog(row []any) ([]cdc.Value, error) {
	if len(row) != len(t.codecs) {
		return nil, fmt.Errorf("%w: image of %d columns, schema of %d", errSchemaMismatch, len(row), len(t.codecs))
	}
	out := make([]cdc.Value, len(row))
	for i, v := range row {
		n, err := t.codecs[i].fromBinlog(v)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", t.schema.Columns[i].Name, err)
		}
		out[i] = n
	}
	return out, nil
}
