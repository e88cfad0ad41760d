package mysqlcdc

import (
	"fmt"

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
