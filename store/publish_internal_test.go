package store

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/tributary-dev/tributary/queue"
)

// A publish failing after its caller's context ended: a message the queue may have written is
// still outcome unknown; a bare context error is the caller's cancellation.
func TestPublishFailureOfAGoneCaller(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	op := Put(Address{Store: "q", Namespace: "n", Dataset: "d", Key: StringKey("x")}, Document{JSON: []byte(`{}`)})
	for _, c := range []struct {
		err  error
		want ErrorKind
	}{
		{&queue.Error{Kind: queue.OutcomeUnknown, Queue: "t", Err: fmt.Errorf("in flight: %w", context.Canceled)}, KindOutcomeUnknown},
		{context.Canceled, KindCanceled},
		{&queue.Error{Kind: queue.Unavailable, Queue: "t", Err: errors.New("refused")}, KindUnavailable},
	} {
		if got := publishFailure(ctx, op, c.err); got.Kind != c.want {
			t.Errorf("%v after the caller left: kind %v, want %v", c.err, got.Kind, c.want)
		}
	}
}
