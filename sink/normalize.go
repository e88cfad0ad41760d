package sink

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	charsetpkg "github.com/tributary-dev/tributary/internal/charset"
	"github.com/tributary-dev/tributary/internal/jsonenc"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/cdc"
)

// RowError says why one row cannot become a document. It names the column and the rule the
// value broke, never the value itself, so it can be logged and dead-lettered safely.
type RowError struct {
	Column string
	Reason string
}

func (e *RowError) Error() string {
	if e.Column == "" {
		return "sink: row: " + e.Reason
	}
	return "sink: column " + strconv.Quote(e.Column) + ": " + e.Reason
}

// AppendDocument appends the JSON document of one row (values in schema column order, as
// cdc.Event carries them) to dst and returns the extended slice. Fields appear in column order,
// NULL as null. The document is one line, ready for a _bulk body. Values are normalized so that
// the same row gives the same bytes from a snapshot and from the stream, from MySQL and from
// PostgreSQL:
//
//   - Integers as JSON integers, uint64 beyond 2^63 included.
//   - Floats in shortest round-trip form (as encoding/json writes them). NaN and the
//     infinities, which JSON numbers cannot carry, become the strings "NaN", "Infinity" and
//     "-Infinity": kept in _source, left out of a float field with ignore_malformed.
//   - Decimals: the source's exact digits as a JSON string ("-1.50"); PostgreSQL's numeric
//     NaN, Infinity and -Infinity as the strings "NaN", "Infinity", "-Infinity".
//   - Character data: strings as UTF-8 JSON strings; cdc.Base64 (MySQL binlog TEXT) is decoded
//     from Column.Charset (utf8/utf8mb4/ascii, or latin1 and the other MySQL character sets) to
//     UTF-8 first. Invalid UTF-8 or an unknown character set: RowError.
//   - Binary: the base64 string, as the binary field takes it.
//   - cdc.EpochMicros (TIMESTAMP, timestamptz): epoch_millis as a JSON number, with the
//     sub-millisecond digits as a fraction ("1700000000123.456") so the instant stays exact in
//     _source; both engines parse it (the indexed date keeps milliseconds).
//   - Temporal strings (DATE "2006-01-02", DATETIME and timestamp "2006-01-02 15:04:05.ffffff")
//     pass through to the date formats, with trailing fractional zeros trimmed (MySQL pads to
//     the declared precision, PostgreSQL trims). MySQL zero dates (a zero year, month or day,
//     "0000-00-00") name no instant and become null. Shapes no date format parses
//     (PostgreSQL infinity, BC dates, years past 9999) pass as the source's text, which a
//     date field with ignore_malformed keeps in _source only. TIME: the string, fraction
//     trimmed likewise. MySQL's zero TIMESTAMP arrives as epoch 0 and is 1970-01-01.
//   - JSON: validated and embedded compacted (PostgreSQL json keeps its input's newlines).
//     An object with duplicate member names (PostgreSQL json and MariaDB JSON keep them; both
//     engines refuse such a document under every mapping) keeps the last member of each name,
//     in its place, at every nesting level, the other members in their order -- the object
//     jsonb, PostgreSQL's json operators and MySQL 8 read. Names compare by decoded text.
//   - SET: an array of its labels ("a,b" -> ["a","b"]). ENUM, UUID, other types: strings.
//   - BIT: MySQL's integer becomes PostgreSQL's bit string of the column's width (5 in BIT(4)
//     -> "0101").
//   - Arrays: JSON arrays of their normalized elements; a PostgreSQL array of several
//     dimensions (nested []cdc.Value, its column's Elem being the scalar type) as nested JSON
//     arrays, which both engines index as the flat list of elements. At most maxArrayDepth (8)
//     levels; PostgreSQL allows 6.
//
// Before a value is written, it is checked against the field it goes to -- here the field
// GenerateMapping gives the column under the options (the default ones for the package
// function); the Sink checks against the index's actual mapping instead (package
// documentation, "Decimals"). A value the field would store inexactly or refuse is a
// RowError, so the row is dead-lettered rather than silently rounded: for a scaled_float
// field, a number (decimal, integer or float) whose scaled value Elasticsearch's own
// arithmetic -- parse as double, multiply by the scaling factor, Math.round -- would not give
// exactly, or that has more fractional digits than the factor keeps; for a numeric field
// without ignore_malformed, NaN and the infinities; for a date field without
// ignore_malformed, a date no format parses. The generated fields take every value their
// column's declared type can hold, so for real source rows only an index mapped otherwise
// (by an earlier version, a user's template, or before the column's type changed) refuses.
//
// A value that cannot be normalized returns a *RowError (the column and the rule, never the
// value) and dst truncated to its original length. With a reused dst of sufficient capacity
// the common kinds allocate nothing; text in a non-UTF-8 character set allocates while
// decoding.
func AppendDocument(dst []byte, s *cdc.TableSchema, row []cdc.Value) ([]byte, error) {
	return MappingOptions{}.AppendDocument(dst, s, row)
}

