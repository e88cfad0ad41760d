package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// An enqueue failing after its caller's context ended: an operation the queue may hold is
// still outcome unknown; a bare context error is the caller's cancellation; the queue's own
// classification stands otherwise; an unclassified error is internal.
func TestEnqueueFailureOfAGoneCaller(t *testing.T) {
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	op := Put(Address{Store: "q", Namespace: "n", Dataset: "d", Key: StringKey("x")}, Document{JSON: []byte(`{}`)})
	inFlight := fmt.Errorf("in flight: %w", context.Canceled)
	for _, c := range []struct {
		ctx  context.Context
		err  error
		want ErrorKind
	}{
		{gone, &Error{Kind: KindOutcomeUnknown, Err: inFlight}, KindOutcomeUnknown},
		{gone, context.Canceled, KindCanceled},
		{gone, &Error{Kind: KindUnavailable, Err: errors.New("refused")}, KindUnavailable},
		{context.Background(), context.DeadlineExceeded, KindOutcomeUnknown},
		{context.Background(), errors.New("denied"), KindInternal},
	} {
		got := enqueueFailure(c.ctx, op, c.err)
		if got.Kind != c.want {
			t.Errorf("%v (caller gone: %v): kind %v, want %v", c.err, c.ctx.Err() != nil, got.Kind, c.want)
		}
		if got.Op != OpPut || got.Addr != op.Addr {
			t.Errorf("%v: the failure names %v %v, not the operation", c.err, got.Op, got.Addr)
		}
	}
}
