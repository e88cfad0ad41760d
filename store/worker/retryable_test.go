package worker

import (
	"errors"
	"testing"

	"github.com/tributary-dev/tributary/store"
)

// TestRetryableCoversEveryKind: the worker's retry decision for every error kind, so a kind
// added to the set cannot fall through unnoticed.
func TestRetryableCoversEveryKind(t *testing.T) {
	want := map[store.ErrorKind]bool{
		store.KindInternal: true, store.KindDatasetNotFound: false, store.KindAlreadyExists: false,
		store.KindConflict: false, store.KindInvalid: false, store.KindTooLarge: false,
		store.KindUnavailable: true, store.KindCanceled: true, store.KindOutcomeUnknown: true,
	}
	for k := store.ErrorKind(0); k <= store.KindOutcomeUnknown; k++ {
		w, ok := want[k]
		if !ok {
			t.Fatalf("kind %v has no expected retry decision here", k)
		}
		err := &store.Error{Kind: k, Err: errors.New("cause")}
		if got := retryable(store.OpPut, err); got != w {
			t.Errorf("a put failing with %v: retryable %v, want %v", k, got, w)
		}
	}
	if !retryable(store.OpMerge, &store.Error{Kind: store.KindConflict, Err: errors.New("contention")}) {
		t.Error("a merge that gave up under contention is not retried")
	}
}
