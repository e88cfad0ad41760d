package sink

import (
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/cdc"
)

// guardColumns are columns of every kind that has a guard, in the shapes the mapping rule
// distinguishes.
func guardColumns() []cdc.Column {
	cols := kindColumns()
	for _, c := range []cdc.Column{
		{Kind: cdc.KindDecimal, Precision: 1},
		{Kind: cdc.KindDecimal, Precision: 15, Scale: 15},
		{Kind: cdc.KindDecimal, Precision: 15, Scale: 6},
		{Kind: cdc.KindDecimal, Precision: 16, Scale: 2},
		{Kind: cdc.KindDecimal, Precision: 20, Scale: 6},
		{Kind: cdc.KindDecimal, Precision: 38, Scale: 10},
		{Kind: cdc.KindDecimal, Precision: 3, Scale: 5},
		{Kind: cdc.KindDecimal, Precision: 5, Scale: -2},
		{Kind: cdc.KindArray, Elem: &cdc.Column{Kind: cdc.KindDecimal, Precision: 4, Scale: 1}},
		{Kind: cdc.KindArray, Elem: &cdc.Column{Kind: cdc.KindFloat, Bits: 32}},
		{Kind: cdc.KindArray, Elem: &cdc.Column{Kind: cdc.KindDate}},
	} {
		c.Name = "extra" + strconv.Itoa(len(cols))
		cols = append(cols, c)
	}
	return cols
}

// TestGeneratedGuardMatchesMapping: the guard AppendDocument derives from a column without
// parsing anything is the one read back from the mapping GenerateMapping gives it, as sent and
// as the cluster echoes it (scaling_factor 100 -> 100.0), under every option.
func TestGeneratedGuardMatchesMapping(t *testing.T) {
	opts := []MappingOptions{{}, {DecimalAs: DecimalKeyword}, {DecimalAs: DecimalDouble}, {Uint64As: Uint64Keyword},
		{Engine: OpenSearch, JSONAs: JSONFlattened}}
	for _, o := range opts {
		for _, c := range guardColumns() {
			m, err := FieldMapping(&c, o)
			if err != nil {
				t.Fatal(err)
			}
			want := generatedGuard(&c, o)
			if got := guardFromMapping(m); got != want {
				t.Errorf("%+v column %s: guard from %s = %+v, generated %+v", o, c.Name, m, got, want)
			}
			// The cluster echoes the factor as a float: 100 -> 100.0.
			if i := strings.Index(string(m), `"scaling_factor":`); i >= 0 {
				j := i + len(`"scaling_factor":`)
				for j < len(m) && m[j] >= '0' && m[j] <= '9' {
					j++
				}
				echoed := string(m[:j]) + ".0" + string(m[j:])
				if got := guardFromMapping(json.RawMessage(echoed)); got != want {
					t.Errorf("column %s: guard from the echoed %s = %+v, want %+v", c.Name, echoed, got, want)
				}
			}
		}
	}
	// What the mapping says, spelled out for the default rule.
	for _, tc := range []struct {
		col  cdc.Column
		want fieldGuard
	}{
		{cdc.Column{Kind: cdc.KindDecimal, Precision: 12, Scale: 2}, fieldGuard{kind: fieldScaled, scale: 2, lenient: true}},
		{cdc.Column{Kind: cdc.KindDecimal, Precision: 20, Scale: 6}, fieldGuard{}},
		{cdc.Column{Kind: cdc.KindDecimal}, fieldGuard{}},
		{cdc.Column{Kind: cdc.KindFloat, Bits: 64}, fieldGuard{kind: fieldNumeric, lenient: true}},
		{cdc.Column{Kind: cdc.KindInt, Bits: 64}, fieldGuard{kind: fieldNumeric}},
		{cdc.Column{Kind: cdc.KindTimestamp}, fieldGuard{kind: fieldDate, lenient: true}},
		{cdc.Column{Kind: cdc.KindText}, fieldGuard{}},
	} {
		if got := generatedGuard(&tc.col, MappingOptions{}); got != tc.want {
			t.Errorf("%+v: %+v, want %+v", tc.col, got, tc.want)
		}
	}
}

