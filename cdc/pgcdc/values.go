package pgcdc

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/tributary-dev/tributary/cdc"
)

// decodeFunc turns one column value in PostgreSQL's text output form into its normalized
// cdc.Value. Both paths hand it the same text: pgoutput sends text tuples, and the snapshot
// SELECT asks for text results on a session with the same output settings (sessionParams), so
// a row yields identical values from either. Errors never quote the input: it is row data.
type decodeFunc func(text []byte) (cdc.Value, error)

// sharedDecodeFunc is the form of a decoder whose values are cut from their text: strings and
// arrays of strings. A row's texts for such columns are copied into one string and each value
// is a substring of it, one allocation per row instead of one per value (rowText). A value
// keeps the row's shared string alive, never more than the row itself holds.
type sharedDecodeFunc func(text string) (cdc.Value, error)

// sessionParams pin every setting that changes a type's text output, on the replication and
// the SQL connection alike, so the two paths cannot drift apart whatever the server's defaults.
var sessionParams = map[string]string{
	"DateStyle":          "ISO, MDY",
	"IntervalStyle":      "postgres",
	"TimeZone":           "UTC",
	"extra_float_digits": "1",
	"bytea_output":       "hex",
	"client_encoding":    "UTF8",
}

var errDecode = errors.New("pgcdc: value not in the expected text form")

func decodeString(text []byte) (cdc.Value, error) { return string(text), nil }

func decodeSharedString(text string) (cdc.Value, error) { return text, nil }

// The decoders' errors are built once: a decoder runs for every value of every row, and the
// error of a value that does not decode says only which form it missed.
var (
	errBoolForm         = fmt.Errorf("%w (boolean)", errDecode)
	errIntForm          = fmt.Errorf("%w (integer)", errDecode)
	errUintForm         = fmt.Errorf("%w (unsigned integer)", errDecode)
	errFloatForm        = fmt.Errorf("%w (float)", errDecode)
	errByteaForm        = fmt.Errorf("%w (bytea hex)", errDecode)
	errTimestamptzForm  = fmt.Errorf("%w (timestamptz)", errDecode)
	errOffsetForm       = fmt.Errorf("%w (timestamptz offset)", errDecode)
	errTimestamptzRange = fmt.Errorf("%w (timestamptz beyond epoch microseconds)", errDecode)
	errDateTimeForm     = fmt.Errorf("%w (date and time)", errDecode)
	errArrayBoundsForm  = fmt.Errorf("%w (array bounds)", errDecode)
	errArrayTrailing    = fmt.Errorf("%w (array trailing text)", errDecode)
	errArrayForm        = fmt.Errorf("%w (array)", errDecode)
)

func decodeBool(text []byte) (cdc.Value, error) {
	switch string(text) {
	case "t":
		return true, nil
	case "f":
		return false, nil
	}
	return nil, errBoolForm
}

func decodeInt(text []byte) (cdc.Value, error) {
	n, err := strconv.ParseInt(string(text), 10, 64)
	if err != nil {
		return nil, errIntForm
	}
	return n, nil
}

func decodeUint(text []byte) (cdc.Value, error) {
	n, err := strconv.ParseUint(string(text), 10, 64)
	if err != nil {
		return nil, errUintForm
	}
	return n, nil
}

// decodeFloat parses real and double precision. PostgreSQL 12+ prints the shortest text that
// reads back to the same float (extra_float_digits >= 1), so a real's "1.1" becomes the
// float64 nearest 1.1 on both paths. NaN and ±Infinity come out as the float64 specials.
func decodeFloat(text []byte) (cdc.Value, error) {
	f, err := strconv.ParseFloat(string(text), 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			return f, nil
		}
		return nil, errFloatForm
	}
	return f, nil
}

// decodeBytea reads the hex output form ("\x0aff").
func decodeBytea(text []byte) (cdc.Value, error) {
	if len(text) < 2 || text[0] != '\\' || text[1] != 'x' {
		return nil, errByteaForm
	}
	// Small values decode on the stack: only the base64 text is allocated.
	var small [128]byte
	var raw []byte
	if n := hex.DecodedLen(len(text) - 2); n <= len(small) {
		raw = small[:n]
	} else {
		raw = make([]byte, n)
	}
	if _, err := hex.Decode(raw, text[2:]); err != nil {
		return nil, errByteaForm
	}
	return cdc.Base64(base64.StdEncoding.EncodeToString(raw)), nil
}

func decodeJSON(text []byte) (cdc.Value, error) {
	out := make([]byte, len(text))
	copy(out, text)
	return cdc.RawJSON(out), nil
}

