package jsonenc

import (
	"errors"
	"unicode/utf16"
	"unicode/utf8"
)

// Unquote's refusals of a malformed string; their texts are what luamerge's errors say.
var (
	ErrControl       = errors.New("control character in string")
	ErrEscape        = errors.New("invalid escape")
	ErrUnicodeEscape = errors.New(`invalid \u escape`)
	ErrUnterminated  = errors.New("unterminated string")
)

// Unquote decodes the JSON string whose text, after its opening quote, begins src, and
// appends it to dst: the one JSON string reader of the hand-written decoders (luamerge's
// bridge, memstore's refusal checker). It returns dst, n: how many bytes of src it read
// (through the closing quote), and lone: whether a UTF-16 surrogate escape without its pair
// was met (decoded as U+FFFD, as encoding/json does). A malformed string is refused with
// ErrControl, ErrEscape, ErrUnicodeEscape or ErrUnterminated, n then being the offset in src
// where it was found. It does not check UTF-8: bytes other than escapes are copied as they
// are.
func Unquote(dst, src []byte) (out []byte, n int, lone bool, err error) {
	i := 0
	for i < len(src) {
		c := src[i]
		switch {
		case c == '"':
			return dst, i + 1, lone, nil
		case c < 0x20:
			return dst, i, lone, ErrControl
		case c != '\\':
			j := i + 1
			for j < len(src) && src[j] >= 0x20 && src[j] != '"' && src[j] != '\\' {
				j++
			}
			dst = append(dst, src[i:j]...)
			i = j
			continue
		}
		i++
		if i >= len(src) {
			break
		}
		e := src[i]
		i++
		switch e {
		case '"', '\\', '/':
			dst = append(dst, e)
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r1, ok := hex4(src[i:])
			if !ok {
				return dst, i, lone, ErrUnicodeEscape
			}
			i += 4
			if utf16.IsSurrogate(r1) {
				if i+1 < len(src) && src[i] == '\\' && src[i+1] == 'u' {
					if r2, ok := hex4(src[i+2:]); ok {
						if r := utf16.DecodeRune(r1, r2); r != utf8.RuneError {
							dst = utf8.AppendRune(dst, r)
							i += 6
							continue
						}
					}
				}
				r1, lone = utf8.RuneError, true
			}
			dst = utf8.AppendRune(dst, r1)
		default:
			return dst, i, lone, ErrEscape
		}
	}
	return dst, len(src), lone, ErrUnterminated
}

// hex4 reads the four hexadecimal digits of a \u escape.
func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
