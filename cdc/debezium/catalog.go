package debezium

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tributary-dev/tributary/cdc"
)

// Records without an embedded schema (JsonConverter with schemas.enable=false) carry only
// values: the columns come from the source database's catalog (Options.Catalog), read when a
// table's first such record arrives and again when a record's fields differ from the columns
// known, and each value is read in the representation Debezium gives that column by default
// (Options.DecimalStrings says which decimal one).

// catalogTimeout bounds one catalog read.
const catalogTimeout = 30 * time.Second

// errCatalog wraps a failure to read the catalog: the stream fails (and is reopened) rather
// than dead-lettering records a later read can decode.
var errCatalog = errors.New("reading the source's catalog failed")

type catalogEntry struct {
	shape *tableShape
	// dropped are fields records hold that the catalog, read again for them, does not have
	// (columns dropped since those records were written): they are left out without reading
	// the catalog again.
	dropped map[string]bool
}

// catalogCache holds the tables read from the catalog for a stream's decoders (one per
// partition), so that a table is read once, not once per partition. A published entry is
// never modified: a reread or a field found dropped replaces it.
type catalogCache struct {
	mu sync.Mutex
	m  map[cdc.TableID]*catalogEntry
}

func newCatalogCache() *catalogCache {
	return &catalogCache{m: map[cdc.TableID]*catalogEntry{}}
}

// catalogShape returns the entry of table id, reading the catalog when there is none or when
// the entry is still stale (a record held a field it lacks; another decoder may have read it
// again meanwhile).
func (d *decoder) catalogShape(ctx context.Context, id cdc.TableID, connector string, stale *catalogEntry) (*catalogEntry, error) {
	c := d.catalogShapes
	c.mu.Lock()
	defer c.mu.Unlock()
	old, ok := c.m[id]
	if ok && old != stale {
		return old, nil
	}
	ctx, cancel := context.WithTimeout(ctx, catalogTimeout)
	defer cancel()
	s, err := d.catalog.LoadSchema(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("%w: table %s: %w", errCatalog, id, err)
	}
	sh := &tableShape{schema: s, columns: make([]column, 0, len(s.Columns)), byName: make(map[string]int, len(s.Columns))}
	o := d.edge
	var refused []cdc.StartProblem
	for i := range s.Columns {
		c := &s.Columns[i]
		if problem, fix := catalogRefusal(connector, c, d.decimalString, o); problem != "" {
			refused = append(refused, cdc.StartProblem{Table: id, Problem: problem, Fix: fix})
			continue
		}
		col := column{col: *c, conv: nativeConverter(connector, c, d.decimalString), rules: rulesFor(connector, c, !d.decimalString, o)}
		sh.add(connector, col)
	}
	if len(refused) > 0 {
		return nil, &configError{&cdc.StartError{Component: "debezium", Problems: refused}}
	}
	if connector == "postgresql" && !o.plainDates {
		sh.snapshotProblem, sh.snapshotFix = snapshotDateProblem(s)
	}
	e := &catalogEntry{shape: sh, dropped: map[string]bool{}}
	if ok {
		e.dropped = old.dropped // a reread keeps what earlier rereads found dropped
	}
	c.m[id] = e
	return e, nil
}

// markDropped returns entry e of table id with field name dropped, replacing e in the cache.
func (d *decoder) markDropped(id cdc.TableID, e *catalogEntry, name string) *catalogEntry {
	c := d.catalogShapes
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur := c.m[id]; cur != nil && cur.shape == e.shape && cur.dropped[name] {
		return cur // another decoder did it
	}
	dropped := make(map[string]bool, len(e.dropped)+1)
	for k := range e.dropped {
		dropped[k] = true
	}
	dropped[name] = true
	n := &catalogEntry{shape: e.shape, dropped: dropped}
	c.m[id] = n
	return n
}

// byJSONShape picks a conversion by the value's JSON type, for columns whose representation
// depends on a connector setting the record does not name.
func byJSONShape(str, num, obj, boolean converter) converter {
	return func(raw []byte) (cdc.Value, error) {
		var conv converter
		switch {
		case len(raw) == 0:
		case raw[0] == '"':
			conv = str
		case raw[0] == '{':
			conv = obj
		case raw[0] == 't' || raw[0] == 'f':
			conv = boolean
		default:
			conv = num
		}
		if conv == nil {
			return nil, errors.New("a value of an unexpected JSON type for its column")
		}
		return conv(raw)
	}
}

// nativeConverter is the conversion of a column the catalog describes (the native source's
// cdc.Column), from the representation Debezium gives its type by default: decimals precise
// (or as text with decimalString), temporal types adaptive, binary as base64, BIGINT
// UNSIGNED as a long or (precise) a decimal, intervals as text or microseconds.
func nativeConverter(connector string, c *cdc.Column, decimalString bool) converter {
	pg := connector == "postgresql"
	switch c.Kind {
	case cdc.KindBool:
		return boolConv
	case cdc.KindInt:
		return intConv(c)
	case cdc.KindUint:
		if c.Bits == 64 {
			return byJSONShape(decimalConv(c, 0), intConv(c), nil, nil)
		}
		return intConv(c)
	case cdc.KindFloat:
		return floatConv
	case cdc.KindDecimal:
		if decimalString {
			return byJSONShape(decimalStringConv, failing("a decimal as a double (set decimal.handling.mode=precise or string)"), nil, nil)
		}
		return byJSONShape(decimalConv(c, c.Scale), failing("a decimal as a double (set decimal.handling.mode=precise or string)"),
			variableDecimalConv(c), nil)
	case cdc.KindText, cdc.KindEnum, cdc.KindSet, cdc.KindUUID:
		return stringConv
	case cdc.KindBinary:
		return byJSONShape(bytesConv(c), nil, geometryConv, nil)
	case cdc.KindDate:
		if pg {
			return pgDateConv
		}
		return dateConv
	case cdc.KindTime:
		if pg && c.Precision <= 3 {
			return timeConv(time.Millisecond)
		}
		return timeConv(time.Microsecond)
	case cdc.KindDateTime:
		unit := time.Microsecond
		if c.Precision <= 3 {
			unit = time.Millisecond
		}
		if pg {
			return pgDateTimeConv(unit)
		}
		return dateTimeConv(unit)
	case cdc.KindTimestamp:
		return zonedTimestampConv()
	case cdc.KindJSON:
		return jsonConv
	case cdc.KindBit:
		if !pg && c.Bits == 1 {
			return byJSONShape(bitsConv(c, false), nil, nil, boolBitConv)
		}
		return bitsConv(c, pg)
	case cdc.KindArray:
		if c.Elem == nil {
			return failing("an array without an element type")
		}
		elem := nativeConverter(connector, c.Elem, decimalString)
		if pg {
			return pgArrayConv(elem, pgNullsAreNull(c.Elem))
		}
		return arrayConv(elem)
	}
	// KindOther: the source's text form.
	t := strings.ToLower(c.SourceType)
	switch {
	case pg && strings.HasPrefix(t, "interval"):
		return byJSONShape(isoIntervalConv, failing("an interval as microseconds (set interval.handling.mode=string)"), nil, nil)
	case pg && t == "money":
		// Debezium's money is a decimal of money.fraction.digits (2): its digits, as with an
		// embedded schema, not PostgreSQL's "$12.50".
		return byJSONShape(decimalConv(c, 2), nil, nil, nil)
	case pg && t == "point":
		return byJSONShape(stringConv, nil, pointConv, nil)
	}
	return stringConv
}
