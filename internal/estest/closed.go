package estest

import (
	"net"
	"testing"
)

// ClosedURL returns a URL of scheme ("http", "https") on a local port nothing listens on: a
// stopped node, which refuses every connection at once.
func ClosedURL(t testing.TB, scheme string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := scheme + "://" + l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return u
}
