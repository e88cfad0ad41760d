package store

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/tributary-dev/tributary/store/driver"
)

// call counts the operations of one caller (a Do, an Apply, one coalesced call or batch) that
// are still to settle; done closes when the last one has, and then the parent is told.
type call struct {
	left   atomic.Int64
	done   chan struct{}
	parent *call
	s      *Service // set when the call has an answer deadline: reports late outcomes
}

// late reports an operation that settled after its caller was told its outcome is unknown.
func (c *call) late(it *item, r Result) {
	for ; c != nil; c = c.parent {
		if c.s != nil {
			c.s.settledLate(it, r)
			return
		}
	}
}

func newCall(n int) *call {
	c := &call{}
	c.init(n)
	return c
}

func (c *call) init(n int) {
	c.done = make(chan struct{})
	c.left.Store(int64(n))
	if n == 0 {
		close(c.done)
	}
}

func (c *call) finish() {
	if c.left.Add(-1) == 0 {
		close(c.done)
		if c.parent != nil {
			c.parent.finish()
		}
	}
}

// item is one operation on its way through a store: the op, where its result goes, who waits
// for it, and the state of a merge between runs.
type item struct {
	op      Op
	res     *Result
	call    *call
	ctx     context.Context // the caller's: once it ends, the operation is no longer sent
	now     time.Time       // acceptance time, merge programs' context time
	visible bool

	phase atomic.Uint32 // who may still decide what the caller is told (see phaseQueued)
	cutAt time.Time     // when the caller must be answered; zero: no deadline (see Service.answerBy)

	settled bool
	attempt int       // merge runs so far
	start   time.Time // first run, the start of a merge's budget against other writers
	epoch   uint64    // its lane's epoch when it was queued (see lane)
	inOrder bool      // ApplyInOrder: a failure holds back the rest of its chain
	next    *item     // ApplyInOrder: the next operation of its address in the call

	// one round's evaluation
	tent    Result // the tentative result
	changes int    // state changes in its segment up to and including it
}

// settle stores the final result and tells the caller, once per item: a second call -- an item
// held back (see holdBack) that its failed write's loop meets again -- does nothing.
func (it *item) settle(r Result) {
	if it.settled {
		return // held back (see holdBack) while its lane's round still listed it
	}
	*it.res = r
	it.settled = true
	if it.phase.Swap(phaseSettled) == phaseCutSent && it.op.Kind != OpRead {
		it.call.late(it, r)
	}
	if r.Err != nil && it.next != nil {
		it.holdBack()
	}
	it.call.finish()
}

func (it *item) fail(err *Error) { it.settle(Result{Err: err}) }

// needsState says whether the operation depends on the record's current state: reads, merges
// and if-absent deletes (a check that writes nothing). Puts and other deletes can be sent
// "blind", carrying their own precondition.
func (it *item) needsState() bool {
	return it.op.Kind == OpRead || it.op.Kind == OpMerge || (it.op.Kind == OpDelete && it.op.If.kind == driver.IfAbsent)
}

// round is one lane's part of an executor round: the queued items it looked at, the segment
// it runs, and what it learned.
type round struct {
	l     *lane
	q     []*item // the lane's queue when the round began
	live  []*item // q without the operations whose callers have gone
	epoch uint64  // the lane's epoch for this round's adapter calls

	mode    baseMode
	readErr error
	aborted bool // a caller was cut while the segment was evaluated: nothing settles this round

	rest    []*item // what stays queued after the round
	seg     []*item // the segment: live[:len(seg)]
	base    recState
	cur     recState
	changes int
	first   int // index in seg of the first state change, -1 when none
	unsafe  int // index in seg of the first item the unvalidated base may not answer, -1 when none
	write   driver.Write
	writes  bool // the segment ends in write
	wres    driver.WriteResult
	visible bool
}

type baseMode uint8

const (
	baseBlind baseMode = iota + 1 // the segment starts with a put or delete carrying its own condition
	baseWarm                      // the state the lane learned from an earlier call
	baseFresh                     // read in this round
)

