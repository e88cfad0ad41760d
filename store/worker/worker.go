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

// Applier applies the operations of decoded queue records on the synchronous path, keeping a
// record's operations in their queue order through failures. *store.Service implements it
// (Service.ApplyInOrder): the operations of one address form a chain, and once one fails the
// later ones of its address fail with store.ErrHeldBack without running. ApplyInOrder must
// not keep ops, or the documents in them, after it returned: the worker reuses the slice for
// a later fetch, and the documents are the fetched messages' memory.
type Applier interface {
	ApplyInOrder(ctx context.Context, ops []store.QueuedOp) ([]store.Result, error)
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
	// dead-lettered, or left to be delivered again because the consumer lost its partition
	// (FetchStats.Revoked), and the offsets committed.
	FetchDone(FetchStats)
}

// FetchStats describes one finished fetch.
type FetchStats struct {
	Records      int // messages fetched
	Applied      int // records applied
	DeadLettered int // messages written to the dead-letter queue
	Retries      int // record applications repeated after a retryable failure
	// Waves is the most records of one address in the fetch: the dependency waves the
	// records form. Applying them takes Rounds calls, usually one, not one per wave.
	Waves  int
	Rounds int // ApplyInOrder calls: one, plus one per round of retries or held-back records
	// Redelivered counts the messages delivered again at or below an offset this worker had
	// already finished (applied or dead-lettered) in their partition: work repeated after a
	// lost group membership, a rebalance or a commit that failed (see "Delivery guarantees").
	Redelivered int
	// Revoked counts the records left unapplied because the consumer lost their partition
	// before their turn: they are delivered again to the partition's owner.
	Revoked  int
	MaxLag   time.Duration // the largest time from a record's acceptance to its application
	Duration time.Duration // from the fetch's return to its commit
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

	// Owned by the reading goroutine: the decoder and the table counting a fetch's waves.
	dec   accepted.Decoder
	depth addrTable
	// highest is, per partition, the highest offset Run finished: a message at or below it
	// is a redelivery. Guarded by mu, as commitFailing: two fetches may be in flight.
	mu      sync.Mutex
	highest map[topicPartition]int64
	// commitFailing is set while a commit fails: no second fetch starts meanwhile.
	commitFailing atomic.Bool
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
		depth: addrTable{seed: maphash.MakeSeed()}, spare: make(chan *fetched, 2), highest: map[topicPartition]int64{},
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
	// At most two fetches are in flight: the one applied longest, and a later one that has
	// no record of an address of it (so neither can hold up or overtake the other), started
	// once its turn came and no commit is failing.
	var prev *flight
	for {
		select {
		case <-w.stop:
			return w.landAll(ctx, prev) // first, so that a fetch read ahead is left for the next worker
		default:
		}
		var f *fetched
		var landed <-chan struct{} // the flight in the air ending before the next fetch comes
		if prev != nil {
			landed = prev.done
		}
		select {
		case <-w.stop:
			return w.landAll(ctx, prev)
		case <-ctx.Done():
			w.landAll(ctx, prev) //nolint:errcheck // ctx's error is Run's
			return ctx.Err()
		case <-landed:
			err := w.landAll(ctx, prev)
			prev = nil
			if err != nil {
				return err
			}
			continue
		case f = <-ahead:
		}
		if f.err != nil {
			if err := w.landAll(ctx, prev); err != nil {
				return err
			}
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
		if prev != nil && (prev.f.overlaps(f) || w.commitFailing.Load()) {
			err := w.land(prev)
			prev = nil
			if err != nil {
				w.recycle(f)
				return w.stopped(ctx, err)
			}
		}
		cur := w.launch(ctx, f)
		if prev != nil {
			if err := w.land(prev); err != nil {
				w.land(cur) //nolint:errcheck // the first failure is Run's
				return w.stopped(ctx, err)
			}
		}
		prev = cur
	}
}

// flight is a fetch being processed on a goroutine of its own.
type flight struct {
	f     *fetched
	start time.Time
	stats FetchStats
	err   error
	done  chan struct{}
}

// launch starts processing f.
func (w *Worker) launch(ctx context.Context, f *fetched) *flight {
	fl := &flight{f: f, start: w.o.Now(), done: make(chan struct{})}
	go func() {
		defer close(fl.done)
		fl.stats, fl.err = w.process(ctx, f)
	}()
	return fl
}

// land waits for a flight to end, reports it and recycles its fetch.
func (w *Worker) land(fl *flight) error {
	<-fl.done
	w.recycle(fl.f)
	if fl.err != nil {
		return fl.err
	}
	fl.stats.Duration = w.o.Now().Sub(fl.start)
	w.o.Observer.FetchDone(fl.stats)
	return nil
}

// landAll lands the flight still in the air, if any, and returns nil, or Run's error when it
// failed.
func (w *Worker) landAll(ctx context.Context, fl *flight) error {
	if fl == nil {
		return nil
	}
	if err := w.land(fl); err != nil {
		return w.stopped(ctx, err)
	}
	return nil
}

// stopped ends Run after a fetch failed: it commits what was finished and returns the error.
func (w *Worker) stopped(ctx context.Context, err error) error {
	w.finalCommit(ctx)
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return ctx.Err()
	}
	w.log.Error("worker: stopped", slog.String("error", err.Error()))
	return err
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

// deadLetter is a message on its way to the dead-letter queue.
type deadLetter struct {
	msg      queue.Message
	reason   string
	kind     string
	attempts int
}

// fetched is one fetch, decoded, or the error that ended reading: recs[i] came in msgs[i], and
// ops[i] is its operation as ApplyInOrder takes it. ops is contiguous so the first call takes
// it as it is.
type fetched struct {
	records int
	waves   int // the most records of one address: the dependency waves the fetch forms
	recs    []accepted.Record
	ops     []store.QueuedOp
	msgs    []queue.Message
	dead    []deadLetter // messages not applied: malformed, or of another store
	// keys are the hashes of the records' keys, sorted, one per address: two fetches whose
	// keys differ have no record in common and may be applied at once.
	keys []uint64
	err  error
}

// overlaps says whether two fetches may hold records of one address (their keys' hashes
// meet; a false positive only costs concurrency).
func (f *fetched) overlaps(g *fetched) bool {
	a, b := f.keys, g.keys
	for len(a) > 0 && len(b) > 0 {
		switch {
		case a[0] == b[0]:
			return true
		case a[0] < b[0]:
			a = a[1:]
		default:
			b = b[1:]
		}
	}
	return false
}

// recycle hands a processed fetch back to the reader. It drops the fetch's references to
// messages and records first, so a spare fetch pins no message memory.
func (w *Worker) recycle(f *fetched) {
	clear(f.recs)
	clear(f.ops)
	clear(f.msgs)
	*f = fetched{recs: f.recs[:0], ops: f.ops[:0], msgs: f.msgs[:0], keys: f.keys[:0]}
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

// decode decodes a fetch and counts its dependency waves (the k-th record of an address is in
// wave k). Malformed messages and records of stores the worker does not apply become dead
// letters. The records' documents share the messages' memory: the worker holds every message
// until it finished it anyway.
func (w *Worker) decode(msgs []queue.Message) *fetched {
	var f *fetched
	select {
	case f = <-w.spare:
	default:
		f = &fetched{recs: make([]accepted.Record, 0, len(msgs)), ops: make([]store.QueuedOp, 0, len(msgs)), msgs: make([]queue.Message, 0, len(msgs))}
	}
	f.records = len(msgs)
	w.depth.reset(len(msgs))
	defer func() { slices.Sort(f.keys) }()
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
		h := w.depth.hash(&rec.Op.Addr)
		d := w.depth.add(h, &rec.Op.Addr, f.recs)
		if d == 0 {
			f.keys = append(f.keys, h)
		}
		f.waves = max(f.waves, d+1)
		f.recs = append(f.recs, rec)
		f.ops = append(f.ops, rec.Queued())
		f.msgs = append(f.msgs, m)
	}
	return f
}

// addrTable counts the records of each address in a fetch: the k-th record of an address
// is in dependency wave k. It is an open-addressing table rather than a map because it runs
// once per record: it hashes only the key (one string, where an Address has four), reuses its
// slots for every fetch, and finds an address's first record -- which holds the address -- in
// the fetch's records instead of storing the address again.
type addrTable struct {
	seed  maphash.Seed
	slots []addrSlot // a power of two, at least twice the records of the fetch
}

type addrSlot struct {
	hash  uint64 // 0: a free slot
	first int32  // the address's first record, an index into the fetch's records
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

// hash is the table's hash of a's key, never 0.
func (t *addrTable) hash(a *store.Address) uint64 { return maphash.Comparable(t.seed, a.Key) | 1 }

// add counts a record of *a, whose hash is h, and returns how many of a's records came before
// it. recs are the fetch's records so far: this one is appended to them next.
func (t *addrTable) add(h uint64, a *store.Address, recs []accepted.Record) int {
	mask := len(t.slots) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		switch {
		case s.hash == 0:
			*s = addrSlot{hash: h, first: int32(len(recs)), count: 1}
			return 0
		case s.hash == h && recs[s.first].Op.Addr == *a:
			s.count++
			return int(s.count - 1)
		}
	}
}

// process applies one fetch in rounds. Each round hands every record still to apply to
// ApplyInOrder at once -- so a record's operations are combined into one conditional write
// per round, however many of them the fetch holds -- finishes the records applied,
// dead-letters the permanent failures and exhausted retries, and commits what is finished.
// A record that failed retryably runs again in the next round, after a backoff, and the later
// records of its address, held back, after it; a record dead-lettered lets the records of
// its address behind it run in the next round, at once. So a record's mutations apply in
// their queue order and a poison record holds up only the records after it on its address,
// only until it is dead-lettered.
func (w *Worker) process(ctx context.Context, f *fetched) (FetchStats, error) {
	stats := FetchStats{Records: f.records, Waves: f.waves}
	stats.Redelivered = w.redelivered(f)
	if err := w.writeDeadLetters(ctx, f.dead); err != nil {
		return stats, err
	}
	stats.DeadLettered += len(f.dead)
	attempts := make([]int, len(f.recs)) // applications tried per record
	recs, ops, msgs := f.recs, f.ops, f.msgs
	var todo []int // the round's records as indexes into f; nil in the first round: all of them
	for round := 0; ; round++ {
		if round > 0 {
			recs, ops, msgs = make([]accepted.Record, len(todo)), make([]store.QueuedOp, len(todo)), make([]queue.Message, len(todo))
			for j, i := range todo {
				recs[j], ops[j], msgs[j] = f.recs[i], f.ops[i], f.msgs[i]
			}
		}
		if lost := w.dropLost(&todo, &recs, &ops, &msgs, f); lost > 0 {
			stats.Revoked += lost
			if len(ops) == 0 {
				return stats, w.commitProgress(ctx)
			}
		}
		stats.Rounds++
		res, err := w.a.ApplyInOrder(ctx, ops)
		if err == nil && len(res) != len(ops) {
			err = fmt.Errorf("the applier returned %d results for %d records", len(res), len(ops))
		}
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, store.ErrClosed) {
				return stats, err
			}
			res = make([]store.Result, len(ops))
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
			w.finish(msgs)
			stats.Applied += len(msgs)
			return stats, w.commitProgress(ctx)
		}
		var again []int
		var dead []deadLetter
		backoff := 0 // the most applications of a record retried after this round
		applied := make([]queue.Message, 0, len(recs)-failed)
		for j := range recs {
			rec, msg, r := &recs[j], msgs[j], res[j]
			i := j
			if todo != nil {
				i = todo[j]
			}
			if r.Err == nil {
				applied = append(applied, msg)
				continue
			}
			if ctx.Err() != nil {
				w.finish(applied)
				return stats, ctx.Err() // abandoned, not failed: it stays unfinished
			}
			if errors.Is(r.Err, store.ErrHeldBack) {
				again = append(again, i) // it did not run: no attempt
				continue
			}
			attempts[i]++
			if retryable(rec.Op.Kind, r.Err) && attempts[i] < w.o.MaxAttempts {
				w.log.Debug("worker: retrying a record", slog.String("record", rec.String()),
					slog.Int("attempts", attempts[i]), slog.String("error", r.Err.Error()))
				again = append(again, i)
				backoff = max(backoff, attempts[i])
				stats.Retries++
				continue
			}
			reason := ReasonFailed
			if retryable(rec.Op.Kind, r.Err) {
				reason = ReasonRetriesExhausted
			}
			w.log.Warn("worker: dead-lettering a record", slog.String("record", rec.String()),
				slog.String("reason", reason), slog.Int("attempts", attempts[i]),
				slog.String("topic", msg.Topic), slog.Int("partition", int(msg.Partition)),
				slog.Int64("offset", msg.Offset), slog.String("error", r.Err.Error()))
			dead = append(dead, deadLetter{msg: msg, reason: reason, kind: store.KindOf(r.Err).String(), attempts: attempts[i]})
		}
		w.finish(applied)
		stats.Applied += len(applied)
		// The dead letters are durable before the records held back behind them run.
		if err := w.writeDeadLetters(ctx, dead); err != nil {
			return stats, err
		}
		stats.DeadLettered += len(dead)
		if err := w.commitProgress(ctx); err != nil {
			return stats, err
		}
		if len(again) == 0 {
			return stats, nil
		}
		if backoff == 0 && len(applied) == 0 && len(dead) == 0 {
			backoff = round + 1 // nothing moved: an applier holding records back for no failure
		}
		if backoff > 0 {
			if err := w.sleep(ctx, backoff); err != nil {
				return stats, err
			}
		}
		todo = again
	}
}

