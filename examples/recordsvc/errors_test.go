package main

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	recordv1 "github.com/tributary-dev/tributary/examples/recordsvc/proto/tributary/record/v1"
	"github.com/tributary-dev/tributary/store"
)

// TestErrorKindMapping: every store kind has its own proto ErrorKind, its retryable flag (the
// kind's Retryable: UNAVAILABLE, OUTCOME_UNKNOWN and NO_QUEUE) and a status code for a whole call.
func TestErrorKindMapping(t *testing.T) {
	seen := map[recordv1.ErrorKind]store.ErrorKind{}
	for k := store.ErrorKind(0); !strings.HasPrefix(k.String(), "ErrorKind("); k++ {
		pk, ok := errorKinds[k]
		if !ok {
			t.Fatalf("store kind %v has no proto ErrorKind", k)
		}
		if other, dup := seen[pk]; dup {
			t.Fatalf("store kinds %v and %v both map to %v", other, k, pk)
		}
		seen[pk] = k
		if _, ok := callCodes[k]; !ok {
			t.Fatalf("store kind %v has no status code", k)
		}
		r := fromResult(&store.Result{Err: &store.Error{Kind: k, Op: store.OpPut, Err: errors.New("cause")}})
		if r.Error.Kind != pk || r.Error.Retryable != k.Retryable() {
			t.Fatalf("kind %v: result %v retryable %v", k, r.Error.Kind, r.Error.Retryable)
		}
	}
	if len(seen) != len(recordv1.ErrorKind_name)-1 {
		t.Fatalf("%d proto kinds are used, the enum has %d besides UNSPECIFIED", len(seen), len(recordv1.ErrorKind_name)-1)
	}
	r := fromResult(&store.Result{Err: &store.Error{Kind: store.KindOutcomeUnknown, Op: store.OpPut, Err: errors.New("no answer")}})
	if r.Error.Kind != recordv1.ErrorKind_ERROR_KIND_OUTCOME_UNKNOWN || !r.Error.Retryable {
		t.Fatalf("outcome unknown: %v", r.Error)
	}
	err := callError(&store.Error{Kind: store.KindOutcomeUnknown, Op: store.OpPut, Err: errors.New("no answer")}, "items")
	if status.Code(err) != codes.Unknown {
		t.Fatalf("a whole call of unknown outcome: %v, want UNKNOWN", err)
	}
}