// runRound runs one segment per lane: one read call for the lanes that need the current state,
// the merge programs and preconditions in memory, then one write call with at most one write
// per record, and settles or requeues every item.
func (x *executor) runRound(work []*round) {
	s, in := x.s, x.in
	for _, r := range work {
		r.live = r.q
		for i, it := range r.q {
			if it.gone() { // a caller has gone or was answered at its deadline: drop what it queued
				r.live = x.dropGone(r.q, i)
				break
			}
		}
	}
	// The adapter calls run under the Service's context, which outlives callers, bounded by the
	// latest answer deadline of the operations they serve, when every one has a deadline.
	ctx, cancel := s.roundContext(work)
	defer cancel()
	var addrs []driver.Address
	var readers []*round
	for _, r := range work {
		if len(r.live) == 0 {
			continue
		}
		first := r.live[0]
		switch {
		case !first.needsState():
			r.mode = baseBlind
		case r.l.st.known && !r.l.needFresh:
			r.mode = baseWarm
		default:
			r.mode = baseFresh
			addrs = append(addrs, r.l.addr.driver())
			readers = append(readers, r)
		}
	}
	if len(addrs) > 0 {
		results := s.readWithRetry(ctx, in, addrs)
		for i, r := range readers {
			rr := results[i]
			if rr.Err != nil {
				r.readErr = rr.Err
				r.l.st = recState{}
				continue
			}
			r.l.st = recState{known: true, exists: rr.Found, doc: Document(rr.Doc), rev: rr.Revision, epoch: r.epoch}
			r.l.needFresh = false
		}
	}
	var writes []driver.Write
	var writers []*round
	visible := false
	for _, r := range work {
		if len(r.live) == 0 || r.readErr != nil {
			continue
		}
		x.evaluate(r)
		if r.writes && !r.claim() {
			// A caller was answered at its deadline while the segment was evaluated: it
			// runs again next round, without the operations cut.
			r.writes, r.aborted = false, true
		}
		if r.writes {
			if writes == nil {
				writes, writers = make([]driver.Write, 0, len(work)), make([]*round, 0, len(work))
			}
			writes = append(writes, r.write)
			writers = append(writers, r)
			visible = visible || r.visible
		}
	}
	if len(writes) > 0 {
		results := s.writeWithRetry(ctx, in, writes, driver.WriteOptions{Visible: visible})
		for i, r := range writers {
			r.wres = results[i]
		}
	}
	requeued := 0
	for _, r := range work {
		requeued += x.conclude(r)
	}
	if obs := s.opts.Observer; obs != nil && requeued > 0 {
		obs.Retry(Retry{Store: in.name, Reason: RetryMergeConflict, Call: CallWrite, Ops: requeued})
	}
}

// dropGone returns q without the operations whose callers have gone or were answered at
// their deadline (the first at index i), failing those: they are never sent.
func (x *executor) dropGone(q []*item, i int) []*item {
	live := append(make([]*item, 0, len(q)), q[:i]...)
	for _, it := range q[i:] {
		if it.gone() {
			it.fail(it.goneErr())
			continue
		}
		live = append(live, it)
	}
	return live
}

// evaluate builds the round's segment from the front of the lane's queue and runs it in memory:
// each operation sees the state the one before it left, and the segment's net effect becomes
// one write, conditional on the state it started from. The segment ends before a read that
// follows a change (a read reports a stored revision), and, in solo mode, before a second
// change.
func (x *executor) evaluate(r *round) {
	x.evaluateUpTo(r, len(r.live))
	if r.mode == baseBlind && r.seg[0].op.If.kind == driver.IfAbsent && !r.cur.exists && len(r.seg) > 1 {
		// Created if absent and deleted again: no write expresses that check, so the
		// if-absent put is written on its own.
		x.evaluateUpTo(r, 1)
	}
}