// decodeTimestamptz turns the ISO output of timestamp with time zone ("2024-05-06
// 07:08:09.123456+00", optionally "+05:30", "+05:30:15" and " BC") into epoch microseconds.
// The infinities have no instant; they stay the strings "infinity" and "-infinity".
func decodeTimestamptz(text []byte) (cdc.Value, error) {
	switch string(text) {
	case "infinity":
		return "infinity", nil
	case "-infinity":
		return "-infinity", nil
	}
	s := text
	bc := false
	if len(s) > 3 && string(s[len(s)-3:]) == " BC" {
		bc, s = true, s[:len(s)-3]
	}
	// The offset starts at the last sign after the time of day.
	i := len(s) - 1
	for i > 10 && s[i] != '+' && s[i] != '-' {
		i--
	}
	if i <= 10 {
		return nil, errTimestamptzForm
	}
	local, off := s[:i], s[i:]
	offSec, ok := parseOffset(off)
	if !ok {
		return nil, errOffsetForm
	}
	t, err := parseISODateTime(local, bc)
	if err != nil {
		return nil, err
	}
	// Epoch microseconds in an int64 end in 294247 AD, 29 years before PostgreSQL's range
	// does (its own microseconds count from 2000): a later instant has no value here.
	if t.Before(minInstant) || t.After(maxInstant) {
		return nil, errTimestamptzRange
	}
	return cdc.EpochMicros(t.UnixMicro() - int64(offSec)*1e6), nil
}

// digits reads a run of ASCII digits (at most 18, so it cannot overflow).
func digits(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// parseOffset reads "+HH", "+HH:MM" or "+HH:MM:SS" into seconds east of UTC.
func parseOffset(s []byte) (int, bool) {
	sign := 1
	if s[0] == '-' {
		sign = -1
	}
	var parts [3]int
	rest := s[1:]
	for k := 0; k < 3 && len(rest) > 0; k++ {
		if len(rest) < 2 {
			return 0, false
		}
		n, ok := digits(rest[:2])
		if !ok {
			return 0, false
		}
		parts[k] = n
		rest = rest[2:]
		if len(rest) > 0 {
			if rest[0] != ':' {
				return 0, false
			}
			rest = rest[1:]
		}
	}
	return sign * (parts[0]*3600 + parts[1]*60 + parts[2]), true
}

// parseISODateTime reads "YYYY-MM-DD HH:MM:SS[.ffffff]" as UTC; years may have more than four
// digits, and bc marks a year before 1 AD (PostgreSQL's 1 BC is year 0 proleptic).
func parseISODateTime(s []byte, bc bool) (time.Time, error) {
	dash := 0
	for dash < len(s) && s[dash] != '-' {
		dash++
	}
	if dash < 4 || len(s) < dash+15 {
		return time.Time{}, errDateTimeForm
	}
	year, ok := digits(s[:dash])
	if !ok {
		return time.Time{}, errDateTimeForm
	}
	if bc {
		year = 1 - year
	}
	r := s[dash:] // "-MM-DD HH:MM:SS[.ffffff]"
	if r[0] != '-' || r[3] != '-' || r[6] != ' ' || r[9] != ':' || r[12] != ':' {
		return time.Time{}, errDateTimeForm
	}
	month, ok1 := digits(r[1:3])
	day, ok2 := digits(r[4:6])
	hour, ok3 := digits(r[7:9])
	minute, ok4 := digits(r[10:12])
	sec, ok5 := digits(r[13:15])
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		return time.Time{}, errDateTimeForm
	}
	micros := 0
	if len(r) > 15 {
		frac := r[15:]
		if frac[0] != '.' || len(frac) < 2 || len(frac) > 7 {
			return time.Time{}, errDateTimeForm
		}
		n, ok := digits(frac[1:])
		if !ok {
			return time.Time{}, errDateTimeForm
		}
		for k := len(frac) - 1; k < 6; k++ {
			n *= 10
		}
		micros = n
	}
	// PostgreSQL prints only real instants of its range (4713 BC to 294276 AD): anything else
	// is not its output, and time.Date would silently normalize it (a 13th month, a 31st of
	// April) or, for a year of many digits, give an instant whose epoch microseconds overflow.
	if year < minYear || year > maxYear || month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, errDateTimeForm
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, micros*1000, time.UTC)
	if t.Day() != day {
		return time.Time{}, errDateTimeForm
	}
	return t, nil
}

