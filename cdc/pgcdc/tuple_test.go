package pgcdc

import (
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/tributary-dev/tributary/cdc"
)

// pgoutput messages (protocol 1) built by hand, for tests that need no server.

type testCol struct {
	name string
	oid  uint32
	key  bool
}

var testCols = []testCol{
	{"id", pgtype.Int4OID, true},
	{"name", pgtype.TextOID, false},
	{"tags", pgtype.TextArrayOID, false},
	{"doc", pgtype.JSONBOID, false},
	{"at", pgtype.TimestamptzOID, false},
	{"blob", pgtype.ByteaOID, false},
	{"price", pgtype.NumericOID, false},
}

// testTable is the tableInfo of testCols, built from the built-in types (no catalog).
func testTable(id cdc.TableID) *tableInfo {
	ti := &tableInfo{schema: &cdc.TableSchema{ID: id}}
	for i, c := range testCols {
		td, _ := builtinType(c.oid, -1)
		col := td.col
		col.Name, col.Nullable = c.name, !c.key
		ti.schema.Columns = append(ti.schema.Columns, col)
		ti.oids = append(ti.oids, c.oid)
		ti.typmods = append(ti.typmods, -1)
		ti.decoders = append(ti.decoders, td.decode)
		ti.shared = append(ti.shared, td.shared)
		if c.key {
			ti.schema.PrimaryKey = append(ti.schema.PrimaryKey, i)
		}
	}
	return ti
}

// cachedTestTable caches testTable for table in src as the relation msgRelation(rel, ...)
// describes, so that relation message needs no catalog.
func cachedTestTable(src *Source, table Table, rel uint32) {
	ti := testTable(src.tableID("db", table))
	ti.schema.Relation = relationID(rel)
	src.remember(ti)
}

func cstring(b []byte, s string) []byte { return append(append(b, s...), 0) }

func msgRelation(relID uint32, schema, name string) []byte {
	b := binary.BigEndian.AppendUint32([]byte{'R'}, relID)
	b = cstring(cstring(b, schema), name)
	b = append(b, 'd')
	b = binary.BigEndian.AppendUint16(b, uint16(len(testCols)))
	for _, c := range testCols {
		flags := byte(0)
		if c.key {
			flags = 1
		}
		b = cstring(append(b, flags), c.name)
		b = binary.BigEndian.AppendUint32(b, c.oid)
		b = binary.BigEndian.AppendUint32(b, 0xffffffff) // typmod -1
	}
	return b
}

func msgBegin(final uint64, xid uint32) []byte {
	b := binary.BigEndian.AppendUint64([]byte{'B'}, final)
	b = binary.BigEndian.AppendUint64(b, 0)
	return binary.BigEndian.AppendUint32(b, xid)
}

func msgCommit(lsn, end uint64) []byte {
	b := binary.BigEndian.AppendUint64([]byte{'C', 0}, lsn)
	b = binary.BigEndian.AppendUint64(b, end)
	return binary.BigEndian.AppendUint64(b, 0)
}

// tv is one tuple column: kind 'n', 'u', 't' or 'b' and, for the last two, its value.
type tv struct {
	kind byte
	data string
}

func txt(s string) tv { return tv{'t', s} }

var null, toast = tv{kind: 'n'}, tv{kind: 'u'}

func tuple(cols ...tv) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(len(cols)))
	for _, c := range cols {
		b = append(b, c.kind)
		if c.kind == 't' || c.kind == 'b' {
			b = binary.BigEndian.AppendUint32(b, uint32(len(c.data)))
			b = append(b, c.data...)
		}
	}
	return b
}

func msgInsert(relID uint32, row []byte) []byte {
	return append(append(binary.BigEndian.AppendUint32([]byte{'I'}, relID), 'N'), row...)
}

// msgUpdate builds an update; oldKind 0 means no old tuple.
func msgUpdate(relID uint32, oldKind byte, old, row []byte) []byte {
	b := binary.BigEndian.AppendUint32([]byte{'U'}, relID)
	if oldKind != 0 {
		b = append(append(b, oldKind), old...)
	}
	return append(append(b, 'N'), row...)
}

func msgDelete(relID uint32, oldKind byte, old []byte) []byte {
	return append(append(binary.BigEndian.AppendUint32([]byte{'D'}, relID), oldKind), old...)
}

// xlogData wraps a pgoutput message in an XLogData frame stamped with at.
func xlogData(at uint64, msg []byte) []byte {
	b := binary.BigEndian.AppendUint64([]byte{'w'}, at)
	b = binary.BigEndian.AppendUint64(b, at)
	b = binary.BigEndian.AppendUint64(b, 0)
	return append(b, msg...)
}

var fullRow = []tv{
	txt("42"), txt("a name"), txt(`{"x y","q\"z",NULL,plain}`), txt(`{"k": [1, 2]}`),
	txt("2024-05-06 07:08:09.5+00"), txt(`\x00ff`), txt("12.50"),
}

