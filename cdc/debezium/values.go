package debezium

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/cdc"
)

// converter turns one JSON value of Debezium's representation (never null) into the value
// shape a native source gives for the column (cdc.Value).
type converter func(raw []byte) (cdc.Value, error)

// The placeholder Debezium's PostgreSQL connector writes for a TOASTed value an update left
// unchanged (unavailable.value.placeholder's default), as text and as bytes.
const unavailablePlaceholder = "__debezium_unavailable_value"

var unavailableBytes = base64.StdEncoding.EncodeToString([]byte(unavailablePlaceholder))

// converterFor picks the conversion from the field's Connect type and logical name to the
// column's native value shape.
func converterFor(connector string, c *cdc.Column, f *connectSchema) (converter, error) {
	pg := connector == "postgresql"
	switch f.Name {
	case logicalDecimal:
		scale, err := strconv.Atoi(f.Parameters["scale"]) // negative scales included
		if err != nil {
			return nil, errors.New("a Decimal schema without its scale")
		}
		return decimalConv(c, scale), nil
	case logicalVariableDecimal:
		return variableDecimalConv(c), nil
	case logicalDate, logicalConnectDate:
		if pg {
			return pgDateConv, nil
		}
		return dateConv, nil
	case logicalTime:
		return timeConv(time.Millisecond), nil
	case logicalMicroTime:
		return timeConv(time.Microsecond), nil
	case logicalNanoTime:
		return timeConv(time.Nanosecond), nil
	case logicalConnectTime:
		return timeConv(time.Millisecond), nil
	case logicalTimestamp, logicalConnectTS:
		if pg {
			return pgDateTimeConv(time.Millisecond), nil
		}
		return dateTimeConv(time.Millisecond), nil
	case logicalMicroTimestamp:
		if pg {
			return pgDateTimeConv(time.Microsecond), nil
		}
		return dateTimeConv(time.Microsecond), nil
	case logicalNanoTimestamp:
		return dateTimeConv(time.Nanosecond), nil
	case logicalZonedTimestamp:
		return zonedTimestampConv(), nil
	case logicalYear:
		return intConv(c), nil
	case logicalJSON:
		return jsonConv, nil
	case logicalBits:
		return bitsConv(c, pg), nil
	case logicalGeometry, logicalGeography:
		return geometryConv, nil
	case logicalMicroDuration:
		return failing("an interval as microseconds (set interval.handling.mode=string)"), nil
	case logicalPoint:
		return pointConv, nil
	}
	switch f.Type {
	case "int8", "int16", "int32", "int64":
		return intConv(c), nil
	case "float", "float32", "double", "float64":
		return floatConv, nil
	case "boolean":
		if c.Kind == cdc.KindBit { // MySQL BIT(1)
			return boolBitConv, nil
		}
		return boolConv, nil
	case "string":
		if c.Kind == cdc.KindJSON {
			return jsonConv, nil
		}
		if c.Kind == cdc.KindDecimal { // decimal.handling.mode=string
			return decimalStringConv, nil
		}
		if pg && c.Kind == cdc.KindOther && strings.EqualFold(c.SourceType, "interval") {
			return isoIntervalConv, nil
		}
		return stringConv, nil
	case "bytes":
		return bytesConv(c), nil
	case "array":
		if f.Items == nil {
			return nil, errors.New("array schema without items")
		}
		ec := cdc.Column{Name: c.Name}
		if c.Elem != nil {
			ec = *c.Elem
		}
		elem, err := converterFor(connector, &ec, f.Items)
		if err != nil {
			return nil, err
		}
		if pg {
			return pgArrayConv(elem, pgNullsAreNull(c.Elem)), nil
		}
		return arrayConv(elem), nil
	case "struct":
		return nil, fmt.Errorf("struct type %q is not supported", f.Name)
	}
	return nil, fmt.Errorf("connect type %q is not supported", f.Type)
}

// errNotExact is the reason of a value whose Debezium form cannot be turned into the native
// one without loss.
var errNotExact = errors.New("the connector's representation cannot be converted exactly")

