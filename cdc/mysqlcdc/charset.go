package mysqlcdc

import (
	"fmt"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/tributary-dev/tributary/internal/charset"
)

// decodeText converts character data in charset cs to a UTF-8 string (always a copy). The
// error names the character set, never the data.
func decodeText(cs string, b []byte) (string, error) {
	s, err := charset.Decode(cs, b)
	if err != nil {
		return "", fmt.Errorf("mysqlcdc: %s: %w", cs, err)
	}
	return s, nil
}

// isUTF8 says whether text in character set cs is stored as UTF-8 already.
func isUTF8(cs string) bool { return charset.IsUTF8(cs) }

// singleByteCharsets are the character sets internal/charset decodes byte by byte (code
// pages): a byte's UTF-8 does not depend on its neighbours.
var singleByteCharsets = map[string]bool{
	"latin1": true, "latin2": true, "latin5": true, "latin7": true, "greek": true, "hebrew": true,
	"cp1250": true, "cp1251": true, "cp1256": true, "cp1257": true, "cp850": true, "cp866": true,
	"koi8r": true, "koi8u": true, "macroman": true,
}

// singleByteMap returns each byte's UTF-8 in a single-byte character set, taken from
// internal/charset so both always agree; nil for other character sets.
func singleByteMap(cs string) *[256]string {
	if !singleByteCharsets[strings.ToLower(cs)] {
		return nil
	}
	var m [256]string
	for b := range 256 {
		s, err := charset.Decode(cs, []byte{byte(b)})
		if err != nil || utf8.RuneCountInString(s) != 1 || b < 0x80 && s != string(rune(b)) {
			return nil // not a code page over ASCII after all: the general path decodes it
		}
		m[b] = s
	}
	return &m
}

// decodeByteMap converts text in a single-byte character set with its byte map, in one
// allocation.
func decodeByteMap(m *[256]string, b []byte) string {
	if isASCII(b) {
		return string(b) // the same bytes: the map keeps ASCII as it is
	}
	n := 0
	for _, x := range b {
		n += len(m[x])
	}
	out := make([]byte, 0, n)
	for _, x := range b {
		out = append(out, m[x]...)
	}
	return unsafe.String(unsafe.SliceData(out), len(out)) // out is never written again
}

func isASCII(b []byte) bool {
	for _, x := range b {
		if x >= 0x80 {
			return false
		}
	}
	return true
}