func fullRowValues() []cdc.Value {
	return []cdc.Value{
		int64(42), "a name", []cdc.Value{"x y", `q"z`, nil, "plain"}, cdc.RawJSON(`{"k": [1, 2]}`),
		cdc.EpochMicros(time.Date(2024, 5, 6, 7, 8, 9, 500000000, time.UTC).UnixMicro()), cdc.Base64("AP8="), "12.50",
	}
}

// keyOnly is the old key tuple of the default replica identity: the key, every other column null.
func keyOnly(id string) []tv {
	row := []tv{txt(id)}
	for range len(testCols) - 1 {
		row = append(row, null)
	}
	return row
}

func TestChangeMessagesDecode(t *testing.T) {
	ti := testTable(cdc.TableID{Schema: "public", Table: "t"})
	want := fullRowValues()
	withToast := append([]tv(nil), fullRow...)
	withToast[3] = toast
	wantKey := make([]cdc.Value, len(testCols))
	wantKey[0] = int64(7)
	wantUnchanged := append([]cdc.Value(nil), want...)
	wantUnchanged[3] = cdc.Unchanged{}
	cases := []struct {
		name          string
		msg           []byte
		before, after []cdc.Value
		bad           error // nil: the row decodes; errDecode etc.: errors.Is target
		badText       string
	}{
		{name: "insert", msg: msgInsert(1, tuple(fullRow...)), after: want},
		{name: "insert with nulls", msg: msgInsert(1, tuple(keyOnly("7")...)), after: wantKey},
		{name: "update", msg: msgUpdate(1, 0, nil, tuple(fullRow...)), after: want},
		{name: "update of the key", msg: msgUpdate(1, 'K', tuple(keyOnly("7")...), tuple(fullRow...)), before: wantKey, after: want},
		{name: "update, toast from the full old row", msg: msgUpdate(1, 'O', tuple(fullRow...), tuple(withToast...)), before: want, after: want},
		{name: "update, toast without an old value", msg: msgUpdate(1, 0, nil, tuple(withToast...)), after: wantUnchanged},
		{
			name: "update of the key, toast not in the old key", msg: msgUpdate(1, 'K', tuple(keyOnly("7")...), tuple(withToast...)),
			before: wantKey, after: wantUnchanged,
		},
		{
			name: "toast in an insert", msg: msgInsert(1, tuple(withToast...)),
			after: append(append(append([]cdc.Value(nil), want[:3]...), nil), want[4:]...), bad: errUnchangedToast,
		},
		{
			name: "toast in an old row", msg: msgDelete(1, 'O', tuple(withToast...)),
			before: append(append(append([]cdc.Value(nil), want[:3]...), nil), want[4:]...), bad: errUnchangedToast,
		},
		{name: "delete by key", msg: msgDelete(1, 'K', tuple(keyOnly("7")...)), before: wantKey},
		{name: "delete of the full row", msg: msgDelete(1, 'O', tuple(fullRow...)), before: want},
		{
			name: "value not in its text form", msg: msgInsert(1, tuple(append([]tv{txt("x1")}, fullRow[1:]...)...)),
			after: append([]cdc.Value{nil}, want[1:]...), bad: errDecode, badText: `column "id"`,
		},
		{
			name: "binary value", msg: msgInsert(1, tuple(append([]tv{{'b', "\x00\x00\x00\x2a"}}, fullRow[1:]...)...)),
			after: append([]cdc.Value{nil}, want[1:]...), badText: "unexpected tuple value kind 'b'",
		},
		{
			name: "old tuple of another width", msg: msgUpdate(1, 'K', tuple(txt("7")), tuple(fullRow...)),
			after: want, badText: "tuple has 1 columns",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := parseChangeFrame(c.msg)
			if err != nil {
				t.Fatal(err)
			}
			before, after, bad, err := decodeChange(ti, f)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(before, c.before) || !reflect.DeepEqual(after, c.after) {
				t.Errorf("before %#v\nafter %#v\nwant %#v\nand %#v", before, after, c.before, c.after)
			}
			switch {
			case c.bad == nil && c.badText == "" && bad != nil:
				t.Errorf("malformed: %v", bad)
			case c.bad != nil && !errors.Is(bad, c.bad):
				t.Errorf("malformed: %v, want %v", bad, c.bad)
			case c.badText != "" && (bad == nil || !strings.Contains(bad.Error(), c.badText)):
				t.Errorf("malformed: %v, want it to say %q", bad, c.badText)
			}
			if bad != nil && strings.Contains(bad.Error(), "x1") {
				t.Errorf("the error quotes the value: %v", bad)
			}
		})
	}
}