// TestGuardFromMapping reads fields as other mappings have them: an index created by an
// earlier version, or by a user's template.
func TestGuardFromMapping(t *testing.T) {
	for _, tc := range []struct {
		m    string
		want fieldGuard
	}{
		{`{"type":"scaled_float","scaling_factor":100.0,"fields":{"exact":{"type":"keyword"}}}`, fieldGuard{kind: fieldScaled, scale: 2}},
		{`{"type":"scaled_float","scaling_factor":1.0E18}`, fieldGuard{kind: fieldScaled, scale: 18}},
		{`{"type":"scaled_float","scaling_factor":1,"ignore_malformed":"true"}`, fieldGuard{kind: fieldScaled, lenient: true}},
		{`{"type":"scaled_float","scaling_factor":2.5}`, fieldGuard{kind: fieldScaledOdd}},
		{`{"type":"scaled_float","scaling_factor":1.0E19}`, fieldGuard{kind: fieldScaledOdd}},
		{`{"type":"double"}`, fieldGuard{kind: fieldNumeric}},
		{`{"type":"half_float","ignore_malformed":true}`, fieldGuard{kind: fieldNumeric, lenient: true}},
		{`{"type":"date","format":"strict_date_optional_time"}`, fieldGuard{kind: fieldDate}},
		{`{"type":"date_nanos","ignore_malformed":false}`, fieldGuard{kind: fieldDate}},
		{`{"type":"keyword","ignore_above":8191}`, fieldGuard{}},
		{`{"type":"text","fields":{"keyword":{"type":"keyword","ignore_above":256}}}`, fieldGuard{}},
		{`{"properties":{"a":{"type":"long"}}}`, fieldGuard{}},
		{`not json`, fieldGuard{}},
	} {
		if got := guardFromMapping(json.RawMessage(tc.m)); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.m, got, tc.want)
		}
	}
}

// TestGuardFollowsIndexMapping: values are checked against the field the index really has.
// Each case is a column, the index's field for it, a value and the document's JSON value or
// the RowError reason.
func TestGuardFollowsIndexMapping(t *testing.T) {
	dec := cdc.Column{Kind: cdc.KindDecimal, Precision: 12, Scale: 4} // widened from (10,2)
	scaled100 := `{"type":"scaled_float","scaling_factor":100.0,"fields":{"exact":{"type":"keyword","ignore_above":8191}}}`
	scaled100lenient := `{"type":"scaled_float","scaling_factor":100.0,"ignore_malformed":true}`
	cases := []struct {
		name  string
		col   cdc.Column
		field string
		v     cdc.Value
		want  string // JSON value; "" when refused
		err   string
	}{
		{"scaled100_four_digits", dec, scaled100, "1.2345", "", "scaled_float"},
		{"scaled100_trailing_zeros", dec, scaled100, "1.2300", `"1.2300"`, ""},
		{"scaled100_two_digits", dec, scaled100, "-99999999.99", `"-99999999.99"`, ""},
		{"scaled100_magnitude", cdc.Column{Kind: cdc.KindDecimal, Precision: 20, Scale: 2}, scaled100, "123456789012345678.00", "", "2^53"},
		{"scaled100_nan_strict", dec, scaled100, "NaN", "", "without ignore_malformed"},
		{"scaled100_nan_lenient", dec, scaled100lenient, "NaN", `"NaN"`, ""},
		{"scaled100_infinity_lenient", cdc.Column{Kind: cdc.KindDecimal}, scaled100lenient, "-Infinity", `"-Infinity"`, ""},
		{"scaled_odd_factor", dec, `{"type":"scaled_float","scaling_factor":4}`, "1.25", "", "not a power of ten"},
		{"scaled_int_exact", cdc.Column{Kind: cdc.KindInt, Bits: 64}, scaled100, int64(-90071992547409), `-90071992547409`, ""},
		{"scaled_int_magnitude", cdc.Column{Kind: cdc.KindInt, Bits: 64}, scaled100, int64(90071992547410), "", "2^53"},
		{"scaled_uint_magnitude", cdc.Column{Kind: cdc.KindUint, Bits: 64}, scaled100, uint64(math.MaxUint64), "", "2^53"},
		{"scaled_float_exact", cdc.Column{Kind: cdc.KindFloat, Bits: 64}, scaled100, 0.25, `0.25`, ""},
		{"scaled_float_fraction", cdc.Column{Kind: cdc.KindFloat, Bits: 64}, scaled100, 0.125, "", "fractional digits"},
		{"scaled_float_tiny", cdc.Column{Kind: cdc.KindFloat, Bits: 64}, scaled100, 1e-300, "", "fractional digits"},
		{"scaled_float_huge", cdc.Column{Kind: cdc.KindFloat, Bits: 64}, scaled100, 1e300, "", "2^53"},
		{"scaled_float_nan_strict", cdc.Column{Kind: cdc.KindFloat, Bits: 64}, scaled100, math.NaN(), "", "without ignore_malformed"},
		{"keyword_takes_anything", cdc.Column{Kind: cdc.KindDecimal, Precision: 12, Scale: 2}, wantKeyword, "123456789012345678901234.5678", `"123456789012345678901234.5678"`, ""},
		{"double_strict_nan", cdc.Column{Kind: cdc.KindFloat, Bits: 64}, `{"type":"double"}`, math.Inf(1), "", "without ignore_malformed"},
		{"double_no_exactness_check", cdc.Column{Kind: cdc.KindDecimal, Precision: 12, Scale: 2}, `{"type":"double"}`, "1.23456", `"1.23456"`, ""},
		{"date_strict_infinity", cdc.Column{Kind: cdc.KindDate}, `{"type":"date"}`, "infinity", "", "without ignore_malformed"},
		{"date_lenient_infinity", cdc.Column{Kind: cdc.KindDate}, `{"type":"date","ignore_malformed":true}`, "infinity", `"infinity"`, ""},
		{"date_strict_ordinary", cdc.Column{Kind: cdc.KindDate}, `{"type":"date"}`, "2024-02-29", `"2024-02-29"`, ""},
		{"date_as_keyword", cdc.Column{Kind: cdc.KindTimestamp}, wantKeyword, "-infinity", `"-infinity"`, ""},
		{"array_elements", cdc.Column{Kind: cdc.KindArray, Elem: &cdc.Column{Kind: cdc.KindDecimal, Precision: 6, Scale: 3}}, scaled100, []cdc.Value{"1.5", "2.125"}, "", "array element 1: more fractional digits"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.col.Name = "c"
			sch := &cdc.TableSchema{Columns: []cdc.Column{{Name: "id", Kind: cdc.KindInt, Bits: 64}, tc.col}}
			have := map[string]json.RawMessage{"id": json.RawMessage(`{"type":"long"}`), "c": json.RawMessage(tc.field)}
			got, err := appendDocument([]byte("x"), sch, []cdc.Value{int64(1), tc.v}, MappingOptions{}, guardsFor(sch, have, MappingOptions{}))
			if tc.err != "" {
				var re *RowError
				if !errors.As(err, &re) || re.Column != "c" || !strings.Contains(re.Reason, tc.err) || string(got) != "x" {
					t.Fatalf("got %s, %v; want a RowError for column c containing %q", got, err, tc.err)
				}
				return
			}
			if want := `x{"id":1,"c":` + tc.want + `}`; err != nil || string(got) != want {
				t.Fatalf("got %s, %v; want %s", got, err, want)
			}
		})
	}
}

