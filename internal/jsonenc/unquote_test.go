package jsonenc

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// TestUnquote: escapes, surrogate pairs and lone surrogates (U+FFFD, reported), and where each
// refusal of a malformed string is found.
func TestUnquote(t *testing.T) {
	for _, c := range []struct {
		src, want string
		n         int
		lone      bool
		err       error
	}{
		{`plain"rest`, "plain", 6, false, nil},
		{`\"\\\/\b\f\n\r\t"`, "\"\\/\b\f\n\r\t", 17, false, nil},
		{`\u00e9\ud83d\ude80"`, "é🚀", 19, false, nil},
		{`\ud800x"`, "\uFFFDx", 8, true, nil},
		{`\udc00\ud800\udc00"`, "\uFFFD\U00010000", 19, true, nil},
		{`\ud800\u12"`, "", 8, true, ErrUnicodeEscape},
		{"a\x01\"", "", 1, false, ErrControl},
		{`ab\q"`, "", 4, false, ErrEscape},
		{`ab\u12g4"`, "", 4, false, ErrUnicodeEscape},
		{`ab`, "", 2, false, ErrUnterminated},
		{`ab\`, "", 3, false, ErrUnterminated},
	} {
		out, n, lone, err := Unquote([]byte("x"), []byte(c.src))
		if err != c.err || n != c.n || lone != c.lone || (err == nil && string(out) != "x"+c.want) {
			t.Errorf("Unquote(%q) = %q, %d, %v, %v; want %q, %d, %v, %v", c.src, out, n, lone, err, c.want, c.n, c.lone, c.err)
		}
	}
}

// FuzzUnquote: Unquote never reads past its input, and what it accepts of valid UTF-8 is
// what encoding/json reads; AppendString writes it back.
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{`abc"`, `\ud800"`, `\ud800\udc00"`, `\udc00\ud800"`, `\ud800\u12"`, "a\x01\"", `\q"`, `\`, `\u12`, `\"\\\/\b\f\n\r\t"x`, `naïve 東京 🚀"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		out, n, _, err := Unquote(nil, src)
		if n < 0 || n > len(src) {
			t.Fatalf("%q: n = %d", src, n)
		}
		if err != nil {
			return
		}
		q := append([]byte{'"'}, src[:n]...)
		if !utf8.Valid(q) {
			return
		}
		var s string
		if json.Unmarshal(q, &s) != nil || s != string(out) {
			t.Fatalf("%s: encoding/json reads %q, Unquote %q", q, s, out)
		}
		back, m, _, err := Unquote(nil, AppendString(nil, s)[1:])
		if err != nil || string(back) != s || m != len(AppendString(nil, s))-1 {
			t.Fatalf("%q: written back and read again: %q (%v)", s, back, err)
		}
	})
}
