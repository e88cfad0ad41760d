package mysqlcdc_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/mysqlcdc"
)

// typeColumns is the type matrix: every common column type, with its expected normalized value
// for the first row of typeRows.
var typeColumns = []struct {
	name, sqlType string
	want          cdc.Value
}{
	{"ti", "TINYINT", int64(-128)},
	{"tiu", "TINYINT UNSIGNED", uint64(255)},
	{"si", "SMALLINT", int64(-32768)},
	{"siu", "SMALLINT UNSIGNED", uint64(65535)},
	{"mi", "MEDIUMINT", int64(-8388608)},
	{"miu", "MEDIUMINT UNSIGNED", uint64(16777215)},
	{"i", "INT", int64(-2147483648)},
	{"iu", "INT UNSIGNED", uint64(4294967295)},
	{"bi", "BIGINT", int64(-9223372036854775808)},
	{"biu", "BIGINT UNSIGNED", uint64(18446744073709551615)},
	{"b1", "TINYINT(1)", int64(1)},
	{"dec", "DECIMAL(12,3)", "-123456789.125"},
	{"dec0", "DECIMAL(20,0)", "12345678901234567890"},
	{"decs", "DECIMAL(5,2)", "0.50"},
	{"f", "FLOAT", 0.1},
	{"d", "DOUBLE", 0.1},
	{"bit1", "BIT(1)", uint64(1)},
	{"bit12", "BIT(12)", uint64(0xAAA)},
	{"bit64", "BIT(64)", uint64(18446744073709551615)},
	{"c", "CHAR(4)", "ab"},
	{"vc", "VARCHAR(32)", "ålpha ☃"},
	{"vcl", "VARCHAR(16) CHARACTER SET latin1", "café €"},
	{"tx", "TEXT", b64("long text ☃")},
	{"txl", "TINYTEXT CHARACTER SET latin1", b64("d\xe9j\xe0")}, // the binlog's latin1 bytes
	{"bn", "BINARY(4)", b64("ab\x00\x00")},
	{"vb", "VARBINARY(8)", b64("\x00\xff\x00")},
	{"bl", "BLOB", b64("\xde\xad\xbe\xef")},
	{"en", "ENUM('a','b c','it''s')", "it's"},
	{"st", "SET('x','y','z')", "x,z"},
	{"dt", "DATE", "2024-02-29"},
	{"tm", "TIME", "-838:59:59"},
	{"tm3", "TIME(3)", "12:34:56.789"},
	{"dtm", "DATETIME", "2024-01-02 03:04:05"},
	{"dtm6", "DATETIME(6)", "2024-01-02 03:04:05.123456"},
	{"ts", "TIMESTAMP NULL", cdc.EpochMicros(time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC).UnixMicro())},
	{"ts3", "TIMESTAMP(3) NULL", cdc.EpochMicros(time.Date(2038, 1, 19, 3, 14, 7, 999e6, time.UTC).UnixMicro())},
	{"yr", "YEAR", int64(2024)},
	{"j", "JSON", cdc.RawJSON(`{"a":[1,2.5,"x"],"b":null}`)},
	{"u1", "UUID", "123e4567-e89b-12d3-a456-426614174000"}, // version 1: MariaDB reorders it in storage
	{"u4", "UUID", "0f8fad5b-d9cb-469f-a165-70867728950e"},
	{"ip4", "INET4", "10.1.2.3"},
	{"ip6", "INET6", "2001:db8::1"},
}

func b64(s string) cdc.Base64 { return cdc.Base64(base64.StdEncoding.EncodeToString([]byte(s))) }

// typeRows are the matrix's rows, in typeColumns order: extremes, zeros and zero dates, NULLs.
var typeRows = [][]string{
	{`-128`, `255`, `-32768`, `65535`, `-8388608`, `16777215`, `-2147483648`, `4294967295`,
		`-9223372036854775808`, `18446744073709551615`, `1`, `-123456789.125`, `12345678901234567890`, `0.5`,
		`0.1`, `0.1`, `b'1'`, `b'101010101010'`, `b'1111111111111111111111111111111111111111111111111111111111111111'`,
		`'ab'`, `'ålpha ☃'`, `'café €'`, `'long text ☃'`, `'déjà'`, `'ab'`, `x'00ff00'`, `x'deadbeef'`,
		`'it''s'`, `'z,x'`, `'2024-02-29'`, `'-838:59:59'`, `'12:34:56.789'`, `'2024-01-02 03:04:05'`,
		`'2024-01-02 03:04:05.123456'`, `'2024-06-01 12:00:00'`, `'2038-01-19 03:14:07.999'`, `2024`,
		`'{"a": [1, 2.5, "x"], "b": null}'`, `'123e4567-e89b-12d3-a456-426614174000'`,
		`'0f8fad5b-d9cb-469f-a165-70867728950e'`, `'10.1.2.3'`, `'2001:db8::1'`},
	{`0`, `0`, `0`, `0`, `0`, `0`, `0`, `0`, `0`, `0`, `0`, `0`, `0`, `-0.01`,
		`3.4028235e38`, `-1.2345678901234567e300`, `b'0'`, `b'0'`, `b'0'`,
		`''`, `''`, `''`, `''`, `''`, `''`, `''`, `''`,
		`'a'`, `''`, `'0000-00-00'`, `'00:00:00'`, `'-00:00:00.001'`, `'0000-00-00 00:00:00'`,
		`'0000-00-00 00:00:00.000000'`, `'1970-01-01 00:00:01'`, `'0000-00-00 00:00:00'`, `1901`,
		`'[]'`, `'00000000-0000-0000-0000-000000000000'`, `'00000000-0000-0000-0000-000000000001'`,
		`'0.0.0.0'`, `'::ffff:1.2.3.4'`},
	nil, // every column NULL
}

