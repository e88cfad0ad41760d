package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/tributary-dev/tributary/store/driver"
)

// Store is the batch interface: one Do over every configured store instance, and Close. It
// is what a component that only needs batches takes (a wrapper, a test double).
// *Service implements it and adds the one-record helpers Get, Put, Merge, Delete and DoOne
// (each a one-operation Do) that the README's examples call; programs usually hold a
// *Service. An adapter (memstore.Adapter, searchstore, mongostore) is not a Store: it is the
// driver a Service runs on, given to New under a store name. For a Service that needs no
// server use memstore.NewService (tests) or New with memstore.New().
type Store interface {
	// Do runs ops and returns one Result per op, in request order. Operations on the same
	// record run in request order; operations on different records may run concurrently, and
	// each store instance runs independently of the others. A multi-record request is not a
	// transaction: each operation succeeds or fails on its own (see Result).
	//
	// The error is for the whole call: a *RequestError when validation refused the request
	// before anything ran, ErrClosed after Close, or the context's error when ctx was
	// canceled before the call finished. A call whose ctx has a deadline answers by it (less
	// Options.DeadlineReserve) with one Result per operation: those not settled by then fail
	// on their own, retryably -- ErrUnavailable for a read or a write never sent, which will
	// not be sent any more, ErrOutcomeUnknown for a write already sent, which may still take
	// effect (see "Deadlines" in the package documentation). Operations not yet sent to a
	// backend when ctx ends are dropped; those already sent may still take effect.
	Do(ctx context.Context, ops []Op, mode Completion) ([]Result, error)
	// Close stops accepting calls, waits for the calls in flight (until ctx ends) and closes
	// every adapter.
	Close(ctx context.Context) error
}

// Completion says when a write (put, merge, delete) returns. Reads ignore it.
type Completion uint8

// Completion modes.
const (
	// WaitApplied returns once the adapter has applied the write.
	WaitApplied Completion = iota
	// WaitVisible also waits until subsequent searches observe the write (refresh=wait_for on
	// Elasticsearch and OpenSearch; MongoDB and memory writes are visible when acknowledged).
	WaitVisible
	// ReturnAccepted returns once a durable queue holds the write (outcome Accepted); a
	// worker applies it later (package store/worker). A write to a store without a queue
	// (see Options.Queues) fails on its own with ErrNoQueue (kind KindNoQueue, retryable);
	// the request's other operations run.
	ReturnAccepted
)

func (c Completion) String() string {
	switch c {
	case WaitApplied:
		return "applied"
	case WaitVisible:
		return "visible"
	case ReturnAccepted:
		return "accepted"
	}
	return fmt.Sprintf("Completion(%d)", uint8(c))
}

// Options configure a Service. The zero value (or nil) gives the documented defaults.
type Options struct {
	// Merger runs merge programs. Default nil: merges fail with ErrInvalid.
	Merger Merger
	// MaxDocumentBytes limits the JSON size of every document written or merged.
	// Default DefaultMaxDocumentBytes (8 MiB).
	MaxDocumentBytes int
	// MaxOps limits the operations of one request. Default 10000.
	MaxOps int
	// MergeBudget bounds how long one merge keeps running again when other writers (other
	// processes: operations on one record within this Service never race each other) keep
	// changing its record between its read and its write; then the merge fails with
	// ErrConflict. The time counts from the merge's first run, not from its queueing.
	// Default 10s.
	MergeBudget time.Duration
	// RetryAttempts bounds how often a read or write is sent while the adapter reports it
	// unavailable (which means it had no effect). Default 3.
	RetryAttempts int
	// BackoffBase and BackoffMax shape the jittered exponential backoff between attempts.
	// Defaults 2ms and 250ms.
	BackoffBase, BackoffMax time.Duration
	// DeadlineReserve is the time a call whose context has a deadline keeps for its answer to
	// reach the caller: the call answers by its deadline less this (at most a tenth of the time
	// left when it began), every operation not settled by then failing retryably on its own
	// (see "Deadlines" in the package documentation). Default DefaultDeadlineReserve (50ms);
	// negative means none.
	DeadlineReserve time.Duration
	// Coalesce configures the gathering of concurrent one-operation calls into batches.
	Coalesce CoalesceOptions
	// Queues gives store instances, by store name, the durable queue their accepted-mode
	// writes go to (accepted.NewPublisher wraps a queue.Publisher into one). Every name must
	// be a configured store; an accepted-mode write to a store without a queue fails on its
	// own (ErrNoQueue), the request's other operations run. The Service does not close the
	// queues: close them after Close.
	// Default: none.
	Queues map[string]Queue
	// Now is the clock (merge context times). Default time.Now.
	Now func() time.Time
	// Rand supplies backoff jitter. Default a generator seeded at random.
	Rand *rand.Rand
	// Logger receives operational events: merges giving up, refused calls (debug), Close
	// abandoning work. Addresses appear, document contents never. Default: discarded.
	Logger *slog.Logger
	// Observer receives measurements per store: adapter calls (size, latency, outcomes),
	// coalesced batches and the calls waiting behind them, refusals of a full queue, and
	// retries (unavailable items resent, merges repeated after a lost compare-and-set). It
	// is called from the Service's goroutines and must be cheap. Default: none, and then
	// nothing is measured.
	Observer Observer
}

