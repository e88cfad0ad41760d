package sqlstate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/statestore"
)

// scanLease reads a row of (name, holder, epoch, expires µs, now µs); epoch 0 is a lease
// never acquired.
func scanLease(row *sql.Row) (statestore.Lease, error) {
	var name, holder []byte
	var epoch, expires, now int64
	if err := row.Scan(&name, &holder, &epoch, &expires, &now); err != nil {
		return statestore.Lease{}, err
	}
	if epoch == 0 {
		return statestore.Lease{Name: string(name)}, nil
	}
	return statestore.Lease{Name: string(name), Holder: string(holder), Epoch: uint64(epoch),
		Expires: time.UnixMicro(expires), Remaining: time.Duration(expires-now) * time.Microsecond}, nil
}

func checkTTL(ttl time.Duration) error {
	if ttl < time.Millisecond {
		return fmt.Errorf("%w: a lease lasts at least 1ms", statestore.ErrInvalid)
	}
	return nil
}

// leaseTx runs a conditional update of the lease row and, when it matched, reads the row back
// in the same transaction (holding its lock); ok is false when it matched nothing.
func (s *Store) leaseTx(ctx context.Context, what, name, update string, args ...any) (l statestore.Lease, ok bool, err error) {
	err = s.tx(ctx, what+" lease "+quote(name), func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, update, args...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil || n == 0 {
			return err
		}
		ok = true
		l, err = scanLease(tx.QueryRowContext(ctx, s.q.readLease, h(name)))
		return err
	})
	return l, ok, err
}

// Acquire implements statestore.Leaser. When the lease is held it returns the current lease
// with ErrLeaseHeld. Of racing acquirers exactly one wins: the conditional UPDATE of the one
// lease row serializes them, and the losers see the winner's expiry.
func (s *Store) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (statestore.Lease, error) {
	if err := s.start(ctx, name, holder); err != nil {
		return statestore.Lease{}, err
	}
	if err := checkTTL(ttl); err != nil {
		return statestore.Lease{}, err
	}
	if _, err := s.db.ExecContext(ctx, s.q.ensureLease, h(name), []byte(name)); err != nil {
		return statestore.Lease{}, s.classify(ctx, "acquire lease "+quote(name), err)
	}
	l, ok, err := s.leaseTx(ctx, "acquire", name, s.q.acquire, []byte(holder), ttl.Microseconds(), h(name))
	if err != nil {
		return statestore.Lease{}, err
	}
	if ok {
		return l, nil
	}
	cur, err := s.ReadLease(ctx, name)
	if err != nil {
		return statestore.Lease{}, err
	}
	return cur, fmt.Errorf("%w: lease %q is held by %q at epoch %d for %v more", statestore.ErrLeaseHeld,
		name, cur.Holder, cur.Epoch, cur.Remaining.Round(time.Millisecond))
}

// Renew implements statestore.Leaser.
func (s *Store) Renew(ctx context.Context, l statestore.Lease, ttl time.Duration) (statestore.Lease, error) {
	if err := s.start(ctx, l.Name, l.Holder); err != nil {
		return statestore.Lease{}, err
	}
	if err := checkTTL(ttl); err != nil {
		return statestore.Lease{}, err
	}
	n, ok, err := s.leaseTx(ctx, "renew", l.Name, s.q.renew, ttl.Microseconds(), h(l.Name), []byte(l.Holder), int64(l.Epoch))
	if err != nil {
		return statestore.Lease{}, err
	}
	if !ok {
		return statestore.Lease{}, s.notLeader(ctx, "renew", l)
	}
	return n, nil
}

// Release implements statestore.Leaser.
func (s *Store) Release(ctx context.Context, l statestore.Lease) error {
	if err := s.start(ctx, l.Name, l.Holder); err != nil {
		return err
	}
	ok := false
	err := s.tx(ctx, "release lease "+quote(l.Name), func(tx *sql.Tx) error {
		var one int
		err := tx.QueryRowContext(ctx, s.q.lockLease, h(l.Name), []byte(l.Holder), int64(l.Epoch)).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		ok = true
		_, err = tx.ExecContext(ctx, s.q.release, h(l.Name))
		return err
	})
	if err != nil {
		return err
	}
	if !ok {
		return s.notLeader(ctx, "release", l)
	}
	return nil
}