// AppendDocument is the package AppendDocument for an index mapped by GenerateMapping with o.
// The document bytes are the same for every option; the options decide the fields whose
// checks apply (DecimalKeyword and DecimalDouble fields, for example, need no exactness check).
func (o MappingOptions) AppendDocument(dst []byte, s *cdc.TableSchema, row []cdc.Value) ([]byte, error) {
	return appendDocument(dst, s, row, o, nil)
}

// appendDocument writes the document, checking each value against guards[i] (one per column),
// or against the generated field under o when guards is nil.
func appendDocument(dst []byte, s *cdc.TableSchema, row []cdc.Value, o MappingOptions, guards []fieldGuard) ([]byte, error) {
	start := len(dst)
	if len(row) != len(s.Columns) {
		return dst, &RowError{Reason: "row has " + strconv.Itoa(len(row)) + " values for " + strconv.Itoa(len(s.Columns)) + " columns"}
	}
	dst = append(dst, '{')
	for i := range s.Columns {
		c := &s.Columns[i]
		if reason := checkFieldName(c.Name); reason != "" {
			return dst[:start], &RowError{Column: c.Name, Reason: reason}
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, c.Name)
		dst = append(dst, ':')
		var g fieldGuard
		if guards != nil {
			g = guards[i]
		} else {
			g = generatedGuard(c, o)
		}
		var reason string
		dst, reason = appendValue(dst, c, row[i], g, 0)
		if reason != "" {
			return dst[:start], &RowError{Column: c.Name, Reason: reason}
		}
	}
	return append(dst, '}'), nil
}

// appendValue appends one normalized value, or returns a reason why it cannot, or why the
// column's field g cannot take it.
func appendValue(b []byte, c *cdc.Column, v cdc.Value, g fieldGuard, depth int) ([]byte, string) {
	if v == nil {
		return append(b, "null"...), ""
	}
	if x, ok := v.(storedValue); ok { // an unchanged value from the index (unchanged.go)
		return append(b, x...), ""
	}
	switch c.Kind {
	case cdc.KindBool:
		if x, ok := v.(bool); ok {
			return strconv.AppendBool(b, x), ""
		}
	case cdc.KindInt, cdc.KindUint:
		switch x := v.(type) {
		case int64:
			n := len(b)
			b = strconv.AppendInt(b, x, 10)
			if g.kind == fieldScaled || g.kind == fieldScaledOdd {
				return checkScaledInteger(b, n, g)
			}
			return b, ""
		case uint64:
			n := len(b)
			b = strconv.AppendUint(b, x, 10)
			if g.kind == fieldScaled || g.kind == fieldScaledOdd {
				return checkScaledInteger(b, n, g)
			}
			return b, ""
		}
	case cdc.KindFloat:
		if x, ok := v.(float64); ok {
			return appendFloat(b, x, g)
		}
	case cdc.KindDecimal:
		if x, ok := v.(string); ok {
			return appendDecimal(b, x, g)
		}
	case cdc.KindText:
		switch x := v.(type) {
		case string:
			return appendText(b, x)
		case cdc.Base64:
			return appendBase64Text(b, c.Charset, string(x))
		}
	case cdc.KindBinary:
		if x, ok := v.(cdc.Base64); ok {
			return appendBase64(b, string(x))
		}
	case cdc.KindDate, cdc.KindDateTime:
		if x, ok := v.(string); ok {
			return appendDateString(b, x, c.Kind == cdc.KindDate, g)
		}
	case cdc.KindTimestamp:
		switch x := v.(type) {
		case cdc.EpochMicros:
			return appendEpochMillis(b, int64(x)), ""
		case string:
			return appendDateString(b, x, false, g)
		}
	case cdc.KindTime:
		if x, ok := v.(string); ok {
			return appendText(b, trimFraction(x))
		}
	case cdc.KindJSON:
		switch x := v.(type) {
		case cdc.RawJSON:
			return appendJSON(b, x)
		case string:
			return appendJSON(b, []byte(x))
		}
	case cdc.KindSet:
		if x, ok := v.(string); ok {
			return appendSet(b, x)
		}
	case cdc.KindBit:
		switch x := v.(type) {
		case uint64:
			return appendBits(b, x, c.Bits), ""
		case string:
			for i := 0; i < len(x); i++ {
				if x[i] != '0' && x[i] != '1' {
					return b, "bit string with a character other than 0 or 1"
				}
			}
			return appendJSONString(b, x), ""
		}
	case cdc.KindEnum, cdc.KindUUID:
		if x, ok := v.(string); ok {
			return appendText(b, x)
		}
	case cdc.KindArray:
		if x, ok := v.([]cdc.Value); ok && c.Elem != nil {
			if depth >= maxArrayDepth {
				return b, "arrays nested deeper than " + strconv.Itoa(maxArrayDepth) + " levels"
			}
			b = append(b, '[')
			for i, e := range x {
				if i > 0 {
					b = append(b, ',')
				}
				// A PostgreSQL array of several dimensions has one element type (bigint[][] is
				// bigint[]) and arrives as nested []cdc.Value: a nested array of a column whose
				// element is no array is a sub-array of the same column.
				ec := c.Elem
				if _, sub := e.([]cdc.Value); sub && ec.Kind != cdc.KindArray {
					ec = c
				}
				var reason string
				if b, reason = appendValue(b, ec, e, g, depth+1); reason != "" {
					return b, "array element " + strconv.Itoa(i) + ": " + reason
				}
			}
			return append(b, ']'), ""
		}
	case cdc.KindOther:
		return appendOther(b, v)
	}
	return b, fmt.Sprintf("unexpected value type %T for a %s column", v, c.Kind)
}