// CoalesceOptions configure coalescing: concurrent one-operation calls (except accepted-mode
// writes) are gathered per store into batches. Explicit batches are not coalesced.
type CoalesceOptions struct {
	// Disabled sends every one-operation call on its own.
	Disabled bool
	// Window is how long a batch that is still a lone call, once its slot is free, waits for
	// company. Default 25µs (a timer: on a busy or virtualized machine it may fire a
	// millisecond or more late); negative means none. A batch of more calls never waits on a
	// timer: when its slot is free the collector takes what is queued and yields to the
	// goroutines ready to run until a round brings no new call, so the callers a finished
	// batch woke rejoin the next one instead of trickling into many small ones. Under load
	// batches grow anyway, since calls queue while every slot is busy (see MaxInFlight).
	Window time.Duration
	// MaxBatch closes a batch early at this many operations. Default 256.
	MaxBatch int
	// QueueLimit bounds the calls waiting for a batch per store; beyond it a call fails at once
	// with ErrUnavailable. Default 4096.
	QueueLimit int
	// MaxInFlight bounds the coalesced batches running at once per store. Default 4.
	MaxInFlight int
}

func (o *Options) withDefaults() Options {
	var c Options
	if o != nil {
		c = *o
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.MaxDocumentBytes, DefaultMaxDocumentBytes)
	def(&c.MaxOps, 10000)
	def(&c.RetryAttempts, 3)
	def(&c.Coalesce.MaxBatch, 256)
	def(&c.Coalesce.QueueLimit, 4096)
	def(&c.Coalesce.MaxInFlight, 4)
	if c.MergeBudget <= 0 {
		c.MergeBudget = 10 * time.Second
	}
	if c.BackoffBase <= 0 {
		c.BackoffBase = 2 * time.Millisecond
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = 250 * time.Millisecond
	}
	switch {
	case c.DeadlineReserve == 0:
		c.DeadlineReserve = DefaultDeadlineReserve
	case c.DeadlineReserve < 0:
		c.DeadlineReserve = 0
	}
	switch {
	case c.Coalesce.Window == 0:
		c.Coalesce.Window = 25 * time.Microsecond
	case c.Coalesce.Window < 0:
		c.Coalesce.Window = 0
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Rand == nil {
		c.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c
}

// Service is the standard Store, with one-record helpers (Get, Put, Merge, Delete, DoOne) on
// top of Do: it validates requests, routes each operation by its address's
// store name to that store's adapter, runs stores concurrently and independently, orders
// operations on the same record, runs merges with conditional writes and retries, and coalesces
// concurrent one-operation calls.
type Service struct {
	opts   Options
	stores map[string]*instance
	names  []string

	randMu sync.Mutex

	mu       sync.RWMutex // guards closed against calls starting
	closed   bool
	inflight sync.WaitGroup  // calls in Do and Apply
	running  sync.WaitGroup  // executors of explicit requests, which may outlive their calls
	base     context.Context // outlives callers: coalesced batches run under it
	stop     context.CancelFunc
}

type instance struct {
	name      string
	adapter   Adapter
	validator driver.AddressValidator
	timePrec  time.Duration // > 0: merge context times are truncated to it (driver.TimePrecisioner)
	coalescer *coalescer
	queue     Queue        // nil: accepted-mode writes fail (ErrNoQueue)
	checker   QueueChecker // queue as a QueueChecker, or nil

	laneMu sync.Mutex
	lanes  map[Address]*lane // the records with operations queued or running (see lane)
}

// Adapter is a backend adapter, one store instance: memstore.New, searchstore.New and
// mongostore.New return one. Its methods are the contract of package store/driver, which only
// adapter authors need; applications hand adapters to New and call the Service.
type Adapter interface {
	driver.Store
}

// New returns a Service over the given adapters, keyed by store name. The Service owns them:
// its Close closes them.
func New(adapters map[string]Adapter, opts *Options) (*Service, error) {
	if len(adapters) == 0 {
		return nil, errors.New("store: New needs at least one adapter")
	}
	s := &Service{opts: opts.withDefaults(), stores: make(map[string]*instance, len(adapters))}
	if s.opts.Coalesce.MaxBatch > s.opts.MaxOps {
		return nil, fmt.Errorf("store: Coalesce.MaxBatch %d exceeds MaxOps %d", s.opts.Coalesce.MaxBatch, s.opts.MaxOps)
	}
	s.base, s.stop = context.WithCancel(context.Background())
	for name, a := range adapters {
		if name == "" || a == nil {
			return nil, fmt.Errorf("store: adapter %q: empty name or nil adapter", name)
		}
		in := &instance{name: name, adapter: a, queue: s.opts.Queues[name], lanes: make(map[Address]*lane)}
		in.validator, _ = a.(driver.AddressValidator)
		in.checker, _ = in.queue.(QueueChecker)
		if tp, ok := a.(driver.TimePrecisioner); ok {
			in.timePrec = tp.TimePrecision()
		}
		if !s.opts.Coalesce.Disabled {
			in.coalescer = newCoalescer(s, in)
		}
		s.stores[name] = in
		s.names = append(s.names, name)
	}
	sort.Strings(s.names)
	for name, q := range s.opts.Queues {
		if s.stores[name] == nil || q == nil {
			return nil, fmt.Errorf("store: Queues[%q]: no adapter of that name, or a nil queue", name)
		}
	}
	return s, nil
}

// Stores returns the configured store names, sorted.
func (s *Service) Stores() []string { return append([]string(nil), s.names...) }

// Do implements Store.
func (s *Service) Do(ctx context.Context, ops []Op, mode Completion) ([]Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !s.enter() {
		return nil, ErrClosed
	}
	defer s.inflight.Done()
	if err := s.validate(ops, mode); err != nil {
		return nil, err
	}
	results := make([]Result, len(ops))
	if len(ops) == 0 {
		return results, nil
	}
	now := s.opts.Now()
	by := s.answerBy(ctx)
	if len(ops) == 1 && !(mode == ReturnAccepted && ops[0].Kind != OpRead) {
		in := s.stores[ops[0].Addr.Store]
		if in.coalescer != nil {
			if err := in.coalescer.submit(ctx, ops[0], now, by, mode == WaitVisible, &results[0]); err != nil {
				return nil, err
			}
			return results, nil
		}
	}
	// The operations write into their own array: when ctx ends first, Do returns at once
	// and the operations already sent settle there, unseen.
	out := make([]Result, len(ops))
	items := make([]item, len(ops))
	c := newCall(len(ops))
	if !by.IsZero() {
		c.s = s
	}
	byStore := make(map[*instance][]*item)
	var accepted map[*instance][]acceptedOp
	for i := range ops {
		it := &items[i]
		*it = item{op: ops[i], res: &out[i], call: c, ctx: ctx, now: now, visible: mode == WaitVisible, cutAt: by}
		in := s.stores[it.op.Addr.Store]
		if mode == ReturnAccepted && it.op.Kind != OpRead {
			if in.queue == nil {
				it.fail(&Error{Kind: KindNoQueue, Op: it.op.Kind, Addr: it.op.Addr, Err: noQueueError{in.name}})
				continue
			}
			if accepted == nil {
				accepted = make(map[*instance][]acceptedOp)
			}
			// Handed to the queue at once: cut at the deadline, it may have been enqueued.
			it.phase.Store(phaseSent)
			accepted[in] = append(accepted[in], acceptedOp{it: it, index: i})
			continue
		}
		byStore[in] = append(byStore[in], it)
	}
	if accepted != nil {
		rid := s.newRequestID()
		for in, acc := range accepted {
			s.running.Add(1)
			go func() {
				defer s.running.Done()
				s.enqueue(ctx, in, rid, acc)
			}()
		}
	}
	s.runStores(byStore)
	return s.await(ctx, c, items, results, out, by)
}

// runStores runs each store's items in an executor goroutine of its own.
func (s *Service) runStores(byStore map[*instance][]*item) {
	for in, items := range byStore {
		s.running.Add(1)
		go func() {
			defer s.running.Done()
			s.execute(in, items)
		}()
	}
}

func (s *Service) enter() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return false
	}
	s.inflight.Add(1)
	return true
}

