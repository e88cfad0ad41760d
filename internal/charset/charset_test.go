package charset

import (
	"errors"
	"testing"
)

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		cs   string
		in   []byte
		want string
	}{
		{"utf8mb4", []byte("naïve"), "naïve"},
		{"latin1", []byte{0x80, 0xe9}, "€é"}, // MySQL latin1 is Windows-1252: 0x80 is the euro sign
		{"LATIN1", []byte{0xe9}, "é"},
		{"cp1251", []byte{0xcf, 0xf0}, "Пр"},
		{"", []byte("plain"), "plain"},
	} {
		got, err := Decode(tc.cs, tc.in)
		if err != nil || got != tc.want {
			t.Fatalf("Decode(%q, % x) = %q, %v; want %q", tc.cs, tc.in, got, err, tc.want)
		}
	}
	if _, err := Decode("klingon", []byte("x")); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("unknown charset: %v", err)
	}
}