// appendOther writes the source's text form of a type the sink does not know.
func appendOther(b []byte, v cdc.Value) ([]byte, string) {
	switch x := v.(type) {
	case string:
		return appendText(b, x)
	case cdc.Base64:
		return appendBase64(b, string(x))
	case int64:
		return appendJSONString(b, strconv.FormatInt(x, 10)), ""
	case uint64:
		return appendJSONString(b, strconv.FormatUint(x, 10)), ""
	case bool:
		return appendJSONString(b, strconv.FormatBool(x)), ""
	case float64:
		if s := nonFiniteName(x); s != "" {
			return appendJSONString(b, s), ""
		}
		return appendJSONString(b, strconv.FormatFloat(x, 'g', -1, 64)), ""
	}
	return b, fmt.Sprintf("unexpected value type %T for an other column", v)
}

// appendFloat writes a float the way encoding/json does (shortest round-trip digits, exponent
// outside [1e-6, 1e21)). NaN and the infinities have no JSON number: they are written as the
// strings Java's Double.parseDouble reads them back from ("NaN", "Infinity", "-Infinity"),
// which a numeric field with ignore_malformed leaves out and a strict one refuses.
func appendFloat(b []byte, f float64, g fieldGuard) ([]byte, string) {
	if f-f != 0 { // NaN or an infinity
		return appendNonFinite(b, nonFiniteName(f), g)
	}
	abs := math.Abs(f)
	fmtc := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		fmtc = 'e'
	}
	n := len(b)
	b = strconv.AppendFloat(b, f, fmtc, -1, 64)
	if fmtc == 'e' {
		// "1e-07" -> "1e-7", as encoding/json writes it.
		if m := len(b); m-n >= 4 && b[m-4] == 'e' && b[m-3] == '-' && b[m-2] == '0' {
			b[m-2] = b[m-1]
			b = b[:m-1]
		}
	}
	if g.kind == fieldScaled || g.kind == fieldScaledOdd {
		if reason := scaledFloatReason(f, g); reason != "" {
			return b[:n], reason
		}
	}
	return b, ""
}

// nonFiniteName is the JSON string of NaN and the infinities, or "" for a finite float.
func nonFiniteName(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return ""
}

// appendNonFinite writes "NaN", "Infinity" or "-Infinity" unless g is a numeric field that
// would refuse the document for it.
func appendNonFinite(b []byte, s string, g fieldGuard) ([]byte, string) {
	if !g.lenient && (g.kind == fieldNumeric || g.kind == fieldScaled || g.kind == fieldScaledOdd) {
		return b, reasonNonFiniteStrict
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), ""
}

