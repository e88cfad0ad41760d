package store

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/tributary-dev/tributary/store/driver"
)

// item is one operation on its way through a store: the op, where its result goes, and the
// state of a merge between attempts.
type item struct {
	op      Op
	res     *Result
	now     time.Time
	visible bool

	attempt int       // merge runs so far
	current *Document // merge: the record read this round (nil when absent)
	curRev  []byte
}

func (it *item) fail(err *Error) { *it.res = Result{Err: err} }

// run executes the items of one store in dependency waves: the k-th operation on an address goes
// to wave k, so operations on one record keep their request order while a wave holds at most
// one operation per record and runs as one batch.
func (s *Service) run(ctx context.Context, in *instance, items []*item) {
	var waves [][]*item
	seen := make(map[Address]int, len(items))
	for _, it := range items {
		w := seen[it.op.Addr]
		seen[it.op.Addr] = w + 1
		if w == len(waves) {
			waves = append(waves, nil)
		}
		waves[w] = append(waves[w], it)
	}
	for _, wave := range waves {
		s.runWave(ctx, in, wave)
	}
}

// runWave runs operations on distinct records: one read round for reads and merges, one write
// round for puts, deletes and merge results, then again for the merges whose conditional write
// lost a race, with backoff, until they succeed or run out of attempts.
func (s *Service) runWave(ctx context.Context, in *instance, wave []*item) {
	todo := wave
	for round := 0; len(todo) > 0; round++ {
		if round > 0 {
			if err := sleep(ctx, s.backoff(round)); err != nil {
				for _, it := range todo {
					it.fail(opError(it.op.Kind, it.op.Addr, err))
				}
				return
			}
		}
		s.readRound(ctx, in, todo)
		var writes []driver.Write
		var writers []*item
		for _, it := range todo {
			if it.res.Err != nil || it.res.Outcome != 0 {
				continue // settled by the read round
			}
			w, ok := s.prepareWrite(ctx, in, it)
			if ok {
				writes = append(writes, w)
				writers = append(writers, it)
			}
		}
		todo = todo[:0:0]
		if len(writes) == 0 {
			return
		}
		visible := false
		for _, it := range writers {
			visible = visible || it.visible
		}
		results := s.writeWithRetry(ctx, in, writes, driver.WriteOptions{Visible: visible})
		requeued := 0
		for i, it := range writers {
			r := results[i]
			if r.Err != nil {
				k := driver.KindOf(r.Err)
				if it.op.Kind == OpMerge && (k == KindConflict || k == KindAlreadyExists) && it.attempt < s.opts.MergeAttempts {
					*it.res = Result{}
					todo = append(todo, it) // another writer changed the record: merge again
					requeued++
					continue
				}
				if it.op.Kind == OpMerge && (k == KindConflict || k == KindAlreadyExists) {
					s.opts.Logger.Warn("store: merge gave up: the record kept changing",
						slog.String("store", in.name), slog.String("address", it.op.Addr.String()), slog.Int("attempts", it.attempt))
					it.fail(&Error{Kind: KindConflict, Op: OpMerge, Addr: it.op.Addr, Err: errors.New("the record kept changing under the merge; gave up after the last attempt")})
					continue
				}
				it.fail(opError(it.op.Kind, it.op.Addr, r.Err))
				continue
			}
			res := Result{Outcome: r.Outcome, Revision: revisionOf(r.Revision)}
			if it.op.Kind == OpMerge && writes[i].Kind == driver.Put {
				res.Doc = writes[i].Doc
			}
			*it.res = res
		}
		if obs := s.opts.Observer; obs != nil && requeued > 0 {
			obs.Retry(Retry{Store: in.name, Reason: RetryMergeConflict, Call: CallWrite, Ops: requeued})
		}
	}
}

// readRound reads the records the items need: reads, merges and if-absent deletes. It settles
// reads and if-absent deletes, and loads merges' current state.
func (s *Service) readRound(ctx context.Context, in *instance, todo []*item) {
	var addrs []Address
	var readers []*item
	for _, it := range todo {
		if it.op.Kind == OpRead || it.op.Kind == OpMerge || (it.op.Kind == OpDelete && it.op.If.kind == driver.IfAbsent) {
			addrs = append(addrs, it.op.Addr)
			readers = append(readers, it)
		}
	}
	if len(addrs) == 0 {
		return
	}
	results := s.readWithRetry(ctx, in, addrs)
	for i, it := range readers {
		r := results[i]
		if r.Err != nil {
			it.fail(opError(it.op.Kind, it.op.Addr, r.Err))
			continue
		}
		switch it.op.Kind {
		case OpRead:
			if r.Found {
				*it.res = Result{Outcome: Found, Doc: r.Doc, Revision: revisionOf(r.Revision)}
			} else {
				*it.res = Result{Outcome: NotFound}
			}
		case OpDelete: // IfAbsent: a check that writes nothing
			if r.Found {
				it.fail(newOpError(KindAlreadyExists, OpDelete, it.op.Addr, "the record exists"))
			} else {
				*it.res = Result{Outcome: NotFound}
			}
		case OpMerge:
			it.current, it.curRev = nil, nil
			if r.Found {
				doc := r.Doc
				it.current, it.curRev = &doc, r.Revision
			}
		}
	}
}

