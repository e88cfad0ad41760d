package store

import (
	"context"
	"encoding/hex"
	"errors"
	"log/slog"
	"time"

	"github.com/tributary-dev/tributary/queue"
)

// acceptedOp is an accepted-mode write on its way to its store's queue, with its position in
// the request (which its record carries).
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

// publish writes one store's accepted-mode operations to its queue in one Publish call, one
// record per operation in request order (so a record's mutations keep their order in its
// partition), and settles each operation: Accepted, or the failure of its message.
func (s *Service) publish(ctx context.Context, in *instance, requestID string, acc []acceptedOp) {
	msgs := make([]queue.Message, len(acc))
	var hashes map[string]string // one SHA-256 per distinct program of the request
	// One buffer holds every value and key; the estimate covers a record's fixed members
	// and its key twice over, so it rarely grows.
	size := 0
	for _, a := range acc {
		op := &a.it.op
		size += 320 + 2*(len(op.Addr.Store)+len(op.Addr.Namespace)+len(op.Addr.Dataset)+len(op.Addr.Key.StringValue())) +
			len(op.Doc.JSON) + len(op.Program)
	}
	buf := make([]byte, 0, size)
	var atBuf [len(time.RFC3339Nano)]byte
	var at []byte
	var atTime time.Time
	for j, a := range acc {
		op := &a.it.op
		hash := ""
		if op.Kind == OpMerge {
			if hash = hashes[op.Program]; hash == "" {
				if hashes == nil {
					hashes = make(map[string]string)
				}
				hash = ProgramHash(op.Program)
				hashes[op.Program] = hash
			}
		}
		if at == nil || !a.it.now.Equal(atTime) { // the text is UTC: equal times, equal text
			at, atTime = appendAcceptedAt(atBuf[:0], a.it.now), a.it.now // the request's time: usually once
		}
		// Values and keys share buf; each is capped, so no later append reaches a neighbour.
		start := len(buf)
		buf = appendRecord(buf, &Record{RequestID: requestID, Index: a.index, AcceptedAt: a.it.now, Op: *op}, hash, at)
		value := buf[start:len(buf):len(buf)]
		start = len(buf)
		buf = appendRecordKey(buf, op.Addr)
		msgs[j] = queue.Message{Key: buf[start:len(buf):len(buf)], Value: value}
	}
	err := in.queue.Publish(ctx, msgs)
	if err == nil {
		for _, a := range acc {
			a.it.settle(Result{Outcome: Accepted})
		}
		return
	}
	var perMsg *queue.PublishError
	if errors.As(err, &perMsg) && len(perMsg.Errs) != len(msgs) {
		perMsg = nil // a publisher breaking its contract: fail every message
	}
	failed := 0
	for j, a := range acc {
		e := err
		if perMsg != nil {
			e = perMsg.Errs[j]
		}
		if e == nil {
			a.it.settle(Result{Outcome: Accepted})
			continue
		}
		failed++
		a.it.fail(publishFailure(ctx, a.it.op, e))
	}
	s.opts.Logger.Warn("store: accepted-mode publish failed", slog.String("store", in.name),
		slog.Int("failed", failed), slog.Int("operations", len(acc)), slog.String("error", err.Error()))
}

// publishFailure classifies a failed publish for the caller. A message the queue says it may
// have written (queue.OutcomeUnknown: sent and unanswered within the publisher's bound, or in
// flight when ctx ended) is ErrOutcomeUnknown, and so is a bare context error from the
// publisher's own deadline: retryable, and a retry may enqueue the operation twice, which the
// at-least-once delivery of queued operations allows anyway, while not retrying might lose it.
// A message the queue could not take is ErrUnavailable, which promises it was not enqueued.
func publishFailure(ctx context.Context, op Op, err error) *Error {
	kind := KindInternal
	ctxErr := errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
	_, classified := errors.AsType[*queue.Error](err)
	switch qk := queue.KindOf(err); {
	case qk == queue.OutcomeUnknown:
		kind = KindOutcomeUnknown
	case ctxErr && ctx.Err() != nil:
		kind = KindCanceled
	case classified:
		switch qk {
		case queue.Unavailable, queue.NotFound:
			kind = KindUnavailable
		case queue.Invalid:
			kind = KindInvalid
		}
	case ctxErr:
		// The publisher's own deadline, not the caller's: it stopped waiting for messages it
		// had taken, so it cannot promise they were not written.
		kind = KindOutcomeUnknown
	}
	return &Error{Kind: kind, Op: op.Kind, Addr: op.Addr, Err: err}
}
