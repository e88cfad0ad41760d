package kafkaqueue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-dev/tributary/queue"
)

// Publisher publishes to one topic with an idempotent producer that waits for all in-sync
// replicas. It implements queue.Publisher and is safe for concurrent use.
type Publisher struct {
	cl    *kgo.Client
	topic string
	// answer bounds a Publish call: messages still unanswered then are OutcomeUnknown. send is
	// the deadline of the records' context: a record franz-go has not sent by then (or whose
	// send was answered) is failed, and so reported not written, before answer passes.
	answer, send time.Duration

	mu       sync.RWMutex // guards closed against inflight.Add
	closed   bool
	inflight sync.WaitGroup
}

var _ queue.Publisher = (*Publisher)(nil)

// publishBounds returns, for a DeliveryTimeout d, how long Publish waits for answers (d) and
// the deadline of its records' context, d less a slack of d/5 (at most 1s): the time franz-go
// has to fail the records it can still fail safely -- those not sent -- so that they come back
// as not written (Unavailable) rather than of unknown outcome.
func publishBounds(d time.Duration) (answer, send time.Duration) {
	return d, d - min(d/5, time.Second)
}

// connectionBounds returns the produce request timeout (how long the broker may hold a produce
// waiting for the in-sync replicas) and the request timeout overhead (franz-go's allowance on
// top of a request's own timeout before it kills the connection: the hung-connection
// detector) for a DeliveryTimeout d: d/2 each, at most franz-go's default 10s each, and an
// overhead of at least 1s. So a broker that stops answering (a hung process, a black-holed
// host) makes the producer drop the connection, and look for the partition's leader again,
// within about d, not franz-go's 20s.
func connectionBounds(d time.Duration) (produce, overhead time.Duration) {
	produce = min(d/2, 10*time.Second)
	overhead = min(max(d/2, time.Second), 10*time.Second)
	return produce, overhead
}

// NewPublisher connects to cfg.Brokers and checks (or creates, see Config.CreateTopic) the
// topic. It publishes to one Topic: a Config with Topics or TopicPattern is refused
// (queue.Invalid). ctx bounds the check. opts may be nil.
func NewPublisher(ctx context.Context, cfg Config, o *Options) (*Publisher, error) {
	if err := cfg.validate(forPublisher); err != nil {
		return nil, err
	}
	opts, err := cfg.clientOptions(o.logger())
	if err != nil {
		return nil, err
	}
	delivery := cfg.DeliveryTimeout
	if delivery == 0 {
		delivery = defaultDeliveryTimeout
	}
	answer, send := publishBounds(delivery)
	produce, overhead := connectionBounds(delivery)
	opts = append(opts,
		kgo.DefaultProduceTopic(cfg.Topic),
		// franz-go's default: the port's durability rests on it. Idempotence (also the default)
		// is what makes every failure franz-go reports a record it did not write: it never
		// abandons a record it sent before the broker answered.
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(send),
		kgo.ProduceRequestTimeout(produce),
		kgo.RequestTimeoutOverhead(overhead),
		kgo.WithHooks(answerHook{}),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, &queue.Error{Kind: queue.Invalid, Queue: cfg.Topic, Err: err}
	}
	if err := ensureTopic(ctx, cl, &cfg); err != nil {
		cl.Close()
		return nil, err
	}
	return &Publisher{cl: cl, topic: cfg.Topic, answer: answer, send: send}, nil
}

// errSharedBatchCanceled stands for a context error a message got although its own context
// is alive: franz-go fails every buffered record of a partition together, so another
// Publish's canceled context can fail this one's messages. Trying again may succeed.
var errSharedBatchCanceled = errors.New("failed together with another publish's canceled messages of the same partition")

// Publish produces msgs and waits until the brokers acknowledged each of them or gave up, for
// at most the DeliveryTimeout. Messages of one partition fail together and in order: when one
// fails, no later message of its partition in this call was written by it (franz-go keeps
// partitions gapless). Every failure franz-go reports is a message it did not write; a
// message still unanswered when the DeliveryTimeout passes or ctx ends is OutcomeUnknown: if
// it was sent, franz-go keeps it (the idempotent producer never abandons a record it sent),
// so it may still be written later, in its order in its partition; if not, canceling its
// context on return drops it at franz-go's first chance.
func (p *Publisher) Publish(ctx context.Context, msgs []queue.Message) error {
	p.mu.RLock()
	if p.closed {
		p.mu.RUnlock()
		return queue.ErrClosed
	}
	p.inflight.Add(1)
	p.mu.RUnlock()
	defer p.inflight.Done()

	if len(msgs) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		errs := make([]error, len(msgs))
		for i := range errs {
			errs[i] = err
		}
		return &queue.PublishError{Errs: errs}
	}
	start := time.Now()
	w := newWaiter(len(msgs))
	records := p.records(msgs)
	sendCtx, cancel := context.WithDeadline(ctx, start.Add(p.send))
	defer cancel() // fails the records not sent yet once Publish has answered for them
	timer := time.NewTimer(time.Until(start.Add(p.answer)))
	defer timer.Stop()
	// ProduceSync batches the call's records as one (it unlingers their partitions once all
	// are buffered) but returns only when every record was answered, so it runs on its own
	// and the answers reach w through answerHook, each record naming w in its context.
	wctx := context.WithValue(sendCtx, waiterKey{}, w)
	ptrs := make([]*kgo.Record, len(records))
	for i := range records {
		records[i].Context = wctx
		ptrs[i] = &records[i]
	}
	go p.cl.ProduceSync(sendCtx, ptrs...)
	var why error // set when Publish answers before every record was answered
	select {
	case <-w.done:
	case <-timer.C:
		why = fmt.Errorf("no answer within the delivery timeout (%s); the message may have been written", p.answer)
	case <-ctx.Done():
		why = fmt.Errorf("the context ended while the message was in flight; it may have been written: %w", ctx.Err())
	}
	results := w.stop()
	var errs []error
	fail := func(i int, err error) {
		if errs == nil {
			errs = make([]error, len(msgs))
		}
		errs[i] = err
	}
	if len(results) < len(records) {
		// Some records are still with franz-go: each is OutcomeUnknown unless answered.
		unknown := &queue.Error{Kind: queue.OutcomeUnknown, Queue: p.topic, Err: why}
		for i := range records {
			fail(i, unknown)
		}
		for _, r := range results {
			i := index(records, r.Record)
			errs[i] = p.classifyRecord(ctx, start, r.Err)
		}
		return &queue.PublishError{Errs: errs}
	}
	for _, r := range results {
		if r.Err != nil {
			// Results come in completion order; the record pointer says which message it is.
			fail(index(records, r.Record), p.classifyRecord(ctx, start, r.Err))
		}
	}
	if errs != nil {
		return &queue.PublishError{Errs: errs}
	}
	return nil
}