// The instants epoch microseconds hold, a day short at either end so that no offset
// overflows them.
var (
	minInstant = time.UnixMicro(math.MinInt64).Add(24 * time.Hour)
	maxInstant = time.UnixMicro(math.MaxInt64).Add(-24 * time.Hour)
)

// The years of PostgreSQL's timestamp range, proleptic (1 BC is year 0).
const (
	minYear = -4712
	maxYear = 294276
)

// text is what the array parser reads: a value's bytes, or a string the row shares.
type rawText interface{ ~[]byte | ~string }

// arrayDecoder parses PostgreSQL's array output ("{1,2,NULL}", "{{a,b},{c,d}}", "{"x y","q\"z"}",
// with an optional "[1:2]=" bounds prefix) into nested []cdc.Value whose elements go through
// elem.
func arrayDecoder(elem decodeFunc, delim byte) decodeFunc {
	return func(text []byte) (cdc.Value, error) { return parseArray(text, elem, delim) }
}

// sharedArrayDecoder is arrayDecoder over a shared row string: elements that need no
// unescaping are substrings of it.
func sharedArrayDecoder(elem sharedDecodeFunc, delim byte) sharedDecodeFunc {
	return func(text string) (cdc.Value, error) { return parseArray(text, elem, delim) }
}

func parseArray[T rawText](s T, elem func(T) (cdc.Value, error), delim byte) (cdc.Value, error) {
	if len(s) > 0 && s[0] == '[' {
		eq := 0
		for eq < len(s) && s[eq] != '=' {
			eq++
		}
		if eq == len(s) {
			return nil, errArrayBoundsForm
		}
		s = s[eq+1:]
	}
	p := arrayParser[T]{s: s, elem: elem, delim: delim}
	v, err := p.parse()
	if err != nil {
		return nil, err
	}
	if p.i != len(p.s) {
		return nil, errArrayTrailing
	}
	return v, nil
}

type arrayParser[T rawText] struct {
	s     T
	i     int
	elem  func(T) (cdc.Value, error)
	delim byte
	buf   []byte // unescaping scratch, reused across elements
}

// count returns how many elements the array starting at p.i (just after its '{') holds, so
// that its slice is allocated once. It reads ahead without moving p.i.
func (p *arrayParser[T]) count() int {
	n, depth, quoted := 1, 0, false
	for i := p.i; i < len(p.s); i++ {
		c := p.s[i]
		switch {
		case quoted:
			if c == '\\' {
				i++
			} else if c == '"' {
				quoted = false
			}
		case c == '"':
			quoted = true
		case c == '{':
			depth++
		case c == '}':
			if depth == 0 {
				return n
			}
			depth--
		case c == p.delim && depth == 0:
			n++
		}
	}
	return n
}

func (p *arrayParser[T]) parse() ([]cdc.Value, error) {
	if p.i >= len(p.s) || p.s[p.i] != '{' {
		return nil, errArrayForm
	}
	p.i++
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return []cdc.Value{}, nil
	}
	out := make([]cdc.Value, 0, p.count())
	for {
		if p.i >= len(p.s) {
			return nil, errArrayForm
		}
		switch p.s[p.i] {
		case '{':
			sub, err := p.parse()
			if err != nil {
				return nil, err
			}
			out = append(out, sub)
		case '"':
			p.i++
			start, escaped := p.i, false
			for {
				if p.i >= len(p.s) {
					return nil, errArrayForm
				}
				c := p.s[p.i]
				if c == '\\' && p.i+1 < len(p.s) {
					escaped = true
					p.i += 2
					continue
				}
				if c == '"' {
					break
				}
				p.i++
			}
			tok := p.s[start:p.i]
			p.i++ // the closing quote
			if escaped {
				p.buf = p.buf[:0]
				for k := 0; k < len(tok); k++ {
					if tok[k] == '\\' && k+1 < len(tok) {
						k++
					}
					p.buf = append(p.buf, tok[k])
				}
				// For []byte the element decoders copy what they keep, so the scratch may be
				// reused; for string the conversion copies.
				tok = T(p.buf)
			}
			v, err := p.elem(tok)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		default:
			start := p.i
			for p.i < len(p.s) && p.s[p.i] != p.delim && p.s[p.i] != '}' {
				p.i++
			}
			tok := p.s[start:p.i]
			if string(tok) == "NULL" {
				out = append(out, nil)
				break
			}
			v, err := p.elem(tok)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		if p.i >= len(p.s) {
			return nil, errArrayForm
		}
		switch p.s[p.i] {
		case p.delim:
			p.i++
		case '}':
			p.i++
			return out, nil
		default:
			return nil, errArrayForm
		}
	}
}
