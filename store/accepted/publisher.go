package accepted

import (
	"context"
	"errors"
	"time"

	"github.com/tributary-dev/tributary/queue"
	"github.com/tributary-dev/tributary/store"
)

// Publisher is the store.Queue of accepted mode over a queue.Publisher: each Enqueue is one
// Publish call with one message per operation, in batch order (so a record's mutations keep
// their order in its partition), the value a version-1 Record and the key MessageKey of the
// operation's address. A worker (package store/worker) reads them back with a Decoder.
//
//	pub, err := kafkaqueue.NewPublisher(ctx, cfg, nil)
//	...
//	svc, err := store.New(adapters, &store.Options{Queues: map[string]store.Queue{"main": accepted.NewPublisher(pub)}})
//
// It is safe for concurrent use if pub is.
type Publisher struct {
	pub queue.Publisher
}

// NewPublisher returns the Queue that publishes to pub. It does not take pub over: close pub
// after the Services that enqueue through it.
func NewPublisher(pub queue.Publisher) *Publisher { return &Publisher{pub: pub} }

var (
	_ store.Queue        = (*Publisher)(nil)
	_ store.QueueChecker = (*Publisher)(nil)
)

// CheckAccepted implements store.QueueChecker: a merge program travels as a JSON string, so it
// must be valid UTF-8.
func (p *Publisher) CheckAccepted(op *store.Op) error {
	if !validUTF8Program(op) {
		return errors.New("an accepted-mode merge program must be valid UTF-8 to travel in a queue record")
	}
	return nil
}

// Enqueue implements store.Queue. A message pub fails is a *store.Error whose Kind follows the
// queue's: queue.OutcomeUnknown (it may have been written) is KindOutcomeUnknown,
// queue.Unavailable and queue.NotFound (not written) KindUnavailable, queue.Invalid
// KindInvalid, queue.Denied (credentials or ACLs refused) KindPermissionDenied; any other
// failure is left to the Service to classify (see store.Queue).
func (p *Publisher) Enqueue(ctx context.Context, b *store.AcceptedBatch) []error {
	msgs := make([]queue.Message, len(b.Ops))
	var hashes map[string]string // one SHA-256 per distinct program of the batch
	// One buffer holds every value and key; the estimate covers a record's fixed members
	// and its key twice over, so it rarely grows.
	size := 0
	for i := range b.Ops {
		op := &b.Ops[i]
		size += 320 + 2*(len(op.Addr.Store)+len(op.Addr.Namespace)+len(op.Addr.Dataset)+len(op.Addr.Key.StringValue())) +
			len(op.Doc.JSON) + len(op.Program)
	}
	buf := make([]byte, 0, size)
	var atBuf [len(time.RFC3339Nano)]byte
	at := appendAcceptedAt(atBuf[:0], b.AcceptedAt) // the batch's one time, formatted once
	for i := range b.Ops {
		op := &b.Ops[i]
		hash := ""
		if op.Kind == store.OpMerge {
			if hash = hashes[op.Program]; hash == "" {
				if hashes == nil {
					hashes = make(map[string]string)
				}
				hash = ProgramHash(op.Program)
				hashes[op.Program] = hash
			}
		}
		// Values and keys share buf; each is capped, so no later append reaches a neighbour.
		start := len(buf)
		buf = appendRecord(buf, &Record{RequestID: b.RequestID, Index: b.Indexes[i], AcceptedAt: b.AcceptedAt, Op: *op}, hash, at)
		value := buf[start:len(buf):len(buf)]
		start = len(buf)
		buf = appendKey(buf, op.Addr)
		msgs[i] = queue.Message{Key: buf[start:len(buf):len(buf)], Value: value}
	}
	err := p.pub.Publish(ctx, msgs)
	if err == nil {
		return nil
	}
	errs := make([]error, len(msgs))
	perMsg, ok := errors.AsType[*queue.PublishError](err)
	if ok && len(perMsg.Errs) != len(msgs) {
		ok = false // a publisher breaking its contract: fail every message
	}
	for i := range errs {
		e := err
		if ok {
			e = perMsg.Errs[i]
		}
		if e != nil {
			errs[i] = classify(e)
		}
	}
	return errs
}

// classify gives a failed message's error the store.ErrorKind its queue.ErrorKind means.
func classify(err error) error {
	if _, ok := errors.AsType[*queue.Error](err); !ok {
		return err
	}
	switch queue.KindOf(err) {
	case queue.OutcomeUnknown:
		return &store.Error{Kind: store.KindOutcomeUnknown, Err: err}
	case queue.Unavailable, queue.NotFound:
		return &store.Error{Kind: store.KindUnavailable, Err: err}
	case queue.Invalid:
		return &store.Error{Kind: store.KindInvalid, Err: err}
	case queue.Denied:
		return &store.Error{Kind: store.KindPermissionDenied, Err: err}
	}
	return err
}
