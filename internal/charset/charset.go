package charset

import (
	"errors"
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

// decoders maps MySQL character set names to decoders. MySQL's latin1 is really Windows-1252.
var decoders = map[string]encoding.Encoding{
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

// Errors of Decode. Their messages name the character set, never the data.
var (
	ErrUnsupported = errors.New("character set is not supported")
	ErrInvalid     = errors.New("text is not valid in its character set")
)

// IsUTF8 says whether text in character set cs is already UTF-8 ("" means unspecified, as
// PostgreSQL never needs to say).
func IsUTF8(cs string) bool {
	switch strings.ToLower(cs) {
	case "", "utf8", "utf8mb3", "utf8mb4", "ascii":
		return true
	}
	return false
}

// Decode converts b from character set cs to a UTF-8 string (always a copy).
func Decode(cs string, b []byte) (string, error) {
	if IsUTF8(cs) {
		return string(b), nil
	}
	enc, ok := decoders[strings.ToLower(cs)]
	if !ok {
		return "", ErrUnsupported
	}
	out, err := enc.NewDecoder().Bytes(b)
	if err != nil {
		return "", ErrInvalid
	}
	return string(out), nil
}
