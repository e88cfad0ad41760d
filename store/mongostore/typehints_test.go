package mongostore

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tributary-dev/tributary/store/driver"
)

func dec128(t *testing.T, s string) bson.Decimal128 {
	t.Helper()
	d, err := bson.ParseDecimal128(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// storedAs marshals fields as the document a put would store under the key "k" with a zero
// token, so that it compares byte for byte with stored().
func storedAs(t *testing.T, fields bson.D) []byte {
	t.Helper()
	doc := append(bson.D{{Key: "_id", Value: "k"}}, fields...)
	doc = append(doc, bson.E{Key: testMeta, Value: bson.D{{Key: "rev", Value: bson.Binary{Data: make([]byte, tokenLength)}}}})
	raw, err := bson.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// reencode decodes raw and encodes the JSON it gives again, with the read's type hints when
// hinted is set, returning the stored document and the JSON in between.
func reencode(t *testing.T, raw []byte, hinted bool) ([]byte, string) {
	t.Helper()
	doc, hints, err := decodeDocumentHints(raw, testMeta)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if !hinted {
		hints = nil
	}
	buf := appendID(make([]byte, 4), driver.NewStringKey("k"))
	buf, _, err = encodeBodyHinted(doc, testMeta, false, hints, buf)
	if err != nil {
		t.Fatalf("encode %s: %v", doc.JSON, err)
	}
	buf = appendMeta(buf, testMeta, make([]byte, tokenLength))
	buf = append(buf, 0)
	putLen(buf)
	return buf, string(doc.JSON)
}

// Every double (signed zeros, integral values, the extremes, magnitudes that read back with an
// exponent), int32, int64 beyond the int32 range and Decimal128 a read turns into JSON is
// stored again as the same BSON value, byte for byte, also nested in arrays and objects,
// without any hint.
func TestNumbersRoundTripToTheSameBSON(t *testing.T) {
	negZero := math.Copysign(0, -1)
	scalars := bson.D{
		{Key: "one", Value: 1.0}, {Key: "negzero", Value: negZero}, {Key: "zero", Value: 0.0},
		{Key: "neg", Value: -2.5}, {Key: "tenth", Value: 0.1}, {Key: "e20", Value: 1e20}, {Key: "e21", Value: 1e21},
		{Key: "e300", Value: -1e300}, {Key: "micro", Value: 1e-6}, {Key: "small", Value: 1e-7},
		{Key: "max", Value: math.MaxFloat64}, {Key: "tiny", Value: math.SmallestNonzeroFloat64},
		{Key: "wide", Value: 123456789012345680.0}, {Key: "p53", Value: 9007199254740993.0},
		{Key: "i32", Value: int32(0)}, {Key: "i32neg", Value: int32(-1)},
		{Key: "i32max", Value: int32(math.MaxInt32)}, {Key: "i32min", Value: int32(math.MinInt32)},
		{Key: "i64", Value: int64(math.MaxInt32) + 1}, {Key: "i64neg", Value: int64(math.MinInt32) - 1},
		{Key: "i64max", Value: int64(math.MaxInt64)}, {Key: "i64min", Value: int64(math.MinInt64)},
		{Key: "big", Value: int64(9007199254740993)},
		{Key: "d1", Value: dec128(t, "9223372036854775808")}, {Key: "d2", Value: dec128(t, "1.00000000000000000001")},
		{Key: "d3", Value: dec128(t, "1E+400")}, {Key: "d4", Value: dec128(t, "-1.5E-400")},
		{Key: "d5", Value: dec128(t, "3.141592653589793238462643383279502")},
	}
	var arr bson.A
	for _, e := range scalars {
		arr = append(arr, e.Value)
	}
	orig := storedAs(t, append(append(bson.D{}, scalars...),
		bson.E{Key: "arr", Value: arr},
		bson.E{Key: "obj", Value: bson.D{{Key: "in", Value: bson.D{{Key: "list", Value: bson.A{bson.D(scalars)}}}}}}))
	got, js := reencode(t, orig, false)
	if !bytes.Equal(got, orig) {
		t.Fatalf("re-encoded BSON differs\n got %v\nwant %v\n via %s", bson.Raw(got), bson.Raw(orig), js)
	}
	if !strings.Contains(js, `"one":1.0,"negzero":-0.0,"zero":0.0,`) || !strings.Contains(js, `"e21":1e+21,"e300":-1e+300,"micro":0.000001,"small":1e-7,`) {
		t.Fatalf("doubles read as %s", js)
	}
	if f := bson.Raw(got).Lookup("arr", "1").Double(); !math.Signbit(f) {
		t.Fatalf("-0.0 in an array lost its sign")
	}
}

// JSON spellings of numbers and the BSON type each gets: integers in range are int32 or int64,
// every other number a double when one holds it (-0 and -0.0 the double -0.0).
func TestNumberSpellingsAndTheirTypes(t *testing.T) {
	for _, tc := range []struct {
		lit string
		typ bson.Type
		f   float64 // the double, for doubles
	}{
		{"1", bson.TypeInt32, 0}, {"-2147483648", bson.TypeInt32, 0}, {"2147483648", bson.TypeInt64, 0},
		{"1.0", bson.TypeDouble, 1}, {"1e0", bson.TypeDouble, 1}, {"1E0", bson.TypeDouble, 1}, {"1.5e3", bson.TypeDouble, 1500},
		{"10.0e-1", bson.TypeDouble, 1}, {"-0", bson.TypeDouble, math.Copysign(0, -1)},
		{"-0.0", bson.TypeDouble, math.Copysign(0, -1)}, {"-0e5", bson.TypeDouble, math.Copysign(0, -1)},
		{"0.0", bson.TypeDouble, 0}, {"0", bson.TypeInt32, 0}, {"1e21", bson.TypeDouble, 1e21},
		{"9007199254740993", bson.TypeInt64, 0}, {"9007199254740993.0", bson.TypeDecimal128, 0},
	} {
		for _, js := range []string{`{"v":` + tc.lit + `}`, `{"v":[` + tc.lit + `]}`, `{"v":{"w":` + tc.lit + `}}`} {
			raw, err := stored(t, js, nil, false)
			if err != nil {
				t.Fatalf("%s: %v", js, err)
			}
			v := bson.Raw(raw).Lookup("v")
			if v.Type == bson.TypeArray {
				v = v.Array().Index(0)
			} else if v.Type == bson.TypeEmbeddedDocument {
				v = v.Document().Lookup("w")
			}
			if v.Type != tc.typ {
				t.Errorf("%s stored as %v, want %v", js, v.Type, tc.typ)
				continue
			}
			if tc.typ == bson.TypeDouble && math.Float64bits(v.Double()) != math.Float64bits(tc.f) {
				t.Errorf("%s stored as %v, want %v", js, v.Double(), tc.f)
			}
		}
	}
}

// Values whose BSON type has no JSON text of its own (only other applications write them: an
// int64 within the int32 range, a Decimal128 that reads as a number an int32, int64 or double
// holds) change type when their JSON is stored by the rule alone, and keep it with the hints of
// the read -- also when the program changed the number, as long as the type holds the new one.
func TestTypeHintsKeepTypesJSONCannotTell(t *testing.T) {
	ambiguous := bson.D{
		{Key: "l", Value: int64(5)}, {Key: "lneg", Value: int64(math.MinInt32)}, {Key: "lzero", Value: int64(0)},
		{Key: "dint", Value: dec128(t, "5")}, {Key: "dhalf", Value: dec128(t, "1.50")}, {Key: "dtenth", Value: dec128(t, "0.1")},
		{Key: "dexp", Value: dec128(t, "1E+3")}, {Key: "dlong", Value: dec128(t, "9223372036854775807")},
		{Key: "nested", Value: bson.A{int64(7), bson.D{{Key: "d", Value: dec128(t, "2.5")}}}},
	}
	orig := storedAs(t, ambiguous)
	doc, hints, err := decodeDocumentHints(orig, testMeta)
	if err != nil {
		t.Fatal(err)
	}
	wantHints := typeHints{"/l": bsonInt64, "/lneg": bsonInt64, "/lzero": bsonInt64, "/dint": bsonDecimal128,
		"/dhalf": bsonDecimal128, "/dtenth": bsonDecimal128, "/dexp": bsonDecimal128, "/dlong": bsonDecimal128,
		"/nested/0": bsonInt64, "/nested/1/d": bsonDecimal128}
	if len(hints) != len(wantHints) {
		t.Fatalf("hints %v, want %v (JSON %s)", hints, wantHints, doc.JSON)
	}
	for p, typ := range wantHints {
		if hints[p] != typ {
			t.Errorf("hint at %s: %v, want %v", p, hints[p], typ)
		}
	}
	if unhinted, _ := reencode(t, orig, false); bytes.Equal(unhinted, orig) {
		t.Fatalf("without hints the types survived: the test proves nothing")
	}
	if got, js := reencode(t, orig, true); !bytes.Equal(got, orig) {
		t.Fatalf("with hints the BSON differs\n got %v\nwant %v\n via %s", bson.Raw(got), bson.Raw(orig), js)
	}

	// Changed numbers: a hinted slot keeps its type when the type holds the new number.
	enc := func(js string) bson.Raw {
		t.Helper()
		buf := appendID(make([]byte, 4), driver.NewStringKey("k"))
		buf, _, err := encodeBodyHinted(driver.Document{JSON: []byte(js)}, testMeta, false, hints, buf)
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		buf = append(buf, 0)
		putLen(buf)
		return buf
	}
	raw := enc(`{"l":6,"lneg":1.5,"lzero":-0,"dint":6,"dhalf":0.30000000000000004,"dexp":"x","nested":[8,{"d":1e-3}],"new":5}`)
	for _, c := range []struct {
		path []string
		typ  bson.Type
		text string
	}{
		{[]string{"l"}, bson.TypeInt64, "6"},
		{[]string{"lneg"}, bson.TypeDouble, "1.5"},   // an int64 cannot hold 1.5
		{[]string{"lzero"}, bson.TypeDouble, "-0.0"}, // nor -0
		{[]string{"dint"}, bson.TypeDecimal128, "6"},
		{[]string{"dhalf"}, bson.TypeDecimal128, "0.30000000000000004"},
		{[]string{"dexp"}, bson.TypeString, ""},
		{[]string{"nested", "0"}, bson.TypeInt64, "8"},
		{[]string{"nested", "1", "d"}, bson.TypeDecimal128, "0.001"},
		{[]string{"new"}, bson.TypeInt32, "5"}, // no hint there
	} {
		v := raw.Lookup(c.path...)
		if v.Type != c.typ {
			t.Errorf("%v stored as %v, want %v", c.path, v.Type, c.typ)
			continue
		}
		var text string
		switch v.Type {
		case bson.TypeInt64:
			text = strconv.FormatInt(v.Int64(), 10)
		case bson.TypeDecimal128:
			text = v.Decimal128().String()
		case bson.TypeDouble:
			text = string(appendDouble(nil, v.Double()))
		case bson.TypeInt32:
			text = strconv.Itoa(int(v.Int32()))
		}
		if c.text != "" && !sameDecimal(text, c.text) {
			t.Errorf("%v stored as %s, want %s", c.path, text, c.text)
		}
	}
	if f := raw.Lookup("lzero").Double(); !math.Signbit(f) {
		t.Errorf("-0 at an int64 hint lost its sign")
	}

	// What this adapter writes never needs a hint.
	own, err := stored(t, `{"a":5,"b":2147483648,"c":1.5,"d":1.0,"e":-0.0,"f":9223372036854775808,"g":1.00000000000000000001,"h":[1,{"i":2.0}]}`, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, h, err := decodeDocumentHints(own, testMeta); err != nil || h != nil {
		t.Fatalf("hints %v (%v) for a document the adapter wrote", h, err)
	}
}

func TestFerretDBModeRefusesNegativeZero(t *testing.T) {
	for _, js := range []string{`{"z":-0.0}`, `{"z":-0}`, `{"a":[1,{"z":-0e3}]}`} {
		_, err := stored(t, js, nil, true)
		if driver.KindOf(err) != driver.KindInvalid || !strings.Contains(err.Error(), "-0") {
			t.Errorf("%s in FerretDB mode: %v, want invalid naming -0", js, err)
		}
		if _, err := stored(t, js, nil, false); err != nil {
			t.Errorf("%s without FerretDB mode: %v", js, err)
		}
	}
	if _, err := stored(t, `{"z":0.0,"y":0,"x":-1.5}`, nil, true); err != nil {
		t.Errorf("positive zero in FerretDB mode: %v", err)
	}
}

func TestHintCache(t *testing.T) {
	var c hintCache
	k := driver.NewStringKey("a")
	rev1, rev2 := []byte{1, 1}, []byte{1, 2}
	h := typeHints{"/n": bsonInt64}
	if c.lookup("db", "c", k, rev1) != nil {
		t.Fatal("empty cache has hints")
	}
	c.record("db", "c", k, rev1, h)
	if got := c.lookup("db", "c", k, rev1); got["/n"] != bsonInt64 {
		t.Fatalf("lookup at the read's revision: %v", got)
	}
	for _, miss := range []func() typeHints{
		func() typeHints { return c.lookup("db", "c", k, rev2) },                               // another revision
		func() typeHints { return c.lookup("db", "d", k, rev1) },                               // another collection
		func() typeHints { return c.lookup("db", "c", driver.NewStringKey("b"), rev1) },        // another record
		func() typeHints { return c.lookup("other", "c", k, rev1) },                            // another database
		func() typeHints { return c.lookup("db", "c", driver.NewBytesKey([]byte("a")), rev1) }, // another key kind
	} {
		if miss() != nil {
			t.Fatal("hints found for another read")
		}
	}
	// A later read replaces the entry; a read without hints removes it.
	c.record("db", "c", k, rev2, h)
	if c.lookup("db", "c", k, rev1) != nil || c.lookup("db", "c", k, rev2) == nil {
		t.Fatal("a later read did not replace the entry")
	}
	c.record("db", "c", k, rev2, nil)
	if c.lookup("db", "c", k, rev2) != nil || c.n.Load() != 0 || c.bytes != 0 {
		t.Fatalf("a read without hints left the entry (%d entries, %d bytes)", c.n.Load(), c.bytes)
	}
	// The cache stays within its bytes, dropping the oldest entries first.
	long := typeHints{"/" + strings.Repeat("p", 1000): bsonInt64}
	var first driver.Key
	for i := range 2 * hintCacheBytes / 1000 {
		key := driver.NewInt64Key(int64(i))
		if i == 0 {
			first = key
		}
		c.record("db", "c", key, rev1, long)
		if c.bytes > hintCacheBytes {
			t.Fatalf("cache holds %d bytes, more than %d", c.bytes, hintCacheBytes)
		}
	}
	if c.lookup("db", "c", first, rev1) != nil {
		t.Fatal("the oldest entry survived")
	}
	if c.lookup("db", "c", driver.NewInt64Key(int64(2*hintCacheBytes/1000-1)), rev1) == nil {
		t.Fatal("the newest entry is gone")
	}
	if int(c.n.Load()) != len(c.entries) || c.age.Len() != len(c.entries) {
		t.Fatalf("bookkeeping: n %d, map %d, list %d", c.n.Load(), len(c.entries), c.age.Len())
	}
	// A record whose hints alone exceed the budget is not kept.
	huge := typeHints{}
	for i := 0; i < hintCacheBytes/hintOverhead; i++ {
		huge["/"+strings.Repeat("x", 8)+string(rune('a'+i%26))+strings.Repeat("y", i%7)+bson.NewObjectID().Hex()] = bsonInt64
	}
	c.record("db", "c", k, rev1, huge)
	if c.lookup("db", "c", k, rev1) != nil || c.bytes > hintCacheBytes {
		t.Fatal("an entry larger than the cache was kept")
	}
}
