package sink

import (
	"encoding/json"

	"github.com/tributary-dev/tributary/cdc"
)

// fieldKind is what a column's field in the index does with the values the sink writes, as
// far as normalization must care.
type fieldKind uint8

const (
	// fieldOther takes every value the sink writes (keyword, text, a disabled object, ...).
	fieldOther fieldKind = iota
	// fieldNumeric is a numeric field other than scaled_float: it parses numbers and numeric
	// strings and cannot hold "NaN" or "Infinity".
	fieldNumeric
	// fieldScaled is a scaled_float with scaling_factor 10^fieldGuard.scale.
	fieldScaled
	// fieldScaledOdd is a scaled_float whose scaling_factor is not a power of ten from 1 to
	// 10^18 (only a user's template makes one): no decimal can be proven to be stored exactly.
	fieldScaledOdd
	// fieldDate is a date field: it cannot hold the dates no format of it parses.
	fieldDate
)

// fieldGuard is what normalization must prove about a column's value before it is written,
// derived once per (table schema, index) from the index's field mapping, or from the
// generated one where the sink does not know the index's.
type fieldGuard struct {
	kind  fieldKind
	scale uint8 // fieldScaled: log10 of the scaling_factor
	// lenient is ignore_malformed: the field leaves out a value it cannot parse and the
	// document is kept; without it the cluster refuses the document.
	lenient bool
}

// generatedGuard is the guard of the field GenerateMapping gives c under o (the two agree:
// TestGeneratedGuardMatchesMapping). It allocates nothing, for AppendDocument's per-row use.
func generatedGuard(c *cdc.Column, o MappingOptions) fieldGuard {
	switch c.Kind {
	case cdc.KindText, cdc.KindBool, cdc.KindEnum, cdc.KindUUID, cdc.KindJSON, cdc.KindBinary:
		return fieldGuard{} // the common kinds first: this runs per value in AppendDocument
	case cdc.KindArray:
		for depth := 0; c.Kind == cdc.KindArray && c.Elem != nil && depth <= maxArrayDepth; depth++ {
			c = c.Elem // an array maps as its element
		}
	}
	switch c.Kind {
	case cdc.KindInt:
		return fieldGuard{kind: fieldNumeric}
	case cdc.KindUint:
		if unsignedType(c.Bits) == "unsigned_long" && o.Uint64As == Uint64Keyword {
			return fieldGuard{}
		}
		return fieldGuard{kind: fieldNumeric}
	case cdc.KindFloat:
		return fieldGuard{kind: fieldNumeric, lenient: true}
	case cdc.KindDecimal:
		switch {
		case o.DecimalAs == DecimalKeyword:
			return fieldGuard{}
		case o.DecimalAs == DecimalDouble:
			return fieldGuard{kind: fieldNumeric, lenient: true}
		case decimalScaled(c, o):
			return fieldGuard{kind: fieldScaled, scale: uint8(c.Scale), lenient: true}
		}
		return fieldGuard{} // keyword, with the lenient "approx" sub-field
	case cdc.KindDate, cdc.KindDateTime, cdc.KindTimestamp:
		return fieldGuard{kind: fieldDate, lenient: true}
	}
	return fieldGuard{}
}

// guardFromMapping reads the guard of an existing field from its mapping as the cluster
// returns it ({"type":"scaled_float","scaling_factor":100.0,"ignore_malformed":true,...}).
// Only the field's own ignore_malformed is read: an index-wide index.mapping.ignore_malformed
// is not seen, so such a field counts as strict (the safe side: a dead letter with a reason
// instead of a document the cluster would have kept).
func guardFromMapping(m json.RawMessage) fieldGuard {
	var f struct {
		Type            string          `json:"type"`
		ScalingFactor   float64         `json:"scaling_factor"`
		IgnoreMalformed json.RawMessage `json:"ignore_malformed"`
	}
	if json.Unmarshal(m, &f) != nil {
		return fieldGuard{}
	}
	g := fieldGuard{lenient: string(f.IgnoreMalformed) == "true" || string(f.IgnoreMalformed) == `"true"`}
	switch f.Type {
	case "scaled_float":
		g.kind = fieldScaledOdd
		for k := 0; k <= maxScale; k++ {
			if f.ScalingFactor == pow10f[k] {
				g.kind, g.scale = fieldScaled, uint8(k)
				break
			}
		}
	case "long", "integer", "short", "byte", "double", "float", "half_float", "unsigned_long":
		g.kind = fieldNumeric
	case "date", "date_nanos":
		g.kind = fieldDate
	default:
		g.lenient = false // meaningless for fields that take every value
	}
	return g
}

// guardsFor derives one guard per column of sch: from the index's field where have (the
// index's top-level fields, nil when unknown) maps the column, else from the field o would
// generate for it.
func guardsFor(sch *cdc.TableSchema, have map[string]json.RawMessage, o MappingOptions) []fieldGuard {
	g := make([]fieldGuard, len(sch.Columns))
	for i := range sch.Columns {
		c := &sch.Columns[i]
		if m, ok := have[c.Name]; ok {
			g[i] = guardFromMapping(m)
		} else {
			g[i] = generatedGuard(c, o)
		}
	}
	return g
}

// The reasons a guard refuses a value for. Each names the field the index has and what to do.
const (
	reasonNonFiniteStrict = "NaN or infinite value, and the index maps the column as a numeric field without " +
		"ignore_malformed, which refuses it; an index created by this version keeps such rows"
	reasonScaledFraction = "more fractional digits than the scaling_factor of the index's field keeps: the index " +
		"maps the column as scaled_float (created for a narrower column, or by an earlier version) and would " +
		"round the value; storing it exactly needs a new index"
	reasonScaledMagnitude = "magnitude beyond what the index's field stores exactly (2^53 scaled units): the " +
		"index maps the column as scaled_float (created for a narrower column, or by an earlier version) and " +
		"would round the value; storing it exactly needs a new index"
	reasonScaledOddFactor = "the index maps the column as scaled_float with a scaling_factor that is not a power " +
		"of ten, which cannot be proven to store a decimal exactly; storing it exactly needs a new index"
	reasonDateStrict = "date outside the range and forms Elasticsearch dates accept, and the index maps the " +
		"column as date without ignore_malformed, which refuses it; an index created by this version keeps such rows"
)

// scaledReason checks a plain decimal string (digits with an optional sign and fraction) for
// a scaled_float with factor 10^scale: "" when the engine stores it exactly.
func scaledReason(s string, scale int) string {
	// Trailing fractional zeros change neither the value nor the double the engine parses
	// ("1.50" is 15 units at factor 10).
	s = trimFractionZeros(s)
	intDigits, fracDigits, ok := decimalShape(s)
	if !ok {
		return "not a finite decimal number"
	}
	if fracDigits > scale {
		return reasonScaledFraction
	}
	if !scaledExact(s, scale, intDigits, fracDigits) {
		return reasonScaledMagnitude
	}
	return ""
}

// trimFractionZeros drops a fraction's trailing zeros, and the point when nothing is left of
// it ("1.500" -> "1.5", "2.00" -> "2"); s without a point is returned as it is.
func trimFractionZeros(s string) string {
	dot := -1
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			dot = i
			break
		}
	}
	if dot < 0 {
		return s
	}
	e := len(s)
	for e > dot+1 && s[e-1] == '0' {
		e--
	}
	if e == dot+1 && dot > 0 && s[dot-1] >= '0' && s[dot-1] <= '9' {
		e = dot
	}
	return s[:e]
}
