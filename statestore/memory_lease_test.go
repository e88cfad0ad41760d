package statestore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/statestore"
	"github.com/tributary-dev/tributary/statestore/statestoretest"
)

// TestMemoryLeases runs the lease behaviours (and, through them, the whole behaviour suite
// through a fenced view) against the memory store on the real clock, as the SQL stores run
// them against their servers: the memory store is the unit-test fake of a shared store. The
// plain suite runs in TestSuite/memory.
func TestMemoryLeases(t *testing.T) {
	statestoretest.RunLeases(t, func(t *testing.T) statestore.Leaser {
		s := statestore.NewMemory()
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

// fakeClock is a test's clock, moved by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestMemoryLeaseClock drives expiry with MemoryOptions.Now: a lease is held until exactly
// its expiry on the store's clock, checkpoints are stamped by it, and the epoch survives
// DeletePipeline and Copy.
func TestMemoryLeaseClock(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	s := statestore.NewMemoryWithOptions(&statestore.MemoryOptions{Now: clock.Now})
	defer s.Close()

	a, err := s.Acquire(ctx, "p", "A", 10*time.Second)
	if err != nil || a.Epoch != 1 || a.Remaining != 10*time.Second || !a.Expires.Equal(clock.Now().Add(10*time.Second)) {
		t.Fatalf("Acquire = %+v, %v", a, err)
	}
	fa := s.Fenced("p", a.Epoch)
	if err := fa.SaveCheckpoint(ctx, "p", cdc.Checkpoint("a1")); err != nil {
		t.Fatal(err)
	}
	if at, err := s.CheckpointSaved(ctx, "p"); err != nil || !at.Equal(clock.Now()) {
		t.Fatalf("CheckpointSaved = %v, %v; want the store's clock %v", at, err, clock.Now())
	}
	clock.advance(6 * time.Second)
	if l, err := s.ReadLease(ctx, "p"); err != nil || !l.Held() || l.Remaining != 4*time.Second {
		t.Fatalf("ReadLease 6s in = %+v, %v; want held for 4s more", l, err)
	}
	if _, err := s.Acquire(ctx, "p", "B", 10*time.Second); !errors.Is(err, statestore.ErrLeaseHeld) {
		t.Fatalf("Acquire of a live lease: %v, want ErrLeaseHeld", err)
	}
	if a, err = s.Renew(ctx, a, 10*time.Second); err != nil || a.Remaining != 10*time.Second {
		t.Fatalf("Renew = %+v, %v", a, err)
	}
	clock.advance(10 * time.Second) // exactly the expiry: free
	if l, err := s.ReadLease(ctx, "p"); err != nil || l.Held() || l.Epoch != 1 {
		t.Fatalf("ReadLease at the expiry = %+v, %v; want epoch 1, not held", l, err)
	}
	if _, err := s.Renew(ctx, a, time.Second); !errors.Is(err, statestore.ErrNotLeader) {
		t.Fatalf("Renew at the expiry: %v, want ErrNotLeader", err)
	}
	// Released after it expired: the expiry stays where it was.
	if err := s.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	if l, _ := s.ReadLease(ctx, "p"); l.Remaining != 0 {
		t.Fatalf("Release of an expired lease moved its expiry: %+v", l)
	}
	// The pipeline's state goes; its lease does not: the epochs go on from 1.
	if err := fa.DeletePipeline(ctx, "p"); err != nil {
		t.Fatalf("fenced DeletePipeline of an expired lease nobody took over: %v", err)
	}
	b, err := s.Acquire(ctx, "p", "B", 10*time.Second)
	if err != nil || b.Epoch != 2 {
		t.Fatalf("takeover = %+v, %v; want epoch 2", b, err)
	}
	if err := fa.SaveCheckpoint(ctx, "p", cdc.Checkpoint("stale")); !errors.Is(err, statestore.ErrNotLeader) {
		t.Fatalf("stale write: %v, want ErrNotLeader", err)
	}
	c := s.Copy()
	if l, err := c.ReadLease(ctx, "p"); err != nil || l.Holder != "B" || l.Epoch != 2 || l.Remaining != 10*time.Second {
		t.Fatalf("the copy's lease = %+v, %v; want B's at epoch 2 on the same clock", l, err)
	}
	if err := c.Fenced("p", 1).SaveCheckpoint(ctx, "p", cdc.Checkpoint("stale")); !errors.Is(err, statestore.ErrNotLeader) {
		t.Fatalf("stale write to the copy: %v, want ErrNotLeader", err)
	}
	// Closing a view closes only the view.
	fb := s.Fenced("p", b.Epoch)
	if err := fb.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fb.SaveCheckpoint(ctx, "p", cdc.Checkpoint("b")); !errors.Is(err, statestore.ErrClosed) {
		t.Fatalf("write to a closed view: %v, want ErrClosed", err)
	}
	if err := s.Fenced("p", b.Epoch).SaveCheckpoint(ctx, "p", cdc.Checkpoint("b")); err != nil {
		t.Fatalf("write through a new view after another view closed: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, "q", "A", time.Second); !errors.Is(err, statestore.ErrClosed) {
		t.Fatalf("Acquire after Close: %v, want ErrClosed", err)
	}
	if err := s.Fenced("p", b.Epoch).SaveCheckpoint(ctx, "p", cdc.Checkpoint("b")); !errors.Is(err, statestore.ErrClosed) {
		t.Fatalf("fenced write after the store closed: %v, want ErrClosed", err)
	}
}
