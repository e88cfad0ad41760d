package cdc

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// ConcurrentSink is a Sink whose Write may run for several batches at once. The runner then
// keeps up to RunnerOptions.MaxInFlight batches at the sink together and commits them (dead
// letters, checkpoint, ack) strictly in batch order; package sink's Sink is one.
//
// Batches written concurrently land in any order, which external versions make harmless for
// inserts and updates: the highest version of a document wins whatever the order. Three kinds
// of change are not order-free, and the runner never lets them overtake an earlier batch that
// writes the same document: a delete (Elasticsearch keeps a delete's version only for
// index.gc_deletes, so an older write arriving later could bring the row back), an update
// whose key changed (it deletes the old document) and an update carrying Unchanged values
// (the sink reads them from the document's current state). A Truncate waits for every
// earlier batch, and every later batch waits for it.
type ConcurrentSink interface {
	Sink
	// ConcurrentWrites says whether Write may be called concurrently (false: one batch at a
	// time, as for any other Sink).
	ConcurrentWrites() bool
	// IdentityColumns returns the columns whose values identify the document a row of the
	// table becomes (nil: the schema's primary key). The runner compares batches by them.
	IdentityColumns(*TableSchema) []int
}

// flight is one batch handed to the sink.
type flight struct {
	b     batch
	done  chan struct{} // closed when the sink answered (or the flight gave up)
	start time.Time
	rand  *rand.Rand // backoff jitter of this flight's goroutine

	// Set by the flight's goroutine before done is closed.
	dead     []DeadLetter
	attempts int
	err      error

	// Guarded by Runner.mu: when the sink first pushed the batch back (zero: it is not being
	// pushed back) and the last backpressure; when the Sink.Write now waiting for its answer
	// was called (zero: none is).
	pushedSince time.Time
	pushedErr   error
	calledAt    time.Time

	// Built by the loop's goroutine only.
	truncate bool                // the batch holds a Truncate
	ordered  map[uint64]struct{} // documents the batch's order-bound changes depend on
	written  map[uint64]struct{} // every document the batch writes: built when first asked
}

// landedOK says whether the sink answered f without an error. A flight that failed ends the
// session when it is committed, and its batch (with every later one) comes again from the
// stored checkpoint.
func (f *flight) landedOK() bool {
	select {
	case <-f.done:
		return f.err == nil
	default:
		return false
	}
}

// pipe is one session's flights: the loop's goroutine dispatches and commits them.
type pipe struct {
	r      *Runner
	st     Stream
	outer  context.Context // the session's context: ends the waits of dispatch and drain
	ctx    context.Context // the flights' context: cancelled when the session ends
	cancel context.CancelFunc
	wg     sync.WaitGroup
	max    int
	seed   maphash.Seed
	ids    map[*TableSchema][]int
	ident  func(*TableSchema) []int
	b      batch         // the batch being gathered
	landed chan struct{} // a flight landed (capacity 1: one notice covers several)
}

func (r *Runner) newPipe(ctx context.Context, st Stream) *pipe {
	p := &pipe{r: r, st: st, outer: ctx, max: 1, seed: maphash.MakeSeed(), ids: map[*TableSchema][]int{}, landed: make(chan struct{}, 1)}
	p.ctx, p.cancel = context.WithCancel(ctx)
	if cs, ok := r.sink.(ConcurrentSink); ok && cs.ConcurrentWrites() {
		p.max = r.o.MaxInFlight
		p.ident = cs.IdentityColumns
	}
	return p
}

// stop ends the session's flights: it cancels those still at the sink and waits for their
// goroutines. Flights not committed are dropped: their events come again from the stored
// checkpoint.
func (p *pipe) stop() {
	p.cancel()
	p.wg.Wait()
	p.r.mu.Lock()
	p.r.inflight = nil
	p.r.mu.Unlock()
}

