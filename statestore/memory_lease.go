package statestore

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/tributary-dev/tributary/cdc"
)

// The memory store's leases follow the SQL stores' (package sqlstate) to the letter, with
// MemoryOptions.Now as the server's clock: one lease per name; Acquire succeeds only when it
// is free (never acquired, released, or expired: expires <= now) and moves the epoch up by
// one; Renew extends it for the same holder and epoch before it expired; Release ends it now
// (expires = min(expires, now)) keeping the epoch; lease entries are never deleted (not by
// DeletePipeline either), so epochs never repeat. The store's mutex orders lease calls and
// fenced writes as the lease row's lock does in SQL.

// memLease is one lease's state; epoch 0: never acquired.
type memLease struct {
	holder  string
	epoch   uint64
	expires time.Time
}

// memFence is a fenced write's condition: the lease name must be at the epoch.
type memFence struct {
	name  string
	epoch uint64
}

// checkFence refuses a write unless f is nil or its lease is at its epoch (never 0). The
// caller holds m.mu.
func (m *Memory) checkFence(f *memFence, op string, names []string) error {
	if f == nil {
		return nil
	}
	var epoch uint64
	if l := m.leases[f.name]; l != nil {
		epoch = l.epoch
	}
	if f.epoch != 0 && epoch == f.epoch {
		return nil
	}
	what := fmt.Sprintf("pipeline %q", names[0])
	if len(names) == 3 {
		what += fmt.Sprintf(", %s/%s", names[1], names[2])
	}
	return fmt.Errorf("%w: %s of %s refused: lease %q is at epoch %d, this writer holds epoch %d",
		ErrNotLeader, op, what, f.name, epoch, f.epoch)
}

func checkTTL(ttl time.Duration) error {
	if ttl < time.Millisecond {
		return fmt.Errorf("%w: a lease lasts at least 1ms", ErrInvalid)
	}
	return nil
}

// lease returns the Lease of name as of now. The caller holds m.mu.
func (m *Memory) lease(name string, now time.Time) Lease {
	l := m.leases[name]
	if l == nil || l.epoch == 0 {
		return Lease{Name: name}
	}
	return Lease{Name: name, Holder: l.holder, Epoch: l.epoch, Expires: l.expires, Remaining: l.expires.Sub(now)}
}

// currentLease returns l's lease if l is still its current acquisition (same holder and
// epoch), else nil.
// The caller holds m.mu.
func (m *Memory) currentLease(l Lease) *memLease {
	cur := m.leases[l.Name]
	if cur == nil || cur.epoch == 0 || cur.epoch != l.Epoch || cur.holder != l.Holder {
		return nil
	}
	return cur
}

// Acquire implements Leaser. When the lease is held it returns the current lease with
// ErrLeaseHeld.
func (m *Memory) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (Lease, error) {
	if err := m.lock(ctx, name, holder); err != nil {
		return Lease{}, err
	}
	defer m.mu.Unlock()
	if err := checkTTL(ttl); err != nil {
		return Lease{}, err
	}
	now := m.now()
	l := m.leases[name]
	if l == nil {
		l = &memLease{}
		m.leases[name] = l
	}
	if l.epoch != 0 && l.expires.After(now) {
		cur := m.lease(name, now)
		return cur, fmt.Errorf("%w: lease %q is held by %q at epoch %d for %v more", ErrLeaseHeld,
			name, cur.Holder, cur.Epoch, cur.Remaining.Round(time.Millisecond))
	}
	l.holder, l.epoch, l.expires = holder, l.epoch+1, now.Add(ttl)
	return m.lease(name, now), nil
}

// Renew implements Leaser.
func (m *Memory) Renew(ctx context.Context, l Lease, ttl time.Duration) (Lease, error) {
	if err := m.lock(ctx, l.Name, l.Holder); err != nil {
		return Lease{}, err
	}
	defer m.mu.Unlock()
	if err := checkTTL(ttl); err != nil {
		return Lease{}, err
	}
	now := m.now()
	cur := m.currentLease(l)
	if cur == nil || !cur.expires.After(now) {
		return Lease{}, m.notLeader("renew", l, now)
	}
	cur.expires = now.Add(ttl)
	return m.lease(l.Name, now), nil
}

// Release implements Leaser.
func (m *Memory) Release(ctx context.Context, l Lease) error {
	if err := m.lock(ctx, l.Name, l.Holder); err != nil {
		return err
	}
	defer m.mu.Unlock()
	now := m.now()
	cur := m.currentLease(l)
	if cur == nil {
		return m.notLeader("release", l, now)
	}
	if cur.expires.After(now) {
		cur.expires = now
	}
	return nil
}

