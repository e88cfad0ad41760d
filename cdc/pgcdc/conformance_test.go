package pgcdc_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/cdctest"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/internal/testenv"
)

func TestConformance(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		dsn := testenv.Require(t, testenv.PostgresDSN)
		cdctest.Run(t, cdctest.Harness{
			Exec: func(ctx context.Context, stmts ...string) error {
				return execSQL(ctx, dsn, false, stmts...)
			},
			ExecTx: func(ctx context.Context, stmts ...string) error {
				return execSQL(ctx, dsn, true, stmts...)
			},
			Quote: quote,
			NewSource: func(t *testing.T, mode cdc.SnapshotMode, tables ...string) cdc.Source {
				var ts []pgcdc.Table
				for _, name := range tables {
					ts = append(ts, pgcdc.Table{Name: name})
				}
				return newSource(t, dsn, pgcdc.Options{Snapshot: mode, Tables: ts})
			},
			Types: pgTypes,
		})
	})
}

func quote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// execSQL runs statements each in its own transaction, or all in one.
func execSQL(ctx context.Context, dsn string, oneTx bool, stmts ...string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if !oneTx {
		for _, s := range stmts {
			if _, err := conn.Exec(ctx, s); err != nil {
				return err
			}
		}
		return nil
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	for _, s := range stmts {
		if _, err := tx.Exec(ctx, s); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

func suffix(t testing.TB) string {
	var b [5]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// newSource makes a source with a unique slot and publication (opts.Slot, when set, is the
// prefix of both names). Cleanup (which runs after the tests' stream cleanups) drops slot,
// publication and the captured tables.
func newSource(t *testing.T, dsn string, opts pgcdc.Options) *pgcdc.Source {
	t.Helper()
	sfx := suffix(t)
	prefix := "pgcdc_test_"
	if opts.Slot != "" {
		prefix = opts.Slot
	}
	opts.Name = "test_" + sfx
	opts.Slot = prefix + sfx
	opts.Publication = prefix + sfx
	if opts.StatusInterval == 0 {
		opts.StatusInterval = 200 * time.Millisecond
	}
	src, err := pgcdc.New(dsn, &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := src.Drop(ctx); err != nil {
			t.Errorf("drop slot and publication: %v", err)
		}
		var stmts []string
		for _, tb := range opts.Tables {
			stmts = append(stmts, "DROP TABLE IF EXISTS "+quote(tb.Name))
		}
		if err := execSQL(ctx, dsn, false, stmts...); err != nil {
			t.Errorf("drop tables: %v", err)
		}
	})
	return src
}

// pgTypes is PostgreSQL's type matrix: every common column type with its schema, an ordinary
// value and an edge value (extremes, NaN and infinities, empty strings and arrays, BC dates).
func pgTypes(sfx string) cdctest.TypeMatrix {
	enum, dom := quote("mood_"+sfx), quote("price_"+sfx)
	v := func(lit string, want cdc.Value) cdctest.TypeValue { return cdctest.TypeValue{Literal: lit, Want: want} }
	micros := func(t time.Time) cdc.EpochMicros { return cdc.EpochMicros(t.UnixMicro()) }
	arr := func(vs ...cdc.Value) []cdc.Value { return append([]cdc.Value{}, vs...) }
	return cdctest.TypeMatrix{
		Setup: []string{
			"CREATE TYPE " + enum + " AS ENUM ('sad', 'ok', 'happy')",
			"CREATE DOMAIN " + dom + " AS numeric(7,2)",
		},
		Teardown: []string{"DROP TYPE IF EXISTS " + enum, "DROP DOMAIN IF EXISTS " + dom},
		Cases: []cdctest.TypeCase{
			{Name: "c_enum", Type: enum, Column: cdc.Column{Kind: cdc.KindEnum, Labels: []string{"sad", "ok", "happy"}},
				Values: []cdctest.TypeValue{v("'happy'", "happy"), v("'sad'", "sad")}},
			{Name: "c_domain", Type: dom, Column: cdc.Column{Kind: cdc.KindDecimal, Precision: 7, Scale: 2},
				Values: []cdctest.TypeValue{v("12.5", "12.50"), v("-99999.99", "-99999.99")}},
			{Name: "c_int2", Type: "int2", Column: cdc.Column{Kind: cdc.KindInt, Bits: 16, SourceType: "smallint"},
				Values: []cdctest.TypeValue{v("-7", int64(-7)), v("32767", int64(32767))}},
			{Name: "c_int4", Type: "int4", Column: cdc.Column{Kind: cdc.KindInt, Bits: 32, SourceType: "integer"},
				Values: []cdctest.TypeValue{v("42", int64(42)), v("-2147483648", int64(math.MinInt32))}},
			{Name: "c_int8", Type: "int8", Column: cdc.Column{Kind: cdc.KindInt, Bits: 64, SourceType: "bigint"},
				Values: []cdctest.TypeValue{v("9007199254740993", int64(9007199254740993)), v("-9223372036854775808", int64(math.MinInt64))}},
			{Name: "c_num", Type: "numeric(12,3)", Column: cdc.Column{Kind: cdc.KindDecimal, Precision: 12, Scale: 3, SourceType: "numeric(12,3)"},
				Values: []cdctest.TypeValue{v("12.34", "12.340"), v("-0.001", "-0.001")}},
			{Name: "c_num_free", Type: "numeric", Column: cdc.Column{Kind: cdc.KindDecimal, SourceType: "numeric"},
				Values: []cdctest.TypeValue{
					v("123456789012345678901234567890.000000000000000000001", "123456789012345678901234567890.000000000000000000001"),
					v("'NaN'", "NaN")}},
			{Name: "c_real", Type: "real", Column: cdc.Column{Kind: cdc.KindFloat, Bits: 32, SourceType: "real"},
				Values: []cdctest.TypeValue{v("1.1", 1.1), v("'-Infinity'", math.Inf(-1))}},
			{Name: "c_double", Type: "double precision", Column: cdc.Column{Kind: cdc.KindFloat, Bits: 64, SourceType: "double precision"},
				Values: []cdctest.TypeValue{v("0.1", 0.1), v("'NaN'", math.NaN())}},
			{Name: "c_bool", Type: "boolean", Column: cdc.Column{Kind: cdc.KindBool, SourceType: "boolean"},
				Values: []cdctest.TypeValue{v("true", true), v("false", false)}},
			{Name: "c_text", Type: "text", Column: cdc.Column{Kind: cdc.KindText, SourceType: "text"},
				Values: []cdctest.TypeValue{v(`'ålpha ''quoted'' \ back'`, `ålpha 'quoted' \ back`), v("''", "")}},
			{Name: "c_varchar", Type: "varchar(20)", Column: cdc.Column{Kind: cdc.KindText, Length: 20, SourceType: "character varying(20)"},
				Values: []cdctest.TypeValue{v("'Mixed Case'", "Mixed Case"), v("'😀'", "😀")}},
			{Name: "c_char", Type: "char(5)", Column: cdc.Column{Kind: cdc.KindText, Length: 5, SourceType: "character(5)"},
				Values: []cdctest.TypeValue{v("'ab'", "ab   "), v("'abcde'", "abcde")}},
			{Name: "c_bytea", Type: "bytea", Column: cdc.Column{Kind: cdc.KindBinary, SourceType: "bytea"},
				Values: []cdctest.TypeValue{v(`'\x0102ff'`, cdc.Base64("AQL/")), v("''", cdc.Base64(""))}},
			{Name: "c_date", Type: "date", Column: cdc.Column{Kind: cdc.KindDate, SourceType: "date"},
				Values: []cdctest.TypeValue{v("'2024-05-06'", "2024-05-06"), v("'0044-03-15 BC'", "0044-03-15 BC")}},
			{Name: "c_time", Type: "time", Column: cdc.Column{Kind: cdc.KindTime, Precision: 6, SourceType: "time without time zone"},
				Values: []cdctest.TypeValue{v("'13:14:15.25'", "13:14:15.25"), v("'00:00:00'", "00:00:00")}},
			{Name: "c_time3", Type: "time(3)", Column: cdc.Column{Kind: cdc.KindTime, Precision: 3, SourceType: "time(3) without time zone"},
				Values: []cdctest.TypeValue{v("'13:14:15.1239'", "13:14:15.124"), v("'23:59:59.999'", "23:59:59.999")}},
			{Name: "c_ts", Type: "timestamp", Column: cdc.Column{Kind: cdc.KindDateTime, Precision: 6, SourceType: "timestamp without time zone"},
				Values: []cdctest.TypeValue{v("'2024-05-06 07:08:09.5'", "2024-05-06 07:08:09.5"), v("'infinity'", "infinity")}},
			{Name: "c_tstz", Type: "timestamptz", Column: cdc.Column{Kind: cdc.KindTimestamp, Precision: 6, SourceType: "timestamp with time zone"},
				Values: []cdctest.TypeValue{
					v("'2024-05-06 07:08:09.123456+02'", micros(time.Date(2024, 5, 6, 5, 8, 9, 123456000, time.UTC))),
					v("'1969-12-31 23:59:59.999999+00'", cdc.EpochMicros(-1))}},
			{Name: "c_json", Type: "json", Column: cdc.Column{Kind: cdc.KindJSON, SourceType: "json"},
				Values: []cdctest.TypeValue{v(`'{"b": 2,  "a": [1, "x"]}'`, cdc.RawJSON(`{"b": 2,  "a": [1, "x"]}`)), v("'null'", cdc.RawJSON("null"))}},
			{Name: "c_jsonb", Type: "jsonb", Column: cdc.Column{Kind: cdc.KindJSON, SourceType: "jsonb"},
				Values: []cdctest.TypeValue{v(`'{"b": 2,  "a": [1, "x"]}'`, cdc.RawJSON(`{"a": [1, "x"], "b": 2}`)), v(`'"str"'`, cdc.RawJSON(`"str"`))}},
			{Name: "c_uuid", Type: "uuid", Column: cdc.Column{Kind: cdc.KindUUID, SourceType: "uuid"},
				Values: []cdctest.TypeValue{
					v("'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
					v("'00000000-0000-0000-0000-000000000000'", "00000000-0000-0000-0000-000000000000")}},
			{Name: "c_int_arr", Type: "int4[]", Column: cdc.Column{Kind: cdc.KindArray, SourceType: "integer[]", Elem: &cdc.Column{Kind: cdc.KindInt, Bits: 32}},
				Values: []cdctest.TypeValue{v("'{1,NULL,3}'", arr(int64(1), nil, int64(3))), v("'{}'", arr())}},
			{Name: "c_int_2d", Type: "int8[][]", Column: cdc.Column{Kind: cdc.KindArray, SourceType: "bigint[]", Elem: &cdc.Column{Kind: cdc.KindInt, Bits: 64}},
				Values: []cdctest.TypeValue{
					v("'{{1,2},{3,4}}'", arr(arr(int64(1), int64(2)), arr(int64(3), int64(4)))),
					v("'[0:1]={5,6}'", arr(int64(5), int64(6)))}}, // lower bounds are dropped
			{Name: "c_text_arr", Type: "text[]", Column: cdc.Column{Kind: cdc.KindArray, SourceType: "text[]", Elem: &cdc.Column{Kind: cdc.KindText}},
				Values: []cdctest.TypeValue{
					v(`ARRAY['a b', 'q"z', NULL, 'NULL', 'x,y']`, arr("a b", `q"z`, nil, "NULL", "x,y")),
					v("ARRAY['']", arr(""))}},
			{Name: "c_num_arr", Type: "numeric(5,2)[]", Column: cdc.Column{Kind: cdc.KindArray, SourceType: "numeric(5,2)[]", Elem: &cdc.Column{Kind: cdc.KindDecimal, Precision: 5, Scale: 2}},
				Values: []cdctest.TypeValue{v("'{1.5,-2}'", arr("1.50", "-2.00")), v("'{NULL}'", arr(nil))}},
			{Name: "c_bytea_arr", Type: "bytea[]", Column: cdc.Column{Kind: cdc.KindArray, SourceType: "bytea[]", Elem: &cdc.Column{Kind: cdc.KindBinary}},
				Values: []cdctest.TypeValue{v(`ARRAY['\x00'::bytea, '\xff'::bytea]`, arr(cdc.Base64("AA=="), cdc.Base64("/w=="))), v("'{}'", arr())}},
			{Name: "c_tstz_arr", Type: "timestamptz[]", Column: cdc.Column{Kind: cdc.KindArray, SourceType: "timestamp with time zone[]", Elem: &cdc.Column{Kind: cdc.KindTimestamp, Precision: 6}},
				Values: []cdctest.TypeValue{
					v("ARRAY['2024-01-01 00:00:00+00'::timestamptz]", arr(micros(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)))),
					v("'{}'", arr())}},
			{Name: "c_interval", Type: "interval", Column: cdc.Column{Kind: cdc.KindOther, SourceType: "interval"},
				Values: []cdctest.TypeValue{v("'1 day 02:03:04'", "1 day 02:03:04"), v("'-1 mons'", "-1 mons")}},
			{Name: "c_bit", Type: "bit(4)", Column: cdc.Column{Kind: cdc.KindBit, Bits: 4, SourceType: "bit(4)"},
				Values: []cdctest.TypeValue{v("B'1010'", "1010"), v("B'0000'", "0000")}},
			{Name: "c_varbit", Type: "varbit(8)", Column: cdc.Column{Kind: cdc.KindBit, Bits: 8, SourceType: "bit varying(8)"},
				Values: []cdctest.TypeValue{v("B'101'", "101"), v("B''", "")}},
			{Name: "c_inet", Type: "inet", Column: cdc.Column{Kind: cdc.KindOther, SourceType: "inet"},
				Values: []cdctest.TypeValue{v("'192.168.0.1/24'", "192.168.0.1/24"), v("'::1'", "::1")}},
		},
	}
}

// nextEvent returns the stream's next event, failing on a malformed one or the deadline.
