package mysqlcdc

import (
	"context"
	"errors"
	"fmt"
	"runtime"

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
	images, deferred := pendingImages(e)
	pair, compressed, direct := imageLayout(h.EventType)
	if deferred && !framed(e, images) {
		return &binlogError{op: "decode rows event", err: errCorruptRows}
	}
	if deferred && !direct {
		if err := decodeWithGoMySQL(e, images); err != nil {
			return err
		}
		deferred = false
	}
	body := images // what the direct decoder reads: the images, decompressed
	if deferred && compressed {
		var err error
		if body, err = decompressImages(images); err != nil {
			return &binlogError{op: "decompress rows event", err: err}
		}
	}
	if deferred && hasBinaryJSON(e.Table) && !binaryJSONBounded(e.Table, e, pair, body) {
		// go-mysql, which decodes these documents, would expand them without bound.
		return &binlogError{op: "decode rows event", err: errCorruptRows}
	}
	name := TableName{Database: string(e.Table.Schema), Table: string(e.Table.Table)}
	first := r.txRows
	if !r.src.captures(name) {
		if name == r.src.signalName {
			return r.signalRows(e, images, deferred, step)
		}
		if deferred {
			n, ok := countRows(e.Table, e, pair, body)
			if ok {
				r.txRows += n
				return nil
			}
			if err := decodeWithGoMySQL(e, images); err != nil {
				return err
			}
		}
		r.txRows += len(e.Rows) / step
		return nil
	}
	if !r.inTx {
		r.begin(h)
	}
	id := r.src.tableID(name)
	t, schemaErr := r.table(ctx, name, id, e.Table)
	if schemaErr != nil && !errors.Is(schemaErr, errSchemaMismatch) && !errors.Is(schemaErr, errNoTable) &&
		!errors.Is(schemaErr, errUnknownCollation) {
		return schemaErr
	}
	if deferred {
		if schemaErr == nil {
			if plan, ok := t.planFor(e.Table); ok {
				return r.decodedRows(ctx, h, op, id, t, newRowDecoder(plan, e, pair, body), first)
			}
		}
		if err := decodeWithGoMySQL(e, images); err != nil {
			return err
		}
	}
	r.txRows = first + len(e.Rows)/step
	for i := 0; i+step <= len(e.Rows); i += step {
		ev := cdc.Event{Op: op, Table: id, CommitTime: r.txTime, TxID: r.txID,
			Position: r.position(h, r.ordinal(first, i/step))}
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
			} else if t.ambiguous != nil {
				ev.Malformed = t.ambiguous // its values go to the dead letter as read
			}
		}
		if err := r.emit(ctx, ev); err != nil {
			return err
		}
	}
	return nil
}

// decodedRows emits the rows of an event whose images d reads straight from the event.
func (r *reader) decodedRows(ctx context.Context, h *replication.EventHeader, op cdc.Op, id cdc.TableID, t *table, d *rowDecoder, first int) (err error) {
	defer func() {
		// A malformed image makes the decoder index past its data (the event is cut short or
		// does not follow its table map): an error like go-mysql's parse errors, not a crash.
		if p := recover(); p != nil {
			if _, ok := p.(runtime.Error); !ok && p != errCorruptRows {
				panic(p)
			}
			err = &binlogError{op: "decode rows event", err: errCorruptRows}
		}
	}()
	n := 0
	for ; d.more(); n++ {
		ev := cdc.Event{Op: op, Table: id, Schema: t.schema, CommitTime: r.txTime, TxID: r.txID,
			Position: r.position(h, r.ordinal(first, n))}
		var err error
		switch op {
		case cdc.Insert:
			ev.After, err = d.next(false)
		case cdc.Delete:
			ev.Before, err = d.next(false)
		case cdc.Update:
			var afterErr error
			ev.Before, err = d.next(false)
			ev.After, afterErr = d.next(true)
			if err == nil {
				err = afterErr
			}
		}
		if err != nil {
			ev.Before, ev.After, ev.Malformed = nil, nil, err
		} else if t.ambiguous != nil {
			ev.Malformed = t.ambiguous // its values go to the dead letter as read
		}
		r.txRows = first + n + 1
		if err := r.emit(ctx, ev); err != nil {
			return err
		}
	}
	return nil
}

// ordinal is the version ordinal of the i-th row of a rows event whose first row is the
// transaction's first-th: within the transaction for MariaDB GTID versions, within the event
// for file versions.
func (r *reader) ordinal(first, i int) int {
	if r.useGTID && r.src.opts.Flavor == MariaDB {
		return first + i
	}
	return i
}

