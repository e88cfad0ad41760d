package store

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Queue is where a store's accepted-mode writes go (Options.Queues): a durable queue from which
// a worker (package store/worker) applies them later through Service.Apply. The Service knows
// nothing of its format or transport: package store/accepted implements Queue over any
// queue.Publisher with the record format the worker reads; a test may implement it in memory.
//
// The Service calls Enqueue concurrently, one call per store and request, with operations it
// has validated, in request order: a queue keeps that order for the operations of one record.
type Queue interface {
	// Enqueue makes the batch's operations durable. It returns nil when the queue holds every
	// one, else one error per operation of b.Ops, nil for those it holds; a slice of another
	// length fails every operation with ErrInternal. An error that is a *Error (errors.As)
	// gives the operation's failure its Kind -- ErrOutcomeUnknown when the operation may
	// have been enqueued, ErrUnavailable when it was not; a context error of ctx is
	// ErrCanceled, any other context error ErrOutcomeUnknown (the queue stopped waiting on
	// its own bound); anything else is ErrInternal. Enqueue must not keep b after it returns.
	Enqueue(ctx context.Context, b *AcceptedBatch) []error
}

// QueueChecker is a Queue that cannot carry every operation: the Service calls CheckAccepted
// for every accepted-mode write while it validates the request, and a non-nil error refuses
// the request (kind Invalid, not retryable) before anything is enqueued.
type QueueChecker interface {
	Queue
	// CheckAccepted returns why op, a valid write, cannot travel through the queue, or nil.
	CheckAccepted(op *Op) error
}

// AcceptedBatch is one store's accepted-mode writes of one request, as Queue.Enqueue receives
// them.
type AcceptedBatch struct {
	// RequestID names the Do call: 32 hex digits, fresh for every call.
	RequestID string
	// AcceptedAt is when the Service accepted the request (Options.Now); the worker applies
	// every operation with it as MergeContext.Time (QueuedOp.AcceptedAt).
	AcceptedAt time.Time
	// Ops are the writes, validated, in request order.
	Ops []Op
	// Indexes[i] is the position of Ops[i] in the request's ops.
	Indexes []int
}

// QueuedOp is an accepted-mode write a queue delivered, for Apply: the operation and the time
// its request was accepted.
type QueuedOp struct {
	Op         Op
	AcceptedAt time.Time
}

// acceptedOp is an accepted-mode write on its way to its store's queue, with its position in
// the request.
type acceptedOp struct {
	it    *item
	index int
}

// newRequestID returns 32 hex digits naming one Do call in its queue records.
func (s *Service) newRequestID() string {
	var b [16]byte
	s.randMu.Lock()
	for i := 0; i < len(b); i += 8 {
		v := s.opts.Rand.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	s.randMu.Unlock()
	return hex.EncodeToString(b[:])
}

// enqueue hands one store's accepted-mode operations to its queue in one Enqueue call and
// settles each: Accepted, or its failure.
func (s *Service) enqueue(ctx context.Context, in *instance, requestID string, acc []acceptedOp) {
	b := &AcceptedBatch{RequestID: requestID, AcceptedAt: acc[0].it.now, Ops: make([]Op, len(acc)), Indexes: make([]int, len(acc))}
	for j, a := range acc {
		b.Ops[j], b.Indexes[j] = a.it.op, a.index
	}
	errs := in.queue.Enqueue(ctx, b)
	if errs == nil {
		for _, a := range acc {
			a.it.settle(Result{Outcome: Accepted})
		}
		return
	}
	var broken error
	if len(errs) != len(acc) {
		broken = fmt.Errorf("the queue broke its contract: Enqueue answered %d errors for %d operations", len(errs), len(acc))
	}
	failed := 0
	var first error
	for j, a := range acc {
		e := broken
		if e == nil {
			e = errs[j]
		}
		if e == nil {
			a.it.settle(Result{Outcome: Accepted})
			continue
		}
		failed++
		if first == nil {
			first = e
		}
		a.it.fail(enqueueFailure(ctx, a.it.op, e))
	}
	if failed > 0 {
		s.opts.Logger.Warn("store: accepted-mode enqueue failed", slog.String("store", in.name),
			slog.Int("failed", failed), slog.Int("operations", len(acc)), slog.String("error", first.Error()))
	}
}

// enqueueFailure classifies a failed enqueue for the caller (see Queue.Enqueue). An operation
// the queue may hold is ErrOutcomeUnknown: retryable, and a retry may enqueue it twice, which
// the at-least-once delivery of queued operations allows anyway, while not retrying might
// lose it. ErrUnavailable promises it was not enqueued.
func enqueueFailure(ctx context.Context, op Op, err error) *Error {
	ctxErr := errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
	e, classified := errors.AsType[*Error](err)
	cause := err
	if classified && e.Err != nil {
		cause = e.Err // the queue's own cause; this Error names the operation
	}
	kind := KindInternal
	switch {
	case classified && e.Kind == KindOutcomeUnknown:
		kind = KindOutcomeUnknown
	case ctxErr && ctx.Err() != nil:
		kind = KindCanceled
	case classified:
		kind = e.Kind
	case ctxErr:
		// The queue's own deadline, not the caller's: it stopped waiting for operations it
		// had taken, so it cannot promise they were not written.
		kind = KindOutcomeUnknown
	}
	return &Error{Kind: kind, Op: op.Kind, Addr: op.Addr, Err: cause}
}