// failing is the conversion of a representation that cannot be converted exactly: each value
// fails, naming why (and the connector setting that fixes it).
func failing(why string) converter {
	return func([]byte) (cdc.Value, error) { return nil, fmt.Errorf("%w: %s", errNotExact, why) }
}

func jsonString(raw []byte) (string, error) {
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		inner := raw[1 : len(raw)-1]
		plain := true
		for _, b := range inner {
			if b == '\\' || b == '"' || b < 0x20 {
				plain = false
				break
			}
		}
		if plain {
			return string(inner), nil
		}
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", errors.New("not a JSON string")
	}
	return s, nil
}

func jsonInt(raw []byte) (int64, error) {
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return 0, errors.New("not a JSON integer")
	}
	return n, nil
}

func stringConv(raw []byte) (cdc.Value, error) { return jsonString(raw) }

func jsonConv(raw []byte) (cdc.Value, error) {
	s, err := jsonString(raw)
	if err != nil {
		return nil, err
	}
	if !json.Valid([]byte(s)) {
		return nil, errors.New("a JSON column's value is not valid JSON")
	}
	return cdc.RawJSON(s), nil
}

func boolConv(raw []byte) (cdc.Value, error) {
	switch string(raw) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return nil, errors.New("not a JSON boolean")
}

func boolBitConv(raw []byte) (cdc.Value, error) {
	b, err := boolConv(raw)
	if err != nil {
		return nil, err
	}
	if b.(bool) {
		return uint64(1), nil
	}
	return uint64(0), nil
}

// intConv converts an integer. An unsigned column gets uint64: Debezium carries MySQL's
// unsigned integers widened (INT UNSIGNED as int64), except BIGINT UNSIGNED under
// bigint.unsigned.handling.mode=long, whose values above 2^63-1 arrive as their two's
// complement (18446744073709551615 as -1): reinterpreting the 64 bits restores them.
func intConv(c *cdc.Column) converter {
	if c.Kind == cdc.KindUint {
		bits := c.Bits
		return func(raw []byte) (cdc.Value, error) {
			n, err := jsonInt(raw)
			if err != nil {
				return nil, err
			}
			if n < 0 && bits < 64 {
				return nil, errors.New("a negative value in an unsigned column")
			}
			return uint64(n), nil
		}
	}
	return func(raw []byte) (cdc.Value, error) {
		n, err := jsonInt(raw)
		if err != nil {
			return nil, err
		}
		return n, nil
	}
}

// floatConv converts a float. JsonConverter writes NaN and the infinities as the strings
// "NaN", "Infinity" and "-Infinity".
func floatConv(raw []byte) (cdc.Value, error) {
	if len(raw) > 0 && raw[0] == '"' {
		s, err := jsonString(raw)
		if err != nil {
			return nil, err
		}
		switch s {
		case "NaN":
			return math.NaN(), nil
		case "Infinity":
			return math.Inf(1), nil
		case "-Infinity":
			return math.Inf(-1), nil
		}
		return nil, errors.New("not a JSON number")
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return nil, errors.New("not a JSON number")
	}
	return f, nil
}

func bytesConv(c *cdc.Column) converter {
	return func(raw []byte) (cdc.Value, error) {
		s, err := jsonString(raw)
		if err != nil {
			return nil, err
		}
		if c.Kind == cdc.KindText { // text the connector sent as bytes (binary.handling)
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				return nil, errors.New("bytes that are not base64")
			}
			return string(b), nil
		}
		if _, err := base64.StdEncoding.DecodeString(s); err != nil {
			return nil, errors.New("bytes that are not base64")
		}
		return cdc.Base64(s), nil
	}
}

// unscaled decodes Connect's Decimal bytes: a big-endian two's complement integer.
func unscaled(s string) (*big.Int, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, errors.New("decimal bytes that are not base64")
	}
	n := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(len(b))*8))
	}
	return n, nil
}