// position derives a streamed row's position and version.
func (r *reader) position(h *replication.EventHeader, ordinal int) Position {
	p := Position{File: r.curFile, Pos: h.LogPos, Row: ordinal}
	var ok bool
	if r.useGTID && r.src.opts.Flavor == MariaDB {
		if r.txGTIDText == "" {
			r.txGTIDText = gtidText(r.txGTID)
		}
		p.GTID = r.txGTIDText
		p.version, ok = gtidVersion(r.txGTID.SequenceNumber, ordinal)
	} else {
		p.GTID = r.txMySQL
		if r.indexedFile != r.curFile || r.curIndex == nil {
			idx, err := binlogIndex(r.curFile)
			if err != nil {
				r.src.log.Error("mysqlcdc: cannot derive versions", "source", r.src.opts.SourceName, "error", err)
			}
			r.indexedFile, r.curIndex = r.curFile, &idx
		}
		p.version, ok = fileVersion(*r.curIndex, h.LogPos, ordinal)
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
// one rebuilt from the table map and the catalog. The description used is the name's last
// (relations.last): the columns a later schema event of the name carries.
func (r *reader) table(ctx context.Context, name TableName, id cdc.TableID, tm *replication.TableMapEvent) (*table, error) {
	cs, err := r.collations(ctx, tm)
	if err != nil {
		return nil, err
	}
	flavor := r.src.opts.Flavor
	if t := r.tables[name]; t != nil && t.agrees(tm, flavor, cs) {
		if r.rel.last[name] != t || r.rel.stale[name] {
			r.rel.describe(name, t) // after a projection (an older image) of the name, or DDL
		}
		return t, nil
	}
	key := tableMapKey(id, tm)
	if t := r.projections[key]; t != nil {
		r.rel.describe(name, t)
		return t, nil
	}
	t, err := r.cat.load(ctx, id)
	if errors.Is(err, errNoTable) {
		p, perr := r.goneTable(name, id, tm, cs)
		if perr != nil {
			return nil, r.unknownCollation(id, perr)
		}
		if p != nil {
			r.src.log.Info("mysqlcdc: row image of a table the catalog no longer has (renamed or dropped since); schema rebuilt from the table map",
				"source", r.src.opts.SourceName, "table", id.String())
			r.projections[key] = p
			r.rel.describe(name, p)
			r.ambiguousRows(id, p)
			return p, nil
		}
	}
	if err != nil {
		return nil, err
	}
	t.schema.Relation = r.rel.ids[name]
	r.tables[name] = t
	if !r.known[name] {
		// A table of a database captured whole, created after Open: from now on it is
		// captured like the others (a sink checks it on its first event).
		r.known[name] = true
		r.src.log.Info("mysqlcdc: capturing a table that appeared after the stream opened",
			"source", r.src.opts.SourceName, "table", id.String())
	}
	if t.agrees(tm, flavor, cs) {
		r.adopt(name, t)
		return t, nil
	}
	p, err := fromTableMap(t, tm, flavor, cs)
	if err != nil {
		return nil, r.unknownCollation(id, err)
	}
	if p != nil {
		r.src.log.Info("mysqlcdc: row image older than the catalog; schema rebuilt from the table map",
			"source", r.src.opts.SourceName, "table", id.String())
		r.projections[key] = p
		r.adopt(name, p)
		r.ambiguousRows(id, p)
		return p, nil
	}
	return nil, fmt.Errorf("%w: the binlog has %d columns, the catalog %d", errSchemaMismatch, tm.ColumnCount, len(t.codecs))
}

// collations returns the server's collation ids, read on the first table map that needs them
// (one with collations: binlog_row_metadata=FULL).
func (r *reader) collations(ctx context.Context, tm *replication.TableMapEvent) (collations, error) {
	if r.charsets != nil || len(tm.DefaultCharset) == 0 && len(tm.ColumnCharset) == 0 &&
		len(tm.EnumSetDefaultCharset) == 0 && len(tm.EnumSetColumnCharset) == 0 {
		return r.charsets, nil
	}
	cs, err := r.cat.collations(ctx)
	if err != nil {
		return nil, err
	}
	r.charsets = cs
	return cs, nil
}

// maxCollationWarnings bounds the tables unknownCollation logs (and remembers); past it their
// rows are still Malformed, dead-lettered with the reason, without a log line per rows event.
const maxCollationWarnings = 1024

// unknownCollation reports, once per table and collation error, rows that cannot be decoded
// since a column's character set is unknown (the events go out Malformed, so dead-lettered).
func (r *reader) unknownCollation(id cdc.TableID, err error) error {
	if !errors.Is(err, errUnknownCollation) {
		return err
	}
	k := id.String() + "\x00" + err.Error()
	if !r.warnedCollation[k] && len(r.warnedCollation) < maxCollationWarnings {
		if r.warnedCollation == nil {
			r.warnedCollation = map[string]bool{}
		}
		r.warnedCollation[k] = true
		r.src.log.Error("mysqlcdc: rows of a table whose character set cannot be told are delivered malformed (dead-lettered): "+
			"re-snapshot the table once the server lists the collation",
			"source", r.src.opts.SourceName, "table", id.String(), "error", err)
	}
	return err
}

// ambiguousRows reports, once per schema rebuilt from a table map, rows delivered malformed
// because a column's type cannot be told (ErrAmbiguousType).
func (r *reader) ambiguousRows(id cdc.TableID, p *table) {
	if p.ambiguous != nil {
		r.src.log.Error("mysqlcdc: rows of a table whose column types cannot be told are delivered malformed (dead-lettered, values as the binlog has them)",
			"source", r.src.opts.SourceName, "table", id.String(), "error", p.ambiguous)
	}
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
