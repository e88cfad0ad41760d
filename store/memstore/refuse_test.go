package memstore

import (
	"testing"

	"github.com/tributary-dev/tributary/store/driver"
)

// FuzzCheck: the refusal checker ends on any bytes, valid JSON or not, in every profile.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,{"b":"\ud800"}],"$c":-0}`, `{"a":`, `[}`, `{"a":[}`, `{"a" 1}`, `{,}`, `{"a":"\u12`, `{"t":"2026-01-01T00:00:00.1234Z"}`} {
		f.Add([]byte(s))
	}
	profiles := []profile{}
	for _, b := range []Backend{Strictest, MongoDB, FerretDB, Search, Lenient} {
		profiles = append(profiles, (&Options{Like: b}).profile())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for i := range profiles {
			_ = profiles[i].check(driver.Document{JSON: b, Times: []string{"/t", "/a/0"}})
		}
	})
}