// formatDecimal renders unscaled * 10^-scale with exactly scale fractional digits, as
// PostgreSQL and MySQL print a decimal of that scale.
func formatDecimal(n *big.Int, scale int) string {
	digits := n.String()
	neg := strings.HasPrefix(digits, "-")
	if neg {
		digits = digits[1:]
	}
	switch {
	case scale < 0:
		if digits != "0" {
			digits += strings.Repeat("0", -scale)
		}
	case scale > 0:
		if len(digits) <= scale {
			digits = strings.Repeat("0", scale-len(digits)+1) + digits
		}
		digits = digits[:len(digits)-scale] + "." + digits[len(digits)-scale:]
	}
	if neg {
		return "-" + digits
	}
	return digits
}

// decimalConv converts a Decimal: digits for a decimal column, an unsigned integer for a
// MySQL BIGINT UNSIGNED under bigint.unsigned.handling.mode=precise.
func decimalConv(c *cdc.Column, scale int) converter {
	return func(raw []byte) (cdc.Value, error) {
		if len(raw) > 0 && raw[0] != '"' { // decimal.handling.mode=double
			return failing("a decimal as a double (set decimal.handling.mode=precise or string)")(raw)
		}
		s, err := jsonString(raw)
		if err != nil {
			return nil, err
		}
		n, err := unscaled(s)
		if err != nil {
			return nil, err
		}
		switch c.Kind {
		case cdc.KindUint:
			if scale != 0 || n.Sign() < 0 || !n.IsUint64() {
				return nil, errors.New("an unsigned integer out of range")
			}
			return n.Uint64(), nil
		case cdc.KindInt:
			if scale != 0 || !n.IsInt64() {
				return nil, errors.New("an integer out of range")
			}
			return n.Int64(), nil
		}
		return formatDecimal(n, scale), nil
	}
}

// variableDecimalConv converts io.debezium.data.VariableScaleDecimal {scale, value}.
func variableDecimalConv(c *cdc.Column) converter {
	return func(raw []byte) (cdc.Value, error) {
		var v struct {
			Scale *int   `json:"scale"`
			Value string `json:"value"`
		}
		if err := json.Unmarshal(raw, &v); err != nil || v.Scale == nil {
			return nil, errors.New("not a variable-scale decimal")
		}
		n, err := unscaled(v.Value)
		if err != nil {
			return nil, err
		}
		return formatDecimal(n, *v.Scale), nil
	}
}

// dateConv converts days since 1970-01-01 to "2006-01-02".
func dateConv(raw []byte) (cdc.Value, error) {
	n, err := jsonInt(raw)
	if err != nil {
		return nil, err
	}
	return formatDate(time.Unix(n*86400, 0).UTC()), nil
}

func formatDate(t time.Time) string {
	y := t.Year()
	if y <= 0 { // PostgreSQL writes year 0 as 1 BC
		return fmt.Sprintf("%04d-%02d-%02d BC", 1-y, int(t.Month()), t.Day())
	}
	return t.Format("2006-01-02")
}

// appendFraction appends ".ffffff" with trailing zeros dropped (nothing for zero), as
// PostgreSQL prints fractional seconds.
func appendFraction(b []byte, micros int64) []byte {
	if micros == 0 {
		return b
	}
	s := strconv.FormatInt(micros+1_000_000, 10)[1:]
	s = strings.TrimRight(s, "0")
	return append(append(b, '.'), s...)
}

// timeConv converts a time of day (or MySQL's TIME, a duration that may be negative or
// exceed a day) in unit since midnight to "15:04:05[.ffffff]".
func timeConv(unit time.Duration) converter {
	return func(raw []byte) (cdc.Value, error) {
		n, err := jsonInt(raw)
		if err != nil {
			return nil, err
		}
		micros := n * int64(unit/time.Microsecond)
		if unit == time.Nanosecond {
			micros = n / 1000
		}
		var b []byte
		if micros < 0 {
			b = append(b, '-')
			micros = -micros
		}
		secs, frac := micros/1_000_000, micros%1_000_000
		h, m, s := secs/3600, secs/60%60, secs%60
		if h < 10 {
			b = append(b, '0')
		}
		b = strconv.AppendInt(b, h, 10)
		b = append(b, ':', byte('0'+m/10), byte('0'+m%10), ':', byte('0'+s/10), byte('0'+s%10))
		return string(appendFraction(b, frac)), nil
	}
}