func (x *executor) evaluateUpTo(r *round, limit int) {
	l := r.l
	r.seg, r.changes, r.first, r.unsafe, r.writes, r.visible = r.live[:0], 0, -1, -1, false, false
	switch r.mode {
	case baseBlind:
		r.base = recState{}
	default:
		r.base = l.st
	}
	r.cur = r.base
	solo := l.soloUntil != nil && !l.soloUntil.settled
	for i, it := range r.live[:limit] {
		if i > 0 {
			if it.op.Kind == OpRead && r.changes > 0 {
				break
			}
			if solo && r.changes > 0 && it.op.Kind != OpRead && !(it.op.Kind == OpDelete && it.op.If.kind == driver.IfAbsent) {
				break
			}
			if it.endsSegmentBefore(r.changes) {
				break
			}
		}
		if r.mode == baseWarm && r.unsafe < 0 && it.epoch >= r.base.epoch {
			r.unsafe = i // queued after the call that taught the lane its state began
		}
		r.seg = r.live[:i+1]
		if r.mode == baseBlind && i == 0 {
			x.applyBlind(r, it)
		} else {
			x.apply(r, it)
		}
		it.changes = r.changes
		r.visible = r.visible || it.visible
		if it.endsSegmentAfter() {
			break
		}
	}
	if r.changes == 0 || (r.mode != baseBlind && !r.base.exists && !r.cur.exists) {
		return // nothing to store: the state the segment ends in is the state it started from
	}
	var cond driver.Condition
	switch {
	case r.mode == baseBlind:
		cond = condition(r.seg[0].op.If)
	case r.base.exists:
		cond = driver.Condition{Kind: driver.IfRevision, Revision: r.base.rev}
	default:
		cond = driver.Condition{Kind: driver.IfAbsent}
	}
	r.write = driver.Write{Kind: driver.Delete, Addr: l.addr.driver(), Cond: cond}
	if r.cur.exists {
		r.write = driver.Write{Kind: driver.Put, Addr: l.addr.driver(), Doc: driver.Document(r.cur.doc), Cond: cond}
	}
	r.writes = true
}

// applyBlind runs the segment's first operation, a put or delete whose outcome only its write
// will tell.
func (x *executor) applyBlind(r *round, it *item) {
	r.changes, r.first = 1, 0
	if it.op.Kind == OpPut {
		r.cur = recState{known: true, exists: true, doc: it.op.Doc}
	} else {
		r.cur = recState{known: true}
	}
	it.tent = Result{}
}

// apply runs one operation on the segment's current state and records its tentative result.
func (x *executor) apply(r *round, it *item) {
	op := &it.op
	cur := &r.cur
	unchangedRev := func() []byte { // the revision of the state as it is now, if it is stored
		if r.changes == 0 {
			return cur.rev
		}
		return nil // decided after the write (see conclude)
	}
	change := func(next recState, res Result) {
		if r.first < 0 {
			r.first = len(r.seg) - 1
		}
		r.changes++
		*cur = next
		it.tent = res
	}
	fail := func(err *Error) { it.tent = Result{Err: err} }
	switch op.Kind {
	case OpRead:
		if cur.exists {
			it.tent = Result{Outcome: Found, Doc: cur.doc, Revision: revisionOf(cur.rev)}
		} else {
			it.tent = Result{Outcome: Absent}
		}
	case OpPut, OpDelete:
		switch op.If.kind {
		case driver.IfAbsent:
			if cur.exists {
				fail(newOpError(KindAlreadyExists, op.Kind, op.Addr, "the record exists"))
				return
			}
			if op.Kind == OpDelete { // a check that writes nothing
				it.tent = Result{Outcome: Absent}
				return
			}
		case driver.IfRevision:
			if !cur.exists || r.changes > 0 || !bytes.Equal(cur.rev, op.If.rev.bytes()) {
				msg := "the record is at another revision"
				if !cur.exists {
					msg = "the record does not exist"
				}
				fail(newOpError(KindConflict, op.Kind, op.Addr, msg))
				return
			}
		}
		if op.Kind == OpPut {
			out := Updated
			if !cur.exists {
				out = Created
			}
			change(recState{known: true, exists: true, doc: op.Doc}, Result{Outcome: out})
			return
		}
		if !cur.exists {
			it.tent = Result{Outcome: Absent}
			return
		}
		change(recState{known: true}, Result{Outcome: Deleted})
	case OpMerge:
		x.merge(r, it, unchangedRev, change, fail)
	}
}

