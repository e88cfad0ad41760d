package accepted_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/queue"
	"github.com/tributary-dev/tributary/queue/memqueue"
	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/accepted"
	"github.com/tributary-dev/tributary/store/memstore"
)

// acceptedService returns a service over two memory stores, "q" with a queue on topic "t"
// of broker b and "plain" without one.
func acceptedService(t *testing.T, b *memqueue.Broker, opts *store.Options) *store.Service {
	t.Helper()
	pub, err := b.Publisher("t")
	if err != nil {
		t.Fatal(err)
	}
	if opts == nil {
		opts = &store.Options{}
	}
	opts.Queues = map[string]store.Queue{"q": accepted.NewPublisher(pub)}
	if opts.Merger == nil {
		opts.Merger = store.MergeFunc(func(_ context.Context, c *store.MergeCall) (store.MergeResult, error) {
			return store.MergeResult{Doc: c.Incoming}, nil
		})
	}
	s, err := store.New(map[string]store.Adapter{"q": memstore.New(), "plain": memstore.New()}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Close(context.Background())
		_ = pub.Close()
	})
	return s
}

func TestAcceptedModePublishesOneRecordPerWrite(t *testing.T) {
	ctx := context.Background()
	b := memqueue.New(nil)
	at := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	s := acceptedService(t, b, &store.Options{Now: func() time.Time { return at }})

	var ops []store.Op
	for i := range 20 {
		a := addr("q", fmt.Sprint("k", i%5)) // four operations on each of five records
		switch i % 3 {
		case 0:
			ops = append(ops, store.Put(a, store.Document{JSON: fmt.Appendf(nil, `{"i":%d}`, i)}))
		case 1:
			ops = append(ops, store.Merge(a, "same program", store.Document{JSON: fmt.Appendf(nil, `{"i":%d}`, i)}))
		case 2:
			ops = append(ops, store.Delete(a))
		}
	}
	ops = append(ops, store.Read(addr("q", "k0")))
	res, err := s.Do(ctx, ops, store.ReturnAccepted)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res[:20] {
		if r.Err != nil || r.Outcome != store.Accepted {
			t.Fatalf("op %d: %+v, want Accepted", i, r)
		}
	}
	if r := res[20]; r.Err != nil || r.Outcome != store.Absent {
		t.Fatalf("a read in accepted mode runs synchronously and sees nothing applied yet: %+v", r)
	}

	msgs := b.Messages("t")
	if len(msgs) != 20 {
		t.Fatalf("the topic holds %d messages, want one per write (20)", len(msgs))
	}
	requests := map[string]bool{}
	lastIndex := map[string]int{} // per partition and key: records keep request order
	for _, m := range msgs {
		r, err := accepted.Decode(m.Value)
		if err != nil {
			t.Fatal(err)
		}
		requests[r.RequestID] = true
		if string(m.Key) != string(accepted.MessageKey(r.Op.Addr)) {
			t.Fatalf("message key %q, want MessageKey of %v", m.Key, r.Op.Addr)
		}
		want := accepted.Record{RequestID: r.RequestID, Index: r.Index, AcceptedAt: at, Op: ops[r.Index]}
		if !sameRecord(&r, &want) {
			t.Fatalf("record %d is %+v, want op %+v accepted at %v", r.Index, r, ops[r.Index], at)
		}
		if string(m.Value) != string(encode(&want)) {
			t.Fatalf("record %d is not Append's encoding:\n got %s\nwant %s", r.Index, m.Value, encode(&want))
		}
		pk := fmt.Sprint(m.Partition, string(m.Key))
		if last, ok := lastIndex[pk]; ok && last >= r.Index {
			t.Fatalf("record %d follows record %d of the same address in its partition", r.Index, last)
		}
		lastIndex[pk] = r.Index
	}
	if len(requests) != 1 {
		t.Fatalf("one request's records carry %d request ids", len(requests))
	}
}

