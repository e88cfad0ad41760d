package pgcdc

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/tributary-dev/tributary/cdc"
)

// decodeFunc turns one column value in PostgreSQL's text output form into its normalized
// cdc.Value. Both paths hand it the same text: pgoutput sends text tuples, and the snapshot
// SELECT asks for text results on a session with the same output settings (sessionParams), so
// a row yields identical values from either. Errors never quote the input: it is row data.
type decodeFunc func(text []byte) (cdc.Value, error)

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

func decodeBool(text []byte) (cdc.Value, error) {
	switch string(text) {
	case "t":
		return true, nil
	case "f":
		return false, nil
	}
	return nil, fmt.Errorf("%w (boolean)", errDecode)
}

func decodeInt(text []byte) (cdc.Value, error) {
	n, err := strconv.ParseInt(string(text), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%w (integer)", errDecode)
	}
	return n, nil
}

func decodeUint(text []byte) (cdc.Value, error) {
	n, err := strconv.ParseUint(string(text), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%w (unsigned integer)", errDecode)
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
		return nil, fmt.Errorf("%w (float)", errDecode)
	}
	return f, nil
}

// decodeBytea reads the hex output form ("\x0aff").
func decodeBytea(text []byte) (cdc.Value, error) {
	if len(text) < 2 || text[0] != '\\' || text[1] != 'x' {
		return nil, fmt.Errorf("%w (bytea hex)", errDecode)
	}
	raw := make([]byte, hex.DecodedLen(len(text)-2))
	if _, err := hex.Decode(raw, text[2:]); err != nil {
		return nil, fmt.Errorf("%w (bytea hex)", errDecode)
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
	s := string(text)
	if s == "infinity" || s == "-infinity" {
		return s, nil
	}
	bc := false
	if len(s) > 3 && s[len(s)-3:] == " BC" {
		bc, s = true, s[:len(s)-3]
	}
	// The offset starts at the last sign after the time of day.
	i := len(s) - 1
	for i > 10 && s[i] != '+' && s[i] != '-' {
		i--
	}
	if i <= 10 {
		return nil, fmt.Errorf("%w (timestamptz)", errDecode)
	}
	local, off := s[:i], s[i:]
	offSec, ok := parseOffset(off)
	if !ok {
		return nil, fmt.Errorf("%w (timestamptz offset)", errDecode)
	}
	t, err := parseISODateTime(local, bc)
	if err != nil {
		return nil, err
	}
	return cdc.EpochMicros(t.UnixMicro() - int64(offSec)*1e6), nil
}

// parseOffset reads "+HH", "+HH:MM" or "+HH:MM:SS" into seconds east of UTC.
func parseOffset(s string) (int, bool) {
	sign := 1
	if s[0] == '-' {
		sign = -1
	}
	parts := []int{0, 0, 0}
	rest := s[1:]
	for k := 0; k < 3 && rest != ""; k++ {
		if len(rest) < 2 {
			return 0, false
		}
		n, err := strconv.Atoi(rest[:2])
		if err != nil {
			return 0, false
		}
		parts[k] = n
		rest = rest[2:]
		if rest != "" {
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
func parseISODateTime(s string, bc bool) (time.Time, error) {
	bad := fmt.Errorf("%w (date and time)", errDecode)
	dash := 0
	for dash < len(s) && s[dash] != '-' {
		dash++
	}
	if dash < 4 || len(s) < dash+15 {
		return time.Time{}, bad
	}
	year, err := strconv.Atoi(s[:dash])
	if err != nil {
		return time.Time{}, bad
	}
	if bc {
		year = 1 - year
	}
	r := s[dash:] // "-MM-DD HH:MM:SS[.ffffff]"
	num := func(a, b int) int {
		n, e := strconv.Atoi(r[a:b])
		if e != nil {
			err = e
		}
		return n
	}
	if r[0] != '-' || r[3] != '-' || r[6] != ' ' || r[9] != ':' || r[12] != ':' {
		return time.Time{}, bad
	}
	month, day, hour, minute, sec := num(1, 3), num(4, 6), num(7, 9), num(10, 12), num(13, 15)
	micros := 0
	if len(r) > 15 {
		frac := r[15:]
		if frac[0] != '.' || len(frac) < 2 || len(frac) > 7 {
			return time.Time{}, bad
		}
		digits := frac[1:]
		n, e := strconv.Atoi(digits)
		if e != nil {
			return time.Time{}, bad
		}
		for k := len(digits); k < 6; k++ {
			n *= 10
		}
		micros = n
	}
	if err != nil {
		return time.Time{}, bad
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, micros*1000, time.UTC), nil
}

// arrayDecoder parses PostgreSQL's array output ("{1,2,NULL}", "{{a,b},{c,d}}", "{"x y","q\"z"}",
// with an optional "[1:2]=" bounds prefix) into nested []cdc.Value whose elements go through
// elem.
func arrayDecoder(elem decodeFunc, delim byte) decodeFunc {
	return func(text []byte) (cdc.Value, error) {
		s := text
		if len(s) > 0 && s[0] == '[' {
			eq := 0
			for eq < len(s) && s[eq] != '=' {
				eq++
			}
			if eq == len(s) {
				return nil, fmt.Errorf("%w (array bounds)", errDecode)
			}
			s = s[eq+1:]
		}
		p := arrayParser{s: s, elem: elem, delim: delim}
		v, err := p.parse()
		if err != nil {
			return nil, err
		}
		if p.i != len(p.s) {
			return nil, fmt.Errorf("%w (array trailing text)", errDecode)
		}
		return v, nil
	}
}

type arrayParser struct {
	s     []byte
	i     int
	elem  decodeFunc
	delim byte
}

func (p *arrayParser) parse() ([]cdc.Value, error) {
	bad := fmt.Errorf("%w (array)", errDecode)
	if p.i >= len(p.s) || p.s[p.i] != '{' {
		return nil, bad
	}
	p.i++
	out := []cdc.Value{}
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return out, nil
	}
	for {
		if p.i >= len(p.s) {
			return nil, bad
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
			var buf []byte
			for {
				if p.i >= len(p.s) {
					return nil, bad
				}
				c := p.s[p.i]
				if c == '\\' && p.i+1 < len(p.s) {
					buf = append(buf, p.s[p.i+1])
					p.i += 2
					continue
				}
				p.i++
				if c == '"' {
					break
				}
				buf = append(buf, c)
			}
			v, err := p.elem(buf)
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
			return nil, bad
		}
		switch p.s[p.i] {
		case p.delim:
			p.i++
		case '}':
			p.i++
			return out, nil
		default:
			return nil, bad
		}
	}
}