func (x *executor) merge(r *round, it *item, unchangedRev func() []byte, change func(recState, Result), fail func(*Error)) {
	s, op, cur := x.s, &it.op, &r.cur
	it.attempt++
	if it.start.IsZero() {
		it.start = time.Now()
	}
	var current *Document
	if cur.exists {
		d := cur.doc
		current = &d
	}
	ctx := it.ctx
	if ctx == nil {
		ctx = s.base
	}
	out, err := s.opts.Merger.Merge(ctx, &MergeCall{
		Program:  op.Program,
		Current:  current,
		Incoming: op.Doc,
		Context:  MergeContext{Addr: op.Addr, Time: x.in.mergeTime(it.now), Attempt: it.attempt},
	})
	if err != nil {
		kind := KindOf(err)
		if kind == KindInternal && !errors.As(err, new(*driver.Error)) && !errors.As(err, new(*Error)) {
			kind = KindInvalid // a program failing on its input fails again on a retry
		}
		fail(&Error{Kind: kind, Op: OpMerge, Addr: op.Addr, Err: err})
		return
	}
	switch out.Action {
	case MergeWrite:
		if err := validateDocument(out.Doc, s.opts.MaxDocumentBytes); err != nil {
			e := opError(OpMerge, op.Addr, err)
			e.Err = errors.New("the merge program's result: " + e.Err.Error())
			fail(e)
			return
		}
		outcome := Updated
		if !cur.exists {
			outcome = Created
		}
		change(recState{known: true, exists: true, doc: out.Doc}, Result{Outcome: outcome, Doc: out.Doc})
	case MergeDelete:
		if !cur.exists {
			it.tent = Result{Outcome: Absent}
			return
		}
		change(recState{known: true}, Result{Outcome: Deleted})
	case MergeUnchanged:
		if !cur.exists {
			it.tent = Result{Outcome: Absent}
		} else {
			it.tent = Result{Outcome: Unchanged, Doc: cur.doc, Revision: revisionOf(unchangedRev())}
		}
	default:
		fail(newOpError(KindInvalid, OpMerge, op.Addr, "the merger returned an unknown action"))
	}
}

