package jsonenc

import (
	"encoding/json"
	"testing"
)

func TestAppendStringRoundTrips(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uote\back`, "\x00\x01\x1f\n\r\t", "naïve 東京 🚀 \u2028", "</script>&"} {
		got := AppendString([]byte("x"), s)
		var back string
		if err := json.Unmarshal(got[1:], &back); err != nil || back != s {
			t.Fatalf("AppendString(%q) = %s, which decodes to %q (%v)", s, got[1:], back, err)
		}
		if string(AppendString(nil, []byte(s))) != string(got[1:]) {
			t.Fatalf("the []byte and string forms differ for %q", s)
		}
	}
}
