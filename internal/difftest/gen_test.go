package difftest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// family is the oracle rule a column's values follow.
type family uint8

const (
	famBool     family = iota
	famInt             // exact integer digits
	famFloat           // binary float of bits 32 or 64
	famDecimal         // exact decimal digits, as a string
	famText            // character data, as a string
	famBinary          // bytes, as base64
	famDate            // calendar date
	famDateTime        // date and time without a zone
	famEpoch           // an instant, read back as exact epoch seconds -> epoch_millis
	famTime            // time of day or duration, fraction trimmed
	famJSON            // a JSON document
	famString          // enum, uuid, bit strings and other types: the source's text
	famSet             // MySQL SET: an array of labels
	famArray           // PostgreSQL array of elem
)

// colType is one column type a source supports, with the literals the generator draws.
type colType struct {
	sql  string // as written in CREATE TABLE
	fam  family
	bits int      // famFloat: 32 or 64; MySQL BIT width
	elem *colType // famArray
	big  bool     // values can be large enough to be TOASTed (PostgreSQL)
	// uint64 marks MySQL BIGINT UNSIGNED (the uint64 mapping option applies).
	uint64 bool
	// read, when set, is the read-back expression for the quoted column (else the dialect's).
	read func(q string) string
	// gen returns a random non-NULL SQL literal.
	gen func(r *rand.Rand) string
	// setup and teardown create and drop what the type needs (enum types, domains).
	setup, teardown []string
}

// keyType is a primary-key column type: an integer range or text.
type keyType struct {
	sql             string
	text            bool
	lo, hi          int64
	unsigned        bool // the whole uint64 range
	maxLen          int  // text: characters
	noTrailingSpace bool // a PAD SPACE collation would make "a" and "a " one key
}

// column is one column of a generated table.
type column struct {
	name string
	t    *colType
	key  bool
	// The schema cases (schema_test.go): addedAt is the table's write clock when ADD COLUMN
	// added the column (0: created with the table); fieldBits, for an integer column whose
	// type ALTER TYPE widened, is the width of the type it had before (its field keeps that
	// type: sink/doc.go, Schema changes), 0 when its type never changed.
	addedAt   int
	fieldBits int
}

// pick returns a random element.
func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

// chance is true with probability p.
func chance(r *rand.Rand, p float64) bool { return r.Float64() < p }

// Character pools for random text: ASCII, quoting and escaping characters, control
// characters JSON must escape, Latin-1, BMP and astral characters.
var (
	asciiRunes   = []rune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ")
	specialRunes = []rune("'\"\\|/,{}[]:;%_$<>&\t\n\r\x01\x1f\u007f")
	latinRunes   = []rune("éàüßçñøÅÉ€£¥©®±µ¿")
	wideRunes    = []rune("☃あ漢字ДЖ€\u2028\u2029\ufeff😀𝄞🇩🇪")
)

// randText returns n random characters; latin restricts them to what latin1 (cp1252) holds.
func randText(r *rand.Rand, n int, latin bool) string {
	var b strings.Builder
	for range n {
		switch p := r.IntN(20); {
		case p < 13:
			b.WriteRune(asciiRunes[r.IntN(len(asciiRunes))])
		case p < 15:
			b.WriteRune(specialRunes[r.IntN(len(specialRunes))])
		case p < 18 || latin:
			b.WriteRune(latinRunes[r.IntN(len(latinRunes))])
		default:
			b.WriteRune(wideRunes[r.IntN(len(wideRunes))])
		}
	}
	return b.String()
}

// textLength draws a string length: mostly short, sometimes empty, sometimes beyond 3 KB
// (TOASTed by PostgreSQL) and beyond keyword's 8191 characters.
func textLength(r *rand.Rand, max int) int {
	n := 0
	switch p := r.IntN(20); {
	case p < 2:
		n = 0
	case p < 14:
		n = 1 + r.IntN(30)
	case p < 17:
		n = 30 + r.IntN(300)
	case p < 19:
		n = 3000 + r.IntN(5000)
	default:
		n = 8192 + r.IntN(4000)
	}
	if max > 0 && n > max {
		n = r.IntN(max + 1)
	}
	return n
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return b
}

// randDigits returns n random decimal digits (the first one may be 0).
func randDigits(r *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('0' + r.IntN(10))
	}
	return string(b)
}