// Close implements Store.
func (s *Service) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.closed = true
	s.mu.Unlock()

	drained := make(chan struct{})
	go func() {
		s.inflight.Wait()
		for _, in := range s.stores {
			if in.coalescer != nil {
				in.coalescer.close()
			}
		}
		s.running.Wait()
		close(drained)
	}()
	var err error
	select {
	case <-drained:
	case <-ctx.Done():
		s.opts.Logger.Warn("store: Close gave up waiting for calls in flight; abandoning them")
		s.stop() // abandon what is still running
		err = ctx.Err()
	}
	s.stop()
	for _, name := range s.names {
		if cerr := s.stores[name].adapter.Close(ctx); cerr != nil && err == nil {
			err = fmt.Errorf("store: closing %q: %w", name, cerr)
		}
	}
	return err
}

// validate refuses the whole request when any operation is malformed, before anything runs.
func (s *Service) validate(ops []Op, mode Completion) error {
	if mode > ReturnAccepted {
		return &RequestError{Items: []ItemError{{Index: -1, Err: &Error{Kind: KindInvalid, Err: fmt.Errorf("unknown completion mode %d", mode)}}}}
	}
	if len(ops) > s.opts.MaxOps {
		return &RequestError{Items: []ItemError{{Index: -1, Err: &Error{Kind: KindTooLarge, Err: fmt.Errorf("the request has %d operations, more than the limit of %d", len(ops), s.opts.MaxOps)}}}}
	}
	var bad []ItemError
	for i := range ops {
		err := s.validateOp(&ops[i])
		if err == nil && mode == ReturnAccepted && ops[i].Kind != OpRead {
			// A store without a queue is no refusal of the request: that operation fails on
			// its own when the request runs (ErrNoQueue), and the others run.
			if in := s.stores[ops[i].Addr.Store]; in.checker != nil {
				if cerr := in.checker.CheckAccepted(&ops[i]); cerr != nil {
					err = &Error{Kind: KindInvalid, Op: ops[i].Kind, Addr: ops[i].Addr, Err: cerr}
				}
			}
		}
		if err != nil {
			bad = append(bad, ItemError{Index: i, Err: err})
		}
	}
	if bad != nil {
		return &RequestError{Items: bad}
	}
	return nil
}