// checkScaledInteger checks the integer just written at b[n:] against a scaled_float field.
func checkScaledInteger(b []byte, n int, g fieldGuard) ([]byte, string) {
	switch g.kind {
	case fieldScaled:
		if reason := scaledReason(string(b[n:]), int(g.scale)); reason != "" {
			return b[:n], reason
		}
	case fieldScaledOdd:
		return b[:n], reasonScaledOddFactor
	}
	return b, ""
}

// scaledFloatReason checks a finite float for a scaled_float field: its shortest decimal
// digits (what _source carries) must be stored exactly, as a decimal's would.
func scaledFloatReason(f float64, g fieldGuard) string {
	if g.kind == fieldScaledOdd {
		return reasonScaledOddFactor
	}
	scale := int(g.scale)
	a := math.Abs(f)
	switch {
	case a == 0:
		return ""
	case a*pow10f[scale] > maxExactScaled:
		return reasonScaledMagnitude
	case a < 1/pow10f[scale]:
		return reasonScaledFraction
	}
	// Now at most 16 integer digits and scale+17 fractional ones.
	var buf [64]byte
	return scaledReason(string(strconv.AppendFloat(buf[:0], f, 'f', -1, 64)), scale)
}

// appendDecimal writes a decimal's exact digits as a JSON string (a scaled_float or double
// field and the keyword fields all read it). For a scaled_float field it first proves that the
// engine will store the value exactly: Elasticsearch parses the string as a double, multiplies
// by the scaling factor and rounds (Math.round) to a long; the same IEEE operations here must
// give exactly the unscaled integer, or the row is refused rather than silently rounded.
// PostgreSQL's NaN, Infinity and -Infinity are written as those strings.
func appendDecimal(b []byte, s string, g fieldGuard) ([]byte, string) {
	switch s {
	case "NaN", "Infinity", "-Infinity":
		return appendNonFinite(b, s, g)
	}
	switch g.kind {
	case fieldScaled:
		if reason := scaledReason(s, int(g.scale)); reason != "" { // checks the shape too
			return b, reason
		}
	case fieldScaledOdd:
		if _, _, ok := decimalShape(s); !ok {
			return b, "not a finite decimal number"
		}
		return b, reasonScaledOddFactor
	default:
		if _, _, ok := decimalShape(s); !ok {
			return b, "not a finite decimal number"
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), ""
}

// decimalShape validates [-+]digits[.digits] and counts digits without leading zeros.
func decimalShape(s string) (intDigits, fracDigits int, ok bool) {
	i := 0
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		i++
	}
	lead := true
	n := 0
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		n++
		if lead && s[i] == '0' {
			continue
		}
		lead = false
		intDigits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			fracDigits++
		}
	}
	if i != len(s) || n+fracDigits == 0 {
		return 0, 0, false
	}
	return intDigits, fracDigits, true
}

const maxExactScaled = 1 << 53

var pow10f = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18}

// scaledExact reports whether scaled_float with factor 10^scale stores s exactly.
func scaledExact(s string, scale, intDigits, fracDigits int) bool {
	if intDigits+scale > 18 {
		return false // beyond int64 and far beyond 2^53
	}
	// The exact unscaled integer: all digits, the fraction padded to scale.
	var u int64
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			u = u*10 + int64(s[i]-'0')
		}
	}
	for range scale - fracDigits {
		u *= 10
	}
	if u > maxExactScaled {
		return false
	}
	if s[0] == '-' {
		u = -u
	}
	d, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return false
	}
	// Java's Math.round(x) is floor(x + 0.5) computed without the intermediate rounding.
	p := d * pow10f[scale]
	r := math.Floor(p)
	if p-r >= 0.5 {
		r++
	}
	return r == float64(u)
}

// appendText writes a UTF-8 string; invalid UTF-8 would make the whole _bulk body unparsable.
func appendText(b []byte, s string) ([]byte, string) {
	if !utf8.ValidString(s) {
		return b, "text is not valid UTF-8"
	}
	return appendJSONString(b, s), ""
}

// appendBase64 keeps binary data as its base64 string (the binary field's input form) after
// checking it is base64, since a stray quote would break the document.
func appendBase64(b []byte, s string) ([]byte, string) {
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if !(ch >= 'A' && ch <= 'Z' || ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || ch == '+' || ch == '/' || ch == '=') {
			return b, "binary value is not base64"
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), ""
}