// notLeader explains why l is no longer the current acquisition.
func (s *Store) notLeader(ctx context.Context, what string, l statestore.Lease) error {
	cur, err := s.ReadLease(ctx, l.Name)
	if err != nil {
		return err
	}
	if cur.Epoch == l.Epoch && cur.Holder == l.Holder {
		return fmt.Errorf("%w: %s lease %q: epoch %d expired %v ago", statestore.ErrNotLeader, what, l.Name, l.Epoch, -cur.Remaining.Round(time.Millisecond))
	}
	return fmt.Errorf("%w: %s lease %q: epoch %d was taken over by %q at epoch %d", statestore.ErrNotLeader, what, l.Name, l.Epoch, cur.Holder, cur.Epoch)
}

// ReadLease implements statestore.Leaser.
func (s *Store) ReadLease(ctx context.Context, name string) (statestore.Lease, error) {
	if err := s.start(ctx, name); err != nil {
		return statestore.Lease{}, err
	}
	l, err := scanLease(s.db.QueryRowContext(ctx, s.q.readLease, h(name)))
	if errors.Is(err, sql.ErrNoRows) {
		return statestore.Lease{Name: name}, nil
	}
	if err != nil {
		return statestore.Lease{}, s.classify(ctx, "read lease "+quote(name), err)
	}
	return l, nil
}

// Fenced implements statestore.Leaser.
func (s *Store) Fenced(name string, epoch uint64) statestore.Store {
	return &Fenced{s: s, f: fence{name: name, epoch: epoch}}
}

// Fenced is the view Store.Fenced returns: its writes take effect only while its lease is at
// its epoch (checked in the write's transaction), else they fail with statestore.ErrNotLeader.
type Fenced struct {
	s      *Store
	f      fence
	closed atomic.Bool
}

var _ statestore.Store = (*Fenced)(nil)

func (v *Fenced) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if v.closed.Load() {
		return statestore.ErrClosed
	}
	return nil
}

// Identity implements statestore.Store.
func (v *Fenced) Identity() string { return v.s.Identity() }

// Close closes the view (not the store).
func (v *Fenced) Close() error { v.closed.Store(true); return nil }

// LoadCheckpoint implements cdc.CheckpointStore.
func (v *Fenced) LoadCheckpoint(ctx context.Context, pipeline string) (cdc.Checkpoint, error) {
	if err := v.check(ctx); err != nil {
		return nil, err
	}
	return v.s.LoadCheckpoint(ctx, pipeline)
}

// SaveCheckpoint implements cdc.CheckpointStore, fenced.
func (v *Fenced) SaveCheckpoint(ctx context.Context, pipeline string, cp cdc.Checkpoint) error {
	if err := v.check(ctx); err != nil {
		return err
	}
	return v.s.saveCheckpoint(ctx, pipeline, cp, v.f)
}

// CheckpointSaved implements statestore.Store.
func (v *Fenced) CheckpointSaved(ctx context.Context, pipeline string) (time.Time, error) {
	if err := v.check(ctx); err != nil {
		return time.Time{}, err
	}
	return v.s.CheckpointSaved(ctx, pipeline)
}

// ResetCheckpoint is Store.ResetCheckpoint, fenced.
func (v *Fenced) ResetCheckpoint(ctx context.Context, pipeline string) error {
	if err := v.check(ctx); err != nil {
		return err
	}
	return v.s.resetCheckpoint(ctx, pipeline, v.f)
}

// Get implements statestore.Store.
func (v *Fenced) Get(ctx context.Context, pipeline, namespace, key string) (statestore.Record, error) {
	if err := v.check(ctx); err != nil {
		return statestore.Record{}, err
	}
	return v.s.Get(ctx, pipeline, namespace, key)
}

// Put implements statestore.Store, fenced.
func (v *Fenced) Put(ctx context.Context, pipeline, namespace, key string, value []byte, expect statestore.Revision) (statestore.Revision, error) {
	if err := v.check(ctx); err != nil {
		return 0, err
	}
	return v.s.put(ctx, pipeline, namespace, key, value, expect, v.f)
}

// Delete implements statestore.Store, fenced.
func (v *Fenced) Delete(ctx context.Context, pipeline, namespace, key string, expect statestore.Revision) error {
	if err := v.check(ctx); err != nil {
		return err
	}
	return v.s.delete(ctx, pipeline, namespace, key, expect, v.f)
}

// List implements statestore.Store.
func (v *Fenced) List(ctx context.Context, pipeline, namespace string) ([]statestore.Record, error) {
	if err := v.check(ctx); err != nil {
		return nil, err
	}
	return v.s.List(ctx, pipeline, namespace)
}

// DeletePipeline implements statestore.Store, fenced.
func (v *Fenced) DeletePipeline(ctx context.Context, pipeline string) error {
	if err := v.check(ctx); err != nil {
		return err
	}
	return v.s.deletePipeline(ctx, pipeline, v.f)
}
