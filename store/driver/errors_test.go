package driver

import (
	"strings"
	"testing"
)

// TestErrorKinds: every kind has a name, numbers keep their meaning (kinds are only appended),
// and exactly the three retryable kinds are Retryable.
func TestErrorKinds(t *testing.T) {
	want := []struct {
		k         ErrorKind
		name      string
		retryable bool
	}{
		{KindInternal, "internal", false},
		{KindNotFound, "not found", false},
		{KindAlreadyExists, "already exists", false},
		{KindConflict, "conflict", false},
		{KindInvalid, "invalid", false},
		{KindTooLarge, "too large", false},
		{KindUnavailable, "unavailable", true},
		{KindCanceled, "canceled", false},
		{KindOutcomeUnknown, "outcome unknown", true},
		{KindPermissionDenied, "permission denied", false},
		{KindNoQueue, "no queue", true},
	}
	if len(want) != len(kindNames) {
		t.Fatalf("%d kinds named, %d checked here", len(kindNames), len(want))
	}
	for i, w := range want {
		if int(w.k) != i {
			t.Errorf("%s is %d, want %d: an existing kind changed its number", w.name, w.k, i)
		}
		if w.k.String() != w.name || w.k.Retryable() != w.retryable {
			t.Errorf("kind %d: %q retryable %v, want %q retryable %v", i, w.k, w.k.Retryable(), w.name, w.retryable)
		}
	}
	if s := ErrorKind(len(kindNames)).String(); !strings.HasPrefix(s, "ErrorKind(") {
		t.Errorf("a kind beyond the set prints %q", s)
	}
}