// appendBase64Text decodes a binlog TEXT value (base64 of bytes in the column's character set)
// to UTF-8. The bytes are decoded into dst's spare capacity and escaped from there, so the
// common UTF-8 case allocates nothing once dst has grown.
func appendBase64Text(b []byte, charset, s string) ([]byte, string) {
	n := len(b)
	b = growCap(b, base64.StdEncoding.DecodedLen(len(s)))
	raw := b[n : n+base64.StdEncoding.DecodedLen(len(s))]
	m, err := base64.StdEncoding.Decode(raw, []byte(s))
	if err != nil {
		return b[:n], "text value is not valid base64"
	}
	raw = raw[:m]
	if !charsetpkg.IsUTF8(charset) {
		out, reason := decodeCharset(charset, raw)
		if reason != "" {
			return b[:n], reason
		}
		return appendText(b[:n], out)
	}
	if !utf8.Valid(raw) {
		return b[:n], "text is not valid UTF-8"
	}
	// Escape after the raw bytes, then move the result down over them.
	b = b[:n+m]
	b = appendJSONString(b, raw)
	k := copy(b[n:], b[n+m:])
	return b[:n+k], ""
}

func growCap(b []byte, extra int) []byte {
	if cap(b)-len(b) >= extra {
		return b
	}
	nb := make([]byte, len(b), 2*cap(b)+extra)
	copy(nb, b)
	return nb
}

