package pgcdc_test

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// matrixColumns are the value matrix's columns: name, type, and one SQL literal per row.
var matrixColumns = []struct {
	name, typ string
	vals      [3]string
}{
	{"c_int2", "int2", [3]string{"-7", "NULL", "32767"}},
	{"c_int4", "int4", [3]string{"42", "NULL", "-2147483648"}},
	{"c_int8", "int8", [3]string{"9007199254740993", "NULL", "-9223372036854775808"}},
	{"c_num", "numeric(12,3)", [3]string{"12.34", "NULL", "-0.001"}},
	{"c_num_free", "numeric", [3]string{"123456789012345678901234567890.000000000000000000001", "NULL", "'NaN'"}},
	{"c_real", "real", [3]string{"1.1", "NULL", "'-Infinity'"}},
	{"c_double", "double precision", [3]string{"0.1", "NULL", "'NaN'"}},
	{"c_bool", "boolean", [3]string{"true", "NULL", "false"}},
	{"c_text", "text", [3]string{"'ålpha ''quoted'' \\ back'", "NULL", "''"}},
	{"c_varchar", "varchar(20)", [3]string{"'Mixed Case'", "NULL", "'😀'"}},
	{"c_char", "char(5)", [3]string{"'ab'", "NULL", "'abcde'"}},
	{"c_bytea", "bytea", [3]string{`'\x0102ff'`, "NULL", `''`}},
	{"c_date", "date", [3]string{"'2024-05-06'", "NULL", "'0044-03-15 BC'"}},
	{"c_time", "time", [3]string{"'13:14:15.25'", "NULL", "'00:00:00'"}},
	{"c_time3", "time(3)", [3]string{"'13:14:15.1239'", "NULL", "'23:59:59.999'"}},
	{"c_ts", "timestamp", [3]string{"'2024-05-06 07:08:09.5'", "NULL", "'infinity'"}},
	{"c_tstz", "timestamptz", [3]string{"'2024-05-06 07:08:09.123456+02'", "NULL", "'1969-12-31 23:59:59.999999+00'"}},
	{"c_json", "json", [3]string{`'{"b": 2,  "a": [1, "x"]}'`, "NULL", `'null'`}},
	{"c_jsonb", "jsonb", [3]string{`'{"b": 2,  "a": [1, "x"]}'`, "NULL", `'"str"'`}},
	{"c_uuid", "uuid", [3]string{"'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'", "NULL", "'00000000-0000-0000-0000-000000000000'"}},
	{"c_int_arr", "int4[]", [3]string{"'{1,NULL,3}'", "NULL", "'{}'"}},
	{"c_int_2d", "int8[][]", [3]string{"'{{1,2},{3,4}}'", "NULL", "'[0:1]={5,6}'"}},
	{"c_text_arr", "text[]", [3]string{`ARRAY['a b', 'q"z', NULL, 'NULL', 'x,y']`, "NULL", `ARRAY['']`}},
	{"c_num_arr", "numeric(5,2)[]", [3]string{"'{1.5,-2}'", "NULL", "'{NULL}'"}},
	{"c_bytea_arr", "bytea[]", [3]string{`ARRAY['\x00'::bytea, '\xff'::bytea]`, "NULL", "'{}'"}},
	{"c_tstz_arr", "timestamptz[]", [3]string{"ARRAY['2024-01-01 00:00:00+00'::timestamptz]", "NULL", "'{}'"}},
	{"c_interval", "interval", [3]string{"'1 day 02:03:04'", "NULL", "'-1 mons'"}},
	{"c_bit", "bit(4)", [3]string{"B'1010'", "NULL", "B'0000'"}},
	{"c_varbit", "varbit(8)", [3]string{"B'101'", "NULL", "B''"}},
	{"c_inet", "inet", [3]string{"'192.168.0.1/24'", "NULL", "'::1'"}},
}

