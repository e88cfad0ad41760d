package sink

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/cdc"
)

func b64(s string) cdc.Base64 { return cdc.Base64(base64.StdEncoding.EncodeToString([]byte(s))) }

// TestAppendDocumentPerKind: each case is one column, one value and the exact JSON value the
// document carries for it (or the RowError reason).
func TestAppendDocumentPerKind(t *testing.T) {
	dec := cdc.Column{Kind: cdc.KindDecimal, Precision: 12, Scale: 2}
	cases := []struct {
		name string
		col  cdc.Column
		v    cdc.Value
		want string // the JSON value; "" when an error is expected
		err  string // substring of the RowError reason
	}{
		{"null", cdc.Column{Kind: cdc.KindInt, Bits: 32}, nil, `null`, ""},
		{"bool", cdc.Column{Kind: cdc.KindBool}, true, `true`, ""},
		{"int_min", cdc.Column{Kind: cdc.KindInt, Bits: 64}, int64(math.MinInt64), `-9223372036854775808`, ""},
		{"uint64_max", cdc.Column{Kind: cdc.KindUint, Bits: 64}, uint64(math.MaxUint64), `18446744073709551615`, ""},
		{"uint64_above_2^63", cdc.Column{Kind: cdc.KindUint, Bits: 64}, uint64(1<<63 + 1), `9223372036854775809`, ""},
		{"float", cdc.Column{Kind: cdc.KindFloat, Bits: 64}, 0.1, `0.1`, ""},
		{"float32_shortest", cdc.Column{Kind: cdc.KindFloat, Bits: 32}, 0.1, `0.1`, ""},
		{"float_big", cdc.Column{Kind: cdc.KindFloat, Bits: 64}, 1e21, `1e+21`, ""},
		{"float_small", cdc.Column{Kind: cdc.KindFloat, Bits: 64}, 1e-7, `1e-7`, ""},
		{"float_neg_zero", cdc.Column{Kind: cdc.KindFloat, Bits: 64}, math.Copysign(0, -1), `-0`, ""},
		{"float_nan", cdc.Column{Kind: cdc.KindFloat, Bits: 64}, math.NaN(), `"NaN"`, ""},
		{"float_inf", cdc.Column{Kind: cdc.KindFloat, Bits: 64}, math.Inf(1), `"Infinity"`, ""},
		{"float_neg_inf", cdc.Column{Kind: cdc.KindFloat, Bits: 32}, math.Inf(-1), `"-Infinity"`, ""},
		{"decimal", dec, "-1.50", `"-1.50"`, ""},
		{"decimal_int", dec, "42", `"42"`, ""},
		{"decimal_trailing_zeros", dec, "1.2000", `"1.2000"`, ""},
		{"decimal_max_scaled", cdc.Column{Kind: cdc.KindDecimal, Precision: 15, Scale: 2}, "-9999999999999.99", `"-9999999999999.99"`, ""},
		{"decimal_beyond_2^53_wide", cdc.Column{Kind: cdc.KindDecimal, Precision: 18, Scale: 2}, "90071992547409.93", `"90071992547409.93"`, ""},
		{"decimal_20_6_beyond_2^53", cdc.Column{Kind: cdc.KindDecimal, Precision: 20, Scale: 6}, "9007199254.740993", `"9007199254.740993"`, ""},
		{"decimal_beyond_2^53_keyword", cdc.Column{Kind: cdc.KindDecimal, Precision: 30, Scale: 19}, "12345678901.1234567890123456789", `"12345678901.1234567890123456789"`, ""},
		{"decimal_unbounded_long", cdc.Column{Kind: cdc.KindDecimal}, "123456789012345678901234567890.5", `"123456789012345678901234567890.5"`, ""},
		{"decimal_nan", cdc.Column{Kind: cdc.KindDecimal}, "NaN", `"NaN"`, ""},
		{"decimal_nan_scaled", dec, "NaN", `"NaN"`, ""},
		{"decimal_infinity", cdc.Column{Kind: cdc.KindDecimal}, "Infinity", `"Infinity"`, ""},
		{"decimal_neg_infinity", cdc.Column{Kind: cdc.KindDecimal}, "-Infinity", `"-Infinity"`, ""},
		{"decimal_nan_lowercase", cdc.Column{Kind: cdc.KindDecimal}, "nan", "", "finite decimal"},
		{"decimal_garbage", dec, "1.2.3", "", "finite decimal"},
		{"decimal_too_many_fraction_digits", dec, "1.234", "", "fractional digits"},
		{"decimal_scaled_magnitude", dec, "123456789012345678", "", "2^53"},
		{"text", cdc.Column{Kind: cdc.KindText}, "a\"b\\c\n\x01é", `"a\"b\\c\n\u0001é"`, ""},
		{"text_invalid_utf8", cdc.Column{Kind: cdc.KindText}, "a\xffb", "", "UTF-8"},
		{"text_base64_utf8", cdc.Column{Kind: cdc.KindText, Charset: "utf8mb4"}, b64("héllo \"x\""), `"héllo \"x\""`, ""},
		{"text_base64_latin1", cdc.Column{Kind: cdc.KindText, Charset: "latin1"}, cdc.Base64(base64.StdEncoding.EncodeToString([]byte{'c', 0xe9, 0x80})), `"cé€"`, ""},
		{"text_base64_unknown_charset", cdc.Column{Kind: cdc.KindText, Charset: "klingon"}, b64("x"), "", "not supported"},
		{"text_base64_invalid_utf8", cdc.Column{Kind: cdc.KindText, Charset: "utf8mb4"}, cdc.Base64(base64.StdEncoding.EncodeToString([]byte{0xff})), "", "UTF-8"},
		{"text_base64_broken", cdc.Column{Kind: cdc.KindText}, cdc.Base64("@@@"), "", "base64"},
		{"binary", cdc.Column{Kind: cdc.KindBinary}, cdc.Base64("AAEC/w=="), `"AAEC/w=="`, ""},
		{"binary_broken", cdc.Column{Kind: cdc.KindBinary}, cdc.Base64(`a"b`), "", "base64"},
		{"date", cdc.Column{Kind: cdc.KindDate}, "2024-01-02", `"2024-01-02"`, ""},
		{"date_zero", cdc.Column{Kind: cdc.KindDate}, "0000-00-00", `null`, ""},
		{"date_zero_day", cdc.Column{Kind: cdc.KindDate}, "2024-05-00", `null`, ""},
		{"date_infinity", cdc.Column{Kind: cdc.KindDate}, "infinity", `"infinity"`, ""},
		{"date_bc", cdc.Column{Kind: cdc.KindDate}, "2024-01-02 BC", `"2024-01-02 BC"`, ""},
		{"date_year_10000", cdc.Column{Kind: cdc.KindDate}, "10000-01-01", `"10000-01-01"`, ""},
		{"date_invalid_utf8", cdc.Column{Kind: cdc.KindDate}, "x\xff", "", "UTF-8"},
		{"datetime", cdc.Column{Kind: cdc.KindDateTime}, "2024-01-02 03:04:05", `"2024-01-02 03:04:05"`, ""},
		{"datetime_fraction_trimmed", cdc.Column{Kind: cdc.KindDateTime}, "2024-01-02 03:04:05.120000", `"2024-01-02 03:04:05.12"`, ""},
		{"datetime_fraction_zero", cdc.Column{Kind: cdc.KindDateTime}, "2024-01-02 03:04:05.000", `"2024-01-02 03:04:05"`, ""},
		{"datetime_zero", cdc.Column{Kind: cdc.KindDateTime}, "0000-00-00 00:00:00", `null`, ""},
		{"datetime_bc", cdc.Column{Kind: cdc.KindDateTime}, "0044-03-15 12:00:00 BC", `"0044-03-15 12:00:00 BC"`, ""},
		{"datetime_other_shape", cdc.Column{Kind: cdc.KindDateTime}, "2024-01-02T03:04:05", `"2024-01-02T03:04:05"`, ""},
		{"timestamp_whole_ms", cdc.Column{Kind: cdc.KindTimestamp}, cdc.EpochMicros(1700000000123000), `1700000000123`, ""},
		{"timestamp_micros", cdc.Column{Kind: cdc.KindTimestamp}, cdc.EpochMicros(1700000000123456), `1700000000123.456`, ""},
		{"timestamp_micros_trim", cdc.Column{Kind: cdc.KindTimestamp}, cdc.EpochMicros(1700000000123450), `1700000000123.45`, ""},
		{"timestamp_negative", cdc.Column{Kind: cdc.KindTimestamp}, cdc.EpochMicros(-1500), `-1.5`, ""},
		{"timestamp_negative_sub_ms", cdc.Column{Kind: cdc.KindTimestamp}, cdc.EpochMicros(-5), `-0.005`, ""},
		{"timestamp_zero", cdc.Column{Kind: cdc.KindTimestamp}, cdc.EpochMicros(0), `0`, ""},
		{"timestamp_infinity", cdc.Column{Kind: cdc.KindTimestamp}, "infinity", `"infinity"`, ""},
		{"timestamp_neg_infinity", cdc.Column{Kind: cdc.KindTimestamp}, "-infinity", `"-infinity"`, ""},
		{"time", cdc.Column{Kind: cdc.KindTime}, "15:04:05.500000", `"15:04:05.5"`, ""},
		{"time_negative_mysql", cdc.Column{Kind: cdc.KindTime}, "-838:59:59", `"-838:59:59"`, ""},
		{"json_object", cdc.Column{Kind: cdc.KindJSON}, cdc.RawJSON(`{"a": [1, "x y"],` + "\n" + `"b":null}`), `{"a":[1,"x y"],"b":null}`, ""},
		{"json_escaped_quote", cdc.Column{Kind: cdc.KindJSON}, cdc.RawJSON(`{"a\" b": "c\\" }`), `{"a\" b":"c\\"}`, ""},
		{"json_invalid", cdc.Column{Kind: cdc.KindJSON}, cdc.RawJSON(`{"a":`), "", "invalid JSON"},
		{"enum", cdc.Column{Kind: cdc.KindEnum}, "small", `"small"`, ""},
		{"set", cdc.Column{Kind: cdc.KindSet}, "a,b", `["a","b"]`, ""},
		{"set_empty", cdc.Column{Kind: cdc.KindSet}, "", `[]`, ""},
		{"bit_mysql", cdc.Column{Kind: cdc.KindBit, Bits: 4}, uint64(5), `"0101"`, ""},
		{"bit_mysql_64", cdc.Column{Kind: cdc.KindBit, Bits: 64}, uint64(1 << 63), `"1` + strings.Repeat("0", 63) + `"`, ""},
		{"bit_postgres", cdc.Column{Kind: cdc.KindBit, Bits: 4}, "0101", `"0101"`, ""},
		{"bit_garbage", cdc.Column{Kind: cdc.KindBit}, "01x", "", "bit string"},
		{"uuid", cdc.Column{Kind: cdc.KindUUID}, "0e37df36-f698-11e6-8dd4-cb9ced3df976", `"0e37df36-f698-11e6-8dd4-cb9ced3df976"`, ""},
		{"array", cdc.Column{Kind: cdc.KindArray, Elem: &cdc.Column{Kind: cdc.KindInt, Bits: 32}}, []cdc.Value{int64(1), nil, int64(-3)}, `[1,null,-3]`, ""},
		{"array_2d", cdc.Column{Kind: cdc.KindArray, Elem: &cdc.Column{Kind: cdc.KindText}}, []cdc.Value{[]cdc.Value{"a"}, []cdc.Value{"b"}}, `[["a"],["b"]]`, ""},
		{"array_2d_int", cdc.Column{Kind: cdc.KindArray, Elem: &cdc.Column{Kind: cdc.KindInt, Bits: 64}}, []cdc.Value{[]cdc.Value{int64(1), nil}, []cdc.Value{int64(-9223372036854775808), int64(4)}}, `[[1,null],[-9223372036854775808,4]]`, ""},
		{"array_3d_empty", cdc.Column{Kind: cdc.KindArray, Elem: &cdc.Column{Kind: cdc.KindInt, Bits: 64}}, []cdc.Value{[]cdc.Value{[]cdc.Value{}, []cdc.Value{int64(2)}}}, `[[[],[2]]]`, ""},
		{"array_2d_bad_elem", cdc.Column{Kind: cdc.KindArray, Elem: &cdc.Column{Kind: cdc.KindText}}, []cdc.Value{[]cdc.Value{"a"}, []cdc.Value{"b", int64(1)}}, "", "array element 1: array element 1: unexpected value type int64"},
		{"array_2d_strict_nan", cdc.Column{Kind: cdc.KindArray, Elem: &cdc.Column{Kind: cdc.KindFloat}}, []cdc.Value{[]cdc.Value{math.Inf(-1)}}, `[["-Infinity"]]`, ""},
		{"array_too_deep", cdc.Column{Kind: cdc.KindArray, Elem: &cdc.Column{Kind: cdc.KindInt}}, nested(9, int64(1)), "", "nested deeper than 8"},
		{"array_depth_8", cdc.Column{Kind: cdc.KindArray, Elem: &cdc.Column{Kind: cdc.KindInt}}, nested(8, int64(1)), strings.Repeat("[", 8) + "1" + strings.Repeat("]", 8), ""},
		{"array_nan_elem", cdc.Column{Kind: cdc.KindArray, Elem: &cdc.Column{Kind: cdc.KindFloat}}, []cdc.Value{1.5, math.NaN()}, `[1.5,"NaN"]`, ""},
		{"array_bad_elem", cdc.Column{Kind: cdc.KindArray, Elem: &cdc.Column{Kind: cdc.KindText}}, []cdc.Value{"ok", "\xff"}, "", "array element 1: text"},
		{"other_nan", cdc.Column{Kind: cdc.KindOther}, math.NaN(), `"NaN"`, ""},
		{"other_text", cdc.Column{Kind: cdc.KindOther}, "1 day 02:00:00", `"1 day 02:00:00"`, ""},
		{"wrong_type", cdc.Column{Kind: cdc.KindInt}, "12", "", "unexpected value type string"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.col.Name = "c"
			s := &cdc.TableSchema{Columns: []cdc.Column{{Name: "id", Kind: cdc.KindInt, Bits: 32}, tc.col}}
			prefix := []byte("prefix")
			got, err := AppendDocument(prefix, s, []cdc.Value{int64(7), tc.v})
			if tc.err != "" {
				var re *RowError
				if !errors.As(err, &re) {
					t.Fatalf("err = %v, want a *RowError", err)
				}
				if re.Column != "c" || !strings.Contains(re.Reason, tc.err) {
					t.Fatalf("RowError %+v, want column c and reason containing %q", re, tc.err)
				}
				if string(got) != "prefix" {
					t.Fatalf("dst not restored: %q", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := `prefix{"id":7,"c":` + tc.want + `}`
			if string(got) != want {
				t.Fatalf("\n got %s\nwant %s", got, want)
			}
			if !json.Valid(got[len("prefix"):]) {
				t.Fatal("document is not valid JSON")
			}
		})
	}
}

// nested wraps v in n levels of one-element arrays (n >= 1).
func nested(n int, v cdc.Value) cdc.Value {
	for range n {
		v = []cdc.Value{v}
	}
	return v
}

// TestAppendDocumentArrays2D: a schema whose Elem is itself an array (a shape no source
// produces today; pgcdc gives bigint[][] the scalar Elem and nested values, the array_2d cases
// above) nests the same way; mapping one dimension suffices (both engines flatten arrays of
// arrays), and the document keeps the nesting.
func TestAppendDocumentArrays2D(t *testing.T) {
	elem := &cdc.Column{Kind: cdc.KindText}
	col := cdc.Column{Name: "a", Kind: cdc.KindArray, Elem: &cdc.Column{Kind: cdc.KindArray, Elem: elem}}
	got, err := AppendDocument(nil, &cdc.TableSchema{Columns: []cdc.Column{col}}, []cdc.Value{[]cdc.Value{[]cdc.Value{"a"}, []cdc.Value{"b"}}})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != `{"a":[["a"],["b"]]}` {
		t.Fatalf("got %s", got)
	}
}

// TestAppendDocumentSameAcrossSources: the shapes MySQL and PostgreSQL give for the same
// logical row produce the same bytes.
func TestAppendDocumentSameAcrossSources(t *testing.T) {
	my := &cdc.TableSchema{Columns: []cdc.Column{
		{Name: "id", Kind: cdc.KindInt, Bits: 32},
		{Name: "note", Kind: cdc.KindText, Charset: "latin1"},
		{Name: "flags", Kind: cdc.KindBit, Bits: 8},
		{Name: "at", Kind: cdc.KindDateTime, Precision: 6},
		{Name: "ts", Kind: cdc.KindTimestamp, Precision: 6},
		{Name: "price", Kind: cdc.KindDecimal, Precision: 10, Scale: 2},
		{Name: "doc", Kind: cdc.KindJSON},
	}}
	pg := &cdc.TableSchema{Columns: []cdc.Column{
		{Name: "id", Kind: cdc.KindInt, Bits: 32},
		{Name: "note", Kind: cdc.KindText},
		{Name: "flags", Kind: cdc.KindBit, Bits: 8},
		{Name: "at", Kind: cdc.KindDateTime, Precision: 6},
		{Name: "ts", Kind: cdc.KindTimestamp, Precision: 6},
		{Name: "price", Kind: cdc.KindDecimal, Precision: 10, Scale: 2},
		{Name: "doc", Kind: cdc.KindJSON},
	}}
	myRow := []cdc.Value{int64(1), cdc.Base64(base64.StdEncoding.EncodeToString([]byte{'c', 'a', 'f', 0xe9})), uint64(0xa5),
		"2024-01-02 03:04:05.120000", cdc.EpochMicros(1704164645120000), "12.50", cdc.RawJSON(`{"a":1}`)}
	pgRow := []cdc.Value{int64(1), "café", "10100101", "2024-01-02 03:04:05.12", cdc.EpochMicros(1704164645120000), "12.50", cdc.RawJSON(`{"a": 1}`)}
	a, err := AppendDocument(nil, my, myRow)
	if err != nil {
		t.Fatal(err)
	}
	b, err := AppendDocument(nil, pg, pgRow)
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) {
		t.Fatalf("mysql %s\npostgres %s", a, b)
	}
}

func TestAppendDocumentErrorsNeverQuoteValues(t *testing.T) {
	secret := "s3cr3t-value"
	s := &cdc.TableSchema{Columns: []cdc.Column{{Name: "c", Kind: cdc.KindDecimal}, {Name: "d", Kind: cdc.KindDate}, {Name: "t", Kind: cdc.KindText}}}
	// d goes to a date field without ignore_malformed, which refuses what no format parses.
	guards := []fieldGuard{{}, {kind: fieldDate}, {}}
	for _, row := range [][]cdc.Value{{secret, nil, nil}, {nil, secret, nil}, {nil, nil, secret + "\xff"}} {
		_, err := appendDocument(nil, s, row, MappingOptions{}, guards)
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Fatalf("err = %v", err)
		}
	}
}

