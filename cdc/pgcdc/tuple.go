package pgcdc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/tributary-dev/tributary/cdc"
)

// Row changes are the stream's hot path, so Insert, Update and Delete messages are read here,
// straight from the XLogData bytes, instead of through pglogrepl.Parse, which copies every
// column into its own allocation before the decoders copy it again. pglogrepl still parses
// every other message.

// The value kinds of a pgoutput TupleData column.
const (
	tupleNull   = 'n' // NULL
	tupleToast  = 'u' // an unchanged TOASTed value the server did not send
	tupleText   = 't' // text form: Int32 length, then the bytes
	tupleBinary = 'b' // binary form (never requested, so never sent): Int32 length, then the bytes
)

// errTupleFraming means a change message does not parse: the stream cannot go on, since the
// next message's start is unknown.
var errTupleFraming = errors.New("pgcdc: pgoutput: truncated or malformed row change message")

// tupleColumn reads the column starting at src[pos]: its kind, its value (text and binary
// kinds) and the position after it; ok is false when the column is cut short or of no known
// kind.
func tupleColumn(src []byte, pos int) (kind byte, data []byte, next int, ok bool) {
	if pos >= len(src) {
		return 0, nil, 0, false
	}
	kind = src[pos]
	pos++
	switch kind {
	case tupleNull, tupleToast:
		return kind, nil, pos, true
	case tupleText, tupleBinary:
		if len(src)-pos < 4 {
			return 0, nil, 0, false
		}
		n := binary.BigEndian.Uint32(src[pos:])
		pos += 4
		if uint64(n) > uint64(len(src)-pos) {
			return 0, nil, 0, false
		}
		end := pos + int(n)
		return kind, src[pos:end:end], end, true
	}
	return 0, nil, 0, false
}

// decodeTupleData decodes the TupleData at the start of src under ti. It returns the row,
// what follows the tuple, the reason the row does not decode (the event is Malformed: a column
// count other than the schema's, a value not in its text form, an unchanged TOASTed value
// outside the new row of an update), and a framing error (the stream must stop). In the new
// row of an update (update set) an unchanged TOASTed value is taken from before when that
// holds it (REPLICA IDENTITY FULL), else it is cdc.Unchanged{}.
func decodeTupleData(ti *tableInfo, src []byte, before []cdc.Value, update bool) (row []cdc.Value, rest []byte, bad, err error) {
	if len(src) < 2 {
		return nil, nil, nil, errTupleFraming
	}
	ncols := int(binary.BigEndian.Uint16(src))
	// The columns are framed once, into a stack array for tables of usual width.
	type column struct {
		kind byte
		data []byte
	}
	var small [32]column
	cols := small[:0]
	if ncols > len(small) {
		cols = make([]column, 0, ncols)
	}
	pos, shared := 2, 0
	for i := range ncols {
		kind, data, next, ok := tupleColumn(src, pos)
		if !ok {
			return nil, nil, nil, errTupleFraming
		}
		if kind == tupleText && ti.sharedDecoder(i) != nil {
			shared += len(data)
		}
		cols = append(cols, column{kind, data})
		pos = next
	}
	rest = src[pos:]
	if ncols != len(ti.decoders) {
		return nil, rest, fmt.Errorf("pgcdc: tuple has %d columns, schema of %s %d", ncols, ti.schema.ID, len(ti.decoders)), nil
	}
	var text string
	if shared > 0 {
		var b strings.Builder
		b.Grow(shared)
		for i, c := range cols {
			if c.kind == tupleText && ti.sharedDecoder(i) != nil {
				b.Write(c.data)
			}
		}
		text = b.String()
	}
	row = make([]cdc.Value, ncols)
	off := 0
	for i, c := range cols {
		var err error
		switch c.kind {
		case tupleNull:
		case tupleText:
			if dec := ti.sharedDecoder(i); dec != nil {
				row[i], err = dec(text[off : off+len(c.data)])
				off += len(c.data)
			} else {
				row[i], err = ti.decoders[i](c.data)
			}
		case tupleToast:
			switch {
			case before != nil && before[i] != nil:
				row[i] = before[i]
			case update:
				row[i] = cdc.Unchanged{}
			default:
				err = errUnchangedToast
			}
		default:
			err = fmt.Errorf("unexpected tuple value kind %q", c.kind)
		}
		if err != nil && bad == nil {
			bad = fmt.Errorf("pgcdc: column %q of %s: %w", ti.schema.Columns[i].Name, ti.schema.ID, err)
		}
	}
	return row, rest, bad, nil
}

// changeFrame is a row change message of protocol 1 split up to its tuples: Insert ('I',
// relation, 'N', new), Update ('U', relation, optionally 'K' or 'O' and the old key or row,
// 'N', new) and Delete ('D', relation, 'K' or 'O', old).
type changeFrame struct {
	relID uint32
	// old starts at the old tuple (nil when absent). Where the new tuple of an update with an
	// old one starts is known only once the old one is read: it follows it behind an 'N'.
	old    []byte
	new    []byte // the new tuple when there is no old one (inserts, most updates)
	hasNew bool
	update bool
}

// parseChangeFrame reads the framing of a row change message, up to its tuples.
func parseChangeFrame(wal []byte) (changeFrame, error) {
	if len(wal) < 6 {
		return changeFrame{}, errTupleFraming
	}
	f := changeFrame{relID: binary.BigEndian.Uint32(wal[1:5])}
	marker, body := wal[5], wal[6:]
	switch wal[0] {
	case 'I':
		if marker != 'N' {
			return changeFrame{}, errTupleFraming
		}
		f.new, f.hasNew = body, true
	case 'U':
		f.update = true
		switch marker {
		case 'K', 'O':
			f.old, f.hasNew = body, true
		case 'N':
			f.new, f.hasNew = body, true
		default:
			return changeFrame{}, errTupleFraming
		}
	case 'D':
		if marker != 'K' && marker != 'O' {
			return changeFrame{}, errTupleFraming
		}
		f.old = body
	default:
		return changeFrame{}, errTupleFraming
	}
	return f, nil
}

// decodeChange decodes a change frame's rows under ti: before from the old tuple (if any),
// after from the new one (if any); bad is the row's decoding failure, err a framing one.
func decodeChange(ti *tableInfo, f changeFrame) (before, after []cdc.Value, bad, err error) {
	newTuple := f.new
	if f.old != nil {
		var rest []byte
		before, rest, bad, err = decodeTupleData(ti, f.old, nil, false)
		if err != nil {
			return nil, nil, nil, err
		}
		if f.hasNew {
			if len(rest) == 0 || rest[0] != 'N' {
				return nil, nil, nil, errTupleFraming
			}
			newTuple = rest[1:]
		}
	}
	if f.hasNew {
		var bad2 error
		after, _, bad2, err = decodeTupleData(ti, newTuple, before, f.update)
		if err != nil {
			return nil, nil, nil, err
		}
		if bad == nil {
			bad = bad2
		}
	}
	return before, after, bad, nil
}

// rowText copies the texts of a row's shared-string columns (vals[i] for which ti has a
// shared decoder; nil is NULL) into one string, in column order.
func rowText(ti *tableInfo, vals [][]byte) string {
	n := 0
	for i, v := range vals {
		if v != nil && ti.sharedDecoder(i) != nil {
			n += len(v)
		}
	}
	if n == 0 {
		return ""
	}
	var b strings.Builder
	b.Grow(n)
	for i, v := range vals {
		if v != nil && ti.sharedDecoder(i) != nil {
			b.Write(v)
		}
	}
	return b.String()
}