// dispatch hands the gathered batch to the sink as a new flight. It first commits finished
// flights, in order, until the new one may go: a slot is free (MaxInFlight), no flight is
// being pushed back (a struggling destination gets no more work), and no flight still at the
// sink writes a document the batch's order-bound changes depend on (see ConcurrentSink).
func (p *pipe) dispatch() error {
	if len(p.b.entries) == 0 {
		return nil
	}
	r := p.r
	f := &flight{b: p.b, done: make(chan struct{})}
	p.b = batch{}
	if p.max > 1 {
		p.classify(f)
		f.rand = rand.New(rand.NewPCG(r.o.Rand.Uint64(), r.o.Rand.Uint64()))
	} else {
		f.rand = r.o.Rand // one flight at a time: the loop's goroutine waits for it
	}
	for {
		if err := p.commitLanded(); err != nil {
			return err
		}
		if p.mayLaunch(f) {
			break
		}
		if err := p.awaitAny(); err != nil {
			return err
		}
	}
	f.start = r.o.Clock.Now()
	r.mu.Lock()
	r.inflight = append(r.inflight, f)
	r.mu.Unlock()
	if len(f.b.toSink) == 0 { // only malformed events: nothing to send
		close(f.done)
		return nil
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		f.dead, f.attempts, f.err = r.write(p.ctx, f)
		close(f.done)
		select {
		case p.landed <- struct{}{}:
		default: // a notice is pending already: the dispatcher looks at every flight
		}
	}()
	return nil
}

// mayLaunch says whether f may go to the sink now. A slot is a flight still at the sink: a
// flight that landed and waits for an earlier one to be committed holds no slot, so one slow
// request does not idle the others (up to max such landed flights wait, bounding memory).
func (p *pipe) mayLaunch(f *flight) bool {
	r := p.r
	if len(r.inflight) == 0 {
		return true
	}
	if len(r.inflight) >= 2*p.max || f.truncate {
		return false
	}
	atSink := 0
	for _, g := range r.inflight {
		if !g.landedOK() {
			atSink++
		}
	}
	if atSink >= p.max {
		return false
	}
	r.mu.Lock()
	for _, g := range r.inflight {
		if !g.pushedSince.IsZero() {
			r.mu.Unlock()
			return false
		}
	}
	r.mu.Unlock()
	for _, g := range r.inflight {
		if g.truncate {
			return false
		}
		if len(f.ordered) == 0 || g.landedOK() {
			continue // a landed write cannot be overtaken
		}
		w := p.writtenBy(g)
		for k := range f.ordered {
			if _, ok := w[k]; ok {
				return false
			}
		}
	}
	return true
}

// await waits for the oldest flight to land and commits it.
func (p *pipe) await() error {
	select {
	case <-p.r.inflight[0].done:
		return p.commitHead()
	case <-p.outer.Done():
		return p.outer.Err()
	}
}

// commitLanded commits the flights that landed, oldest first, up to the first one still at
// the sink.
func (p *pipe) commitLanded() error {
	for len(p.r.inflight) > 0 {
		select {
		case <-p.r.inflight[0].done:
			if err := p.commitHead(); err != nil {
				return err
			}
		default:
			return nil
		}
	}
	return nil
}

// awaitAny waits until the oldest flight landed, and commits it, or any other flight
// landed (which may free a slot).
func (p *pipe) awaitAny() error {
	select {
	case <-p.r.inflight[0].done:
		return p.commitHead()
	case <-p.landed:
		return nil
	case <-p.outer.Done():
		return p.outer.Err()
	}
}

// drain commits every flight, in order, once it landed.
func (p *pipe) drain() error {
	for len(p.r.inflight) > 0 {
		if err := p.await(); err != nil {
			return err
		}
	}
	return nil
}

// commitHead commits the oldest flight, which has landed. A flight that failed ends the
// session with its failure; the flights after it are dropped (stop).
func (p *pipe) commitHead() error {
	r := p.r
	f := r.inflight[0]
	if f.err != nil {
		return f.err
	}
	if err := r.commit(p.outer, p.st, f); err != nil {
		return err
	}
	r.mu.Lock()
	r.inflight[0] = nil
	r.inflight = r.inflight[1:]
	r.progress.Pending -= len(f.b.entries)
	switch {
	case len(r.inflight) > 0:
		r.pendingSince = r.inflight[0].b.since
	case len(p.b.entries) > 0:
		r.pendingSince = p.b.since
	}
	r.mu.Unlock()
	return nil
}

// pushedLocked returns since when, and why, the sink has been pushing back the longest
// pushed-back flight (zero: none is).
func (r *Runner) pushedLocked() (time.Time, error) {
	var since time.Time
	var err error
	for _, f := range r.inflight {
		if !f.pushedSince.IsZero() && (since.IsZero() || f.pushedSince.Before(since)) {
			since, err = f.pushedSince, f.pushedErr
		}
	}
	return since, err
}