// TestScaledFloatHoldsEveryDeclaredValue proves the mapping rule: for every precision 1..15
// and scale 0..precision, every value such a column holds -- checked at the boundaries
// (1 unit, 10^p-1 units, powers of ten and their neighbours) and at random -- passes the
// exactness check, which computes the engine's own arithmetic (parse as double, multiply by
// 10^scale, Math.round). The check is then confirmed independently with exact big.Float
// arithmetic on the double the engine parses.
func TestScaledFloatHoldsEveryDeclaredValue(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 1))
	for p := 1; p <= maxScaledPrecision; p++ {
		limit := int64(math.Pow10(p)) - 1 // the largest number of units
		for sc := 0; sc <= p; sc++ {
			col := cdc.Column{Kind: cdc.KindDecimal, Precision: p, Scale: sc}
			g := generatedGuard(&col, MappingOptions{})
			if g.kind != fieldScaled || int(g.scale) != sc {
				t.Fatalf("numeric(%d,%d): guard %+v, want scaled_float 10^%d", p, sc, g, sc)
			}
			units := []int64{0, 1, 2, 9, limit, limit - 1, limit / 2, limit/2 + 1}
			for k := int64(10); k <= limit; k *= 10 {
				units = append(units, k-1, k, k+1)
			}
			for range 2000 {
				units = append(units, rng.Int64N(limit+1))
			}
			for _, u := range units {
				for _, neg := range []bool{false, true} {
					s := formatUnits(u, sc, neg)
					if reason := scaledReason(s, sc); reason != "" {
						t.Fatalf("numeric(%d,%d) value %s refused: %s", p, sc, s, reason)
					}
					if !engineStoresExactly(s, u, sc, neg) {
						t.Fatalf("numeric(%d,%d) value %s: the engine's arithmetic does not give %d units", p, sc, s, u)
					}
				}
			}
		}
	}
}

// formatUnits writes u units at scale sc the way the sources do ("-0.05", "120.00").
func formatUnits(u int64, sc int, neg bool) string {
	d := strconv.FormatInt(u, 10)
	if sc > 0 {
		if len(d) <= sc {
			d = strings.Repeat("0", sc-len(d)+1) + d
		}
		d = d[:len(d)-sc] + "." + d[len(d)-sc:]
	}
	if neg {
		d = "-" + d
	}
	return d
}

// engineStoresExactly recomputes Math.round(parseDouble(s) * 10^sc) without trusting the
// float64 multiplication: the product of the parsed double and the power of ten is rounded to
// a double (one IEEE operation, as Java does), then rounded half up.
func engineStoresExactly(s string, u int64, sc int, neg bool) bool {
	d, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return false
	}
	exact := new(big.Float).SetPrec(200).Mul(new(big.Float).SetFloat64(d), new(big.Float).SetFloat64(math.Pow10(sc)))
	p, _ := exact.Float64() // round to nearest even, like Java's double multiply
	// Math.round: floor(p + 0.5), where the sum is exact for |p| < 2^52 (10^15 < 2^52).
	r := math.Floor(p + 0.5)
	want := float64(u)
	if neg {
		want = -want
	}
	return r == want
}
