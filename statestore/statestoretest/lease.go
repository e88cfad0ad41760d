package statestoretest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/statestore"
)

// RunLeases runs the lease behaviours against new stores from open (each empty, cleaned up by
// open): acquisition and renewal, races, expiry and takeover, fenced writes of a stale holder,
// and the whole behaviour suite (Run) through a fenced view whose lease is held. Expiry is
// the store's clock; the tests wait for it by polling with generous deadlines and assert no
// durations beyond "positive" and "at most the ttl".
func RunLeases(t *testing.T, open func(t *testing.T) statestore.Leaser) {
	t.Run("AcquireRenewRelease", func(t *testing.T) { testAcquire(t, open(t)) })
	t.Run("Race", func(t *testing.T) { testRace(t, open(t)) })
	t.Run("ExpiryTakeover", func(t *testing.T) { testTakeover(t, open(t)) })
	t.Run("FencingInvariant", func(t *testing.T) { testFencingInvariant(t, open(t)) })
	t.Run("FencedSuite", func(t *testing.T) {
		Run(t, func(t *testing.T) statestore.Store {
			s := open(t)
			l, err := s.Acquire(context.Background(), "suite", "holder", time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			return s.Fenced("suite", l.Epoch)
		})
	})
}

func testAcquire(t *testing.T, s statestore.Leaser) {
	ctx := context.Background()
	const ttl = time.Minute
	if l, err := s.ReadLease(ctx, "p"); err != nil || l.Epoch != 0 || l.Held() || l.Name != "p" {
		t.Fatalf("ReadLease of a lease never acquired = %+v, %v", l, err)
	}
	a, err := s.Acquire(ctx, "p", "A", ttl)
	if err != nil || a.Epoch != 1 || a.Holder != "A" || a.Name != "p" || !a.Held() || a.Remaining > ttl {
		t.Fatalf("Acquire = %+v, %v; want A at epoch 1 for at most %v", a, err, ttl)
	}
	for _, holder := range []string{"B", "A"} {
		cur, err := s.Acquire(ctx, "p", holder, ttl)
		if !errors.Is(err, statestore.ErrLeaseHeld) || cur.Holder != "A" || cur.Epoch != 1 {
			t.Fatalf("Acquire by %s of a held lease = %+v, %v; want ErrLeaseHeld naming A", holder, cur, err)
		}
	}
	if l, err := s.ReadLease(ctx, "p"); err != nil || l.Holder != "A" || l.Epoch != 1 || !l.Held() {
		t.Fatalf("ReadLease = %+v, %v", l, err)
	}
	// Another name is another lease.
	if o, err := s.Acquire(ctx, "q", "B", ttl); err != nil || o.Epoch != 1 {
		t.Fatalf("Acquire of another name = %+v, %v", o, err)
	}
	r, err := s.Renew(ctx, a, 2*ttl)
	if err != nil || r.Epoch != a.Epoch || r.Holder != "A" || !r.Expires.After(a.Expires) {
		t.Fatalf("Renew = %+v, %v; want the same epoch, later expiry than %v", r, err, a.Expires)
	}
	if _, err := s.Renew(ctx, statestore.Lease{Name: "p", Holder: "B", Epoch: 1}, ttl); !errors.Is(err, statestore.ErrNotLeader) {
		t.Fatalf("Renew by another holder: %v, want ErrNotLeader", err)
	}
	if err := s.Release(ctx, r); err != nil {
		t.Fatal(err)
	}
	if l, err := s.ReadLease(ctx, "p"); err != nil || l.Held() || l.Epoch != 1 {
		t.Fatalf("ReadLease after Release = %+v, %v; want epoch 1, not held", l, err)
	}
	if _, err := s.Renew(ctx, r, ttl); !errors.Is(err, statestore.ErrNotLeader) {
		t.Fatalf("Renew after Release: %v, want ErrNotLeader", err)
	}
	b, err := s.Acquire(ctx, "p", "B", ttl)
	if err != nil || b.Epoch != 2 || b.Holder != "B" {
		t.Fatalf("Acquire after Release = %+v, %v; want B at epoch 2", b, err)
	}
	if err := s.Release(ctx, a); !errors.Is(err, statestore.ErrNotLeader) {
		t.Fatalf("Release of a lease taken over: %v, want ErrNotLeader", err)
	}
	// The holder's own earlier epoch is stale too: epochs, not holders, are the token.
	if err := s.Release(ctx, b); err != nil {
		t.Fatal(err)
	}
	a3, err := s.Acquire(ctx, "p", "A", ttl)
	if err != nil || a3.Epoch != 3 {
		t.Fatalf("re-Acquire = %+v, %v; want epoch 3", a3, err)
	}
	if _, err := s.Renew(ctx, a, ttl); !errors.Is(err, statestore.ErrNotLeader) {
		t.Fatalf("Renew of the holder's old epoch: %v, want ErrNotLeader", err)
	}
	for what, err := range map[string]error{
		"zero ttl":    func() error { _, err := s.Acquire(ctx, "z", "A", 0); return err }(),
		"empty name":  func() error { _, err := s.Acquire(ctx, "", "A", ttl); return err }(),
		"empty owner": func() error { _, err := s.Acquire(ctx, "z", "", ttl); return err }(),
	} {
		if !errors.Is(err, statestore.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", what, err)
		}
	}
}

// testRace has holders race for a free lease, round after round: exactly one wins each round,
// and each win is the epoch after the last.
func testRace(t *testing.T, s statestore.Leaser) {
	ctx := context.Background()
	const holders, rounds = 8, 5
	var last uint64
	for round := range rounds {
		var wg sync.WaitGroup
		wins := make(chan statestore.Lease, holders)
		errs := make(chan error, holders)
		for i := range holders {
			wg.Go(func() {
				l, err := s.Acquire(ctx, "race", fmt.Sprintf("h%d", i), time.Minute)
				switch {
				case err == nil:
					wins <- l
				case !errors.Is(err, statestore.ErrLeaseHeld):
					errs <- err
				}
			})
		}
		wg.Wait()
		close(wins)
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if len(wins) != 1 {
			t.Fatalf("round %d: %d holders acquired the lease, want 1", round, len(wins))
		}
		w := <-wins
		if w.Epoch != last+1 {
			t.Fatalf("round %d: epoch %d, want %d", round, w.Epoch, last+1)
		}
		last = w.Epoch
		if cur, err := s.ReadLease(ctx, "race"); err != nil || cur.Holder != w.Holder || cur.Epoch != w.Epoch {
			t.Fatalf("round %d: ReadLease = %+v, %v; want the winner %+v", round, cur, err, w)
		}
		if err := s.Release(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
}

// testTakeover lets A's lease expire: until B takes over, A (expired but not replaced) may
// still write through its fenced view; from the takeover on, A's renewals and fenced writes
// are refused with ErrNotLeader and change nothing, while B's pass.
func testTakeover(t *testing.T, s statestore.Leaser) {
	ctx := context.Background()
	for _, epoch := range []uint64{0, 1} {
		never := s.Fenced("p", epoch)
		if err := never.SaveCheckpoint(ctx, "p", cdc.Checkpoint("x")); !errors.Is(err, statestore.ErrNotLeader) {
			t.Fatalf("fenced write at epoch %d under a lease never acquired: %v, want ErrNotLeader", epoch, err)
		}
	}
	a, err := s.Acquire(ctx, "p", "A", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	fa := s.Fenced("p", a.Epoch)
	if err := fa.SaveCheckpoint(ctx, "p", cdc.Checkpoint("a1")); err != nil {
		t.Fatal(err)
	}
	rev, err := fa.Put(ctx, "p", "esfence", "idx", []byte("a"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, "p", "B", time.Minute); !errors.Is(err, statestore.ErrLeaseHeld) {
		t.Fatalf("Acquire of A's live lease: %v, want ErrLeaseHeld", err)
	}
	// A's lease now runs out soon (as if A stopped renewing).
	if a, err = s.Renew(ctx, a, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "A's lease to expire", func() bool {
		l, err := s.ReadLease(ctx, "p")
		if err != nil {
			t.Fatal(err)
		}
		return !l.Held()
	})
	if _, err := s.Renew(ctx, a, time.Minute); !errors.Is(err, statestore.ErrNotLeader) {
		t.Fatalf("Renew of an expired lease: %v, want ErrNotLeader", err)
	}
	// Expired but not taken over: A's epoch is still the current one.
	if err := fa.SaveCheckpoint(ctx, "p", cdc.Checkpoint("a2")); err != nil {
		t.Fatalf("fenced write of an expired lease nobody took over: %v", err)
	}
	b, err := s.Acquire(ctx, "p", "B", time.Minute)
	if err != nil || b.Epoch != a.Epoch+1 {
		t.Fatalf("takeover = %+v, %v; want epoch %d", b, err, a.Epoch+1)
	}
	stale := map[string]error{
		"SaveCheckpoint": fa.SaveCheckpoint(ctx, "p", cdc.Checkpoint("stale")),
		"Put":            func() error { _, err := fa.Put(ctx, "p", "esfence", "idx", []byte("stale"), rev); return err }(),
		"Put new":        func() error { _, err := fa.Put(ctx, "p", "esfence", "new", []byte("stale"), 0); return err }(),
		"Delete":         fa.Delete(ctx, "p", "esfence", "idx", rev),
		"DeletePipeline": fa.DeletePipeline(ctx, "p"),
		"Renew":          func() error { _, err := s.Renew(ctx, a, time.Minute); return err }(),
	}
	if r, ok := fa.(interface {
		ResetCheckpoint(context.Context, string) error
	}); ok {
		stale["ResetCheckpoint"] = r.ResetCheckpoint(ctx, "p")
	}
	for what, err := range stale {
		if !errors.Is(err, statestore.ErrNotLeader) {
			t.Errorf("stale holder's %s: %v, want ErrNotLeader", what, err)
		}
	}
	// Nothing the stale holder tried took effect; reads through its view still work.
	if cp, err := fa.LoadCheckpoint(ctx, "p"); err != nil || string(cp) != "a2" {
		t.Fatalf("checkpoint after refused writes = %q, %v; want a2", cp, err)
	}
	if r, err := s.Get(ctx, "p", "esfence", "idx"); err != nil || r.Revision != rev || string(r.Value) != "a" {
		t.Fatalf("record after refused writes = %+v, %v", r, err)
	}
	if r, err := s.Get(ctx, "p", "esfence", "new"); err != nil || r.Revision != 0 {
		t.Fatalf("refused create = %+v, %v", r, err)
	}
	fb := s.Fenced("p", b.Epoch)
	if err := fb.SaveCheckpoint(ctx, "p", cdc.Checkpoint("b1")); err != nil {
		t.Fatal(err)
	}
	if _, err := fb.Put(ctx, "p", "esfence", "idx", []byte("b"), rev); err != nil {
		t.Fatal(err)
	}
	if cp, err := s.LoadCheckpoint(ctx, "p"); err != nil || string(cp) != "b1" {
		t.Fatalf("checkpoint = %q, %v; want b1", cp, err)
	}
}

// testFencingInvariant has holders with short leases take the lease from each other while
// they pause (a GC pause, SIGSTOP) for longer than their lease between writes; each writes
// its epoch into one record through its fenced view. A write may succeed only if no later
// epoch wrote before it: the record's epochs never go backwards.
func testFencingInvariant(t *testing.T, s statestore.Leaser) {
	ctx := context.Background()
	const holders, rounds = 4, 15
	var wg sync.WaitGroup
	errs := make(chan error, holders)
	for i := range holders {
		wg.Go(func() {
			holder := fmt.Sprintf("h%d", i)
			for round := range rounds {
				l, err := s.Acquire(ctx, "inv", holder, 30*time.Millisecond)
				if errors.Is(err, statestore.ErrLeaseHeld) {
					time.Sleep(time.Duration(5+round%3*10) * time.Millisecond)
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				f := s.Fenced("inv", l.Epoch)
			writes:
				for w := range 3 {
					if w > 0 && (i+round+w)%2 == 0 {
						time.Sleep(50 * time.Millisecond) // paused past the lease
					}
					r, err := s.Get(ctx, "inv", "fence", "last")
					if err != nil {
						errs <- err
						return
					}
					var last uint64
					if r.Revision != 0 {
						fmt.Sscan(string(r.Value), &last)
					}
					_, err = f.Put(ctx, "inv", "fence", "last", []byte(fmt.Sprint(l.Epoch)), r.Revision)
					switch {
					case err == nil && last > l.Epoch:
						errs <- fmt.Errorf("epoch %d wrote over epoch %d", l.Epoch, last)
						return
					case err == nil, errors.Is(err, statestore.ErrConflict):
					case errors.Is(err, statestore.ErrNotLeader):
						break writes // taken over: step down
					default:
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	l, err := s.ReadLease(ctx, "inv")
	if err != nil || l.Epoch < 2 {
		t.Fatalf("lease after the rounds = %+v, %v; want several takeovers", l, err)
	}
	t.Logf("%d acquisitions", l.Epoch)
}

// waitFor polls cond every 20ms for up to a minute (the machine may be loaded).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