// unansweredLocked returns when the oldest Sink.Write still waiting for its answer was called
// (zero: none is).
func (r *Runner) unansweredLocked() time.Time {
	var since time.Time
	for _, f := range r.inflight {
		if !f.calledAt.IsZero() && (since.IsZero() || f.calledAt.Before(since)) {
			since = f.calledAt
		}
	}
	return since
}

// classify notes what in f must not overtake earlier flights.
func (p *pipe) classify(f *flight) {
	add := func(k uint64) {
		if f.ordered == nil {
			f.ordered = map[uint64]struct{}{}
		}
		f.ordered[k] = struct{}{}
	}
	for i := range f.b.toSink {
		ev := &f.b.toSink[i]
		switch ev.Op {
		case Truncate:
			f.truncate = true
		case Delete:
			if k, ok := p.keyOf(ev, ev.Before); ok {
				add(k)
			}
		case Update:
			after, okAfter := p.keyOf(ev, ev.After)
			if before, ok := p.keyOf(ev, ev.Before); ok && (!okAfter || before != after) {
				add(before) // the key changed: the old document goes
			}
			if okAfter && HasUnchanged(ev.After) {
				add(after)
			}
		}
	}
}

// writtenBy returns the documents g writes, built once.
func (p *pipe) writtenBy(g *flight) map[uint64]struct{} {
	if g.written != nil {
		return g.written
	}
	g.written = make(map[uint64]struct{}, len(g.b.toSink))
	for i := range g.b.toSink {
		ev := &g.b.toSink[i]
		if k, ok := p.keyOf(ev, ev.After); ok {
			g.written[k] = struct{}{}
		}
		if k, ok := p.keyOf(ev, ev.Before); ok {
			g.written[k] = struct{}{}
		}
	}
	return g.written
}

// keyOf hashes the document row belongs to: its table and identity columns. Two documents
// sharing a hash only make a batch wait longer than it needs to. A row without a readable
// identity (a keyless table, a short row) has none: the sink writes no document for it.
func (p *pipe) keyOf(ev *Event, row []Value) (uint64, bool) {
	cols := p.identity(ev.Schema)
	if cols == nil || row == nil {
		return 0, false
	}
	for _, c := range cols {
		if c >= len(row) {
			return 0, false
		}
	}
	var h maphash.Hash
	h.SetSeed(p.seed)
	for _, part := range [...]string{ev.Table.Database, ev.Table.Schema, ev.Table.Table} {
		h.WriteString(part)
		h.WriteByte(0)
	}
	for _, c := range cols {
		hashValue(&h, row[c])
	}
	return h.Sum64(), true
}

func (p *pipe) identity(sch *TableSchema) []int {
	if sch == nil {
		return nil
	}
	cols, ok := p.ids[sch]
	if !ok {
		if p.ident != nil {
			cols = p.ident(sch)
		}
		if cols == nil {
			cols = sch.PrimaryKey
		}
		if len(cols) == 0 {
			cols = nil
		}
		p.ids[sch] = cols
	}
	return cols
}

// hashValue writes v with a type tag, so that 1 and "1" differ (a collision would only cost
// a wait).
func hashValue(h *maphash.Hash, v Value) {
	var buf [9]byte
	num := func(tag byte, u uint64) {
		buf[0] = tag
		binary.LittleEndian.PutUint64(buf[1:], u)
		h.Write(buf[:])
	}
	switch x := v.(type) {
	case nil:
		h.WriteByte(0)
	case int64:
		num(1, uint64(x))
	case int:
		num(1, uint64(x))
	case int32:
		num(1, uint64(x))
	case uint64:
		num(2, x)
	case float64:
		num(3, math.Float64bits(x))
	case string:
		h.WriteByte(4)
		h.WriteString(x)
		h.WriteByte(0)
	case []byte:
		h.WriteByte(5)
		h.Write(x)
		h.WriteByte(0)
	case bool:
		if x {
			h.WriteByte(6)
		} else {
			h.WriteByte(7)
		}
	case time.Time:
		num(8, uint64(x.UnixNano()))
	default:
		h.WriteByte(9)
		fmt.Fprint(h, v)
		h.WriteByte(0)
	}
}