// finish finishes applied messages and remembers how far each partition got.
func (w *Worker) finish(msgs []queue.Message) {
	if len(msgs) == 0 {
		return
	}
	w.c.Finish(msgs...)
	w.noteFinished(msgs)
}

// noteFinished remembers, per partition, the highest offset this worker finished.
func (w *Worker) noteFinished(msgs []queue.Message) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range msgs {
		m := &msgs[i]
		tp := topicPartition{m.Topic, m.Partition}
		if off, ok := w.highest[tp]; !ok || m.Offset > off {
			w.highest[tp] = m.Offset
		}
	}
}

// redelivered counts the fetch's messages at or below an offset this worker already finished
// in their partition: delivered again, after a lost membership, a rebalance that brought the
// partition back, or a commit that did not happen.
func (w *Worker) redelivered(f *fetched) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	count := func(m *queue.Message) {
		if off, ok := w.highest[topicPartition{m.Topic, m.Partition}]; ok && m.Offset <= off {
			n++
		}
	}
	for i := range f.msgs {
		count(&f.msgs[i])
	}
	for i := range f.dead {
		count(&f.dead[i].msg)
	}
	if n > 0 {
		w.log.Warn("worker: records delivered again that this worker already applied or dead-lettered", slog.Int("records", n))
	}
	return n
}