func createTypeTable(t *testing.T, s server, table string) {
	t.Helper()
	cols := []string{"id INT NOT NULL PRIMARY KEY"}
	for _, c := range typeColumns {
		cols = append(cols, quote(c.name)+" "+c.sqlType)
	}
	q := fmt.Sprintf("CREATE TABLE %s (%s) DEFAULT CHARSET=utf8mb4", quote(table), strings.Join(cols, ", "))
	if err := s.exec(q); err != nil {
		t.Fatal(err)
	}
}

func insertTypeRows(t *testing.T, s server, table string) {
	t.Helper()
	var stmts []string
	for i, row := range typeRows {
		if row == nil {
			stmts = append(stmts, fmt.Sprintf("INSERT INTO %s (id) VALUES (%d)", quote(table), i+1))
			continue
		}
		names := []string{"id"}
		for _, c := range typeColumns {
			names = append(names, quote(c.name))
		}
		stmts = append(stmts, fmt.Sprintf("INSERT INTO %s (%s) VALUES (%d, %s)", quote(table),
			strings.Join(names, ", "), i+1, strings.Join(row, ", ")))
	}
	// Zero dates need a permissive SQL mode; the session's is set in the same transaction.
	if err := s.execTx(append([]string{"SET SESSION sql_mode = ''"}, stmts...)...); err != nil {
		t.Fatal(err)
	}
}

// TestTypesSnapshotAndStreamAgree reads the type matrix through the binlog and through a
// snapshot; both must yield exactly the expected normalized values.
func TestTypesSnapshotAndStreamAgree(t *testing.T) {
	s := testServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	table := "types_" + suffix()
	createTypeTable(t, s, table)

	streamed := s.newSource(t, cdc.SnapshotNever, mysqlcdc.Options{}, table)
	st, err := streamed.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	insertTypeRows(t, s, table)
	fromStream := map[int64]cdc.Event{}
	for range typeRows {
		ev := nextEvent(ctx, t, st)
		if ev.Op != cdc.Insert {
			t.Fatalf("streamed %v, want insert", ev.Op)
		}
		fromStream[ev.After[0].(int64)] = ev
	}

	snap := s.newSource(t, cdc.SnapshotInitial, mysqlcdc.Options{}, table)
	st2, err := snap.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	fromSnapshot := map[int64]cdc.Event{}
	for range typeRows {
		ev := nextEvent(ctx, t, st2)
		if ev.Op != cdc.Read {
			t.Fatalf("snapshot delivered %v, want read", ev.Op)
		}
		fromSnapshot[ev.After[0].(int64)] = ev
	}

	if p := st2.Progress(); p.Active {
		t.Errorf("progress after the last snapshot row: %+v, want inactive", p)
	}

	schema := fromStream[1].Schema
	for k, c := range typeColumns {
		col := schema.Columns[k+1]
		if got := fromStream[1].After[k+1]; !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s (%s, kind %v) from the binlog = %#v, want %#v", c.name, c.sqlType, col.Kind, got, c.want)
		}
	}
	for id := int64(1); id <= int64(len(typeRows)); id++ {
		a, b := fromStream[id].After, fromSnapshot[id].After
		for k := range a {
			if !reflect.DeepEqual(a[k], b[k]) {
				t.Errorf("row %d column %s: binlog %#v, snapshot %#v", id, schema.Columns[k].Name, a[k], b[k])
			}
		}
	}
	for k := 1; k < len(schema.Columns); k++ {
		if v := fromStream[3].After[k]; v != nil {
			t.Errorf("NULL %s came out as %#v", schema.Columns[k].Name, v)
		}
	}
	t.Logf("row 2 (zeros): %#v", fromStream[2].After)

	kinds := map[string]cdc.Kind{"tiu": cdc.KindUint, "dec": cdc.KindDecimal, "tx": cdc.KindText,
		"bl": cdc.KindBinary, "en": cdc.KindEnum, "st": cdc.KindSet, "ts": cdc.KindTimestamp,
		"dtm": cdc.KindDateTime, "j": cdc.KindJSON, "bit12": cdc.KindBit, "f": cdc.KindFloat, "u4": cdc.KindUUID}
	for name, kind := range kinds {
		col := schema.Columns[schema.ColumnIndex(name)]
		if col.Kind != kind {
			t.Errorf("column %s has kind %v, want %v", name, col.Kind, kind)
		}
	}
	if col := schema.Columns[schema.ColumnIndex("en")]; !reflect.DeepEqual(col.Labels, []string{"a", "b c", "it's"}) {
		t.Errorf("enum labels %q", col.Labels)
	}
	if col := schema.Columns[schema.ColumnIndex("dec")]; col.Precision != 12 || col.Scale != 3 {
		t.Errorf("decimal precision/scale %d/%d, want 12/3", col.Precision, col.Scale)
	}
	if col := schema.Columns[schema.ColumnIndex("vcl")]; col.Charset != "latin1" || col.Length != 16 {
		t.Errorf("latin1 varchar: charset %q length %d", col.Charset, col.Length)
	}
}

func nextEvent(ctx context.Context, t *testing.T, st cdc.Stream) cdc.Event {
	t.Helper()
	select {
	case ev, ok := <-st.Events():
		if !ok {
			t.Fatalf("stream ended: %v", st.Err())
		}
		if ev.Malformed != nil {
			t.Fatalf("malformed event on %v: %v", ev.Table, ev.Malformed)
		}
		return ev
	case <-ctx.Done():
		t.Fatalf("no event before the deadline: %v", ctx.Err())
	}
	panic("unreachable")
}

func suffix() string {
	return fmt.Sprintf("%08x", nextServerID()*2654435761)
}
