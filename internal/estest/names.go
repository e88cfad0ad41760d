package estest

import (
	"crypto/rand"
	"encoding/hex"
	"testing"
)

// RandomHex returns n random bytes as 2n lower-case hex digits.
func RandomHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// UniqueName returns base followed by "-" and ten random hex digits: a name no other run uses,
// lower-case when base is, as index, alias and template names must be.
func UniqueName(t testing.TB, base string) string {
	t.Helper()
	return base + "-" + RandomHex(t, 5)
}
