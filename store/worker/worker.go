package worker

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tributary-dev/tributary/queue"
	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/accepted"
)

// Applier applies the operations of decoded queue records on the synchronous path.
// *store.Service implements it (Service.Apply). Apply must not keep ops, or the documents in
// them, after it returned: the worker reuses the slice for a later fetch, and the documents are
// the fetched messages' memory.
type Applier interface {
	Apply(ctx context.Context, ops []store.QueuedOp) ([]store.Result, error)
}

// Options configure a Worker. The zero value (or nil) gives the documented defaults.
type Options struct {
	// AlsoApply names further stores, besides the worker's own (New's storeName), whose records
	// the worker applies: for a queue that several stores publish to (store.Options.Queues
	// giving them one queue). Records of any other store are dead-lettered (reason
	// other_store), never applied. Default none: the worker applies its own store's records
	// only.
	AlsoApply []string
	// MaxAttempts bounds how often one record is applied while it fails retryably; then it
	// is dead-lettered (reason retries_exhausted). Writing dead letters and committing are
	// retried as often before Run gives up. Default 8.
	MaxAttempts int
	// BackoffBase and BackoffMax shape the jittered exponential wait between attempts: the
	// n-th retry waits between half and all of min(BackoffBase·2^(n-1), BackoffMax).
	// Defaults 100ms and 10s.
	BackoffBase, BackoffMax time.Duration
	// CommitTimeout bounds the last commit of a Run whose ctx ended, which runs on a context
	// of its own. Default 10s.
	CommitTimeout time.Duration
	// Observer receives per-fetch measurements for metrics. Default: none.
	Observer Observer
	// Logger receives operational events: dead letters, retries (debug), fetch and commit
	// failures. Addresses, topics and offsets appear; document contents never. Default:
	// discarded.
	Logger *slog.Logger
	// Now is the clock for the records' lag. Default time.Now.
	Now func() time.Time
	// Rand supplies backoff jitter. Default a generator seeded at random.
	Rand *rand.Rand
}