// conclude settles what the round decided for one lane and leaves the rest queued. It returns
// how many merges run again because another writer changed the record first.
func (x *executor) conclude(r *round) (requeued int) {
	l := r.l
	if len(r.live) == 0 || r.aborted {
		x.requeue(r)
		return 0
	}
	if r.readErr != nil {
		// Every queued operation needs the backend the read could not reach; they fail
		// together rather than one read attempt after another.
		for _, it := range r.live {
			it.fail(opError(it.op.Kind, it.op.Addr, r.readErr))
		}
		x.requeue(r)
		return 0
	}
	n := len(r.seg)
	if !r.writes {
		if r.unsafe >= 0 {
			// Nothing was written, so nothing proved the remembered state current for the
			// operations queued after it was learned: they run again on a fresh read.
			n = r.unsafe
			l.needFresh = true
		}
		for _, it := range r.seg[:n] {
			x.settleTentative(r, it, nil)
		}
		x.requeue(r)
		return 0
	}
	wr := r.wres
	if wr.Err == nil {
		if r.mode == baseBlind {
			// The write's outcome tells whether the record existed before it, and so what
			// the first operation did.
			first := r.seg[0]
			existed := wr.Outcome == driver.Updated || wr.Outcome == driver.Deleted
			switch {
			case first.op.Kind == OpPut && existed:
				first.tent = Result{Outcome: Updated}
			case first.op.Kind == OpPut:
				first.tent = Result{Outcome: Created}
			case existed:
				first.tent = Result{Outcome: Deleted}
			default:
				first.tent = Result{Outcome: Absent}
			}
		}
		for _, it := range r.seg {
			x.settleTentative(r, it, wr.Revision)
		}
		l.st = recState{known: true, exists: r.cur.exists, doc: r.cur.doc, rev: wr.Revision, epoch: r.epoch}
		l.needFresh, l.conflicts = false, 0
		x.requeue(r)
		return 0
	}
	l.st = recState{}
	kind := ErrorKind(driver.KindOf(wr.Err))
	from := r.first // the operations the failed write carried: the first change and after
	if r.mode == baseWarm {
		from = 0 // a remembered state proved stale or unproved: nothing before counts either
	}
	for _, it := range r.seg[:from] {
		x.settleTentative(r, it, nil)
	}
	switch {
	case kind == KindConflict || kind == KindAlreadyExists:
		if r.mode == baseBlind {
			// The first operation's own precondition failed; the rest never ran.
			first := r.seg[0]
			first.fail(opError(first.op.Kind, first.op.Addr, wr.Err))
			x.requeue(r)
			return 0
		}
		// Another writer changed the record between the read and the write: everything the
		// write carried runs again on a fresh read, merges within their budget.
		kept := r.seg[from:n:n]
		for _, it := range kept {
			if it.op.Kind != OpMerge {
				continue
			}
			if time.Since(it.start) >= x.s.opts.MergeBudget {
				x.s.opts.Logger.Warn("store: merge gave up: the record kept changing",
					slog.String("store", x.in.name), slog.String("address", it.op.Addr.String()), slog.Int("attempts", it.attempt))
				it.fail(&Error{Kind: KindConflict, Op: OpMerge, Addr: it.op.Addr, Err: errors.New("the record kept changing under the merge; gave up after its retry budget")})
				continue
			}
			requeued++
		}
		l.conflicts++
		l.retryAt = time.Now().Add(x.s.backoff(l.conflicts))
		x.requeue(r)
		return requeued
	case (kind == KindInvalid || kind == KindTooLarge) && r.changes > 1:
		// The store refused the combined result; which operation made it unacceptable is
		// unknown, so these operations run again one write each.
		l.soloUntil = r.seg[n-1]
		x.requeue(r)
		return 0
	case kind == KindInvalid || kind == KindTooLarge:
		// One change: it is the one refused; what came after it ran on a state never stored.
		it := r.seg[r.first]
		it.fail(opError(it.op.Kind, it.op.Addr, wr.Err))
		x.requeue(r)
		return 0
	}
	// Unavailable after its retries, canceled, a missing dataset, an unknown outcome: every
	// operation the write carried shares its fate.
	for _, it := range r.seg[from:] {
		it.fail(opError(it.op.Kind, it.op.Addr, wr.Err))
	}
	x.requeue(r)
	return 0
}

// settleTentative settles an item with the result its segment computed, giving it the stored
// revision when the state it left is the one the write stored (no later change).
func (x *executor) settleTentative(r *round, it *item, stored []byte) {
	res := it.tent
	it.tent = Result{}
	if res.Err == nil && it.changes > 0 && res.Outcome != Deleted && res.Outcome != Absent {
		if it.changes == r.changes && stored != nil {
			res.Revision = revisionOf(stored)
		} else {
			res.Revision = Revision{} // a state later operations of its write replaced: never stored
		}
	}
	it.settle(res)
}

// requeue keeps the round's unsettled items, in order, for the front of the lane's queue
// (before what arrived meanwhile; see executor.drive).
func (x *executor) requeue(r *round) {
	var rest []*item
	for _, it := range r.live {
		if !it.settled {
			if rest == nil {
				rest = make([]*item, 0, len(r.live))
			}
			// No write that carried it can have applied it (an unknown outcome settles the
			// operations): until it is sent again, its caller may be told it was not.
			it.phase.CompareAndSwap(phaseSent, phaseQueued)
			it.tent = Result{}
			rest = append(rest, it)
		}
	}
	r.rest = rest
}

func condition(p Precondition) driver.Condition {
	return driver.Condition{Kind: p.kind, Revision: p.rev.bytes()}
}

// readWithRetry reads addrs, sending again the reads the adapter reported unavailable.
func (s *Service) readWithRetry(ctx context.Context, in *instance, addrs []driver.Address) []driver.ReadResult {
	return withRetry(ctx, s, in, CallRead, addrs, in.adapter.Read,
		func(r driver.ReadResult) error { return r.Err },
		func(err error) driver.ReadResult { return driver.ReadResult{Err: err} })
}

