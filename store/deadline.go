package store

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/tributary-dev/tributary/store/driver"
)

// DefaultDeadlineReserve is Options.DeadlineReserve's default.
const DefaultDeadlineReserve = 50 * time.Millisecond

// An item's phase says who may still decide what its caller is told. The executor claims a
// write (phaseSent) before an adapter call carries it; the caller's waiter, when the call's
// answer deadline comes first, cuts the item: a write never claimed is told it was not applied
// (phaseCutUnsent, KindUnavailable), one claimed is told its outcome is unknown (phaseCutSent,
// KindOutcomeUnknown). The executor never sends a cut item. settle ends every item
// (phaseSettled) once its result is stored, cut or not.
const (
	phaseQueued uint32 = iota
	phaseSent
	phaseCutUnsent
	phaseCutSent
	phaseSettled
)

// errCallersDeadline is the cause of a round's adapter context ending at the latest answer
// deadline of the callers it serves.
var errCallersDeadline = errors.New("the callers' deadline came")

// deadlineError is the cause of an operation cut at its call's answer deadline.
type deadlineError struct {
	store string
	op    OpKind
	sent  bool // a write an adapter call carried: it may have been applied
}

func (e deadlineError) Error() string {
	switch {
	case e.sent && e.op != OpRead:
		return "store " + e.store + " did not answer before the call's deadline; the write was sent and may have been applied, and may still be"
	case e.op == OpRead:
		return "store " + e.store + " did not answer before the call's deadline"
	}
	return "store " + e.store + " did not answer before the call's deadline; the write was not sent"
}

// answerBy returns when a call under ctx must have its answer: ctx's deadline less the
// reserve the answer needs to reach the caller (Options.DeadlineReserve, at most a tenth of
// the time left). Zero when ctx has no deadline.
func (s *Service) answerBy(ctx context.Context) time.Time {
	d, ok := ctx.Deadline()
	if !ok {
		return time.Time{}
	}
	r := min(s.opts.DeadlineReserve, time.Until(d)/10)
	return d.Add(-max(r, 0))
}

// claim marks the writes of a round's segment as sent, before the write call carries them. It
// reports false when a caller cut one of them meanwhile: the segment must not be written as it
// was evaluated, and what it claimed is released.
func (r *round) claim() bool {
	for i, it := range r.seg {
		if it.op.Kind == OpRead || it.phase.CompareAndSwap(phaseQueued, phaseSent) || it.phase.Load() == phaseSent {
			continue
		}
		for _, c := range r.seg[:i] {
			c.phase.CompareAndSwap(phaseSent, phaseQueued)
		}
		return false
	}
	return true
}

// gone says whether nobody waits for the item any more: its caller's context ended, or its
// call was answered at its deadline.
func (it *item) gone() bool {
	if p := it.phase.Load(); p == phaseCutUnsent || p == phaseCutSent {
		return true
	}
	return it.ctx != nil && it.ctx.Err() != nil
}

// goneErr is the failure a dropped item settles with (nobody reads it but the late-outcome
// report).
func (it *item) goneErr() *Error {
	if it.ctx != nil && it.ctx.Err() != nil {
		return opError(it.op.Kind, it.op.Addr, it.ctx.Err())
	}
	return &Error{Kind: KindUnavailable, Op: it.op.Kind, Addr: it.op.Addr, Err: deadlineError{store: it.op.Addr.Store, op: it.op.Kind}}
}

// cut answers the item at its call's deadline: its result when it has settled, else what its
// caller can be told now -- KindUnavailable for a read, or a write no adapter call carried,
// KindOutcomeUnknown for a write one did.
func (it *item) cut() Result {
	for {
		switch p := it.phase.Load(); p {
		case phaseSettled:
			return *it.res
		case phaseQueued, phaseSent:
			next := phaseCutUnsent
			if p == phaseSent {
				next = phaseCutSent
			}
			if !it.phase.CompareAndSwap(p, next) {
				continue
			}
			e := deadlineError{store: it.op.Addr.Store, op: it.op.Kind, sent: p == phaseSent}
			kind := KindUnavailable
			if e.sent && it.op.Kind != OpRead {
				kind = KindOutcomeUnknown
			}
			return Result{Err: &Error{Kind: kind, Op: it.op.Kind, Addr: it.op.Addr, Err: e}}
		default: // cut already (a call answers once)
			return Result{Err: &Error{Kind: KindOutcomeUnknown, Op: it.op.Kind, Addr: it.op.Addr, Err: deadlineError{store: it.op.Addr.Store, op: it.op.Kind, sent: true}}}
		}
	}
}

