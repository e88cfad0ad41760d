package mongostore

import (
	"math"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// decimalValue is a number in canonical decimal form: sign, significant digits without leading
// or trailing zeros, and the power of ten of the last digit. Zero has no digits.
type decimalValue struct {
	neg    bool
	digits string
	exp    int
}

// parseDecimal reads a decimal literal (JSON number syntax, or Go's and Decimal128's 'e'/'E'
// forms). ok is false for anything else, including exponents beyond the int range.
func parseDecimal(s string) (v decimalValue, ok bool) {
	if s == "" {
		return v, false
	}
	if s[0] == '-' || s[0] == '+' {
		v.neg = s[0] == '-'
		s = s[1:]
	}
	mant, expPart, hasExp := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	if intPart == "" && frac == "" {
		return v, false
	}
	for _, part := range []string{intPart, frac} {
		for i := 0; i < len(part); i++ {
			if part[i] < '0' || part[i] > '9' {
				return v, false
			}
		}
	}
	exp := 0
	if hasExp {
		n, err := strconv.Atoi(expPart)
		if err != nil || n > math.MaxInt32 || n < math.MinInt32 {
			return v, false
		}
		exp = n
	}
	digits := strings.TrimLeft(intPart+frac, "0")
	exp -= len(frac)
	trimmed := strings.TrimRight(digits, "0")
	exp += len(digits) - len(trimmed)
	v.digits = trimmed
	if v.digits == "" {
		exp = 0
	}
	v.exp = exp
	return v, true
}

// sameDecimal reports whether two decimal literals denote the same number (signed zeros differ).
func sameDecimal(a, b string) bool {
	x, ok1 := parseDecimal(a)
	y, ok2 := parseDecimal(b)
	return ok1 && ok2 && x == y
}

// decimal128Of returns the Decimal128 of a JSON number literal when one holds it exactly:
// up to 34 significant digits and an exponent within range. The literal's own digits are kept
// when they fit (so 1000 stays 1000, not 1E+3); otherwise its canonical digits are used.
func decimal128Of(lit string) (hi, lo uint64, ok bool) {
	try := func(s string) bool {
		d, err := bson.ParseDecimal128(s)
		if err != nil || d.IsNaN() || d.IsInf() != 0 || !sameDecimal(lit, d.String()) {
			return false
		}
		hi, lo = d.GetBytes()
		return true
	}
	if try(lit) {
		return hi, lo, true
	}
	v, okv := parseDecimal(lit)
	if !okv || len(v.digits) > 34 {
		return 0, 0, false
	}
	canon := v.digits
	if canon == "" {
		canon = "0"
	}
	if v.neg {
		canon = "-" + canon
	}
	if try(canon + "E" + strconv.Itoa(v.exp)) {
		return hi, lo, true
	}
	return 0, 0, false
}

// appendDouble appends a finite double as a JSON number that reads back as a double: it always
// has a fraction or an exponent, so 5.0 does not come back as the integer 5.
func appendDouble(dst []byte, f float64) []byte {
	abs := math.Abs(f)
	start := len(dst)
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		dst = strconv.AppendFloat(dst, f, 'e', -1, 64)
		// e-07 -> e-7, as encoding/json writes it.
		if n := len(dst); n-start >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	} else {
		dst = strconv.AppendFloat(dst, f, 'f', -1, 64)
	}
	for _, c := range dst[start:] {
		if c == '.' || c == 'e' {
			return dst
		}
	}
	return append(dst, '.', '0')
}

// maxSignificand is 10^34-1, the largest significand of a canonical Decimal128, as its high
// and low 64 bits.
const maxSignificandHi, maxSignificandLo = 0x0001ed09bead87c0, 0x378d8e63ffffffff

// decimalJSON renders a finite Decimal128 as a JSON number; ok is false for NaN, infinities
// and non-canonical encodings (a significand beyond 10^34-1, which IEEE 754 reads as zero and
// no server writes: the driver would print its 35 digits, a number no Decimal128 holds).
func decimalJSON(hi, lo uint64) (string, bool) {
	d := bson.NewDecimal128(hi, lo)
	if d.IsNaN() || d.IsInf() != 0 {
		return "", false
	}
	if hi>>61&3 == 3 {
		return "", false // the form whose significand is 2^113 and more
	}
	if sh := hi & (1<<49 - 1); sh > maxSignificandHi || sh == maxSignificandHi && lo > maxSignificandLo {
		return "", false
	}
	s := d.String()
	// A Decimal128 integer with a positive exponent prints in exponent form: 10^36, put as
	// the integer 1000...000 (37 digits), is stored as 10^33 x 10^3 and prints as
	// 1.000000000000000000000000000000000E+36. When the integer's own text (up to
	// plainIntegerDigits digits) is stored as these same bits, that text is what it reads as;
	// otherwise (1E+3, which 1000 would store as 1000 x 10^0) the exponent form stays.
	if strings.Contains(s, "E+") {
		if v, ok := parseDecimal(s); ok && v.exp > 0 && len(v.digits)+v.exp <= plainIntegerDigits {
			plain := v.digits + strings.Repeat("0", v.exp)
			if v.neg {
				plain = "-" + plain
			}
			if h, l, ok := decimal128Of(plain); ok && h == hi && l == lo {
				return plain, true
			}
		}
	}
	return s, isJSONNumber(s)
}

// plainIntegerDigits is the longest integer a Decimal128 is read as without an exponent.
const plainIntegerDigits = 100

// isJSONNumber reports whether s has the JSON number syntax.
func isJSONNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			n++
		}
		return n
	}
	start := i
	if n := digits(); n == 0 || (n > 1 && s[start] == '0') {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}
