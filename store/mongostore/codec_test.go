package mongostore

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tributary-dev/tributary/store/driver"
)

const testMeta = "_tributary"

// stored returns the BSON document a put of js would store (with an _id and metadata).
func stored(t *testing.T, js string, times []string, ferret bool) ([]byte, error) {
	t.Helper()
	buf := appendID(make([]byte, 4), driver.NewStringKey("k"))
	buf, err := encodeBody(driver.Document{JSON: []byte(js), Times: times}, testMeta, ferret, buf)
	if err != nil {
		return nil, err
	}
	buf = appendMeta(buf, testMeta, make([]byte, tokenLength))
	buf = append(buf, 0)
	putLen(buf)
	if err := bson.Raw(buf).Validate(); err != nil {
		t.Fatalf("encoder produced invalid BSON for %s: %v", js, err)
	}
	return buf, nil
}

func putLen(b []byte) {
	b[0], b[1], b[2], b[3] = byte(len(b)), byte(len(b)>>8), byte(len(b)>>16), byte(len(b)>>24)
}

func roundTrip(t *testing.T, js string, times ...string) (string, []string) {
	t.Helper()
	raw, err := stored(t, js, times, false)
	if err != nil {
		t.Fatalf("encode %s: %v", js, err)
	}
	doc, err := decodeDocument(raw, testMeta)
	if err != nil {
		t.Fatalf("decode %s: %v", js, err)
	}
	if !json.Valid(doc.JSON) {
		t.Fatalf("decoded JSON is invalid: %s", doc.JSON)
	}
	return string(doc.JSON), doc.Times
}