func TestAcceptedModeFailures(t *testing.T) {
	ctx := context.Background()
	b := memqueue.New(nil)
	s := acceptedService(t, b, nil)
	doc := store.Document{JSON: []byte(`{"a":1}`)}

	// A write to a store without a queue fails on its own (ErrNoQueue, retryable, not
	// ErrUnavailable); the write to the store with a queue is published.
	res, err := s.Do(ctx, []store.Op{store.Put(addr("plain", "x"), doc), store.Put(addr("q", "x"), doc)}, store.ReturnAccepted)
	if err != nil {
		t.Fatalf("no-queue store and queue store: %v, want per-operation results", err)
	}
	if !errors.Is(res[0].Err, store.ErrNoQueue) || errors.Is(res[0].Err, store.ErrUnavailable) || !store.KindOf(res[0].Err).Retryable() {
		t.Fatalf("the no-queue store's write: %+v, want ErrNoQueue, retryable", res[0])
	}
	if res[1].Err != nil || res[1].Outcome != store.Accepted {
		t.Fatalf("the queue store's write: %+v, want Accepted", res[1])
	}
	if n := len(b.Messages("t")); n != 1 {
		t.Fatalf("the queue store's write published %d records, want 1", n)
	}

	// A partial publish failure fails exactly the messages the queue did not take.
	b.FailMessages(func(m queue.Message) error {
		if string(m.Key) == string(accepted.MessageKey(addr("q", "bad"))) {
			return &queue.Error{Kind: queue.Unavailable, Queue: "t", Err: errors.New("broker down")}
		}
		return nil
	})
	res, err = s.Do(ctx, []store.Op{store.Put(addr("q", "good"), doc), store.Put(addr("q", "bad"), doc)}, store.ReturnAccepted)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Outcome != store.Accepted || !errors.Is(res[1].Err, store.ErrUnavailable) {
		t.Fatalf("partial publish failure: %+v, want Accepted then ErrUnavailable", res)
	}
	b.FailNext(memqueue.OpPublish, &queue.Error{Kind: queue.Invalid, Queue: "t", Err: errors.New("message too large")})
	res, err = s.Do(ctx, []store.Op{store.Delete(addr("q", "big"))}, store.ReturnAccepted)
	if err != nil || !errors.Is(res[0].Err, store.ErrInvalid) {
		t.Fatalf("a message the queue refuses as invalid: %v %+v, want ErrInvalid", err, res)
	}

	// A malformed operation refuses the whole request before anything is published.
	before := len(b.Messages("t"))
	_, err = s.Do(ctx, []store.Op{store.Put(addr("q", "y"), doc), store.Put(addr("q", "z"), store.Document{JSON: []byte(`[1]`)})}, store.ReturnAccepted)
	var re *store.RequestError
	if !errors.As(err, &re) || len(re.Items) != 1 || re.Items[0].Index != 1 {
		t.Fatalf("malformed op in accepted mode: %v, want a RequestError naming op 1", err)
	}
	_, err = s.Do(ctx, []store.Op{store.Merge(addr("q", "y"), "bad \xff utf-8", doc)}, store.ReturnAccepted)
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a merge program that cannot travel in a record: %v, want ErrInvalid", err)
	}
	if after := len(b.Messages("t")); after != before {
		t.Fatalf("refused requests published %d messages", after-before)
	}
}