func (s *Service) validateOp(op *Op) *Error {
	invalid := func(msg string) *Error { return newOpError(KindInvalid, op.Kind, op.Addr, msg) }
	if op.Kind < OpRead || op.Kind > OpDelete {
		return invalid(fmt.Sprintf("unknown operation kind %d", op.Kind))
	}
	if err := op.Addr.Validate(); err != nil {
		return invalid(err.Error())
	}
	in, ok := s.stores[op.Addr.Store]
	if !ok {
		return invalid(fmt.Sprintf("no store named %q is configured", op.Addr.Store))
	}
	if in.validator != nil {
		if err := in.validator.ValidateAddress(op.Addr.driver()); err != nil {
			return opError(op.Kind, op.Addr, err)
		}
	}
	switch op.If.kind {
	case driver.Unconditional:
	case driver.IfRevision:
		if op.If.rev.IsZero() {
			return invalid("an IfRevision precondition with the zero revision")
		}
		fallthrough
	case driver.IfAbsent:
		if op.Kind != OpPut && op.Kind != OpDelete {
			return invalid("only puts and deletes take a precondition")
		}
	default:
		return invalid("unknown precondition")
	}
	switch op.Kind {
	case OpPut, OpMerge:
		if err := validateDocument(op.Doc, s.opts.MaxDocumentBytes); err != nil {
			return opError(op.Kind, op.Addr, err)
		}
	case OpRead, OpDelete:
		if op.Doc.JSON != nil || op.Program != "" {
			return invalid("a " + op.Kind.String() + " carries no document or program")
		}
	}
	if op.Kind == OpMerge {
		if op.Program == "" {
			return invalid("merge without a program")
		}
		if s.opts.Merger == nil {
			return invalid("no Merger is configured for merges")
		}
	} else if op.Program != "" {
		return invalid("only merges carry a program")
	}
	return nil
}

// backoff returns the jittered delay before attempt n (n >= 1 is the first retry).
func (s *Service) backoff(n int) time.Duration {
	d := s.opts.BackoffBase << min(n-1, 20)
	if d <= 0 || d > s.opts.BackoffMax {
		d = s.opts.BackoffMax
	}
	s.randMu.Lock()
	j := time.Duration(s.opts.Rand.Int64N(int64(d)/2 + 1))
	s.randMu.Unlock()
	return d/2 + j
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