func TestRoundTripKeepsDocuments(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"key order", `{"b":1,"a":2,"c":{"z":1,"y":[1,2,{"x":null}]},"_":true}`, ""},
		{"empty", `{}`, ""},
		{"empty containers", `{"o":{},"a":[],"n":[[],[{}]]}`, ""},
		{"whitespace", " {\n\t\"a\" : [ 1 , 2 ] ,\r\n \"b\" : { } } ", `{"a":[1,2],"b":{}}`},
		{"int32 and int64 extremes", `{"a":2147483647,"b":-2147483648,"c":2147483648,"d":-2147483649,"e":9223372036854775807,"f":-9223372036854775808}`, ""},
		{"beyond int64", `{"a":9223372036854775808,"b":-9223372036854775809,"c":100000000000000000000000000000000}`, ""},
		{"doubles", `{"a":0.1,"b":1.5,"c":-2.25e-8,"d":1e+300,"e":0.30000000000000004,"f":123456.789}`, `{"a":0.1,"b":1.5,"c":-2.25e-8,"d":1e+300,"e":0.30000000000000004,"f":123456.789}`},
		{"integral doubles stay doubles", `{"a":5.0,"b":1e21,"c":1E2,"d":-0.0}`, `{"a":5.0,"b":1e+21,"c":100.0,"d":-0.0}`},
		{"negative zero keeps its sign", `{"z":-0}`, `{"z":-0.0}`},
		{"high precision decimals", `{"a":1.00000000000000000001,"b":1E400,"c":-1.5e-400,"d":3.141592653589793238462643383279502}`, `{"a":1.00000000000000000001,"b":1E+400,"c":-1.5E-400,"d":3.141592653589793238462643383279502}`},
		{"unicode", `{"text":"naïve café — 東京 🚀","emoji🔑":"\u0000\u001f\u2028","esc":"\ud83d\ude80 \"q\" \\ \/ \b\f\n\r\t"}`, `{"text":"naïve café — 東京 🚀","emoji🔑":"\u0000\u001f` + "\u2028" + `","esc":"🚀 \"q\" \\ / \u0008\u000c\n\r\t"}`},
		{"nested _id and metadata names are ordinary", `{"n":{"_id":1,"_tributary":2}}`, ""},
		{"strings that look like dates stay strings", `{"at":"2026-11-30T04:05:06Z"}`, ""},
		{"booleans and null", `{"t":true,"f":false,"n":null}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if want == "" {
				want = tc.in
			}
			got, times := roundTrip(t, tc.in)
			if got != want {
				t.Fatalf("round trip\n got %s\nwant %s", got, want)
			}
			if len(times) != 0 {
				t.Fatalf("unmarked document came back with time pointers %q", times)
			}
			if !sameJSONNumbers(t, tc.in, got) {
				t.Fatalf("values changed: %s -> %s", tc.in, got)
			}
		})
	}
}

// sameJSONNumbers compares two JSON texts as values, numbers by exact decimal value.
func sameJSONNumbers(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	for _, p := range []struct {
		s string
		v *any
	}{{a, &x}, {b, &y}} {
		dec := json.NewDecoder(strings.NewReader(p.s))
		dec.UseNumber()
		if err := dec.Decode(p.v); err != nil {
			t.Fatal(err)
		}
	}
	var eq func(x, y any) bool
	eq = func(x, y any) bool {
		switch x := x.(type) {
		case json.Number:
			y, ok := y.(json.Number)
			return ok && sameDecimal(string(x), string(y))
		case map[string]any:
			y, ok := y.(map[string]any)
			if !ok || len(x) != len(y) {
				return false
			}
			for k, v := range x {
				if !eq(v, y[k]) {
					return false
				}
			}
			return true
		case []any:
			y, ok := y.([]any)
			return ok && slices.EqualFunc(x, y, eq)
		}
		return x == y
	}
	return eq(x, y)
}

func TestNumbersGetExactBSONTypes(t *testing.T) {
	raw, err := stored(t, `{"i32":7,"i32min":-2147483648,"i64":2147483648,"dbl":0.5,"dblint":2.0,"dec":9223372036854775808,"prec":0.10000000000000000001,"negz":-0}`, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bson.Type{
		"i32": bson.TypeInt32, "i32min": bson.TypeInt32, "i64": bson.TypeInt64, "dbl": bson.TypeDouble,
		"dblint": bson.TypeDouble, "dec": bson.TypeDecimal128, "prec": bson.TypeDecimal128, "negz": bson.TypeDouble,
	}
	for k, typ := range want {
		if got := bson.Raw(raw).Lookup(k).Type; got != typ {
			t.Errorf("%s stored as %v, want %v", k, got, typ)
		}
	}
	if d := bson.Raw(raw).Lookup("dec").Decimal128(); d.String() != "9223372036854775808" {
		t.Errorf("dec stored as %s", d)
	}
	if f := bson.Raw(raw).Lookup("negz").Double(); !math.Signbit(f) || f != 0 {
		t.Errorf("-0 stored as %v", f)
	}
}

func TestNumbersNoTypeHoldsAreRefused(t *testing.T) {
	for _, js := range []string{
		`{"a":3.14159265358979323846264338327950288}`, // 36 significant digits
		`{"a":12345678901234567890123456789012345}`,   // 35-digit integer
		`{"a":1e99999999999}`,                         // exponent beyond any type
		`{"a":1e-7000}`,
	} {
		_, err := stored(t, js, nil, false)
		if driver.KindOf(err) != driver.KindInvalid {
			t.Errorf("%s: error %v, want invalid", js, err)
		}
	}
}

func TestDateTimesOnlyWhereMarked(t *testing.T) {
	in := `{"at":"2026-11-30T04:05:06.789Z","looks":"2026-11-30T04:05:06Z","nested":{"when":"1969-07-20T20:17:40Z"},"list":["x","2000-01-01T00:00:00Z"],"a/b~c":"2001-02-03T04:05:06Z"}`
	times := []string{"/at", "/nested/when", "/list/1", "/a~1b~0c"}
	raw, err := stored(t, in, times, false)
	if err != nil {
		t.Fatal(err)
	}
	r := bson.Raw(raw)
	for _, path := range [][]string{{"at"}, {"nested", "when"}, {"a/b~c"}} {
		if typ := r.Lookup(path...).Type; typ != bson.TypeDateTime {
			t.Errorf("%v stored as %v, want a datetime", path, typ)
		}
	}
	if typ := r.Lookup("looks").Type; typ != bson.TypeString {
		t.Errorf("unmarked date-like string stored as %v", typ)
	}
	if typ := r.Lookup("list", "1").Type; typ != bson.TypeDateTime {
		t.Errorf("list/1 stored as %v", typ)
	}
	if typ := r.Lookup("list", "0").Type; typ != bson.TypeString {
		t.Errorf("list/0 stored as %v", typ)
	}
	got, gotTimes := roundTrip(t, in, times...)
	if got != in {
		t.Fatalf("round trip\n got %s\nwant %s", got, in)
	}
	slices.Sort(gotTimes)
	slices.Sort(times)
	if !slices.Equal(gotTimes, times) {
		t.Fatalf("time pointers %q, want %q", gotTimes, times)
	}
}

func TestDateTimeNormalisation(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"2026-01-01T01:30:00+01:30", "2026-01-01T00:00:00Z"},
		{"2026-01-01T00:00:00.100Z", "2026-01-01T00:00:00.1Z"},
		{"0001-01-01T00:00:00Z", "0001-01-01T00:00:00Z"},
		{"9999-12-31T23:59:59.999Z", "9999-12-31T23:59:59.999Z"},
		{"1969-12-31T23:59:59.999-00:00", "1969-12-31T23:59:59.999Z"},
	} {
		got, times := roundTrip(t, `{"t":"`+tc.in+`"}`, "/t")
		if got != `{"t":"`+tc.want+`"}` || !slices.Equal(times, []string{"/t"}) {
			t.Errorf("%s came back as %s %q, want %s", tc.in, got, times, tc.want)
		}
		a, _ := time.Parse(time.RFC3339Nano, tc.in)
		b, _ := time.Parse(time.RFC3339Nano, tc.want)
		if !a.Equal(b) {
			t.Errorf("%s and %s are different instants", tc.in, tc.want)
		}
	}
}

func TestDateTimeRefusals(t *testing.T) {
	for _, tc := range []struct {
		js    string
		times []string
	}{
		{`{"t":"2026-01-01T00:00:00.0001Z"}`, []string{"/t"}},      // finer than a millisecond
		{`{"t":"2026-01-01T00:00:00.123456789Z"}`, []string{"/t"}}, // nanoseconds
		{`{"t":"yesterday"}`, []string{"/t"}},
		{`{"t":5}`, []string{"/t"}},
		{`{"t":{"x":1}}`, []string{"/t"}},
		{`{"t":"2026-01-01T00:00:00Z"}`, []string{"/u"}}, // names nothing
		{`{"t":["2026-01-01T00:00:00Z"]}`, []string{"/t/1"}},
		{`{"t":"2026-01-01T00:00:00Z"}`, []string{"t"}}, // not a pointer
	} {
		if _, err := stored(t, tc.js, tc.times, false); driver.KindOf(err) != driver.KindInvalid {
			t.Errorf("%s %q: error %v, want invalid", tc.js, tc.times, err)
		}
	}
}

func TestExtendedJSONRoundTrips(t *testing.T) {
	in := `{"id":{"$oid":"5f1a2b3c4d5e6f7081920a1b"},"bin":{"$binary":{"base64":"AP8=","subType":"00"}},` +
		`"uuid":{"$binary":{"base64":"AAAAAAAAAAAAAAAAAAAAAA==","subType":"04"}},"ts":{"$timestamp":{"t":5,"i":6}},` +
		`"re":{"$regularExpression":{"pattern":"^a\\.b","options":"i"}},"min":{"$minKey":1},"max":{"$maxKey":1},` +
		`"nan":{"$numberDouble":"NaN"},"inf":{"$numberDouble":"-Infinity"},"dnan":{"$numberDecimal":"NaN"},"dinf":{"$numberDecimal":"Infinity"}}`
	raw, err := stored(t, in, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	r := bson.Raw(raw)
	for k, typ := range map[string]bson.Type{
		"id": bson.TypeObjectID, "bin": bson.TypeBinary, "uuid": bson.TypeBinary, "ts": bson.TypeTimestamp,
		"re": bson.TypeRegex, "min": bson.TypeMinKey, "max": bson.TypeMaxKey, "nan": bson.TypeDouble,
		"inf": bson.TypeDouble, "dnan": bson.TypeDecimal128, "dinf": bson.TypeDecimal128,
	} {
		if got := r.Lookup(k).Type; got != typ {
			t.Errorf("%s stored as %v, want %v", k, got, typ)
		}
	}
	if sub, data := r.Lookup("bin").Binary(); sub != 0 || string(data) != "\x00\xff" {
		t.Errorf("binary stored as %d %x", sub, data)
	}
	if ts, i := r.Lookup("ts").Timestamp(); ts != 5 || i != 6 {
		t.Errorf("timestamp stored as %d,%d", ts, i)
	}
	// The wrappers are also what a read returns, in a key order of its own for $binary.
	got, _ := roundTrip(t, in)
	if got != in {
		t.Fatalf("round trip\n got %s\nwant %s", got, in)
	}
}

func TestMalformedExtendedJSONIsRefused(t *testing.T) {
	for _, js := range []string{
		`{"a":{"$oid":"xyz"}}`,
		`{"a":{"$oid":"5f1a2b3c4d5e6f7081920a1b","$x":1}}`,
		`{"a":{"$oid":5}}`,
		`{"a":{"$binary":{"base64":"!!","subType":"00"}}}`,
		`{"a":{"$binary":{"base64":"AA==","subType":"100"}}}`,
		`{"a":{"$binary":{"base64":"AA=="}}}`,
		`{"a":{"$timestamp":{"t":-1,"i":0}}}`,
		`{"a":{"$timestamp":{"t":1}}}`,
		`{"a":{"$regularExpression":{"pattern":"x"}}}`,
		`{"a":{"$minKey":2}}`,
		`{"a":{"$numberDouble":"1.5"}}`,
		`{"a":{"$numberDecimal":"1.5"}}`,
		`{"a":{"$date":"2026-01-01T00:00:00Z"}}`,
		`{"a":{"$set":{"x":1}}}`,
	} {
		if _, err := stored(t, js, nil, false); driver.KindOf(err) != driver.KindInvalid {
			t.Errorf("%s: error %v, want invalid", js, err)
		}
	}
	// A '$' member beside ordinary ones is left to the server (MongoDB 5 stores it).
	if _, err := stored(t, `{"a":{"$x":1,"y":2}}`, nil, false); err != nil {
		t.Errorf("mixed '$' object: %v", err)
	}
}

func TestShapesBSONCannotStoreAreRefused(t *testing.T) {
	deep := strings.Repeat(`{"a":`, maxDepth) + "1" + strings.Repeat("}", maxDepth)
	if _, err := stored(t, `{"d":`+deep+`}`, nil, false); driver.KindOf(err) != driver.KindInvalid {
		t.Errorf("nesting deeper than %d: error %v, want invalid", maxDepth, err)
	}
	// The top-level object is the first of the levels.
	ok := strings.Repeat(`[`, maxDepth-1) + strings.Repeat("]", maxDepth-1)
	if _, err := stored(t, `{"d":`+ok+`}`, nil, false); err != nil {
		t.Errorf("nesting of exactly %d levels: %v", maxDepth, err)
	}
	for _, js := range []string{
		`{"_id":1}`,
		`{"_tributary":{}}`,
		`{"$set":{"a":1}}`,
		`{"a":1,"a":2}`,
		`{"a":{"b":1,"c":2,"b":3}}`,
		`{"k\u0000":1}`,
		`{"s":"\ud800"}`,
		`{"s":"\udc00\ud800"}`,
		`{"s":"\ud800\u0041"}`,
		`[1]`,
		`"x"`,
		`{"a":01}`,
		`{"a":1.}`,
		`{"a":.5}`,
		`{"a":+1}`,
		`{"a":tru}`,
		`{"a":1,}`,
		`{"a" 1}`,
		`{"a":"x` + "\n" + `"}`,
		`{"a":"\x"}`,
		`{"a":1}}`,
		`{"a":[1,]}`,
		`{"a":"` + "\xff" + `"}`,
		`{`,
	} {
		if _, err := stored(t, js, nil, false); driver.KindOf(err) != driver.KindInvalid {
			t.Errorf("%q: error %v, want invalid", js, err)
		}
	}
	// Many members take the map path of the duplicate check.
	var b strings.Builder
	b.WriteString(`{`)
	for i := range 40 {
		b.WriteString(`"k` + strconv.Itoa(i) + `":1,`)
	}
	if _, err := stored(t, b.String()+`"k7":2}`, nil, false); driver.KindOf(err) != driver.KindInvalid {
		t.Errorf("duplicate among many members: error %v, want invalid", err)
	}
	if _, err := stored(t, b.String()+`"fresh":2}`, nil, false); err != nil {
		t.Errorf("many distinct members: %v", err)
	}
}

func TestFerretDBModeRefusesWhatFerretDBCannotStore(t *testing.T) {
	for _, js := range []string{
		`{"a":9223372036854775808}`,
		`{"a":1.00000000000000000001}`,
		`{"a":{"$minKey":1}}`,
		`{"a":{"$numberDouble":"NaN"}}`,
		`{"a":{"$numberDecimal":"Infinity"}}`,
	} {
		if _, err := stored(t, js, nil, true); driver.KindOf(err) != driver.KindInvalid {
			t.Errorf("%s: error %v, want invalid", js, err)
		}
		if _, err := stored(t, js, nil, false); err != nil {
			t.Errorf("%s without FerretDB mode: %v", js, err)
		}
	}
	if _, err := stored(t, `{"a":1,"b":0.5,"c":{"$oid":"5f1a2b3c4d5e6f7081920a1b"}}`, nil, true); err != nil {
		t.Errorf("ordinary document in FerretDB mode: %v", err)
	}
}

func TestErrorsNeverQuoteDocuments(t *testing.T) {
	const secret = "s3cr3t-value"
	for _, js := range []string{
		`{"` + secret + `":1,"` + secret + `":2}`,
		`{"_id":"` + secret + `"}`,
		`{"a":"` + secret + `","t":"` + secret + `"}`,
		`{"a":{"$oid":"` + secret + `"}}`,
		`{"a":` + secret + `}`,
	} {
		_, err := stored(t, js, []string{"/t"}, false)
		if err == nil {
			t.Fatalf("%s was accepted", js)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error quotes the document: %v", err)
		}
	}
}

func TestDecodeStoredTypes(t *testing.T) {
	oid := bson.ObjectID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	dec, _ := bson.ParseDecimal128("1.50")
	raw, err := bson.Marshal(bson.D{
		{Key: "_id", Value: oid},
		{Key: "i32", Value: int32(-5)},
		{Key: "i64", Value: int64(1) << 40},
		{Key: "dbl", Value: 2.0},
		{Key: "dec", Value: dec},
		{Key: "when", Value: bson.DateTime(1700000000123)},
		{Key: "ref", Value: oid},
		{Key: "bin", Value: bson.Binary{Subtype: 0x80, Data: []byte{1}}},
		{Key: "arr", Value: bson.A{bson.D{{Key: "at", Value: bson.DateTime(0)}}}},
		{Key: testMeta, Value: bson.D{{Key: "rev", Value: bson.Binary{Data: make([]byte, 16)}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := decodeDocument(raw, testMeta)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"i32":-5,"i64":1099511627776,"dbl":2.0,"dec":1.50,"when":"2023-11-14T22:13:20.123Z","ref":{"$oid":"0102030405060708090a0b0c"},"bin":{"$binary":{"base64":"AQ==","subType":"80"}},"arr":[{"at":"1970-01-01T00:00:00Z"}]}`
	if string(doc.JSON) != want {
		t.Fatalf("decoded\n got %s\nwant %s", doc.JSON, want)
	}
	if !slices.Equal(doc.Times, []string{"/when", "/arr/0/at"}) {
		t.Fatalf("times %q", doc.Times)
	}
}

func TestDecodeRefusesWhatJSONCannotHold(t *testing.T) {
	for name, v := range map[string]any{
		"symbol":      bson.Symbol("x"),
		"javascript":  bson.JavaScript("f()"),
		"undefined":   bson.Undefined{},
		"dbpointer":   bson.DBPointer{DB: "x", Pointer: bson.ObjectID{}},
		"bad utf8":    string([]byte{0xff, 0xfe}),
		"far future":  bson.DateTime(math.MaxInt64),
		"bc datetime": bson.DateTime(-70000000000000),
	} {
		raw, err := bson.Marshal(bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: v}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeDocument(raw, testMeta); driver.KindOf(err) != driver.KindInvalid {
			t.Errorf("%s: error %v, want invalid", name, err)
		}
	}
	if _, err := decodeDocument([]byte{5, 0, 0, 0}, testMeta); driver.KindOf(err) != driver.KindInternal {
		t.Errorf("malformed BSON: error %v, want internal", err)
	}
}

func TestAppendDoubleReadsBackAsDouble(t *testing.T) {
	for _, f := range []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 1e20, 1e21, 1e-6, 1e-7, math.MaxFloat64, math.SmallestNonzeroFloat64, 123456789012345680} {
		s := string(appendDouble(nil, f))
		if !isJSONNumber(s) || !strings.ContainsAny(s, ".e") {
			t.Errorf("%v rendered as %q", f, s)
		}
		out, err := appendNumber([]byte{0}, 0, s, false)
		if err != nil || out[0] != bsonDouble || math.Float64bits(math.Float64frombits(leUint64(out[1:]))) != math.Float64bits(f) {
			t.Errorf("%v -> %q does not read back as the same double", f, s)
		}
	}
}