func TestAppendDocumentRowShape(t *testing.T) {
	s := &cdc.TableSchema{Columns: []cdc.Column{{Name: "a", Kind: cdc.KindInt}}}
	if _, err := AppendDocument(nil, s, nil); err == nil {
		t.Fatal("no error for a short row")
	}
	bad := &cdc.TableSchema{Columns: []cdc.Column{{Name: "a.b", Kind: cdc.KindInt}}}
	var re *RowError
	if _, err := AppendDocument(nil, bad, []cdc.Value{int64(1)}); !errors.As(err, &re) || re.Column != "a.b" {
		t.Fatalf("err = %v", err)
	}
}

// TestAppendDocumentDecimalOptions: the scaled_float checks apply to the fields the options
// generate, and only to scaled_float ones.
func TestAppendDocumentDecimalOptions(t *testing.T) {
	s := &cdc.TableSchema{Columns: []cdc.Column{{Name: "d", Kind: cdc.KindDecimal, Precision: 12, Scale: 2}}}
	// More fractional digits than the scale: no real row has them, but a scaled_float
	// would round them, so the default refuses and the other options pass them through.
	row := []cdc.Value{"1234.567"}
	if _, err := (MappingOptions{}).AppendDocument(nil, s, row); err == nil {
		t.Fatal("scaled_float: no error for a value it would round")
	}
	for _, d := range []DecimalMapping{DecimalKeyword, DecimalDouble} {
		got, err := (MappingOptions{DecimalAs: d}).AppendDocument(nil, s, row)
		if err != nil || string(got) != `{"d":"1234.567"}` {
			t.Fatalf("decimal mapping %d: %s, %v", d, got, err)
		}
	}
}

