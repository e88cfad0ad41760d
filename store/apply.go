package store

import (
	"context"
)

// Apply runs accepted-mode writes a queue delivered, on the synchronous path: it is Do with
// WaitApplied -- the same validation, per-record lanes and combining, adapter batches, merge
// loop and retries -- with two differences that make it an entry point for a queue worker
// (package store/worker uses ApplyInOrder, which also keeps a failure from being overtaken):
//
//   - a merge sees the time its operation was accepted as MergeContext.Time, so a merge applied
//     later, or again after a redelivery, runs with the context it was accepted with;
//   - the operations are independent, not one request: an invalid one (a store this service
//     does not configure, a read, a bad document) fails on its own, in its Result, and the
//     others run. Operations on one record still run in the order of ops.
//
// There is no limit on len(ops). The error is for the whole call: ErrClosed after Close, or
// ctx's error when ctx ended before the call finished (operations already sent may still take
// effect, as with Do).
func (s *Service) Apply(ctx context.Context, ops []QueuedOp) ([]Result, error) {
	return s.applyQueued(ctx, ops, false)
}

// applyQueued is Apply, and ApplyInOrder when inOrder is set.
func (s *Service) applyQueued(ctx context.Context, ops []QueuedOp, inOrder bool) ([]Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !s.enter() {
		return nil, ErrClosed
	}
	defer s.inflight.Done()
	results := make([]Result, len(ops))
	out := make([]Result, len(ops))
	c := newCall(len(ops))
	by := s.answerBy(ctx)
	if !by.IsZero() {
		c.s = s
	}
	// One array of items and, per store, one list sized for the rest of the records: a worker
	// applies hundreds of records per call, usually of one store.
	items := make([]item, len(ops))
	byStore := make(map[*instance][]*item, 1)
	var chains orderChains
	if inOrder {
		chains = make(orderChains, len(ops))
	}
	for i := range ops {
		it := &items[i]
		*it = item{op: ops[i].Op, res: &out[i], call: c, ctx: ctx, now: ops[i].AcceptedAt, cutAt: by}
		if inOrder && chains.link(it) {
			continue // held back behind a failed operation on its record
		}
		if it.op.Kind == OpRead {
			it.fail(newOpError(KindInvalid, OpRead, it.op.Addr, "a queued operation is a write, not a read"))
			continue
		}
		if err := s.validateOp(&it.op); err != nil {
			it.fail(err)
			continue
		}
		in := s.stores[it.op.Addr.Store]
		list := byStore[in]
		if list == nil {
			list = make([]*item, 0, len(ops)-i)
		}
		byStore[in] = append(list, it)
	}
	s.runStores(byStore)
	return s.await(ctx, c, items, results, out, by)
}
