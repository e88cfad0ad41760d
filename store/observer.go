package store

import "time"

// Observer receives measurements of a Service's work per store instance, for metrics. The
// Service calls it from its own goroutines, concurrently and on the hot path: every method
// must return quickly, must not block, and must not call back into the Service. Embed
// NopObserver to implement only some methods (and to keep compiling when methods are added).
// With no Observer configured nothing is measured and nothing is allocated for it.
type Observer interface {
	// AdapterCall reports one call to a store's adapter, after it returned: what coalescing
	// and dependency waves made of the requests.
	AdapterCall(AdapterCall)
	// CoalescedBatch reports a batch a store's coalescer formed from one-operation calls,
	// and how many calls were still waiting behind it.
	CoalescedBatch(CoalescedBatch)
	// QueueFull reports a one-operation call refused with ErrUnavailable because its
	// store's coalescer queue was full (CoalesceOptions.QueueLimit).
	QueueFull(store string)
	// Retry reports operations about to be sent again: see RetryReason.
	Retry(Retry)
}

// CallKind says which adapter method a call used.
type CallKind uint8

// Adapter calls.
const (
	CallRead  CallKind = iota + 1 // driver.Store.Read: reads, and the reads of merges and if-absent deletes
	CallWrite                     // driver.Store.Write: puts, deletes and merge results
)

func (k CallKind) String() string {
	switch k {
	case CallRead:
		return "read"
	case CallWrite:
		return "write"
	}
	return "unknown"
}

// AdapterCall describes one adapter call.
type AdapterCall struct {
	Store    string
	Call     CallKind
	Size     int           // addresses read or writes sent
	Attempt  int           // 1, or n for the (n-1)-th resend of items the adapter reported unavailable
	Duration time.Duration // from the call to its return
	// Err is the error of the whole call (every item failed with it), else nil and the
	// items' outcomes are counted below.
	Err error
	// Per-item outcomes: OK (a read found or did not find its record; a write applied),
	// Unavailable (not applied; resent while attempts remain), Conflict (a precondition
	// failed: ErrConflict or ErrAlreadyExists, which for a merge means another writer came
	// first) and Failed (any other error). They add up to Size when Err is nil.
	OK, Unavailable, Conflict, Failed int
}

// CoalescedBatch describes one batch of a store's coalescer.
type CoalescedBatch struct {
	Store   string
	Size    int // one-operation calls gathered into the batch
	Waiting int // calls left in the store's queue when the batch was formed
}

// RetryReason says why operations are sent again.
type RetryReason uint8

// Retry reasons.
const (
	// RetryUnavailable: the adapter reported the operations unavailable (they had no
	// effect); they are sent again after a backoff, up to Options.RetryAttempts calls.
	RetryUnavailable RetryReason = iota + 1
	// RetryMergeConflict: merges whose conditional write lost to another writer -- another
	// process: a Service never races itself (a compare-and-set retry); they read, run and
	// write again, within Options.MergeBudget.
	RetryMergeConflict
)

func (r RetryReason) String() string {
	switch r {
	case RetryUnavailable:
		return "unavailable"
	case RetryMergeConflict:
		return "merge_conflict"
	}
	return "unknown"
}

// Retry describes operations about to be sent again.
type Retry struct {
	Store  string
	Reason RetryReason
	Call   CallKind // the call that reported them: a merge's losing write is CallWrite
	Ops    int      // how many
}

// NopObserver implements Observer and does nothing; embed it to implement part of Observer.
type NopObserver struct{}

func (NopObserver) AdapterCall(AdapterCall)       {}
func (NopObserver) CoalescedBatch(CoalescedBatch) {}
func (NopObserver) QueueFull(string)              {}
func (NopObserver) Retry(Retry)                   {}