func leUint64(b []byte) uint64 {
	var n uint64
	for i := 7; i >= 0; i-- {
		n = n<<8 | uint64(b[i])
	}
	return n
}

func TestSameDecimal(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		eq   bool
	}{
		{"1", "1.0", true}, {"100", "1e2", true}, {"0.1", "1E-1", true}, {"-0", "-0.0", true},
		{"0", "-0", false}, {"1", "2", false}, {"1e400", "1E+400", true}, {"0.10", "0.1", true},
		{"x", "1", false}, {"1e99999999999", "1", false},
	} {
		if got := sameDecimal(tc.a, tc.b); got != tc.eq {
			t.Errorf("sameDecimal(%s, %s) = %v", tc.a, tc.b, got)
		}
	}
}

func TestDecodeDocumentErrorKinds(t *testing.T) {
	var de *driver.Error
	_, err := decodeDocument([]byte{1, 2}, testMeta)
	if !errors.As(err, &de) {
		t.Fatalf("error %T is not a *driver.Error", err)
	}
}

// TestLongIntegersReadBackAsIntegers: an integer beyond int64 of 35 to 40 digits with at most
// 34 significant ones is stored as a Decimal128 with a positive exponent; it reads back as
// the same integer text (not 1.000...E+36), and that text is stored again as the same bits.
// A Decimal128 with an exponent another application chose (1E+3, which the integer 1000 would
// not store as the same bits) keeps its exponent form.
func TestLongIntegersReadBackAsIntegers(t *testing.T) {
	for _, lit := range []string{
		"1" + strings.Repeat("0", 36),                           // 37 digits, one significant
		"12345678901234567890123456789012340000",                // 38 digits, 34 significant
		"-9999999999999999999999999999999999000000",             // 40 digits
		"1234567890123456789012345678901234" + "0",              // 35 digits
		"9223372036854775808", "123456789012345678901234567890", // beyond int64, no exponent
	} {
		js := `{"n":` + lit + `}`
		got, _ := roundTrip(t, js)
		if got != js {
			t.Errorf("%s read back as %s", js, got)
		}
		first, err := stored(t, js, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		again, err := stored(t, got, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		if bson.Raw(first).Lookup("n").Type != bson.TypeDecimal128 || !bytes.Equal(first, again) {
			t.Errorf("%s: stored as %v, then as %v", lit, bson.Raw(first).Lookup("n"), bson.Raw(again).Lookup("n"))
		}
	}
	other, _ := bson.ParseDecimal128("1E+3")
	h, l := other.GetBytes()
	if s, ok := decimalJSON(h, l); !ok || s != "1E+3" {
		t.Errorf("1E+3 reads as %q, %v", s, ok)
	}
}
