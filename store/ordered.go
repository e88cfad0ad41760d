package store

import (
	"context"
	"errors"
)

// ErrHeldBack is the cause of an operation ApplyInOrder did not run because an earlier
// operation on its record, in the same call, failed. Its *Error has KindUnavailable: the
// operation certainly had no effect, and running it again -- after the one that failed --
// may succeed.
var ErrHeldBack = errors.New("held back: an earlier operation on its record failed")

// ApplyInOrder is Apply for a queue worker that must not let a record's operations overtake
// one that failed: the operations of one address, in the order of ops, form a chain, and
// once one of them fails -- on validation, tentatively in its round, or with the write that
// carried it -- the later ones of its address are not run. They fail with ErrHeldBack
// (errors.Is; kind KindUnavailable), so the caller can deal with the failure first (retry
// it, dead-letter it) and then hand them over again. Operations of other addresses are not
// held up.
//
// Everything else is Apply: the operations are queued on their records' lanes, so a record's
// operations run as segments, each stored with ONE conditional write (see "Combining" in the
// package documentation): a record with many queued operations costs a round trip per
// round, not one per operation. Two rules keep the chain's contract within a segment: a
// segment ends at an operation of the chain that fails (what came before it is written,
// nothing after it runs), and a put or delete of the chain after a change starts a segment
// of its own, so every state a client wrote whole is stored, in queue order, as when each was
// applied on its own (merges, whose states are the Service's computation, combine).
func (s *Service) ApplyInOrder(ctx context.Context, ops []QueuedOp) ([]Result, error) {
	return s.applyQueued(ctx, ops, true)
}

// orderChains links the operations of one ApplyInOrder call per address: the last operation
// seen of each.
type orderChains map[Address]*item

// link makes it the next operation of its address's chain. It reports true when it was held
// back at once, because an earlier operation of its address already failed (validation).
func (c orderChains) link(it *item) (held bool) {
	it.inOrder = true
	prev := c[it.op.Addr]
	c[it.op.Addr] = it
	if prev == nil {
		return false
	}
	if prev.settled && prev.res.Err != nil {
		it.fail(heldBack(it))
		return true
	}
	prev.next = it
	return false
}

// holdBack settles the operations after it in its chain, it having failed: none of them ran.
// It runs on the goroutine that settled it, which owns their lane: a chain's operations are
// queued on one lane together. One pass down the chain: each link is cut before its operation
// settles, so settle does not hold back the rest again (no recursion, no second walk).
func (it *item) holdBack() {
	n := it.next
	it.next = nil
	for n != nil {
		next := n.next
		n.next = nil
		if !n.settled {
			n.settle(Result{Err: heldBack(n)})
		}
		n = next
	}
}

func heldBack(it *item) *Error {
	return &Error{Kind: KindUnavailable, Op: it.op.Kind, Addr: it.op.Addr, Err: ErrHeldBack}
}

// endsSegmentBefore says whether an operation of a chain starts a segment of its own after
// changes in the segment so far: a put or delete, whose state a client wrote whole.
func (it *item) endsSegmentBefore(changes int) bool {
	return it.inOrder && changes > 0 && (it.op.Kind == OpPut || it.op.Kind == OpDelete)
}

// endsSegmentAfter says whether the segment ends with this operation: one of a chain that
// failed in the segment, so nothing after it runs.
func (it *item) endsSegmentAfter() bool {
	return it.inOrder && it.tent.Err != nil
}
