package pgcdc

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/tributary-dev/tributary/cdc"
)

func TestArrayDecoder(t *testing.T) {
	ints := arrayDecoder(decodeInt, ',')
	texts := arrayDecoder(decodeString, ',')
	cases := []struct {
		dec  decodeFunc
		in   string
		want cdc.Value
	}{
		{ints, `{}`, []cdc.Value{}},
		{ints, `{1,NULL,-3}`, []cdc.Value{int64(1), nil, int64(-3)}},
		{ints, `{{1,2},{3,4}}`, []cdc.Value{[]cdc.Value{int64(1), int64(2)}, []cdc.Value{int64(3), int64(4)}}},
		{ints, `[0:1]={5,6}`, []cdc.Value{int64(5), int64(6)}},
		{texts, `{"a b","q\"z",NULL,"NULL","x,y","back\\slash",""}`, []cdc.Value{"a b", `q"z`, nil, "NULL", "x,y", `back\slash`, ""}},
		{texts, `{ab,"{c}"}`, []cdc.Value{"ab", "{c}"}},
		{arrayDecoder(decodeString, ';'), `{(1,2),(0,0);(3,4),(1,1)}`, []cdc.Value{"(1,2),(0,0)", "(3,4),(1,1)"}},
		{arrayDecoder(decodeBytea, ','), `{"\\x00ff",NULL}`, []cdc.Value{cdc.Base64("AP8="), nil}},
	}
	for _, c := range cases {
		got, err := c.dec([]byte(c.in))
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %#v, %v; want %#v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{``, `{`, `{1,2`, `{1}x`, `[1:2]`, `{"a}`, `{x}`} {
		if _, err := ints([]byte(bad)); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
}

func TestDecodeTimestamptz(t *testing.T) {
	us := func(tm time.Time) cdc.Value { return cdc.EpochMicros(tm.UnixMicro()) }
	cases := map[string]cdc.Value{
		"2024-05-06 07:08:09+00":        us(time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)),
		"2024-05-06 07:08:09.5+00":      us(time.Date(2024, 5, 6, 7, 8, 9, 500000000, time.UTC)),
		"2024-05-06 07:08:09.123456-03": us(time.Date(2024, 5, 6, 10, 8, 9, 123456000, time.UTC)),
		"2024-05-06 07:08:09+05:30":     us(time.Date(2024, 5, 6, 1, 38, 9, 0, time.UTC)),
		"1900-01-01 00:00:00+00:19:32":  us(time.Date(1899, 12, 31, 23, 40, 28, 0, time.UTC)),
		"0044-03-15 12:00:00+00 BC":     us(time.Date(-43, 3, 15, 12, 0, 0, 0, time.UTC)),
		"12345-01-01 00:00:00+00":       us(time.Date(12345, 1, 1, 0, 0, 0, 0, time.UTC)),
		"1969-12-31 23:59:59.999999+00": cdc.EpochMicros(-1),
		"infinity":                      "infinity",
		"-infinity":                     "-infinity",
	}
	for in, want := range cases {
		got, err := decodeTimestamptz([]byte(in))
		if err != nil || got != want {
			t.Errorf("%s: %#v, %v; want %#v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "2024-05-06", "2024-05-06 07:08:09", "2024-05-06 07:08:09+0x", "2024-05-06 07:08:09.1234567+00", "secret 07:08:09+00"} {
		_, err := decodeTimestamptz([]byte(bad))
		if err == nil {
			t.Errorf("%q decoded", bad)
		} else if bad != "" && strings.Contains(err.Error(), bad) {
			t.Errorf("error quotes the value: %v", err)
		}
	}
}

func TestScalarDecoders(t *testing.T) {
	if v, err := decodeBool([]byte("t")); v != true || err != nil {
		t.Error("t")
	}
	if _, err := decodeBool([]byte("yes")); !errors.Is(err, errDecode) {
		t.Error("yes decoded")
	}
	if v, _ := decodeFloat([]byte("NaN")); !math.IsNaN(v.(float64)) {
		t.Error("NaN")
	}
	if v, _ := decodeFloat([]byte("-Infinity")); v != math.Inf(-1) {
		t.Error("-Infinity")
	}
	if v, _ := decodeFloat([]byte("1.1")); v != 1.1 {
		t.Error("1.1")
	}
	if v, _ := decodeBytea([]byte(`\x`)); v != cdc.Base64("") {
		t.Error("empty bytea")
	}
	if _, err := decodeBytea([]byte(`abc`)); err == nil {
		t.Error("escape-format bytea decoded")
	}
	if _, err := decodeInt([]byte("9223372036854775808")); err == nil {
		t.Error("int64 overflow decoded")
	}
}

func TestBuiltinTypmods(t *testing.T) {
	num := func(p, s int) int32 { return int32(((p << 16) | (s & 0x7ff)) + 4) }
	cases := []struct {
		oid    uint32
		typmod int32
		want   cdc.Column
	}{
		{pgtype.NumericOID, num(12, 3), cdc.Column{Kind: cdc.KindDecimal, Precision: 12, Scale: 3}},
		{pgtype.NumericOID, num(5, -2), cdc.Column{Kind: cdc.KindDecimal, Precision: 5, Scale: -2}},
		{pgtype.NumericOID, -1, cdc.Column{Kind: cdc.KindDecimal}},
		{pgtype.VarcharOID, 24, cdc.Column{Kind: cdc.KindText, Length: 20}},
		{pgtype.VarcharOID, -1, cdc.Column{Kind: cdc.KindText}},
		{pgtype.TimestamptzOID, 3, cdc.Column{Kind: cdc.KindTimestamp, Precision: 3}},
		{pgtype.TimeOID, -1, cdc.Column{Kind: cdc.KindTime, Precision: 6}},
		{pgtype.BitOID, 4, cdc.Column{Kind: cdc.KindBit, Bits: 4}},
		{pgtype.Int2OID, -1, cdc.Column{Kind: cdc.KindInt, Bits: 16}},
		{pgtype.VarcharArrayOID, 14, cdc.Column{Kind: cdc.KindArray, Elem: &cdc.Column{Kind: cdc.KindText, Length: 10}}},
	}
	for _, c := range cases {
		td, ok := builtinType(c.oid, c.typmod)
		if !ok || !reflect.DeepEqual(td.col, c.want) {
			t.Errorf("oid %d typmod %d: %+v, want %+v", c.oid, c.typmod, td, c.want)
		}
	}
	if _, ok := builtinType(999999, -1); ok {
		t.Error("an unknown OID is built in")
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	cp := encodeCheckpoint(0x16B3748, nil, nil, nil)
	d, err := decodeCheckpoint(cp)
	if err != nil || d.lsn != 0x16B3748 || d.snap != nil {
		t.Fatalf("%+v, %v", d, err)
	}
	snap := &snapshotState{Floor: "0/10", Done: []tableRef{{"public", "A"}}, Table: &tableRef{"s", "b"}, Key: []string{"7", "x"}, Rows: 12}
	d, err = decodeCheckpoint(encodeCheckpoint(0x20, snap, nil, nil))
	if err != nil || d.lsn != 0x20 || d.floor != 0x10 || !reflect.DeepEqual(d.snap, snap) {
		t.Fatalf("%+v, %v", d, err)
	}
	for _, bad := range []string{``, `{}`, `{"v":2,"lsn":"0/1"}`, `{"v":1,"lsn":"x"}`, `{"v":1,"lsn":"0/0"}`, `{"v":1,"lsn":"0/1","snap":{"floor":"?"}}`, `{"v":1,"lsn":"0/1","snap":{"floor":"0/1","key":["1"]}}`} {
		if _, err := decodeCheckpoint(cdc.Checkpoint(bad)); !errors.Is(err, ErrBadCheckpoint) {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func TestNewValidatesAndHidesPassword(t *testing.T) {
	if _, err := New("postgres://u:hunter2@127.0.0.1:1/db", &Options{Slot: "Bad-Name"}); err == nil {
		t.Error("a slot name with capitals and a dash was accepted")
	} else if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error carries the password: %v", err)
	}
	if _, err := New("postgres://u:hunter2@127.0.0.1:1/db?sslmode=bogus", &Options{}); err == nil {
		t.Error("a malformed DSN was accepted")
	} else if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error carries the password: %v", err)
	}
	s, err := New("postgres://u:hunter2@127.0.0.1:1/db", &Options{Name: "Orders DB"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Slot() != "tributary_orders_db" || s.Publication() != "tributary_orders_db" || s.Name() != "Orders DB" {
		t.Errorf("defaults: slot %q publication %q name %q", s.Slot(), s.Publication(), s.Name())
	}
}