// prepareWrite turns a put or delete into its write, and runs a merge's program to decide its
// write. ok is false when the item is settled without a write.
func (s *Service) prepareWrite(ctx context.Context, in *instance, it *item) (w driver.Write, ok bool) {
	op := it.op
	switch op.Kind {
	case OpPut:
		return driver.Write{Kind: driver.Put, Addr: op.Addr, Doc: op.Doc, Cond: condition(op.If)}, true
	case OpDelete:
		return driver.Write{Kind: driver.Delete, Addr: op.Addr, Cond: condition(op.If)}, true
	}
	it.attempt++
	out, err := s.opts.Merger.Merge(ctx, &MergeCall{
		Program:  op.Program,
		Current:  it.current,
		Incoming: op.Doc,
		Context:  MergeContext{Addr: op.Addr, Time: in.mergeTime(it.now), Attempt: it.attempt},
	})
	if err != nil {
		kind := KindOf(err)
		if kind == KindInternal && !errors.As(err, new(*driver.Error)) && !errors.As(err, new(*Error)) {
			kind = KindInvalid // a program failing on its input fails again on a retry
		}
		it.fail(&Error{Kind: kind, Op: OpMerge, Addr: op.Addr, Err: err})
		return w, false
	}
	cond := driver.Condition{Kind: driver.IfAbsent}
	if it.current != nil {
		cond = driver.Condition{Kind: driver.IfRevision, Revision: it.curRev}
	}
	switch out.Action {
	case MergeWrite:
		if err := validateDocument(out.Doc, s.opts.MaxDocumentBytes); err != nil {
			e := opError(OpMerge, op.Addr, err)
			e.Err = errors.New("the merge program's result: " + e.Err.Error())
			it.fail(e)
			return w, false
		}
		return driver.Write{Kind: driver.Put, Addr: op.Addr, Doc: out.Doc, Cond: cond}, true
	case MergeDelete:
		if it.current == nil {
			*it.res = Result{Outcome: NotFound}
			return w, false
		}
		return driver.Write{Kind: driver.Delete, Addr: op.Addr, Cond: cond}, true
	case MergeUnchanged:
		if it.current == nil {
			*it.res = Result{Outcome: NotFound}
		} else {
			*it.res = Result{Outcome: Unchanged, Doc: *it.current, Revision: revisionOf(it.curRev)}
		}
		return w, false
	}
	it.fail(newOpError(KindInvalid, OpMerge, op.Addr, "the merger returned an unknown action"))
	return w, false
}

func condition(p Precondition) driver.Condition {
	return driver.Condition{Kind: p.kind, Revision: p.rev.bytes()}
}

// readWithRetry reads addrs, sending again the reads the adapter reported unavailable.
func (s *Service) readWithRetry(ctx context.Context, in *instance, addrs []Address) []driver.ReadResult {
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
func withRetry[Req, Res any](ctx context.Context, s *Service, in *instance, kind CallKind, reqs []Req,
	call func(context.Context, []Req) ([]Res, error), errOf func(Res) error, failed func(error) Res) []Res {
	obs := s.opts.Observer
	out := make([]Res, len(reqs))
	idx := make([]int, len(reqs))
	for i := range idx {
		idx[i] = i
	}
	for attempt := 1; ; attempt++ {
		batch := make([]Req, len(idx))
		for j, i := range idx {
			batch[j] = reqs[i]
		}
		var start time.Time
		if obs != nil {
			start = time.Now()
		}
		res, err := call(ctx, batch)
		if err == nil && len(res) != len(batch) {
			err = driver.NewError(driver.KindInternal, "adapter returned the wrong number of results", nil)
		}
		var stats AdapterCall
		if obs != nil {
			stats = AdapterCall{Store: in.name, Call: kind, Size: len(batch), Attempt: attempt, Duration: time.Since(start), Err: err}
		}
		var again []int
		for j, i := range idx {
			if err != nil {
				out[i] = failed(err)
			} else {
				out[i] = res[j]
			}
			e := errOf(out[i])
			if e == nil {
				stats.OK++
				continue
			}
			switch driver.KindOf(e) {
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
		if len(again) == 0 || attempt >= s.opts.RetryAttempts || sleep(ctx, s.backoff(attempt)) != nil {
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