// dropLost removes from a round the records of partitions the consumer no longer owns (when
// it can tell, see owner): they are left unfinished, for the partition's new owner -- or this
// worker again, from the last commit -- and applying them now would only apply them twice.
// It returns how many it removed.
func (w *Worker) dropLost(todo *[]int, recs *[]accepted.Record, ops *[]store.QueuedOp, msgs *[]queue.Message, f *fetched) int {
	o, ok := w.c.(owner)
	if !ok {
		return 0
	}
	lost := 0
	for _, m := range *msgs {
		if !o.Owns(m) {
			lost++
		}
	}
	if lost == 0 {
		return 0
	}
	idx := *todo
	if idx == nil {
		idx = make([]int, len(*msgs))
		for i := range idx {
			idx[i] = i
		}
	}
	var keep []int
	for _, i := range idx {
		if o.Owns(f.msgs[i]) {
			keep = append(keep, i)
		}
	}
	if keep == nil {
		keep = []int{}
	}
	*todo = keep
	*recs, *ops, *msgs = make([]accepted.Record, len(keep)), make([]store.QueuedOp, len(keep)), make([]queue.Message, len(keep))
	for j, i := range keep {
		(*recs)[j], (*ops)[j], (*msgs)[j] = f.recs[i], f.ops[i], f.msgs[i]
	}
	w.log.Warn("worker: the consumer lost partitions of records not applied yet; leaving them to be delivered again", slog.Int("records", lost))
	return lost
}

