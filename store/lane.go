package store

import (
	"time"
)

// A lane serializes one record's operations within this Service. Every path that applies
// operations (explicit requests, coalesced batches, Apply) queues them on their record's lane;
// the executor that created the lane owns it and runs what is queued, round after round, until
// the queue is empty and it removes the lane. An executor that finds a lane owned by another
// leaves its operations there for the owner: so operations on one record run one after
// another, in the order they were queued, and one process never races itself through
// compare-and-set. In each round the owner runs the queued operations as one segment on the
// state in memory (see executor.evaluate) and stores the segment's result with one
// conditional write: a hot record costs one round trip per round, not one per operation.
type lane struct {
	addr  Address
	owner *executor

	// guarded by instance.laneMu
	queue []*item
	one   [1]*item // queue's first backing array: most lanes hold one operation
	epoch uint64   // advanced for every round; an item records it when queued

	// owner only
	st        recState // what the lane learned of the record, from its last read or write
	needFresh bool     // st may not answer the queued operations: read before using it
	retryAt   time.Time
	conflicts int   // consecutive rounds that lost their compare-and-set to another writer
	soloUntil *item // until it settles, segments end before their second change (see conclude)
}

// recState is a record's state as a lane knows it. epoch is the lane's epoch of the round whose
// adapter call returned it: the operations queued before that round (item.epoch < epoch) were
// waiting before the call began, so the state is a valid answer for them.
type recState struct {
	known  bool
	exists bool
	doc    Document
	rev    []byte
	epoch  uint64
}

// executor runs the lanes it owns for one batch of operations of one store.
type executor struct {
	s     *Service
	in    *instance
	lanes []*lane
}

// execute queues items on their records' lanes, in order, and runs the lanes it came to own
// until they are empty. Items queued on lanes other executors own are settled by those: the
// caller waits for its items through their calls, not for execute.
func (s *Service) execute(in *instance, items []*item) {
	x := &executor{s: s, in: in, lanes: make([]*lane, 0, len(items))}
	var slab []lane // lanes are allocated a few at a time: most calls touch distinct records
	in.laneMu.Lock()
	for i, it := range items {
		l := in.lanes[it.op.Addr]
		if l == nil {
			if len(slab) == 0 {
				slab = make([]lane, min(len(items)-i, 32))
			}
			l = &slab[0]
			slab = slab[1:]
			l.addr, l.owner = it.op.Addr, x
			l.queue = l.one[:0]
			in.lanes[it.op.Addr] = l
			x.lanes = append(x.lanes, l)
		}
		it.epoch = l.epoch
		l.queue = append(l.queue, it)
	}
	in.laneMu.Unlock()
	x.drive()
}

// drive runs rounds over the executor's lanes that have work and are not backing off after a
// lost compare-and-set, and releases each lane once its queue is empty.
func (x *executor) drive() {
	in := x.in
	var work []*round
	var slots []round // reused from round to round
	for len(x.lanes) > 0 {
		now := time.Now()
		var wake time.Time
		work = work[:0]
		if cap(slots) < len(x.lanes) {
			slots = make([]round, len(x.lanes))
		}
		slots = slots[:0]
		in.laneMu.Lock()
		keep := x.lanes[:0]
		for _, l := range x.lanes {
			if len(l.queue) == 0 {
				delete(in.lanes, l.addr)
				continue
			}
			keep = append(keep, l)
			if now.Before(l.retryAt) && x.s.base.Err() == nil {
				if wake.IsZero() || l.retryAt.Before(wake) {
					wake = l.retryAt
				}
				continue
			}
			l.epoch++
			slots = append(slots, round{l: l, q: l.queue, epoch: l.epoch})
			work = append(work, &slots[len(slots)-1])
		}
		for i := len(keep); i < len(x.lanes); i++ {
			x.lanes[i] = nil
		}
		x.lanes = keep
		in.laneMu.Unlock()
		if len(work) == 0 {
			if len(x.lanes) > 0 {
				_ = sleep(x.s.base, time.Until(wake))
			}
			continue
		}
		x.runRound(work)
		in.laneMu.Lock()
		for _, r := range work {
			l := r.l
			arrived := l.queue[len(r.q):]
			if len(r.rest) == 0 {
				l.queue = append(l.queue[:0:0], arrived...)
				continue
			}
			l.queue = append(r.rest, arrived...)
		}
		in.laneMu.Unlock()
	}
}