// dateTimeConv converts a wall-clock date and time (PostgreSQL timestamp, MySQL DATETIME)
// in unit since the epoch to "2006-01-02 15:04:05[.ffffff]".
func dateTimeConv(unit time.Duration) converter {
	return func(raw []byte) (cdc.Value, error) {
		n, err := jsonInt(raw)
		if err != nil {
			return nil, err
		}
		var t time.Time
		switch unit {
		case time.Millisecond:
			t = time.UnixMilli(n)
		case time.Microsecond:
			t = time.UnixMicro(n)
		default:
			t = time.Unix(0, n)
		}
		t = t.UTC()
		b := t.AppendFormat(nil, "2006-01-02 15:04:05")
		if t.Year() <= 0 {
			b = fmt.Appendf(nil, "%04d%s", 1-t.Year(), t.Format("-01-02 15:04:05"))
		}
		b = appendFraction(b, int64(t.Nanosecond()/1000))
		if t.Year() <= 0 {
			b = append(b, " BC"...)
		}
		return string(b), nil
	}
}

// zonedTimestampConv converts an instant in ISO-8601 with an offset (years past 9999 signed)
// to microseconds since the epoch; PostgreSQL's infinities arrive, and stay, as "infinity"
// and "-infinity".
func zonedTimestampConv() converter {
	return func(raw []byte) (cdc.Value, error) {
		s, err := jsonString(raw)
		if err != nil {
			return nil, err
		}
		if s == "infinity" || s == "-infinity" {
			return s, nil
		}
		t, ok := parseISOInstant(s)
		if !ok {
			return nil, errors.New("not an ISO-8601 instant")
		}
		return cdc.EpochMicros(t.UnixMicro()), nil
	}
}

// bitsConv converts io.debezium.data.Bits (the bytes of a Java BitSet: little-endian, bit 0
// the string's last) to a MySQL BIT's integer, or to PostgreSQL's bit string of the declared
// length. A varbit shorter than its declared length cannot be told from one padded with zeros.
func bitsConv(c *cdc.Column, pg bool) converter {
	return func(raw []byte) (cdc.Value, error) {
		s, err := jsonString(raw)
		if err != nil {
			return nil, err
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, errors.New("bits that are not base64")
		}
		if !pg {
			if len(b) > 8 {
				return nil, errors.New("more than 64 bits")
			}
			var buf [8]byte
			copy(buf[:], b)
			return binary.LittleEndian.Uint64(buf[:]), nil
		}
		n := c.Bits
		if n <= 0 {
			n = len(b) * 8
		}
		out := make([]byte, n)
		for i := range n {
			bit := n - 1 - i // the string's last character is bit 0
			v := byte('0')
			if bit/8 < len(b) && b[bit/8]&(1<<(bit%8)) != 0 {
				v = '1'
			}
			out[i] = v
		}
		return string(out), nil
	}
}

// geometryConv converts io.debezium.data.geometry.Geometry {wkb, srid} to MySQL's internal
// form, which mysqlcdc reports: the SRID (4 bytes, little-endian), then the WKB.
func geometryConv(raw []byte) (cdc.Value, error) {
	var g struct {
		WKB  string `json:"wkb"`
		SRID *int64 `json:"srid"`
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		return nil, errors.New("not a geometry")
	}
	wkb, err := base64.StdEncoding.DecodeString(g.WKB)
	if err != nil {
		return nil, errors.New("a geometry whose wkb is not base64")
	}
	var srid uint32
	if g.SRID != nil {
		srid = uint32(*g.SRID)
	}
	out := binary.LittleEndian.AppendUint32(make([]byte, 0, 4+len(wkb)), srid)
	return cdc.Base64(base64.StdEncoding.EncodeToString(append(out, wkb...))), nil
}

