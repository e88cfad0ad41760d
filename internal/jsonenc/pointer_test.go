package jsonenc

import (
	"strings"
	"testing"
)

// TestPointerToken: the RFC 6901 examples, the order "~01" depends on, a "~" the RFC does not
// define, and that unescaping undoes escaping for every name.
func TestPointerToken(t *testing.T) {
	for _, c := range []struct{ name, tok string }{
		{"", ""},
		{"foo", "foo"},
		{"a/b", "a~1b"},
		{"m~n", "m~0n"},
		{"~1", "~01"},
		{"/~/", "~1~0~1"},
		{"é/ü", "é~1ü"},
	} {
		if got := string(AppendPointerToken([]byte("x"), c.name)); got != "x"+c.tok {
			t.Errorf("AppendPointerToken(%q) = %q, want %q", c.name, got, "x"+c.tok)
		}
		if got := string(AppendPointerToken([]byte("x"), []byte(c.name))); got != "x"+c.tok {
			t.Errorf("AppendPointerToken([]byte(%q)) = %q, want %q", c.name, got, "x"+c.tok)
		}
		if got := UnescapePointerToken(c.tok); got != c.name {
			t.Errorf("UnescapePointerToken(%q) = %q, want %q", c.tok, got, c.name)
		}
	}
	for tok, want := range map[string]string{"~": "~", "~2": "~2", "a~": "a~", "~~1": "~/"} {
		if got := UnescapePointerToken(tok); got != want {
			t.Errorf("UnescapePointerToken(%q) = %q, want %q", tok, got, want)
		}
	}
	// The two replacements the callers made before, in RFC order, agree on every token.
	for _, tok := range []string{"~0~1", "~10", "~~0~", "x~1~1y~0", "~0~01"} {
		want := strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		if got := UnescapePointerToken(tok); got != want {
			t.Errorf("UnescapePointerToken(%q) = %q, want %q", tok, got, want)
		}
	}
}

func FuzzPointerToken(f *testing.F) {
	for _, s := range []string{"", "a/b", "m~n", "~01", "~"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if got := UnescapePointerToken(string(AppendPointerToken(nil, name))); got != name {
			t.Fatalf("round trip of %q gave %q", name, got)
		}
		want := strings.ReplaceAll(strings.ReplaceAll(name, "~1", "/"), "~0", "~")
		if got := UnescapePointerToken(name); got != want {
			t.Fatalf("UnescapePointerToken(%q) = %q, want %q", name, got, want)
		}
	})
}