func TestApplyUsesAcceptedTimeAndFailsRecordsAlone(t *testing.T) {
	ctx := context.Background()
	var seen []time.Time
	s := acceptedService(t, memqueue.New(nil), &store.Options{
		Merger: store.MergeFunc(func(_ context.Context, c *store.MergeCall) (store.MergeResult, error) {
			seen = append(seen, c.Context.Time)
			return store.MergeResult{Doc: c.Incoming}, nil
		}),
	})
	at := time.Date(2020, 1, 2, 3, 4, 5, 6e6, time.UTC) // milliseconds: memstore keeps MongoDB's precision by default
	doc := store.Document{JSON: []byte(`{"a":1}`)}
	res, err := s.Apply(ctx, []store.QueuedOp{
		{AcceptedAt: at, Op: store.Merge(addr("q", "m"), "p", doc)},
		{AcceptedAt: at, Op: store.Put(addr("nowhere", "m"), doc)},
		{AcceptedAt: at, Op: store.Read(addr("q", "m"))},
		{AcceptedAt: at, Op: store.Put(addr("q", "m"), doc).WithPrecondition(store.IfAbsent())},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Outcome != store.Created || len(seen) != 1 || !seen[0].Equal(at) {
		t.Fatalf("merge through Apply: %+v, merge times %v, want Created at %v", res[0], seen, at)
	}
	if !errors.Is(res[1].Err, store.ErrInvalid) || !errors.Is(res[2].Err, store.ErrInvalid) {
		t.Fatalf("an unknown store and a read fail alone with ErrInvalid: %+v %+v", res[1], res[2])
	}
	if !errors.Is(res[3].Err, store.ErrAlreadyExists) {
		t.Fatalf("an if-absent put after the merge created the record: %+v, want ErrAlreadyExists (order kept)", res[3])
	}
}

func TestQueuesMustNameConfiguredStores(t *testing.T) {
	pub, _ := memqueue.New(nil).Publisher("t")
	_, err := store.New(map[string]store.Adapter{"a": memstore.New()}, &store.Options{Queues: map[string]store.Queue{"b": accepted.NewPublisher(pub)}})
	if err == nil {
		t.Fatal("New accepted a queue for a store it does not have")
	}
}

// failingPublisher fails every message of every Publish with err, or with err(ctx) when set.
type failingPublisher struct {
	err func(ctx context.Context) error
}

func (p failingPublisher) Publish(ctx context.Context, msgs []queue.Message) error {
	errs := make([]error, len(msgs))
	for i := range errs {
		errs[i] = p.err(ctx)
	}
	return &queue.PublishError{Errs: errs}
}

func (failingPublisher) Close() error { return nil }

// TestAcceptedModeFailureKinds: what a publish failure becomes for the caller. A message the
// queue may have written is ErrOutcomeUnknown (retryable, distinct from ErrUnavailable, which
// promises it was not written), also when the caller's context ended meanwhile and when the
// publisher's own deadline ended without a classified error; a context error of the caller's
// context is ErrCanceled.
func TestAcceptedModeFailureKinds(t *testing.T) {
	unknown := &queue.Error{Kind: queue.OutcomeUnknown, Queue: "t", Err: errors.New("no answer within the delivery timeout")}
	cases := []struct {
		name     string
		cancel   bool // the caller's context ends during Publish
		err      error
		want     error
		wantKind store.ErrorKind
	}{
		{"unavailable", false, &queue.Error{Kind: queue.Unavailable, Queue: "t", Err: errors.New("connection refused")}, store.ErrUnavailable, store.KindUnavailable},
		{"missing topic", false, &queue.Error{Kind: queue.NotFound, Queue: "t", Err: errors.New("no topic")}, store.ErrUnavailable, store.KindUnavailable},
		{"outcome unknown", false, unknown, store.ErrOutcomeUnknown, store.KindOutcomeUnknown},
		{"outcome unknown, caller gone", true, &queue.Error{Kind: queue.OutcomeUnknown, Queue: "t", Err: fmt.Errorf("in flight: %w", context.Canceled)}, store.ErrOutcomeUnknown, store.KindOutcomeUnknown},
		{"caller's context", true, context.Canceled, store.ErrCanceled, store.KindCanceled},
		{"publisher's own deadline", false, context.DeadlineExceeded, store.ErrOutcomeUnknown, store.KindOutcomeUnknown},
		{"invalid", false, &queue.Error{Kind: queue.Invalid, Queue: "t", Err: errors.New("too large")}, store.ErrInvalid, store.KindInvalid},
		{"denied", false, &queue.Error{Kind: queue.Denied, Queue: "t", Err: errors.New("not authorized")}, store.ErrPermissionDenied, store.KindPermissionDenied},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			pub := failingPublisher{err: func(context.Context) error {
				if c.cancel {
					cancel()
				}
				return c.err
			}}
			s, err := store.New(map[string]store.Adapter{"q": memstore.New()}, &store.Options{Queues: map[string]store.Queue{"q": accepted.NewPublisher(pub)}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(context.Background())
			res, err := s.Do(ctx, []store.Op{store.Put(addr("q", "x"), store.Document{JSON: []byte(`{"a":1}`)})}, store.ReturnAccepted)
			if c.cancel && errors.Is(err, context.Canceled) {
				// Do returns the caller's context error as soon as it ends; whether the
				// publish settled first is a race, so the classification of these cases is
				// also checked directly (TestEnqueueFailureOfAGoneCaller (package store)).
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			e := res[0].Err
			if !errors.Is(e, c.want) || store.KindOf(e) != c.wantKind {
				t.Fatalf("publish failing with %v: %v (kind %v), want %v", c.err, e, store.KindOf(e), c.wantKind)
			}
			if retry := c.wantKind == store.KindUnavailable || c.wantKind == store.KindOutcomeUnknown; store.KindOf(e).Retryable() != retry {
				t.Fatalf("kind %v: Retryable() = %v, want %v", c.wantKind, !retry, retry)
			}
			if c.wantKind == store.KindOutcomeUnknown && errors.Is(e, store.ErrUnavailable) {
				t.Fatal("an outcome-unknown failure also matches ErrUnavailable")
			}
		})
	}
}