// records copies msgs into franz-go records, in one buffer: a record still unanswered when
// Publish returns stays with franz-go, which must then not read the caller's memory. Nil keys
// and values stay nil (a nil value is a tombstone to Kafka).
func (p *Publisher) records(msgs []queue.Message) []kgo.Record {
	size, headers := 0, 0
	for _, m := range msgs {
		size += len(m.Key) + len(m.Value)
		for _, h := range m.Headers {
			size += len(h.Value)
		}
		headers += len(m.Headers)
	}
	buf := make([]byte, 0, size)
	clone := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		start := len(buf)
		buf = append(buf, b...)
		return buf[start:len(buf):len(buf)]
	}
	records := make([]kgo.Record, len(msgs))
	var hs []kgo.RecordHeader
	if headers > 0 {
		hs = make([]kgo.RecordHeader, 0, headers)
	}
	for i, m := range msgs {
		records[i] = kgo.Record{Key: clone(m.Key), Value: clone(m.Value), Topic: p.topic}
		if len(m.Headers) > 0 {
			start := len(hs)
			for _, h := range m.Headers {
				hs = append(hs, kgo.RecordHeader{Key: h.Key, Value: clone(h.Value)})
			}
			records[i].Headers = hs[start:len(hs):len(hs)]
		}
	}
	return records
}

// index finds r among records. It runs only for failed records, so a linear scan costs nothing
// on the successful path.
func index(records []kgo.Record, r *kgo.Record) int {
	for i := range records {
		if &records[i] == r {
			return i
		}
	}
	panic("kafkaqueue: franz-go returned a record it was not given")
}

// classifyRecord classifies the failure franz-go reported for a record: a record it did not
// write (see Publish). A context error while ctx is alive is the records' own send deadline
// (they were not sent in time) or another call's canceled context sharing their batch.
func (p *Publisher) classifyRecord(ctx context.Context, start time.Time, err error) error {
	if (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) && ctx.Err() == nil {
		if errors.Is(err, context.DeadlineExceeded) && time.Since(start) >= p.send {
			return &queue.Error{Kind: queue.Unavailable, Queue: p.topic, Err: fmt.Errorf("not sent within %s (the delivery timeout less its slack): %w", p.send, kgo.ErrRecordTimeout)}
		}
		return &queue.Error{Kind: queue.Unavailable, Queue: p.topic, Err: errSharedBatchCanceled}
	}
	return classify(p.topic, err)
}

// waiterKey keys a record's waiter in its context.
type waiterKey struct{}

// answerHook hands each record's answer to the waiter of its Publish call. franz-go calls it
// for every record, serially, just before the record's promise.
type answerHook struct{}

var _ kgo.HookProduceRecordUnbuffered = answerHook{}

func (answerHook) OnProduceRecordUnbuffered(r *kgo.Record, err error) {
	if r.Context == nil {
		return
	}
	if w, ok := r.Context.Value(waiterKey{}).(*waiter); ok {
		w.promise(r, err)
	}
}

// waiter collects the answers of one Publish call's records. franz-go calls promise serially;
// once stop returned, later answers are dropped (their records' Publish answered already).
type waiter struct {
	mu      sync.Mutex
	results []kgo.ProduceResult
	n       int
	stopped bool
	done    chan struct{}
}

func newWaiter(n int) *waiter {
	return &waiter{results: make([]kgo.ProduceResult, 0, n), n: n, done: make(chan struct{})}
}

func (w *waiter) promise(r *kgo.Record, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	w.results = append(w.results, kgo.ProduceResult{Record: r, Err: err})
	if len(w.results) == w.n {
		close(w.done)
	}
}

// stop ends the collection and returns the answers so far.
func (w *waiter) stop() []kgo.ProduceResult {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	return w.results
}

// Close waits for the Publish calls in flight, then closes the client; records franz-go still
// holds (those of answers Publish did not wait for) are failed, though some may be written.
func (p *Publisher) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.inflight.Wait()
	p.cl.Close()
	return nil
}