// owner is a consumer that can tell whether a message it handed out still belongs to it:
// its partition was not revoked or lost since (kafkaqueue.Consumer.Owns).
type owner interface {
	Owns(queue.Message) bool
}

// topicPartition names one partition of one topic.
type topicPartition struct {
	topic     string
	partition int32
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
				w.noteFinished([]queue.Message{d.msg})
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
					w.noteFinished([]queue.Message{d.msg})
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

// commitProgress makes the finished prefix durable after each round, so that a lost group
// membership repeats at most the round in flight. A retryable failure is retried, with
// backoff, until the commit succeeds or ctx ends -- nothing more is applied meanwhile, since
// whatever is applied uncommitted is applied again after a lost membership. A consumer that
// lost the partitions meanwhile has nothing left to commit for them, and the commit succeeds.
func (w *Worker) commitProgress(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		err := w.c.Commit(ctx)
		if err == nil {
			w.commitFailing.Store(false)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !queue.Retryable(err) {
			return fmt.Errorf("worker: commit: %w", err)
		}
		w.commitFailing.Store(true)
		if attempt%w.o.MaxAttempts == 0 {
			w.log.Warn("worker: commit keeps failing; applying nothing more until it succeeds", slog.String("error", err.Error()), slog.Int("attempts", attempt))
		}
		if err := w.sleep(ctx, min(attempt, w.o.MaxAttempts)); err != nil {
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