// TestScaledExactMatchesJava: values around 2^53 units where double rounding decides.
func TestScaledExactMatchesJava(t *testing.T) {
	cases := []struct {
		s     string
		scale int
		want  bool
	}{
		{"9007199254740992", 0, true},  // 2^53
		{"9007199254740993", 0, false}, // 2^53+1 parses to 2^53
		{"-9007199254740992", 0, true}, // -2^53
		{"0.07", 2, true},              // 0.07*100 = 7.000000000000001 rounds to 7
		{"1.005", 3, true},             // 1.005 is 1.00499999999999989...; *1000 rounds to 1005
		{"90071992547409.91", 2, true}, //
		{"0.000000000000000001", 18, true},
		{"9.999999999999999999", 18, false}, // beyond 2^53 units
	}
	for _, tc := range cases {
		i, f, ok := decimalShape(tc.s)
		if !ok {
			t.Fatalf("%s: shape", tc.s)
		}
		if got := scaledExact(tc.s, tc.scale, i, f); got != tc.want {
			t.Errorf("scaledExact(%s, %d) = %v, want %v", tc.s, tc.scale, got, tc.want)
		}
	}
}

// benchRow is a typical ~20-column row: ids, text, decimals, temporals, a small JSON document.
func benchRow() (*cdc.TableSchema, []cdc.Value) {
	s := &cdc.TableSchema{Columns: []cdc.Column{
		{Name: "id", Kind: cdc.KindInt, Bits: 64},
		{Name: "customer_id", Kind: cdc.KindInt, Bits: 32},
		{Name: "status", Kind: cdc.KindEnum},
		{Name: "active", Kind: cdc.KindBool},
		{Name: "qty", Kind: cdc.KindInt, Bits: 16},
		{Name: "views", Kind: cdc.KindUint, Bits: 64},
		{Name: "price", Kind: cdc.KindDecimal, Precision: 12, Scale: 2},
		{Name: "tax", Kind: cdc.KindDecimal, Precision: 12, Scale: 4},
		{Name: "weight", Kind: cdc.KindFloat, Bits: 64},
		{Name: "name", Kind: cdc.KindText, Charset: "utf8mb4"},
		{Name: "email", Kind: cdc.KindText, Charset: "utf8mb4"},
		{Name: "notes", Kind: cdc.KindText, Charset: "utf8mb4"},
		{Name: "avatar", Kind: cdc.KindBinary},
		{Name: "born", Kind: cdc.KindDate},
		{Name: "created_at", Kind: cdc.KindTimestamp},
		{Name: "updated_at", Kind: cdc.KindDateTime},
		{Name: "opens", Kind: cdc.KindTime},
		{Name: "attrs", Kind: cdc.KindJSON},
		{Name: "tags", Kind: cdc.KindSet},
		{Name: "uid", Kind: cdc.KindUUID},
	}}
	row := []cdc.Value{int64(123456789), int64(42), "shipped", true, int64(3), uint64(1 << 40), "1234.50", "12.3456", 2.5,
		"Ada Lovelace", "ada@example.com", b64("a longer note with \"quotes\" and a\nnewline in it"), cdc.Base64("AAECAwQFBgc="),
		"1815-12-10", cdc.EpochMicros(1704164645123456), "2024-01-02 03:04:05.120000", "09:30:00",
		cdc.RawJSON(`{"color":"red","size":[1,2,3]}`), "a,b,c", "0e37df36-f698-11e6-8dd4-cb9ced3df976"}
	return s, row
}

func BenchmarkAppendDocument(b *testing.B) {
	s, row := benchRow()
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = AppendDocument(buf[:0], s, row); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(buf)))
}

func TestAppendDocumentAllocs(t *testing.T) {
	s, row := benchRow()
	buf := make([]byte, 0, 4096)
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		if buf, err = AppendDocument(buf[:0], s, row); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Fatalf("%.1f allocations per document, want at most 1", allocs)
	}
}