// randDecimal returns a decimal literal with at most intDigits integer digits and fracDigits
// fractional digits: random, the extremes, zero and one unit of the last place.
func randDecimal(r *rand.Rand, intDigits, fracDigits int) string {
	sign := pick(r, "", "-")
	frac := func(n int) string {
		if n == 0 {
			return ""
		}
		return "." + randDigits(r, n)
	}
	switch r.IntN(8) {
	case 0: // the largest magnitude
		ip := "0"
		if intDigits > 0 {
			ip = strings.Repeat("9", intDigits)
		}
		if fracDigits > 0 {
			return sign + ip + "." + strings.Repeat("9", fracDigits)
		}
		return sign + ip
	case 1:
		return "0"
	case 2: // the smallest unit
		if fracDigits > 0 {
			return sign + "0." + strings.Repeat("0", fracDigits-1) + "1"
		}
		return sign + "1"
	default:
		n := r.IntN(intDigits + 1)
		ip := "0"
		if n > 0 {
			ip = strconv.Itoa(1+r.IntN(9)) + randDigits(r, n-1)
		}
		return sign + ip + frac(r.IntN(fracDigits+1))
	}
}

// randFloat returns a float literal of the given width: ordinary values, the extremes,
// denormals and negative zero.
func randFloat(r *rand.Rand, bits int) string {
	var f float64
	switch r.IntN(10) {
	case 0:
		if bits == 32 {
			f = math.MaxFloat32
		} else {
			f = math.MaxFloat64
		}
	case 1:
		if bits == 32 {
			f = math.SmallestNonzeroFloat32
		} else {
			f = math.SmallestNonzeroFloat64
		}
	case 2:
		f = math.Copysign(0, -1)
	case 3:
		f = 0.1
	default:
		f = (r.Float64() - 0.5) * math.Pow(10, float64(r.IntN(40)-20))
	}
	if chance(r, 0.5) {
		f = -f
	}
	s := strconv.FormatFloat(f, 'g', -1, bits)
	if bits == 32 {
		s = strconv.FormatFloat(float64(float32(f)), 'g', -1, 32)
	}
	return s
}

// randDateParts returns a random date with a four-digit year from lo to hi.
func randDateParts(r *rand.Rand, lo, hi int) (y, m, d int) {
	y = lo + r.IntN(hi-lo+1)
	m = 1 + r.IntN(12)
	d = 1 + r.IntN(28)
	if chance(r, 0.1) {
		d = [...]int{31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}[m-1]
		if m == 2 && !(y%4 == 0 && (y%100 != 0 || y%400 == 0)) {
			d = 28
		}
	}
	return
}

func randClock(r *rand.Rand, frac int) string {
	s := fmt.Sprintf("%02d:%02d:%02d", r.IntN(24), r.IntN(60), r.IntN(60))
	if frac > 0 && chance(r, 0.7) {
		s += "." + randDigits(r, 1+r.IntN(frac))
	}
	return s
}

// randJSON returns a random JSON text: objects (nested, with duplicate members sometimes),
// arrays, scalars, whitespace and escapes, sometimes large.
func randJSON(r *rand.Rand, depth int, dupKeys bool) string {
	ws := func() string {
		return pick(r, "", "", "", " ", "\n  ", "\t")
	}
	var val func(d int) string
	val = func(d int) string {
		k := r.IntN(10)
		if d >= depth {
			k = 5 + r.IntN(5)
		}
		switch {
		case k < 3: // object
			n := r.IntN(5)
			parts := make([]string, 0, n+1)
			for i := range n {
				key := randText(r, r.IntN(8), false)
				if i == 0 && chance(r, 0.2) {
					key = ""
				}
				parts = append(parts, ws()+jsonQuote(key)+ws()+":"+ws()+val(d+1))
			}
			if dupKeys && n > 0 && chance(r, 0.3) {
				parts = append(parts, parts[0])
			}
			return "{" + strings.Join(parts, ",") + ws() + "}"
		case k < 5: // array
			n := r.IntN(5)
			parts := make([]string, n)
			for i := range parts {
				parts[i] = ws() + val(d+1)
			}
			return "[" + strings.Join(parts, ",") + ws() + "]"
		case k == 5:
			return jsonQuote(randText(r, textLength(r, 0)/4, false))
		case k == 6:
			return pick(r, "0", "-1", "1.5", "1e300", "-2.5E-10", "12345678901234567890123", "18446744073709551616", "0.1000")
		case k == 7:
			return pick(r, "true", "false")
		case k == 8:
			return "null"
		default:
			return jsonQuote(pick(r, "", "\u00e9", `\`, `"`, "\u2028", "😀"))
		}
	}
	return ws() + val(0) + ws()
}

// jsonQuote writes s as a JSON string, escaping control characters and sometimes (at random
// positions) non-ASCII ones as \u sequences.
func jsonQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteRune(c)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, `\u%04x`, c)
		case c > 0xffff && c%3 == 0:
			c1, c2 := surrogates(c)
			fmt.Fprintf(&b, `\u%04x\u%04x`, c1, c2)
		default:
			b.WriteRune(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func surrogates(c rune) (rune, rune) {
	c -= 0x10000
	return 0xd800 + (c>>10)&0x3ff, 0xdc00 + c&0x3ff
}
