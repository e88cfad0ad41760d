package mysqlcdc

import (
	"fmt"
	"strings"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"
	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/encoding/unicode/utf32"
)

// charsets maps MySQL character set names to decoders. MySQL's latin1 is really Windows-1252.
var charsets = map[string]encoding.Encoding{
	"latin1":   charmap.Windows1252,
	"latin2":   charmap.ISO8859_2,
	"latin5":   charmap.ISO8859_9,
	"latin7":   charmap.ISO8859_13,
	"greek":    charmap.ISO8859_7,
	"hebrew":   charmap.ISO8859_8,
	"cp1250":   charmap.Windows1250,
	"cp1251":   charmap.Windows1251,
	"cp1256":   charmap.Windows1256,
	"cp1257":   charmap.Windows1257,
	"cp850":    charmap.CodePage850,
	"cp866":    charmap.CodePage866,
	"koi8r":    charmap.KOI8R,
	"koi8u":    charmap.KOI8U,
	"macroman": charmap.Macintosh,
	"ucs2":     unicode.UTF16(unicode.BigEndian, unicode.IgnoreBOM),
	"utf16":    unicode.UTF16(unicode.BigEndian, unicode.IgnoreBOM),
	"utf16le":  unicode.UTF16(unicode.LittleEndian, unicode.IgnoreBOM),
	"utf32":    utf32.UTF32(utf32.BigEndian, utf32.IgnoreBOM),
	"sjis":     japanese.ShiftJIS,
	"cp932":    japanese.ShiftJIS,
	"ujis":     japanese.EUCJP,
	"eucjpms":  japanese.EUCJP,
	"gbk":      simplifiedchinese.GBK,
	"gb2312":   simplifiedchinese.GBK,
	"gb18030":  simplifiedchinese.GB18030,
	"big5":     traditionalchinese.Big5,
	"euckr":    korean.EUCKR,
}

// isUTF8Charset says whether a character set's bytes are already UTF-8.
func isUTF8Charset(cs string) bool {
	switch strings.ToLower(cs) {
	case "", "utf8", "utf8mb3", "utf8mb4", "ascii":
		return true
	}
	return false
}

// decodeText converts character data in charset cs to a UTF-8 string (always a copy).
func decodeText(cs string, b []byte) (string, error) {
	if isUTF8Charset(cs) {
		return string(b), nil
	}
	enc, ok := charsets[strings.ToLower(cs)]
	if !ok {
		return "", fmt.Errorf("mysqlcdc: character set %q is not supported", cs)
	}
	out, err := enc.NewDecoder().Bytes(b)
	if err != nil {
		return "", fmt.Errorf("mysqlcdc: decode %s text: %w", cs, err)
	}
	return string(out), nil
}
