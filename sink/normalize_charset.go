package sink

import (
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

// textCharsets decodes the MySQL character sets a binlog TEXT value (cdc.Base64) can be in.
// The sink does not import the source packages, so this mirrors mysqlcdc's table; both
// should move to one shared internal package. MySQL's "latin1" is Windows-1252.
var textCharsets = map[string]encoding.Encoding{
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

// isUTF8Charset says whether text in charset cs is already UTF-8 ("" means the source did
// not say, which PostgreSQL never needs: it delivers strings).
func isUTF8Charset(cs string) bool {
	switch cs {
	case "", "utf8", "utf8mb3", "utf8mb4", "ascii":
		return true
	}
	switch strings.ToLower(cs) {
	case "utf8", "utf8mb3", "utf8mb4", "ascii":
		return true
	}
	return false
}

// decodeCharset converts b from charset cs to UTF-8. The reason names the charset, never data.
func decodeCharset(cs string, b []byte) (string, string) {
	enc, ok := textCharsets[strings.ToLower(cs)]
	if !ok {
		return "", "character set " + strings.ToLower(cs) + " is not supported"
	}
	out, err := enc.NewDecoder().Bytes(b)
	if err != nil {
		return "", "text is not valid " + strings.ToLower(cs)
	}
	return string(out), ""
}
