package pgcdc

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/tributary-dev/tributary/cdc"
)

// The fuzz targets of the pgoutput decoders. Their seeds live in testdata/fuzz/<target>/:
// "pg-*" are messages the real server sent (TestCaptureFuzzSeeds, TRIBUTARY_FUZZ_CAPTURE=1, writes them), the others are
// hand-made or what fuzzing found.

// fuzzTable is the tableInfo a Relation message describes, every column through its built-in
// type (an unknown type is text), as the stream would have it without a catalog; nil when rel
// is no Relation message. Relations wider than 256 columns are cut (fuzzing speed).
func fuzzTable(rel []byte) *tableInfo {
	if len(rel) == 0 || rel[0] != 'R' {
		return nil
	}
	msg, err := parseMessage(rel)
	if err != nil {
		return nil
	}
	m, ok := msg.(*pglogrepl.RelationMessage)
	if !ok || len(m.Columns) > 256 {
		return nil
	}
	ti := &tableInfo{schema: &cdc.TableSchema{ID: cdc.TableID{Schema: m.Namespace, Table: m.RelationName}}}
	for i, c := range m.Columns {
		td, ok := builtinType(c.DataType, c.TypeModifier)
		if !ok {
			td = stringType(cdc.Column{Kind: cdc.KindOther})
		}
		col := td.col
		col.Name = c.Name
		ti.schema.Columns = append(ti.schema.Columns, col)
		ti.oids = append(ti.oids, c.DataType)
		ti.typmods = append(ti.typmods, c.TypeModifier)
		ti.decoders = append(ti.decoders, td.decode)
		ti.shared = append(ti.shared, td.shared)
		if c.Flags&1 != 0 {
			ti.schema.PrimaryKey = append(ti.schema.PrimaryKey, i)
		}
	}
	return ti
}

// pglogreplParse is pglogrepl.Parse that reports a panic as an error (the reference must not
// stop the fuzzer on the inputs it cannot read).
func pglogreplParse(wal []byte) (msg pglogrepl.Message, err error) {
	defer func() {
		if r := recover(); r != nil {
			msg, err = nil, errors.New("pglogrepl panicked")
		}
	}()
	return pglogrepl.Parse(wal)
}

// tupleTexts lists the text values of a change message's tuples as pglogrepl reads them.
func tupleTexts(msg pglogrepl.Message) [][]byte {
	var out [][]byte
	add := func(t *pglogrepl.TupleData) {
		if t == nil {
			return
		}
		for _, c := range t.Columns {
			if c.DataType == 't' {
				out = append(out, c.Data)
			}
		}
	}
	switch m := msg.(type) {
	case *pglogrepl.InsertMessage:
		add(m.Tuple)
	case *pglogrepl.UpdateMessage:
		add(m.OldTuple)
		add(m.NewTuple)
	case *pglogrepl.DeleteMessage:
		add(m.OldTuple)
	}
	return out
}

// assertNoValue fails when text, an error's message, quotes a value of six bytes or more that
// the table's description (schema, table and column names, which errors may name) does not
// also hold.
func assertNoValue(t *testing.T, text string, names string, values [][]byte) {
	t.Helper()
	for _, v := range values {
		if len(v) >= 6 && strings.Contains(text, string(v)) && !strings.Contains(names, string(v)) {
			t.Fatalf("error quotes a value of the input: %q", text)
		}
	}
}

