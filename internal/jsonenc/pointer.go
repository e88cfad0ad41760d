package jsonenc

import "strings"

// AppendPointerToken appends name as one reference token of a JSON Pointer (RFC 6901): "~"
// written "~0" and "/" written "~1". A name without either is appended as it is, without
// allocating: memstore's refusal checker and mongostore's codec build a pointer per member
// they walk.
func AppendPointerToken[T string | []byte](dst []byte, name T) []byte {
	i := 0
	for i < len(name) && name[i] != '~' && name[i] != '/' {
		i++
	}
	dst = append(dst, name[:i]...)
	for ; i < len(name); i++ {
		switch c := name[i]; c {
		case '~':
			dst = append(dst, '~', '0')
		case '/':
			dst = append(dst, '~', '1')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// UnescapePointerToken is the member name a JSON Pointer's reference token names: "~1" read
// as "/" and "~0" as "~", left to right, so that "~01" is "~1". A "~" followed by anything
// else is kept as it is (RFC 6901 does not define it; the pointer then names no member).
func UnescapePointerToken(tok string) string {
	i := strings.IndexByte(tok, '~')
	if i < 0 {
		return tok
	}
	var b strings.Builder
	b.Grow(len(tok))
	b.WriteString(tok[:i])
	for ; i < len(tok); i++ {
		c := tok[i]
		if c == '~' && i+1 < len(tok) && (tok[i+1] == '0' || tok[i+1] == '1') {
			if tok[i+1] == '0' {
				b.WriteByte('~')
			} else {
				b.WriteByte('/')
			}
			i++
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