// TestValueMatrixSnapshotAndStream reads the same rows through an initial snapshot and through
// the replication stream (insert and update) and demands identical normalized values, plus the
// expected shape for a sample of them.
func TestValueMatrixSnapshotAndStream(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sfx := suffix(t)
	tb := "Matrix_" + sfx
	enum := "mood_" + sfx
	dom := "price_" + sfx

	cols := []string{quote("Id") + " int PRIMARY KEY", "c_enum " + quote(enum), "c_domain " + quote(dom)}
	for _, c := range matrixColumns {
		cols = append(cols, quote(c.name)+" "+c.typ)
	}
	if err := execSQL(ctx, dsn, false,
		"CREATE TYPE "+quote(enum)+" AS ENUM ('sad', 'ok', 'happy')",
		"CREATE DOMAIN "+quote(dom)+" AS numeric(7,2)",
		"CREATE TABLE "+quote(tb)+" ("+strings.Join(cols, ", ")+")"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = execSQL(context.Background(), dsn, false, "DROP TABLE IF EXISTS "+quote(tb), "DROP TYPE IF EXISTS "+quote(enum), "DROP DOMAIN IF EXISTS "+quote(dom))
	})
	insert := func(id, row int) string {
		vals := []string{fmt.Sprint(id), [3]string{"'happy'", "NULL", "'sad'"}[row], [3]string{"12.5", "NULL", "-99999.99"}[row]}
		names := []string{quote("Id"), "c_enum", "c_domain"}
		for _, c := range matrixColumns {
			vals = append(vals, c.vals[row])
			names = append(names, quote(c.name))
		}
		return "INSERT INTO " + quote(tb) + " (" + strings.Join(names, ", ") + ") VALUES (" + strings.Join(vals, ", ") + ")"
	}
	if err := execSQL(ctx, dsn, false, insert(1, 0), insert(2, 1), insert(3, 2)); err != nil {
		t.Fatal(err)
	}

	src := newSource(t, dsn, pgcdc.Options{Snapshot: cdc.SnapshotInitial, Tables: []pgcdc.Table{{Name: tb}}, SnapshotChunk: 2})
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })

	snap := map[int64]cdc.Event{}
	for range 3 {
		ev := nextEvent(ctx, t, st)
		if ev.Op != cdc.Read {
			t.Fatalf("snapshot delivered %v", ev.Op)
		}
		snap[ev.After[0].(int64)] = ev
	}
	if err := execSQL(ctx, dsn, false, insert(11, 0), insert(12, 1), insert(13, 2),
		"UPDATE "+quote(tb)+" SET c_int4 = c_int4 WHERE "+quote("Id")+" = 1"); err != nil {
		t.Fatal(err)
	}
	streamed := map[int64]cdc.Event{}
	for range 3 {
		ev := nextEvent(ctx, t, st)
		if ev.Op != cdc.Insert {
			t.Fatalf("stream delivered %v", ev.Op)
		}
		streamed[ev.After[0].(int64)-10] = ev
	}
	upd := nextEvent(ctx, t, st)
	if upd.Op != cdc.Update {
		t.Fatalf("stream delivered %v, want the update", upd.Op)
	}

	s := snap[1].Schema
	for id := int64(1); id <= 3; id++ {
		a, b := snap[id], streamed[id]
		if a.Schema == nil || b.Schema == nil {
			t.Fatalf("row %d missing from one path", id)
		}
		for i := 1; i < len(s.Columns); i++ {
			if !reflect.DeepEqual(a.After[i], b.After[i]) && !bothNaN(a.After[i], b.After[i]) {
				t.Errorf("row %d column %s: snapshot %#v, stream %#v", id, s.Columns[i].Name, a.After[i], b.After[i])
			}
			if id == 1 && !reflect.DeepEqual(a.After[i], upd.After[i]) {
				t.Errorf("column %s: snapshot %#v, update %#v", s.Columns[i].Name, a.After[i], upd.After[i])
			}
		}
	}

	row := snap[1].After
	get := func(name string) cdc.Value {
		i := s.ColumnIndex(name)
		if i < 0 {
			t.Fatalf("no column %s", name)
		}
		return row[i]
	}
	tstz := time.Date(2024, 5, 6, 5, 8, 9, 123456000, time.UTC).UnixMicro()
	want := map[string]cdc.Value{
		"c_enum":      "happy",
		"c_domain":    "12.50",
		"c_int2":      int64(-7),
		"c_int8":      int64(9007199254740993),
		"c_num":       "12.340",
		"c_num_free":  "123456789012345678901234567890.000000000000000000001",
		"c_real":      1.1,
		"c_double":    0.1,
		"c_bool":      true,
		"c_text":      `ålpha 'quoted' \ back`,
		"c_char":      "ab   ",
		"c_bytea":     cdc.Base64("AQL/"),
		"c_date":      "2024-05-06",
		"c_time":      "13:14:15.25",
		"c_time3":     "13:14:15.124",
		"c_ts":        "2024-05-06 07:08:09.5",
		"c_tstz":      cdc.EpochMicros(tstz),
		"c_json":      cdc.RawJSON(`{"b": 2,  "a": [1, "x"]}`),
		"c_jsonb":     cdc.RawJSON(`{"a": [1, "x"], "b": 2}`),
		"c_uuid":      "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
		"c_int_arr":   []cdc.Value{int64(1), nil, int64(3)},
		"c_int_2d":    []cdc.Value{[]cdc.Value{int64(1), int64(2)}, []cdc.Value{int64(3), int64(4)}},
		"c_text_arr":  []cdc.Value{"a b", `q"z`, nil, "NULL", "x,y"},
		"c_num_arr":   []cdc.Value{"1.50", "-2.00"},
		"c_bytea_arr": []cdc.Value{cdc.Base64("AA=="), cdc.Base64("/w==")},
		"c_tstz_arr":  []cdc.Value{cdc.EpochMicros(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro())},
		"c_interval":  "1 day 02:03:04",
		"c_bit":       "1010",
		"c_inet":      "192.168.0.1/24",
	}
	for name, w := range want {
		if got := get(name); !reflect.DeepEqual(got, w) {
			t.Errorf("%s = %#v, want %#v", name, got, w)
		}
	}
	for i := 1; i < len(s.Columns); i++ {
		if snap[2].After[i] != nil {
			t.Errorf("NULL row: %s = %#v", s.Columns[i].Name, snap[2].After[i])
		}
	}
	edge := snap[3].After
	edgeWant := map[string]cdc.Value{
		"c_int8":     int64(math.MinInt64),
		"c_num_free": "NaN",
		"c_real":     math.Inf(-1),
		"c_text":     "",
		"c_varchar":  "😀",
		"c_bytea":    cdc.Base64(""),
		"c_date":     "0044-03-15 BC",
		"c_ts":       "infinity",
		"c_tstz":     cdc.EpochMicros(-1),
		"c_json":     cdc.RawJSON(`null`),
		"c_int_arr":  []cdc.Value{},
		"c_int_2d":   []cdc.Value{int64(5), int64(6)},
		"c_num_arr":  []cdc.Value{nil},
		"c_varbit":   "",
	}
	for name, w := range edgeWant {
		if got := edge[s.ColumnIndex(name)]; !reflect.DeepEqual(got, w) {
			t.Errorf("edge row %s = %#v, want %#v", name, got, w)
		}
	}

	kinds := map[string]cdc.Column{
		"Id":          {Kind: cdc.KindInt, Bits: 32, SourceType: "integer"},
		"c_enum":      {Kind: cdc.KindEnum, Labels: []string{"sad", "ok", "happy"}, Nullable: true},
		"c_domain":    {Kind: cdc.KindDecimal, Precision: 7, Scale: 2, Nullable: true},
		"c_num":       {Kind: cdc.KindDecimal, Precision: 12, Scale: 3, Nullable: true, SourceType: "numeric(12,3)"},
		"c_num_free":  {Kind: cdc.KindDecimal, Nullable: true},
		"c_real":      {Kind: cdc.KindFloat, Bits: 32, Nullable: true},
		"c_varchar":   {Kind: cdc.KindText, Length: 20, Nullable: true, SourceType: "character varying(20)"},
		"c_char":      {Kind: cdc.KindText, Length: 5, Nullable: true},
		"c_bytea":     {Kind: cdc.KindBinary, Nullable: true},
		"c_time3":     {Kind: cdc.KindTime, Precision: 3, Nullable: true},
		"c_ts":        {Kind: cdc.KindDateTime, Precision: 6, Nullable: true},
		"c_tstz":      {Kind: cdc.KindTimestamp, Precision: 6, Nullable: true},
		"c_jsonb":     {Kind: cdc.KindJSON, Nullable: true},
		"c_uuid":      {Kind: cdc.KindUUID, Nullable: true},
		"c_bit":       {Kind: cdc.KindBit, Bits: 4, Nullable: true},
		"c_interval":  {Kind: cdc.KindOther, Nullable: true},
		"c_num_arr":   {Kind: cdc.KindArray, Nullable: true, Elem: &cdc.Column{Kind: cdc.KindDecimal, Precision: 5, Scale: 2}},
		"c_int_arr":   {Kind: cdc.KindArray, Nullable: true, Elem: &cdc.Column{Kind: cdc.KindInt, Bits: 32}, SourceType: "integer[]"},
		"c_bytea_arr": {Kind: cdc.KindArray, Nullable: true, Elem: &cdc.Column{Kind: cdc.KindBinary}},
	}
	for name, w := range kinds {
		got := s.Columns[s.ColumnIndex(name)]
		w.Name = name
		if w.SourceType == "" {
			w.SourceType = got.SourceType
		}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("column %s = %+v, want %+v", name, got, w)
		}
	}
	if len(s.PrimaryKey) != 1 || s.Columns[s.PrimaryKey[0]].Name != "Id" {
		t.Errorf("primary key %v", s.PrimaryKey)
	}
}

func bothNaN(a, b cdc.Value) bool {
	fa, ok1 := a.(float64)
	fb, ok2 := b.(float64)
	return ok1 && ok2 && math.IsNaN(fa) && math.IsNaN(fb)
}

// nextEvent returns the stream's next event, failing on a malformed one or the deadline.
func nextEvent(ctx context.Context, t *testing.T, st cdc.Stream) cdc.Event {
	t.Helper()
	select {
	case ev, ok := <-st.Events():
		if !ok {
			t.Fatalf("stream ended: %v", st.Err())
		}
		if ev.Malformed != nil {
			t.Fatalf("malformed event: %v", ev.Malformed)
		}
		return ev
	case <-ctx.Done():
		t.Fatalf("no event before the deadline")
	}
	panic("unreachable")
}