// notLeader explains why l is no longer the current acquisition. The caller holds m.mu.
func (m *Memory) notLeader(op string, l Lease, now time.Time) error {
	cur := m.lease(l.Name, now)
	if cur.Epoch == l.Epoch && cur.Holder == l.Holder {
		return fmt.Errorf("%w: %s lease %q: epoch %d expired %v ago", ErrNotLeader, op, l.Name, l.Epoch, -cur.Remaining.Round(time.Millisecond))
	}
	return fmt.Errorf("%w: %s lease %q: epoch %d was taken over by %q at epoch %d", ErrNotLeader, op, l.Name, l.Epoch, cur.Holder, cur.Epoch)
}

// ReadLease implements Leaser.
func (m *Memory) ReadLease(ctx context.Context, name string) (Lease, error) {
	if err := m.lock(ctx, name); err != nil {
		return Lease{}, err
	}
	defer m.mu.Unlock()
	return m.lease(name, m.now()), nil
}

// Fenced implements Leaser: the view's writes check the lease's epoch under the store's
// mutex, in the same critical section as the write.
func (m *Memory) Fenced(name string, epoch uint64) Store {
	return &memFenced{m: m, f: memFence{name: name, epoch: epoch}}
}

// memFenced is the view Memory.Fenced returns.
type memFenced struct {
	m      *Memory
	f      memFence
	closed atomic.Bool
}

func (v *memFenced) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if v.closed.Load() {
		return ErrClosed
	}
	return nil
}

// Identity implements Store.
func (v *memFenced) Identity() string { return v.m.Identity() }

// Close closes the view (not the store).
func (v *memFenced) Close() error { v.closed.Store(true); return nil }

// LoadCheckpoint implements cdc.CheckpointStore.
func (v *memFenced) LoadCheckpoint(ctx context.Context, pipeline string) (cdc.Checkpoint, error) {
	if err := v.check(ctx); err != nil {
		return nil, err
	}
	return v.m.LoadCheckpoint(ctx, pipeline)
}

// SaveCheckpoint implements cdc.CheckpointStore, fenced.
func (v *memFenced) SaveCheckpoint(ctx context.Context, pipeline string, cp cdc.Checkpoint) error {
	if err := v.check(ctx); err != nil {
		return err
	}
	return v.m.saveCheckpoint(ctx, pipeline, cp, &v.f)
}

// CheckpointSaved implements Store.
func (v *memFenced) CheckpointSaved(ctx context.Context, pipeline string) (time.Time, error) {
	if err := v.check(ctx); err != nil {
		return time.Time{}, err
	}
	return v.m.CheckpointSaved(ctx, pipeline)
}

// ResetCheckpoint is Memory.ResetCheckpoint, fenced.
func (v *memFenced) ResetCheckpoint(ctx context.Context, pipeline string) error {
	if err := v.check(ctx); err != nil {
		return err
	}
	return v.m.resetCheckpoint(ctx, pipeline, &v.f)
}

// Get implements Store.
func (v *memFenced) Get(ctx context.Context, pipeline, namespace, key string) (Record, error) {
	if err := v.check(ctx); err != nil {
		return Record{}, err
	}
	return v.m.Get(ctx, pipeline, namespace, key)
}

// Put implements Store, fenced.
func (v *memFenced) Put(ctx context.Context, pipeline, namespace, key string, value []byte, expect Revision) (Revision, error) {
	if err := v.check(ctx); err != nil {
		return 0, err
	}
	return v.m.put(ctx, pipeline, namespace, key, value, expect, &v.f)
}

// Delete implements Store, fenced.
func (v *memFenced) Delete(ctx context.Context, pipeline, namespace, key string, expect Revision) error {
	if err := v.check(ctx); err != nil {
		return err
	}
	return v.m.delete(ctx, pipeline, namespace, key, expect, &v.f)
}

// List implements Store.
func (v *memFenced) List(ctx context.Context, pipeline, namespace string) ([]Record, error) {
	if err := v.check(ctx); err != nil {
		return nil, err
	}
	return v.m.List(ctx, pipeline, namespace)
}

// DeletePipeline implements Store, fenced.
func (v *memFenced) DeletePipeline(ctx context.Context, pipeline string) error {
	if err := v.check(ctx); err != nil {
		return err
	}
	return v.m.deletePipeline(ctx, pipeline, &v.f)
}