// await waits for c and returns the results copied from out, where the operations settle.
// When the call's answer deadline (by, zero for none) comes first -- or ctx's deadline -- it
// answers every operation at once (see item.cut) and the rest settle in out, unseen; when ctx
// is canceled first it returns ctx's error.
func (s *Service) await(ctx context.Context, c *call, items []item, results, out []Result, by time.Time) ([]Result, error) {
	cut, err := wait(ctx, c, by)
	switch {
	case err != nil:
		return nil, err
	case !cut:
		copy(results, out)
		return results, nil
	}
	n := 0
	for i := range items {
		results[i] = items[i].cut()
		if errors.As(results[i].Err, new(deadlineError)) {
			n++
		}
	}
	if n > 0 {
		s.reportCut(items[0].op.Addr.Store, n)
	}
	return results, nil
}

// wait waits for c. It reports cut when the answer deadline by (zero for none) or ctx's
// deadline comes first, and ctx's error when ctx is canceled first.
func wait(ctx context.Context, c *call, by time.Time) (cut bool, err error) {
	var timer <-chan time.Time
	if !by.IsZero() {
		t := time.NewTimer(time.Until(by))
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-c.done:
		return false, nil
	case <-timer:
	case <-ctx.Done():
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return false, ctx.Err()
		}
	}
	select {
	case <-c.done: // settled meanwhile
		return false, nil
	default:
		return true, nil
	}
}

// reportCut tells the Observer, when it implements DeadlineObserver, of operations answered
// at their call's deadline.
func (s *Service) reportCut(store string, n int) {
	if o, ok := s.opts.Observer.(DeadlineObserver); ok {
		o.DeadlineCut(DeadlineCut{Store: store, Ops: n})
	}
}

// settledLate reports an operation that settled after its caller was answered at the deadline
// with KindOutcomeUnknown: what it did in the end (the caller was told it may have been
// applied; this says whether it was).
func (s *Service) settledLate(it *item, r Result) {
	var kind ErrorKind
	if r.Err != nil {
		kind = KindOf(r.Err)
	}
	if o, ok := s.opts.Observer.(DeadlineObserver); ok {
		o.LateOutcome(LateOutcome{Store: it.op.Addr.Store, Op: it.op.Kind, Outcome: r.Outcome, Err: kind})
	}
	s.opts.Logger.Debug("store: an operation answered as outcome-unknown at its deadline settled later",
		slog.String("store", it.op.Addr.Store), slog.String("address", it.op.Addr.String()), slog.Bool("applied", r.Err == nil))
}

// DeadlineObserver is an Observer that also hears of deadline cuts. The Service calls its
// methods only when the configured Observer implements it.
type DeadlineObserver interface {
	// DeadlineCut reports operations answered at their call's answer deadline, before they
	// settled (KindUnavailable or KindOutcomeUnknown; see Options.DeadlineReserve).
	DeadlineCut(DeadlineCut)
	// LateOutcome reports a write answered KindOutcomeUnknown at its deadline that settled
	// afterwards: whether it was applied in the end.
	LateOutcome(LateOutcome)
}

// DeadlineCut describes operations of one call answered at its deadline.
type DeadlineCut struct {
	Store string
	Ops   int
}

// LateOutcome is the final result of a write whose caller was told its outcome is unknown:
// Err is 0 when it was applied (Outcome says how), else the kind of its failure.
type LateOutcome struct {
	Store   string
	Op      OpKind
	Outcome Outcome
	Err     ErrorKind
}

// latest returns the latest answer deadline of the items, or zero when one of them has none:
// the bound of an adapter call made for all of them.
func latest(items []*item, d time.Time, some bool) (time.Time, bool) {
	for _, it := range items {
		if it.cutAt.IsZero() {
			return time.Time{}, false
		}
		if !some || it.cutAt.After(d) {
			d, some = it.cutAt, true
		}
	}
	return d, some
}

// roundContext returns the context of a round's adapter calls: the Service's, ended at the
// latest answer deadline of the operations the round serves when every one has one.
func (s *Service) roundContext(work []*round) (context.Context, context.CancelFunc) {
	var d time.Time
	some := false
	for _, r := range work {
		var ok bool
		if d, ok = latest(r.live, d, some); !ok && len(r.live) > 0 {
			return s.base, func() {}
		}
		some = some || ok
	}
	if !some {
		return s.base, func() {}
	}
	return context.WithDeadlineCause(s.base, d, errCallersDeadline)
}

// deadlineCut reports whether ctx ended at its callers' deadline (see roundContext).
func deadlineCut(ctx context.Context) bool {
	return ctx.Err() != nil && errors.Is(context.Cause(ctx), errCallersDeadline)
}

// unanswered turns an item failure an adapter reported as canceled, because the round's
// callers' deadline ended its call, into KindUnavailable: no caller canceled anything; the
// store did not answer in time, and a canceled write was not sent.
func unanswered(err error) error {
	if err == nil || driver.KindOf(err) != driver.KindCanceled {
		return err
	}
	return driver.NewError(driver.KindUnavailable, "the store did not answer before the callers' deadline", err)
}
