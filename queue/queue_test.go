package queue

import (
	"errors"
	"fmt"
	"testing"
)

func TestKinds(t *testing.T) {
	want := map[Kind]struct {
		name      string
		retryable bool
	}{
		Unavailable:    {"unavailable", true},
		NotFound:       {"not_found", false},
		Invalid:        {"invalid", false},
		Denied:         {"denied", false},
		Internal:       {"internal", false},
		OutcomeUnknown: {"outcome_unknown", true},
	}
	if len(want) != len(kindNames)-1 {
		t.Fatalf("%d kinds named, %d checked here", len(kindNames)-1, len(want))
	}
	for k, w := range want {
		err := fmt.Errorf("wrapped: %w", &Error{Kind: k, Queue: "t", Err: errors.New("cause")})
		if k.String() != w.name || Retryable(err) != w.retryable || KindOf(err) != k {
			t.Errorf("kind %d: %q, Retryable %v, KindOf %v; want %q, %v", k, k, Retryable(err), KindOf(err), w.name, w.retryable)
		}
	}
	if Retryable(errors.New("unclassified")) {
		t.Error("an unclassified error is retryable")
	}
}
