package sink

import (
	"strings"

	"github.com/tributary-dev/tributary/internal/charset"
)

// decodeCharset converts b from charset cs to UTF-8. The reason names the charset, never data.
func decodeCharset(cs string, b []byte) (string, string) {
	s, err := charset.Decode(cs, b)
	if err != nil {
		return "", strings.ToLower(cs) + ": " + err.Error()
	}
	return s, ""
}