// TestDirectReaderAgreesWithPglogrepl decodes each message both ways: straight from its bytes
// (the stream's path) and through pglogrepl.Parse with every column decoded from its own bytes
// (the path it replaced), which must give the same rows.
func TestDirectReaderAgreesWithPglogrepl(t *testing.T) {
	ti := testTable(cdc.TableID{Schema: "public", Table: "t"})
	withToast := append([]tv(nil), fullRow...)
	withToast[1] = toast
	odd := []tv{txt("-3"), txt(""), txt(`[0:1]={"",NULL}`), txt("[]"), txt("infinity"), txt(`\x`), null}
	msgs := [][]byte{
		msgInsert(1, tuple(fullRow...)),
		msgInsert(1, tuple(odd...)),
		msgUpdate(1, 0, nil, tuple(odd...)),
		msgUpdate(1, 'K', tuple(keyOnly("9")...), tuple(fullRow...)),
		msgUpdate(1, 'O', tuple(fullRow...), tuple(withToast...)),
		msgUpdate(1, 0, nil, tuple(withToast...)),
		msgUpdate(1, 'K', tuple(keyOnly("9")...), tuple(withToast...)),
		msgDelete(1, 'K', tuple(keyOnly("9")...)),
		msgDelete(1, 'O', tuple(odd...)),
	}
	for _, m := range msgs {
		wantBefore, wantAfter := decodeWithPglogrepl(t, ti, m)
		f, err := parseChangeFrame(m)
		if err != nil {
			t.Fatal(err)
		}
		before, after, _, err := decodeChange(ti, f)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(before, wantBefore) || !reflect.DeepEqual(after, wantAfter) {
			t.Errorf("%c: %#v / %#v\nwant %#v / %#v", m[0], before, after, wantBefore, wantAfter)
		}
	}
}

// decodeWithPglogrepl is the reference decoding of a row change message: pglogrepl.Parse, then
// every text column through its table's decoder for bytes; an unchanged TOASTed value of an
// update's new row from the old row when that has it, else cdc.Unchanged{}.
func decodeWithPglogrepl(tb testing.TB, ti *tableInfo, msg []byte) (before, after []cdc.Value) {
	tb.Helper()
	parsed, err := pglogrepl.Parse(msg)
	if err != nil {
		tb.Fatal(err)
	}
	decode := func(tup *pglogrepl.TupleData, before []cdc.Value, update bool) []cdc.Value {
		if tup == nil {
			return nil
		}
		row := make([]cdc.Value, len(tup.Columns))
		for i, c := range tup.Columns {
			switch c.DataType {
			case 't':
				row[i], _ = ti.decoders[i](c.Data)
			case 'u':
				switch {
				case before != nil && before[i] != nil:
					row[i] = before[i]
				case update:
					row[i] = cdc.Unchanged{}
				}
			}
		}
		return row
	}
	switch p := parsed.(type) {
	case *pglogrepl.InsertMessage:
		after = decode(p.Tuple, nil, false)
	case *pglogrepl.UpdateMessage:
		before = decode(p.OldTuple, nil, false)
		after = decode(p.NewTuple, before, true)
	case *pglogrepl.DeleteMessage:
		before = decode(p.OldTuple, nil, false)
	default:
		tb.Fatalf("%c is no row change", msg[0])
	}
	return before, after
}

// TestBrokenChangeMessagesStopTheStream: a message cut anywhere, an unknown value kind or a
// wrong marker is a framing error (the stream cannot find the next message), never a panic
// and never a quietly shortened row.
func TestBrokenChangeMessagesStopTheStream(t *testing.T) {
	ti := testTable(cdc.TableID{Schema: "public", Table: "t"})
	whole := [][]byte{
		msgInsert(1, tuple(fullRow...)),
		msgUpdate(1, 'K', tuple(keyOnly("7")...), tuple(fullRow...)),
		msgDelete(1, 'O', tuple(fullRow...)),
	}
	var broken [][]byte
	for _, m := range whole {
		for n := range len(m) {
			broken = append(broken, m[:n])
		}
	}
	unknownKind := msgInsert(1, tuple(fullRow...))
	unknownKind[8] = 'x' // the first column's kind
	broken = append(broken,
		unknownKind,
		append(msgInsert(1, nil)[:5], 'K'), // insert without 'N'
		append(msgUpdate(1, 'K', tuple(keyOnly("7")...), nil)[:5], 'X'), // unknown update marker
		append(msgDelete(1, 'K', nil)[:5], 'N'),                         // delete without an old row
	)
	noNew := msgUpdate(1, 'K', tuple(keyOnly("7")...), tuple(fullRow...))
	noNew[len(noNew)-len(tuple(fullRow...))-1] = 'X' // the 'N' after the old key
	broken = append(broken, noNew)
	for _, m := range broken {
		f, err := parseChangeFrame(m)
		if err == nil {
			_, _, _, err = decodeChange(ti, f)
		}
		if !errors.Is(err, errTupleFraming) {
			t.Errorf("%q: %v, want a framing error", m, err)
		}
	}
}

// TestDecodeRowSharesText: the snapshot's rows go through the same shared-string decoders as
// the stream's and give what each column's own decoder gives.
func TestDecodeRowSharesText(t *testing.T) {
	ti := testTable(cdc.TableID{Schema: "public", Table: "t"})
	vals := make([][]byte, len(fullRow))
	for i, c := range fullRow {
		vals[i] = []byte(c.data)
	}
	vals[1] = nil // NULL between shared columns
	row, err := decodeRow(ti, vals)
	if err != nil {
		t.Fatal(err)
	}
	want := fullRowValues()
	want[1] = nil
	if !reflect.DeepEqual(row, want) {
		t.Errorf("%#v\nwant %#v", row, want)
	}
}