// pointConv converts io.debezium.data.geometry.Point {x, y, ...} to PostgreSQL's "(x,y)".
func pointConv(raw []byte) (cdc.Value, error) {
	var p struct {
		X *float64 `json:"x"`
		Y *float64 `json:"y"`
	}
	if err := json.Unmarshal(raw, &p); err != nil || p.X == nil || p.Y == nil {
		return nil, errors.New("not a point")
	}
	return "(" + strconv.FormatFloat(*p.X, 'g', -1, 64) + "," + strconv.FormatFloat(*p.Y, 'g', -1, 64) + ")", nil
}

func arrayConv(elem converter) converter {
	return func(raw []byte) (cdc.Value, error) {
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, errors.New("not a JSON array")
		}
		out := make([]cdc.Value, len(items))
		for i, it := range items {
			if string(it) == "null" {
				continue
			}
			v, err := elem(it)
			if err != nil {
				return nil, fmt.Errorf("array element %d: %w", i, err)
			}
			out[i] = v
		}
		return out, nil
	}
}

// isoIntervalConv converts an interval in ISO-8601 (interval.handling.mode=string:
// "P1Y2M3DT4H5M6.5S") to PostgreSQL's text form under IntervalStyle postgres, which pgcdc
// reports ("1 year 2 mons 3 days 04:05:06.5").
func isoIntervalConv(raw []byte) (cdc.Value, error) {
	s, err := jsonString(raw)
	if err != nil {
		return nil, err
	}
	out, ok := isoToPostgresInterval(s)
	if !ok {
		return nil, errors.New("not an ISO-8601 interval")
	}
	return out, nil
}

func isoToPostgresInterval(s string) (string, bool) {
	if !strings.HasPrefix(s, "P") {
		return "", false
	}
	s = s[1:]
	var years, months, days, hours, minutes int64
	var secMicros int64
	inTime := false
	for len(s) > 0 {
		if s[0] == 'T' {
			inTime = true
			s = s[1:]
			continue
		}
		i := 0
		for i < len(s) && (s[i] == '-' || s[i] == '.' || (s[i] >= '0' && s[i] <= '9')) {
			i++
		}
		if i == 0 || i == len(s) {
			return "", false
		}
		num, unit := s[:i], s[i]
		s = s[i+1:]
		if unit == 'S' && inTime {
			f, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return "", false
			}
			secMicros = int64(math.Round(f * 1e6))
			continue
		}
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return "", false
		}
		switch {
		case unit == 'Y' && !inTime:
			years = n
		case unit == 'M' && !inTime:
			months = n
		case unit == 'D' && !inTime:
			days = n
		case unit == 'H' && inTime:
			hours = n
		case unit == 'M' && inTime:
			minutes = n
		default:
			return "", false
		}
	}
	// PostgreSQL's EncodeInterval: a positive field after a negative one gets a "+".
	var parts []string
	prevNeg := false
	plural := func(n int64, one, many string) {
		if n == 0 {
			return
		}
		w := many
		if n == 1 { // PostgreSQL writes "-1 days"
			w = one
		}
		sign := ""
		if prevNeg && n > 0 {
			sign = "+"
		}
		parts = append(parts, sign+strconv.FormatInt(n, 10)+" "+w)
		prevNeg = n < 0
	}
	plural(years, "year", "years")
	plural(months, "mon", "mons")
	plural(days, "day", "days")
	total := (hours*3600+minutes*60)*1_000_000 + secMicros
	if total != 0 || len(parts) == 0 {
		var b []byte
		if total < 0 {
			b = append(b, '-')
			total = -total
		} else if prevNeg {
			b = append(b, '+')
		}
		secs, frac := total/1_000_000, total%1_000_000
		h, m, sec := secs/3600, secs/60%60, secs%60
		b = fmt.Appendf(b, "%02d:%02d:%02d", h, m, sec)
		b = appendFraction(b, frac)
		parts = append(parts, string(b))
	}
	return strings.Join(parts, " "), true
}