// FuzzPgoutputChange decodes a row change message (Insert, Update, Delete) under the table a
// Relation message describes, through the stream's own reader (tuple.go): it never panics, a
// message it frames pglogrepl frames too, a row that decodes equals pglogrepl's reading of
// it, and no error quotes a value. Truncate messages go through parseMessage.
func FuzzPgoutputChange(f *testing.F) {
	rel := msgRelation(16385, "public", "fz")
	for _, row := range [][]tv{fullRow, keyOnly("7")} {
		f.Add(rel, msgInsert(16385, tuple(row...)))
		f.Add(rel, msgUpdate(16385, 'K', tuple(keyOnly("7")...), tuple(row...)))
		f.Add(rel, msgDelete(16385, 'O', tuple(row...)))
	}
	f.Add(rel, msgUpdate(16385, 0, nil, tuple(txt("1"), toast, null, null, null, null, null)))
	f.Add(rel, []byte{'T', 0, 0, 0, 1, 0, 0, 0, 0x40, 0x01})
	f.Fuzz(func(t *testing.T, rel, wal []byte) {
		ti := fuzzTable(rel)
		if ti == nil {
			ti = testTable(cdc.TableID{Schema: "public", Table: "fz"})
		}
		names := string(rel)
		if len(wal) > 0 && wal[0] == 'T' {
			msg, err := parseMessage(wal)
			if err == nil {
				m := msg.(*pglogrepl.TruncateMessage)
				if int(m.RelationNum) != len(m.RelationIDs) || len(wal) != 6+4*len(m.RelationIDs) {
					t.Fatalf("truncate of %d relations read as %d from %d bytes", m.RelationNum, len(m.RelationIDs), len(wal))
				}
			} else if !errors.Is(err, errMessageFraming) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		fr, err := parseChangeFrame(wal)
		if err != nil {
			if !errors.Is(err, errTupleFraming) {
				t.Fatalf("unclassified framing error %v", err)
			}
			return
		}
		before, after, bad, err := decodeChange(ti, fr)
		if err != nil {
			if !errors.Is(err, errTupleFraming) {
				t.Fatalf("unclassified framing error %v", err)
			}
			return
		}
		// pglogrepl only reads what the stream's reader framed: it allocates a column's
		// stated length before it looks whether the message holds it (up to 4 GiB a column).
		ref, rerr := pglogreplParse(wal)
		var texts [][]byte
		if rerr == nil {
			texts = tupleTexts(ref)
		}
		if rerr != nil {
			t.Fatalf("the stream's reader framed a message pglogrepl does not: %v", rerr)
		}
		if bad != nil {
			assertNoValue(t, bad.Error(), names, texts)
			return
		}
		if fr.update && fr.old == nil && before != nil {
			t.Fatal("an update without an old tuple has a before row")
		}
		wb, wa := decodeWithPglogrepl(t, ti, wal)
		if !reflect.DeepEqual(before, wb) || !reflect.DeepEqual(after, wa) {
			t.Fatalf("the stream's reader and pglogrepl disagree:\nbefore %#v\n   vs %#v\nafter  %#v\n   vs %#v", before, wb, after, wa)
		}
	})
}

// FuzzPgoutputMessage reads any pgoutput message (Begin, Commit, Relation, Truncate, Origin,
// Type, logical decoding messages, row changes) the way handleCopyData does: it never panics,
// never allocates from a count the message does not back, and fails only with a framing error.
func FuzzPgoutputMessage(f *testing.F) {
	f.Add(msgRelation(16385, "public", "fz"))
	f.Add(msgBegin(0x1000, 7))
	f.Add(msgCommit(0x1000, 0x1010))
	f.Add(msgInsert(16385, tuple(fullRow...)))
	f.Add([]byte{'T', 0, 0, 0, 2, 0, 0, 0, 0x40, 0x01, 0, 0, 0x40, 0x02})
	f.Add([]byte{'M', 1, 0, 0, 0, 0, 0, 0, 0x10, 0, 'p', 0, 0, 0, 0, 2, 'h', 'i'})
	f.Fuzz(func(t *testing.T, wal []byte) {
		if len(wal) == 0 {
			return
		}
		switch wal[0] {
		case 'I', 'U', 'D':
			fr, err := parseChangeFrame(wal)
			if err == nil {
				_, _, _, err = decodeChange(testTable(cdc.TableID{Schema: "public", Table: "fz"}), fr)
			}
			if err != nil && !errors.Is(err, errTupleFraming) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		msg, err := parseMessage(wal)
		if err != nil {
			if !errors.Is(err, errMessageFraming) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		if m, ok := msg.(*pglogrepl.RelationMessage); ok && int(m.ColumnNum) != len(m.Columns) {
			t.Fatalf("relation of %d columns read as %d", m.ColumnNum, len(m.Columns))
		}
	})
}

// fuzzOIDs are the types FuzzPgValue picks from (its oid argument modulo their number, when it
// is no built-in type itself).
var fuzzOIDs = []uint32{
	pgtype.BoolOID, pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID, pgtype.OIDOID, pgtype.Float4OID,
	pgtype.Float8OID, pgtype.NumericOID, pgtype.TextOID, pgtype.ByteaOID, pgtype.TimestamptzOID,
	pgtype.JSONBOID, pgtype.TextArrayOID, pgtype.Int4ArrayOID, pgtype.TimestamptzArrayOID,
	pgtype.ByteaArrayOID, pgtype.BoolArrayOID, pgtype.Float8ArrayOID, pgtype.JSONBArrayOID,
}

// FuzzPgValue decodes one text value as a column of a built-in type (values.go): it never
// panics, fails only with one of the decoders' fixed errors (which cannot quote the value),
// the shared-string path agrees with the bytes path, and an instant is one of PostgreSQL's
// range.
func FuzzPgValue(f *testing.F) {
	for _, s := range []struct {
		oid  uint32
		text string
	}{
		{pgtype.TimestamptzOID, "2024-05-06 07:08:09.123456+00"},
		{pgtype.TimestamptzOID, "0044-03-15 12:00:00+05:30:15 BC"},
		{pgtype.TimestamptzOID, "294247-01-10 04:00:54.775807+00"},
		{pgtype.TimestamptzOID, "294276-12-31 23:59:59.999999+00"},
		{pgtype.TimestamptzOID, "infinity"},
		{pgtype.TimestamptzArrayOID, `{"2024-05-06 07:08:09+00",NULL}`},
		{pgtype.TextArrayOID, `[0:1]={"x y","q\"z"}`},
		{pgtype.Int4ArrayOID, "{{1,2},{3,4}}"},
		{pgtype.ByteaOID, `\x00ff10`},
		{pgtype.Float8OID, "-Infinity"},
		{pgtype.Int8OID, "-9223372036854775808"},
		{pgtype.BoolOID, "t"},
	} {
		f.Add(s.oid, int32(-1), []byte(s.text))
	}
	f.Fuzz(func(t *testing.T, oid uint32, typmod int32, text []byte) {
		td, ok := builtinType(oid, typmod)
		if !ok {
			oid = fuzzOIDs[oid%uint32(len(fuzzOIDs))]
			td, _ = builtinType(oid, typmod)
		}
		v, err := td.decode(text)
		if err != nil {
			if !isDecoderError(err) {
				t.Fatalf("error %q is not one of the decoders' fixed errors", err)
			}
		}
		if td.shared != nil {
			sv, serr := td.shared(string(text))
			if (err == nil) != (serr == nil) || !reflect.DeepEqual(v, sv) {
				t.Fatalf("shared path %#v, %v; bytes path %#v, %v", sv, serr, v, err)
			}
		}
		if err != nil {
			return
		}
		checkInstants(t, v)
	})
}

// isDecoderError reports whether err is one of the fixed errors of values.go.
func isDecoderError(err error) bool {
	for _, e := range []error{errBoolForm, errIntForm, errUintForm, errFloatForm, errByteaForm,
		errTimestamptzForm, errTimestamptzRange, errOffsetForm, errDateTimeForm, errArrayBoundsForm, errArrayTrailing, errArrayForm} {
		if err == e {
			return true
		}
	}
	return false
}

// checkInstants fails on an epoch-microseconds value outside PostgreSQL's timestamp range
// (with the widest offset either side), anywhere in v.
func checkInstants(t *testing.T, v cdc.Value) {
	t.Helper()
	lo := time.Date(minYear, 1, 1, 0, 0, 0, 0, time.UTC).Add(-16 * time.Hour).UnixMicro()
	hi := maxInstant.UnixMicro()
	switch x := v.(type) {
	case cdc.EpochMicros:
		if int64(x) < lo || int64(x) > hi {
			t.Fatalf("instant %d µs is outside PostgreSQL's range", x)
		}
	case []cdc.Value:
		for _, e := range x {
			checkInstants(t, e)
		}
	}
}