// writeWithRetry applies writes, sending again those the adapter reported unavailable: the
// driver contract says such a write had no effect, so sending it again cannot apply it twice.
func (s *Service) writeWithRetry(ctx context.Context, in *instance, writes []driver.Write, opts driver.WriteOptions) []driver.WriteResult {
	call := func(ctx context.Context, w []driver.Write) ([]driver.WriteResult, error) {
		return in.adapter.Write(ctx, w, opts)
	}
	return withRetry(ctx, s, in, CallWrite, writes, call,
		func(r driver.WriteResult) error { return r.Err },
		func(err error) driver.WriteResult { return driver.WriteResult{Err: err} })
}

// withRetry makes one adapter call for reqs and repeats it, with backoff, for the items that
// failed with KindUnavailable, up to RetryAttempts calls. A call-level error applies to every
// item of that call. Each call, and each resend, is reported to the Observer if there is one.
//
// When ctx has a deadline (the latest answer deadline of the callers served, see
// roundContext) every attempt ends by it, and no resend starts that cannot end before it: the
// time left after the backoff must cover at least the last attempt's duration. An item an
// attempt reports canceled because ctx reached that deadline is KindUnavailable: the store did
// not answer in time (see unanswered).
func withRetry[Req, Res any](ctx context.Context, s *Service, in *instance, kind CallKind, reqs []Req,
	call func(context.Context, []Req) ([]Res, error), errOf func(Res) error, failed func(error) Res) []Res {
	obs := s.opts.Observer
	out := make([]Res, len(reqs))
	idx := make([]int, len(reqs))
	for i := range idx {
		idx[i] = i
	}
	deadline, bounded := ctx.Deadline()
	for attempt := 1; ; attempt++ {
		batch := make([]Req, len(idx))
		for j, i := range idx {
			batch[j] = reqs[i]
		}
		var start time.Time
		if obs != nil || bounded {
			start = time.Now()
		}
		res, err := call(ctx, batch)
		if err == nil && len(res) != len(batch) {
			err = driver.NewError(driver.KindInternal, "adapter returned the wrong number of results", nil)
		}
		cut := bounded && deadlineCut(ctx)
		if cut {
			err = unanswered(err)
		}
		var stats AdapterCall
		var took time.Duration
		if obs != nil || bounded {
			took = time.Since(start)
		}
		if obs != nil {
			stats = AdapterCall{Store: in.name, Call: kind, Size: len(batch), Attempt: attempt, Duration: took, Err: err}
		}
		var again []int
		for j, i := range idx {
			if err != nil {
				out[i] = failed(err)
			} else {
				out[i] = res[j]
				if cut {
					if e := errOf(out[i]); e != nil && driver.KindOf(e) == driver.KindCanceled {
						out[i] = failed(unanswered(e))
					}
				}
			}
			e := errOf(out[i])
			if e == nil {
				stats.OK++
				continue
			}
			switch ErrorKind(driver.KindOf(e)) {
			case KindUnavailable:
				again = append(again, i)
				stats.Unavailable++
			case KindConflict, KindAlreadyExists:
				stats.Conflict++
			default:
				stats.Failed++
			}
		}
		if obs != nil {
			if err != nil {
				stats.OK, stats.Unavailable, stats.Conflict, stats.Failed = 0, 0, 0, 0
			}
			obs.AdapterCall(stats)
		}
		if len(again) == 0 || attempt >= s.opts.RetryAttempts {
			return out
		}
		wait := s.backoff(attempt)
		if bounded && time.Until(deadline) < wait+took {
			// A resend could not end before the callers' deadline: they get the
			// unavailable answer now, while they wait for it.
			return out
		}
		if sleep(ctx, wait) != nil {
			return out
		}
		if obs != nil {
			obs.Retry(Retry{Store: in.name, Reason: RetryUnavailable, Call: kind, Ops: len(again)})
		}
		idx = again
	}
}

// mergeTime is t as merge programs for this store see it: truncated to the precision the
// backend keeps (driver.TimePrecisioner), so a record stamped with it is stored exactly.
func (in *instance) mergeTime(t time.Time) time.Time {
	if in.timePrec > 0 {
		return t.Truncate(in.timePrec)
	}
	return t
}