// appendEpochMillis converts epoch microseconds to epoch_millis, keeping sub-millisecond
// digits as a fraction ("1700000000123.456") so the instant stays exact in _source; the date
// field itself has millisecond resolution.
func appendEpochMillis(b []byte, us int64) []byte {
	ms, frac := us/1000, us%1000
	if frac == 0 {
		return strconv.AppendInt(b, ms, 10)
	}
	if us < 0 {
		b = append(b, '-')
		ms, frac = -ms, -frac
	}
	b = strconv.AppendInt(b, ms, 10)
	b = append(b, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
	for b[len(b)-1] == '0' {
		b = b[:len(b)-1]
	}
	return b
}

// appendDateString passes a source temporal string through to the date field's formats:
// "2006-01-02" or "2006-01-02 15:04:05[.ffffff]", trailing fractional zeros trimmed so MySQL's
// fixed-width fractions and PostgreSQL's trimmed ones give the same text. MySQL's zero dates
// ("0000-00-00", and dates with a zero year, month or day) name no day and become null (year 0
// also fails the "yyyy" pattern, which counts years of an era). Shapes no engine parses
// (PostgreSQL infinity, BC dates, years past 9999: both engines leave them out of a date field
// with ignore_malformed, TestMappingServerUnparsableValues) are written as the source's text,
// unless g is a date field without ignore_malformed, which would refuse the document.
func appendDateString(b []byte, s string, dateOnly bool, g fieldGuard) ([]byte, string) {
	if !dateShape(s, dateOnly) {
		if g.kind == fieldDate && !g.lenient {
			return b, reasonDateStrict
		}
		return appendText(b, s)
	}
	if s[0:4] == "0000" || s[5:7] == "00" || s[8:10] == "00" {
		return append(b, "null"...), ""
	}
	if len(s) > 10 {
		s = trimFraction(s)
	}
	return appendJSONString(b, s), ""
}

// dateShape reports whether s is "2006-01-02" or (unless dateOnly) "2006-01-02 15:04:05" with
// 0 to 6 fractional digits: the shapes the date formats parse (zero dates included, which
// appendDateString turns into null).
func dateShape(s string, dateOnly bool) bool {
	if len(s) < 10 || !allDigits(s[0:4]) || s[4] != '-' || !allDigits(s[5:7]) || s[7] != '-' || !allDigits(s[8:10]) {
		return false
	}
	if len(s) == 10 {
		return true
	}
	t := s[10:]
	if dateOnly || len(t) < 9 || t[0] != ' ' || !allDigits(t[1:3]) || t[3] != ':' || !allDigits(t[4:6]) || t[6] != ':' || !allDigits(t[7:9]) {
		return false
	}
	f := t[9:]
	return f == "" || f[0] == '.' && len(f) >= 2 && len(f) <= 7 && allDigits(f[1:])
}

// trimFraction drops trailing zeros of a fractional second ("03:04:05.120" -> "03:04:05.12",
// "03:04:05.000" -> "03:04:05").
func trimFraction(s string) string {
	dot := -1
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '.' {
			dot = i
			break
		}
		if s[i] < '0' || s[i] > '9' {
			return s
		}
	}
	if dot < 0 {
		return s
	}
	e := len(s)
	for e > dot+1 && s[e-1] == '0' {
		e--
	}
	if e == dot+1 {
		e = dot
	}
	return s[:e]
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// appendSet writes a SET value ("a,b") as an array of its labels, each a keyword term.
func appendSet(b []byte, s string) ([]byte, string) {
	if !utf8.ValidString(s) {
		return b, "text is not valid UTF-8"
	}
	b = append(b, '[')
	if s != "" {
		st := 0
		for i := 0; i <= len(s); i++ {
			if i == len(s) || s[i] == ',' {
				if st > 0 {
					b = append(b, ',')
				}
				b = appendJSONString(b, s[st:i])
				st = i + 1
			}
		}
	}
	return append(b, ']'), ""
}

// appendBits writes MySQL's BIT(n) integer as the bit string PostgreSQL gives ("0101"), most
// significant bit first, n digits wide.
func appendBits(b []byte, x uint64, n int) []byte {
	if n <= 0 || n > 64 {
		n = 64 - bitLen64Zeros(x)
		if n == 0 {
			n = 1
		}
	}
	b = append(b, '"')
	for i := n - 1; i >= 0; i-- {
		b = append(b, byte('0'+(x>>uint(i))&1))
	}
	return append(b, '"')
}

func bitLen64Zeros(x uint64) int {
	n := 0
	for i := 63; i >= 0 && x>>uint(i)&1 == 0; i-- {
		n++
	}
	return n
}

// appendJSON embeds a JSON document after validating it, compacted to one line (PostgreSQL's
// json type keeps the input's whitespace, and a newline would split the _bulk line), with
// duplicate member names resolved: in every object, at every level, a member is dropped when
// a later member of the same object has the same name (compared by decoded text), so the last
// one stays where it is and the rest keep their order -- the value jsonb, PostgreSQL's json
// operators and MySQL 8 give such an object, which both engines would refuse as it is.
//
// The compaction pass also looks for duplicates, comparing each escape-free name with the
// earlier names of its object in a scratch array on the stack. Only when it finds one, or cannot
// decide cheaply (a name with an escape, an object of more than maxPairwiseMembers members),
// does dedupeJSON re-read the compacted text (and allocate).
func appendJSON(b []byte, j []byte) ([]byte, string) {
	if !json.Valid(j) {
		return b, "invalid JSON document"
	}
	start := len(b)
	// The open containers and the member names of the open objects, as offsets into b.
	var levelBuf [16]jsonLevel
	var nameBuf [2 * maxPairwiseMembers]jsonName
	levels, names := levelBuf[:0], nameBuf[:0]
	track, slow := true, false // track: still deciding in this pass
	expectName, inName, nameEsc := false, false, false
	nameStart := 0
	inStr, esc := false, false
	for _, ch := range j {
		if inStr {
			b = append(b, ch)
			switch {
			case esc:
				esc = false
			case ch == '\\':
				esc, nameEsc = true, true
			case ch == '"':
				inStr = false
				if inName {
					inName = false
					if track {
						top := &levels[len(levels)-1]
						top.members++
						if nameEsc || top.members > maxPairwiseMembers {
							track, slow = false, true
							break
						}
						n := jsonName{start: int32(nameStart - start), end: int32(len(b) - start)}
						doc := b[start:]
						for _, o := range names[top.names:] {
							if bytes.Equal(doc[o.start:o.end], doc[n.start:n.end]) {
								track, slow = false, true
								break
							}
						}
						names = append(names, n)
					}
				}
			}
			continue
		}
		switch ch {
		case ' ', '\t', '\n', '\r':
			continue
		case '"':
			inStr = true
			if expectName {
				expectName, inName, nameEsc, nameStart = false, true, false, len(b)
			}
		case '{', '[':
			if track {
				levels = append(levels, jsonLevel{object: ch == '{', names: int32(len(names))})
			}
			expectName = ch == '{'
		case '}', ']':
			if track {
				names = names[:levels[len(levels)-1].names]
				levels = levels[:len(levels)-1]
			}
			expectName = false
		case ',':
			expectName = track && levels[len(levels)-1].object
		case ':':
			expectName = false
		}
		b = append(b, ch)
	}
	if slow {
		if out, changed := dedupeJSON(b[start:]); changed {
			b = append(b[:start], out...)
		}
	}
	return b, ""
}

// appendJSONString writes s as a JSON string. s must be valid UTF-8 (callers check).
func appendJSONString[T string | []byte](b []byte, s T) []byte { return jsonenc.AppendString(b, s) }