func (o *Options) withDefaults() Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 8
	}
	if c.BackoffBase <= 0 {
		c.BackoffBase = 100 * time.Millisecond
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = 10 * time.Second
	}
	if c.CommitTimeout <= 0 {
		c.CommitTimeout = 10 * time.Second
	}
	if c.Observer == nil {
		c.Observer = noObserver{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Rand == nil {
		c.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return c
}

// Observer receives measurements; implementations must be quick and safe for concurrent use.
type Observer interface {
	// FetchDone reports one fetch the worker finished: every record applied or
	// dead-lettered and the offsets committed (or the commit failed retryably).
	FetchDone(FetchStats)
}

// FetchStats describes one finished fetch.
type FetchStats struct {
	Records      int           // messages fetched
	Applied      int           // records applied
	DeadLettered int           // messages written to the dead-letter queue
	Retries      int           // record applications repeated after a retryable failure
	Waves        int           // dependency waves the records formed
	MaxLag       time.Duration // the largest time from a record's acceptance to its application
	Duration     time.Duration // from the fetch's return to its commit
}

type noObserver struct{}

func (noObserver) FetchDone(FetchStats) {}

// Dead-letter message headers, added after the original message's headers. Values are
// decimal for numbers. They never carry document data or credentials.
const (
	// HeaderReason is "malformed" (the value is not a record this worker reads),
	// "other_store" (a record of a store this worker does not apply), "failed" (a permanent
	// failure) or "retries_exhausted".
	HeaderReason = "tributary-dlq-reason"
	// HeaderErrorKind is the store.ErrorKind of the last failure ("invalid", "conflict", ...).
	HeaderErrorKind = "tributary-dlq-error-kind"
	// HeaderTopic, HeaderPartition and HeaderOffset say where the message was consumed.
	HeaderTopic     = "tributary-dlq-source-topic"
	HeaderPartition = "tributary-dlq-source-partition"
	HeaderOffset    = "tributary-dlq-source-offset"
	// HeaderAttempts counts the applications tried (0 for a record never applied: malformed,
	// or of another store).
	HeaderAttempts = "tributary-dlq-attempts"
)

// Dead-letter reasons.
const (
	ReasonMalformed        = "malformed"
	ReasonOtherStore       = "other_store"
	ReasonFailed           = "failed"
	ReasonRetriesExhausted = "retries_exhausted"
)

// Worker applies the records of one queue consumer. See the package documentation.
type Worker struct {
	c    queue.Consumer
	a    Applier
	dlq  queue.Publisher
	o    Options
	log  *slog.Logger
	rand sync.Mutex

	// The stores whose records the worker applies: its own, then Options.AlsoApply.
	store string
	also  []string

	// Owned by the reading goroutine: the decoder and the table grouping a fetch into waves.
	dec   accepted.Decoder
	depth addrTable
	// spare holds fetches whose processing ended, for the reader to fill again: their slices
	// keep their capacity, so a steady stream of fetches allocates no per-fetch arrays.
	spare chan *fetched

	started  atomic.Bool
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

// New returns the worker of the store named storeName: it applies the records of that store (and
// of Options.AlsoApply) that consumer delivers through applier, and writes the records it
// cannot apply -- and those of any other store -- to deadLetter. When applier has a
// Stores() []string method (*store.Service does), every store the worker applies must be
// among them. The worker does not close the consumer or the publisher: close them after Run
// returned.
func New(storeName string, consumer queue.Consumer, applier Applier, deadLetter queue.Publisher, opts *Options) (*Worker, error) {
	if consumer == nil || applier == nil || deadLetter == nil {
		return nil, errors.New("worker: New needs a consumer, an applier and a dead-letter publisher")
	}
	if storeName == "" {
		return nil, errors.New("worker: New needs the name of the store whose queue the worker consumes")
	}
	o := opts.withDefaults()
	also := make([]string, 0, len(o.AlsoApply))
	for _, name := range o.AlsoApply {
		if name == "" {
			return nil, errors.New("worker: Options.AlsoApply holds an empty store name")
		}
		if name != storeName && !slices.Contains(also, name) {
			also = append(also, name)
		}
	}
	if st, ok := applier.(interface{ Stores() []string }); ok {
		configured := st.Stores()
		for _, name := range append([]string{storeName}, also...) {
			if !slices.Contains(configured, name) {
				return nil, fmt.Errorf("worker: store %q is not configured in the applier, so its records could never be applied", name)
			}
		}
	}
	return &Worker{c: consumer, a: applier, dlq: deadLetter, o: o, log: o.Logger, store: storeName, also: also,
		depth: addrTable{seed: maphash.MakeSeed()}, spare: make(chan *fetched, 2),
		stop: make(chan struct{}), done: make(chan struct{})}, nil
}

// applies reports whether the worker applies the records of the named store.
func (w *Worker) applies(store string) bool {
	return store == w.store || slices.Contains(w.also, store)
}

// Run consumes until Stop is called or ctx ends. After Stop, it finishes the fetch in hand
// (applies or dead-letters every record, commits) and returns nil. When ctx ends it abandons
// the fetch in hand, commits what it finished and returns ctx's error; the records it did not
// finish are delivered again, to this worker's successor. Any other error -- a fetch failing
// with a non-retryable error, a dead letter that cannot be written, ErrClosed from the applier
// -- stops Run with that error after committing what was finished.
//
// Run may be called once.
func (w *Worker) Run(ctx context.Context) error {
	if !w.started.CompareAndSwap(false, true) {
		return errors.New("worker: Run called twice")
	}
	defer close(w.done)
	fetchCtx, cancel := context.WithCancel(ctx)
	ahead := make(chan *fetched) // unbuffered: at most one fetch is read ahead
	var reader sync.WaitGroup
	reader.Add(1)
	go func() {
		defer reader.Done()
		w.readAhead(fetchCtx, ahead)
	}()
	// The reader must be gone before Run returns: the caller closes the consumer then.
	defer reader.Wait()
	defer cancel()
	go func() {
		select {
		case <-w.stop:
			cancel() // Stop interrupts a waiting Fetch, not the work in hand
		case <-fetchCtx.Done():
		}
	}()
	for {
		select {
		case <-w.stop:
			return nil // first, so that a fetch read ahead is left for the next worker
		default:
		}
		var f *fetched
		select {
		case <-w.stop:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case f = <-ahead:
		}
		if f.err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			select {
			case <-w.stop:
				return nil // the reader stopped because of Stop
			default:
			}
			w.log.Error("worker: stopped", slog.String("error", f.err.Error()))
			return f.err
		}
		start := w.o.Now()
		stats, err := w.process(ctx, f)
		w.recycle(f)
		if err != nil {
			w.finalCommit(ctx)
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				return ctx.Err()
			}
			w.log.Error("worker: stopped", slog.String("error", err.Error()))
			return err
		}
		if err := w.commit(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		stats.Duration = w.o.Now().Sub(start)
		w.o.Observer.FetchDone(stats)
	}
}

// Stop asks Run to return after the fetch in hand and waits until it did or ctx ended.
func (w *Worker) Stop(ctx context.Context) error {
	w.stopOnce.Do(func() { close(w.stop) })
	if !w.started.Load() {
		return nil
	}
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// wave is records of distinct addresses, applied together: recs[i] came in msgs[i], and
// ops[i] is its operation as Apply takes it. ops is contiguous so the first Apply takes it as
// it is, and msgs so that a wave applied whole is finished with one call.
type wave struct {
	recs []accepted.Record
	ops  []store.QueuedOp
	msgs []queue.Message
}

// deadLetter is a message on its way to the dead-letter queue.
type deadLetter struct {
	msg      queue.Message
	reason   string
	kind     string
	attempts int
}

// fetched is one fetch, decoded and grouped into waves, or the error that ended reading.
type fetched struct {
	records int
	waves   []wave       // len is the number of waves; beyond it, spare capacity
	dead    []deadLetter // messages not applied: malformed, or of another store
	err     error
}

// recycle hands a processed fetch back to the reader. It drops the fetch's references to
// messages and records first, so a spare fetch pins no message memory.
func (w *Worker) recycle(f *fetched) {
	all := f.waves[:cap(f.waves)]
	for i := range all {
		wv := &all[i]
		clear(wv.recs)
		clear(wv.ops)
		clear(wv.msgs)
		wv.recs, wv.ops, wv.msgs = wv.recs[:0], wv.ops[:0], wv.msgs[:0]
	}
	*f = fetched{waves: f.waves[:0]}
	select {
	case w.spare <- f:
	default:
	}
}

// readAhead fetches and decodes, one fetch ahead of the records being applied, so decoding
// overlaps applying; it never finishes anything, so a fetch read ahead and then abandoned
// (Stop, a crash) is simply delivered again. It retries retryable fetch failures with backoff
// and hands over any other failure, or ctx's error, as its last fetch.
func (w *Worker) readAhead(ctx context.Context, out chan<- *fetched) {
	failures := 0
	for {
		msgs, err := w.c.Fetch(ctx)
		switch {
		case err != nil && ctx.Err() == nil && queue.Retryable(err):
			failures++
			w.log.Warn("worker: fetch failed; retrying", slog.String("error", err.Error()), slog.Int("failures", failures))
			if w.sleep(ctx, failures) == nil {
				continue
			}
			err = ctx.Err()
		case err != nil && ctx.Err() != nil:
			err = ctx.Err()
		case err != nil:
			err = fmt.Errorf("worker: fetch: %w", err)
		}
		var f *fetched
		if err != nil {
			f = &fetched{err: err}
		} else if len(msgs) == 0 {
			continue
		} else {
			failures = 0
			f = w.decode(msgs)
		}
		select {
		case out <- f:
		case <-ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

// decode decodes a fetch and groups its records into dependency waves: the k-th record of an
// address is in wave k. Malformed messages and records of stores the worker does not apply
// become dead letters. The records' documents share the messages' memory: the worker holds
// every message until it finished it anyway.
func (w *Worker) decode(msgs []queue.Message) *fetched {
	var f *fetched
	select {
	case f = <-w.spare:
	default:
		f = &fetched{}
	}
	f.records = len(msgs)
	w.depth.reset(len(msgs))
	for _, m := range msgs {
		rec, err := w.dec.DecodeShared(m.Value)
		if err != nil {
			w.log.Warn("worker: malformed record", slog.String("topic", m.Topic), slog.Int("partition", int(m.Partition)),
				slog.Int64("offset", m.Offset), slog.String("error", err.Error()))
			f.dead = append(f.dead, deadLetter{msg: m, reason: ReasonMalformed, kind: store.KindInvalid.String()})
			continue
		}
		if !w.applies(rec.Op.Addr.Store) {
			w.log.Warn("worker: dead-lettering a record of a store this worker does not apply",
				slog.String("record", rec.String()), slog.String("worker_store", w.store),
				slog.String("topic", m.Topic), slog.Int("partition", int(m.Partition)), slog.Int64("offset", m.Offset))
			f.dead = append(f.dead, deadLetter{msg: m, reason: ReasonOtherStore, kind: store.KindInvalid.String()})
			continue
		}
		var wave0 []accepted.Record
		if len(f.waves) > 0 {
			wave0 = f.waves[0].recs
		}
		d := w.depth.add(&rec.Op.Addr, wave0)
		if d == len(f.waves) {
			if d < cap(f.waves) {
				f.waves = f.waves[:d+1] // a recycled fetch has the wave's arrays already
			} else {
				f.waves = append(f.waves, wave{})
			}
			if d == 0 && cap(f.waves[0].recs) == 0 { // the first wave usually holds nearly every record
				f.waves[0] = wave{recs: make([]accepted.Record, 0, len(msgs)), ops: make([]store.QueuedOp, 0, len(msgs)), msgs: make([]queue.Message, 0, len(msgs))}
			}
		}
		wv := &f.waves[d]
		wv.recs = append(wv.recs, rec)
		wv.ops = append(wv.ops, rec.Queued())
		wv.msgs = append(wv.msgs, m)
	}
	return f
}

// addrTable counts the records of each address in a fetch: the k-th record of an address
// goes to wave k. It is an open-addressing table rather than a map because it runs once per
// record: it hashes only the key (one string, where an Address has four), reuses its slots
// for every fetch, and finds an address's first record -- which holds the address -- in wave
// 0 instead of storing the address again.
type addrTable struct {
	seed  maphash.Seed
	slots []addrSlot // a power of two, at least twice the records of the fetch
}

type addrSlot struct {
	hash  uint64 // 0: a free slot
	first int32  // the address's first record, an index into wave 0
	count int32  // the address's records so far
}

// reset empties the table for a fetch of n records.
func (t *addrTable) reset(n int) {
	size := 16
	for size < 2*n {
		size <<= 1
	}
	if cap(t.slots) < size {
		t.slots = make([]addrSlot, size)
		return
	}
	t.slots = t.slots[:size]
	clear(t.slots)
}

// add counts a record of *a and returns how many of a's records came before it. wave0 is the
// fetch's wave 0 so far: a record of an address not seen yet is appended to it next.
func (t *addrTable) add(a *store.Address, wave0 []accepted.Record) int {
	h := maphash.Comparable(t.seed, a.Key) | 1
	mask := len(t.slots) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		switch {
		case s.hash == 0:
			*s = addrSlot{hash: h, first: int32(len(wave0)), count: 1}
			return 0
		case s.hash == h && wave0[s.first].Op.Addr == *a:
			s.count++
			return int(s.count - 1)
		}
	}
}

// process applies one fetch: each wave is applied -- with retries of the records that failed
// retryably -- and its failures (and the fetch's messages not applied) dead-lettered before the
// next wave starts, so a record's mutations apply in their queue order and a poison record
// holds up only the records after it, only until it is dead-lettered.
func (w *Worker) process(ctx context.Context, f *fetched) (FetchStats, error) {
	stats := FetchStats{Records: f.records, Waves: len(f.waves)}
	dead := f.dead
	for i := range f.waves {
		more, err := w.applyWave(ctx, &f.waves[i], &stats)
		if err != nil {
			return stats, err
		}
		dead = append(dead, more...)
		if err := w.writeDeadLetters(ctx, dead); err != nil {
			return stats, err
		}
		stats.DeadLettered += len(dead)
		dead = nil
	}
	if err := w.writeDeadLetters(ctx, dead); err != nil { // a fetch of no record to apply
		return stats, err
	}
	stats.DeadLettered += len(dead)
	return stats, nil
}

// applyWave applies records on distinct addresses, again and again for those failing
// retryably, and returns the ones to dead-letter. Applied records are finished at once.
func (w *Worker) applyWave(ctx context.Context, wv *wave, stats *FetchStats) ([]deadLetter, error) {
	var dead []deadLetter
	recs, ops, msgs := wv.recs, wv.ops, wv.msgs
	var todo []int // the round's records as indexes into wv; nil in the first round: all of them
	for round := 0; ; round++ {
		if round > 0 {
			stats.Retries += len(todo)
			if err := w.sleep(ctx, round); err != nil {
				return nil, err
			}
			recs, ops, msgs = make([]accepted.Record, len(todo)), make([]store.QueuedOp, len(todo)), make([]queue.Message, len(todo))
			for j, i := range todo {
				recs[j], ops[j], msgs[j] = wv.recs[i], wv.ops[i], wv.msgs[i]
			}
		}
		res, err := w.a.Apply(ctx, ops)
		if err == nil && len(res) != len(recs) {
			err = fmt.Errorf("the applier returned %d results for %d records", len(res), len(recs))
		}
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, store.ErrClosed) {
				return nil, err
			}
			res = make([]store.Result, len(recs))
			for i := range res {
				res[i].Err = err
			}
		}
		now := w.o.Now()
		failed := 0
		for j := range res {
			if res[j].Err != nil {
				failed++
			} else {
				stats.MaxLag = max(stats.MaxLag, now.Sub(recs[j].AcceptedAt))
			}
		}
		if failed == 0 { // the usual round: the records' messages are finished in one call
			w.c.Finish(msgs...)
			stats.Applied += len(msgs)
			return dead, nil
		}
		attempts := round + 1 // a record in this round took part in every round before it
		var again []int
		applied := make([]queue.Message, 0, len(recs)-failed)
		for j := range recs {
			rec, msg, r := &recs[j], msgs[j], res[j]
			if r.Err == nil {
				applied = append(applied, msg)
				continue
			}
			if ctx.Err() != nil {
				w.c.Finish(applied...)
				return nil, ctx.Err() // abandoned, not failed: it stays unfinished
			}
			if retryable(rec.Op.Kind, r.Err) && attempts < w.o.MaxAttempts {
				w.log.Debug("worker: retrying a record", slog.String("record", rec.String()),
					slog.Int("attempts", attempts), slog.String("error", r.Err.Error()))
				if todo == nil {
					again = append(again, j)
				} else {
					again = append(again, todo[j])
				}
				continue
			}
			reason := ReasonFailed
			if retryable(rec.Op.Kind, r.Err) {
				reason = ReasonRetriesExhausted
			}
			w.log.Warn("worker: dead-lettering a record", slog.String("record", rec.String()),
				slog.String("reason", reason), slog.Int("attempts", attempts),
				slog.String("topic", msg.Topic), slog.Int("partition", int(msg.Partition)),
				slog.Int64("offset", msg.Offset), slog.String("error", r.Err.Error()))
			dead = append(dead, deadLetter{msg: msg, reason: reason, kind: store.KindOf(r.Err).String(), attempts: attempts})
		}
		w.c.Finish(applied...)
		stats.Applied += len(applied)
		if len(again) == 0 {
			return dead, nil
		}
		todo = again
	}
}

// retryable says whether applying a record again may succeed: the store was unavailable, the
// outcome is unknown (KindOutcomeUnknown, or KindInternal, which may be one: at-least-once
// allows a second application), or a merge gave up under contention. A failed precondition,
// an invalid record or a failing program fails again.
func retryable(op store.OpKind, err error) bool {
	switch store.KindOf(err) {
	case store.KindUnavailable, store.KindOutcomeUnknown, store.KindInternal, store.KindCanceled:
		return true
	case store.KindConflict:
		return op == store.OpMerge
	}
	return false
}

// writeDeadLetters publishes dead letters, retrying those not written, and finishes each
// once it is durable.
func (w *Worker) writeDeadLetters(ctx context.Context, dead []deadLetter) error {
	for attempt := 1; len(dead) > 0; attempt++ {
		msgs := make([]queue.Message, len(dead))
		for i, d := range dead {
			msgs[i] = deadLetterMessage(d)
		}
		err := w.dlq.Publish(ctx, msgs)
		if err == nil {
			for _, d := range dead {
				w.c.Finish(d.msg)
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var pe *queue.PublishError
		if errors.As(err, &pe) && len(pe.Errs) == len(dead) {
			var left []deadLetter
			for i, d := range dead {
				if pe.Errs[i] == nil {
					w.c.Finish(d.msg)
				} else {
					left = append(left, d)
				}
			}
			dead = left
		}
		if attempt >= w.o.MaxAttempts || !queue.Retryable(err) {
			return fmt.Errorf("worker: writing %d dead letters: %w", len(dead), err)
		}
		w.log.Warn("worker: writing dead letters failed; retrying", slog.Int("messages", len(dead)), slog.String("error", err.Error()))
		if err := w.sleep(ctx, attempt); err != nil {
			return err
		}
	}
	return nil
}

func deadLetterMessage(d deadLetter) queue.Message {
	h := make([]queue.Header, 0, len(d.msg.Headers)+6)
	h = append(h, d.msg.Headers...)
	h = append(h,
		queue.Header{Key: HeaderReason, Value: []byte(d.reason)},
		queue.Header{Key: HeaderErrorKind, Value: []byte(d.kind)},
		queue.Header{Key: HeaderTopic, Value: []byte(d.msg.Topic)},
		queue.Header{Key: HeaderPartition, Value: strconv.AppendInt(nil, int64(d.msg.Partition), 10)},
		queue.Header{Key: HeaderOffset, Value: strconv.AppendInt(nil, d.msg.Offset, 10)},
		queue.Header{Key: HeaderAttempts, Value: strconv.AppendInt(nil, int64(d.attempts), 10)},
	)
	return queue.Message{Key: d.msg.Key, Value: d.msg.Value, Headers: h}
}

// commit makes the finished prefix durable, retrying a retryable failure; one that persists
// is only logged, since the next fetch's commit covers the same offsets.
func (w *Worker) commit(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		err := w.c.Commit(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !queue.Retryable(err) {
			return fmt.Errorf("worker: commit: %w", err)
		}
		if attempt >= w.o.MaxAttempts {
			w.log.Warn("worker: commit failed; the next one will cover it", slog.String("error", err.Error()))
			return nil
		}
		if err := w.sleep(ctx, attempt); err != nil {
			return err
		}
	}
}

// finalCommit commits what a Run that is stopping finished, on a context of its own since
// ctx may have ended.
func (w *Worker) finalCommit(ctx context.Context) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.o.CommitTimeout)
	defer cancel()
	if err := w.c.Commit(cctx); err != nil {
		w.log.Warn("worker: last commit failed; unfinished work will be delivered again", slog.String("error", err.Error()))
	}
}

// sleep waits the jittered backoff before retry n (n >= 1), or until ctx ends.
func (w *Worker) sleep(ctx context.Context, n int) error {
	d := w.o.BackoffBase << min(n-1, 20)
	if d <= 0 || d > w.o.BackoffMax {
		d = w.o.BackoffMax
	}
	w.rand.Lock()
	d = d/2 + time.Duration(w.o.Rand.Int64N(int64(d)/2+1))
	w.rand.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
