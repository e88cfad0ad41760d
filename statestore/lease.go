package statestore

import (
	"context"
	"errors"
	"time"
)

// Lease is one acquisition of a leadership lease: who holds it, with which epoch, until when.
// Expires is the store server's clock; Remaining is Expires minus the server's time when the
// call that returned the Lease ran, so a holder measures its lease with its own monotonic clock
// from before it sent the call (see package sqlstate for the clock assumptions).
type Lease struct {
	// Name is what the lease leads: by convention the pipeline.
	Name string
	// Holder identifies the process holding it (e.g. host name and process id).
	Holder string
	// Epoch is the fencing token: it increases on every acquisition, never on a renewal, and
	// is never reused. 0 means the lease was never acquired.
	Epoch uint64
	// Expires is when the lease ends on the store server's clock.
	Expires time.Time
	// Remaining is how long the lease still ran when the call was answered; <= 0: expired or
	// released (the lease is free to acquire).
	Remaining time.Duration
}

// Held reports whether the lease was held (not expired, not released) when it was read.
func (l Lease) Held() bool { return l.Epoch != 0 && l.Remaining > 0 }

// Leaser is a Store that also keeps leadership leases, one per name, and writes conditional on
// holding one (Fenced). The SQL stores (package sqlstate) implement it, and Memory for tests.
type Leaser interface {
	Store

	// Acquire takes the lease for holder for ttl if it is free (never acquired, expired or
	// released), with the epoch one above the last. A lease held by anyone, holder included,
	// fails with ErrLeaseHeld.
	Acquire(ctx context.Context, name, holder string, ttl time.Duration) (Lease, error)
	// Renew extends the lease to ttl from now if l is still the current acquisition (same
	// holder and epoch) and has not expired; otherwise it fails with ErrNotLeader.
	Renew(ctx context.Context, l Lease, ttl time.Duration) (Lease, error)
	// Release ends the lease now if l is still the current acquisition (expired or not), so a
	// successor need not wait for its expiry; otherwise it fails with ErrNotLeader, which a
	// holder stepping down may ignore.
	Release(ctx context.Context, l Lease) error
	// ReadLease returns the lease's current state; a lease never acquired has epoch 0.
	ReadLease(ctx context.Context, name string) (Lease, error)
	// Fenced returns a view of the store whose writes (checkpoints, records, DeletePipeline,
	// ResetCheckpoint) take effect only while the lease name's current epoch is epoch, checked
	// in the write's own transaction; otherwise they fail with ErrNotLeader and change nothing.
	// Reads are not fenced. Closing the view closes only the view.
	Fenced(name string, epoch uint64) Store
}

// Errors of leases and of shared stores. Test with errors.Is.
var (
	// ErrLeaseHeld: Acquire found the lease held by a holder whose lease has not expired.
	ErrLeaseHeld = errors.New("statestore: lease held by another holder")
	// ErrNotLeader: the lease was acquired by another holder (a takeover: its epoch moved on),
	// or, for Renew, it expired. A fenced write refused with it changed nothing; its process
	// must step down.
	ErrNotLeader = errors.New("statestore: not the lease holder")
	// ErrUnavailable: the store's server could not be reached or the connection broke
	// (refused, reset, server restarting, a serialization failure). Retryable: the call may
	// succeed later. A write whose commit was cut off may or may not have taken effect, so a
	// compare-and-set retried after it re-reads first (a conflict may be the write itself).
	ErrUnavailable = errors.New("statestore: store unavailable")
)
