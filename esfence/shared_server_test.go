package esfence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/statestore"
)

// sharedEngines is engines with the indices of the run named shared-own-<random>-*.
func sharedEngines(t *testing.T, fn func(t *testing.T, s *server)) {
	estest.EachEngine(t, func(t *testing.T, n *estest.Node) {
		s := &server{Node: n, prefix: estest.UniqueName(t, "shared-own")}
		s.DeleteAtCleanup(t, s.prefix+"*")
		s.EnforceAutoCreateRule(t)
		fn(t, s)
	})
}

// sharedFence is a member: a Fence of its own state store under the shared owner (none: an
// exclusive deployment).
func (s *server) sharedFence(t *testing.T, st statestore.Store, owner string) *Fence {
	t.Helper()
	if st == nil {
		st = statestore.NewMemory()
	}
	f, err := New(s.Transport, st, &Options{Timeout: estest.CallTimeout, SharedOwner: owner})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestSharedOwner plays shared ownership on both engines: members of one shared owner, each
// with its own state store, claim and write one index at once and never fence each other;
// everyone else is refused, in both directions between shared and exclusive owners.
func TestSharedOwner(t *testing.T) {
	ctx := context.Background()
	sharedEngines(t, func(t *testing.T, s *server) {
		t.Run("members_write_one_index", func(t *testing.T) {
			d := s.dest("members")
			a, b := s.sharedFence(t, nil, groupA), s.sharedFence(t, nil, groupA)
			ca := ensure(t, a, d)
			cb := ensure(t, b, d)
			if cb.WriteAlias() != ca.WriteAlias() {
				t.Fatalf("b joined %s, a created %s", cb.WriteAlias(), ca.WriteAlias())
			}
			s.wantWrites(t, ca.WriteAlias(), d.Index)
			s.wantWrites(t, cb.WriteAlias(), d.Index)
			for i := 0; i < 2; i++ {
				ca = reclaim(t, a, ca)
				s.wantWrites(t, cb.WriteAlias(), d.Index) // a's claim fenced nothing
				s.wantWrites(t, ca.WriteAlias(), d.Index)
				cb = reclaim(t, b, cb)
				s.wantWrites(t, ca.WriteAlias(), d.Index)
				s.wantWrites(t, cb.WriteAlias(), d.Index)
			}
			if got := s.aliases(t, d.Index); !slices.Equal(got, []string{ca.WriteAlias()}) {
				t.Fatalf("aliases %v, want only %s", got, ca.WriteAlias())
			}
			var m Marker
			if err := json.Unmarshal(s.meta(t, d.Index)[MarkerKey], &m); err != nil {
				t.Fatal(err)
			}
			if m.Owner.Deployment != SharedDeployment(groupA) || m.Instance != ca.Instance() || m.Index.ClusterUUID != ca.ClusterUUID() {
				t.Fatalf("marker %+v", m)
			}
			// Another shared owner, and a deployment without one, are refused, and the
			// members' claims still work.
			for _, owner := range []string{groupB, ""} {
				_, err := s.sharedFence(t, nil, owner).Ensure(ctx, d)
				if ce := wantRefusal(t, err, OwnedByOther, d); ce.OwnerDigest != OwnerDigest(SharedDeployment(groupA), d.Pipeline, d.Sink) {
					t.Fatalf("owner digest %q", ce.OwnerDigest)
				}
			}
			s.wantWrites(t, ca.WriteAlias(), d.Index)
			s.wantWrites(t, cb.WriteAlias(), d.Index)
		})

		t.Run("exclusive_index_refused_to_shared", func(t *testing.T) {
			d := s.dest("exclusive")
			st := statestore.NewMemory()
			c := ensure(t, s.sharedFence(t, st, ""), d)
			for _, f := range []*Fence{s.sharedFence(t, st, groupA), s.sharedFence(t, nil, groupA)} {
				_, err := f.Ensure(ctx, d)
				wantRefusal(t, err, OwnedByOther, d)
			}
			s.wantWrites(t, c.WriteAlias(), d.Index)
		})

		t.Run("shared_index_refused_to_exclusive", func(t *testing.T) {
			d := s.dest("shared")
			st := statestore.NewMemory()
			c := ensure(t, s.sharedFence(t, st, groupA), d)
			for _, f := range []*Fence{s.sharedFence(t, st, ""), s.sharedFence(t, nil, "")} {
				_, err := f.Ensure(ctx, d)
				wantRefusal(t, err, OwnedByOther, d)
			}
			s.wantWrites(t, c.WriteAlias(), d.Index)
		})

		t.Run("lost_creation_race", func(t *testing.T) {
			// a has recorded its creation when b creates the index: a's request is answered
			// resource_already_exists, and a joins b's index.
			d := s.dest("lost-race")
			a, b := s.sharedFence(t, nil, groupA), s.sharedFence(t, nil, groupA)
			var cb *Claim
			a.afterPending = func(string) error {
				cb = ensure(t, b, d)
				return nil
			}
			ca := ensure(t, a, d)
			if cb == nil || ca.WriteAlias() != cb.WriteAlias() {
				t.Fatalf("a %v, b %v", ca, cb)
			}
			s.wantWrites(t, ca.WriteAlias(), d.Index)
		})

		t.Run("deleted_index", func(t *testing.T) {
			d := s.dest("deleted")
			a := s.sharedFence(t, nil, groupA)
			ca := ensure(t, a, d)
			s.DeleteIndices(t, d.Index)
			s.wantFencedWrites(t, ca.WriteAlias())
			_, err := a.Ensure(ctx, d)
			wantRefusal(t, err, DestinationMissing, d)
			// A member without a record creates it; the first member, whose record names the
			// deleted index, refuses the new one.
			cb := ensure(t, s.sharedFence(t, nil, groupA), d)
			s.wantWrites(t, cb.WriteAlias(), d.Index)
			_, err = a.Ensure(ctx, d)
			wantRefusal(t, err, DestinationIdentityMismatch, d)
		})
	})
}

// TestSharedConcurrentCreation: members creating a missing index at the same moment end with
// one index, which both write through the same alias, whoever won; several rounds.
func TestSharedConcurrentCreation(t *testing.T) {
	sharedEngines(t, func(t *testing.T, s *server) {
		for round := 0; round < 5; round++ {
			d := s.dest(fmt.Sprintf("race-%d", round))
			members := []*Fence{s.sharedFence(t, nil, groupA), s.sharedFence(t, nil, groupA), s.sharedFence(t, nil, groupA)}
			claims := make([]*Claim, len(members))
			errs := make([]error, len(members))
			var start, done sync.WaitGroup
			start.Add(1)
			for i, f := range members {
				done.Add(1)
				go func() {
					defer done.Done()
					start.Wait()
					claims[i], errs[i] = f.Ensure(context.Background(), d)
				}()
			}
			start.Done()
			done.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			for i, c := range claims {
				if c.WriteAlias() != claims[0].WriteAlias() {
					t.Fatalf("round %d: member %d holds %s, member 0 %s", round, i, c.WriteAlias(), claims[0].WriteAlias())
				}
			}
			if got := s.aliases(t, d.Index); !slices.Equal(got, []string{claims[0].WriteAlias()}) {
				t.Fatalf("round %d: aliases %v", round, got)
			}
			s.wantWrites(t, claims[0].WriteAlias(), d.Index)
			for i, f := range members {
				s.wantWrites(t, reclaim(t, f, claims[i]).WriteAlias(), d.Index)
			}
		}
	})
}

// TestSharedGenerations: a table created with the read alias (generation 1) or as a legacy
// index is joined by the other members, whatever their own read_alias; reindex operations are
// refused with ErrSharedOwner and leave the table as it was.
func TestSharedGenerations(t *testing.T) {
	ctx := context.Background()
	sharedEngines(t, func(t *testing.T, s *server) {
		for _, legacy := range []bool{false, true} {
			t.Run(fmt.Sprintf("legacy_%v", legacy), func(t *testing.T) {
				d := s.dest(fmt.Sprintf("gens-%v", legacy))
				// Both create at once: the loser joins.
				a, b := s.sharedFence(t, nil, groupA), s.sharedFence(t, nil, groupA)
				var ga, gb *Generations
				var errA, errB error
				var wg sync.WaitGroup
				wg.Add(2)
				go func() { defer wg.Done(); ga, errA = a.EnsureTable(ctx, d, legacy) }()
				go func() { defer wg.Done(); gb, errB = b.EnsureTable(ctx, d, legacy) }()
				wg.Wait()
				if err := errors.Join(errA, errB); err != nil {
					t.Fatal(err)
				}
				want := GenerationIndex(d.Index, 1)
				if legacy {
					want = d.Index
				}
				if ga.Live().Index() != want || gb.Live().WriteAlias() != ga.Live().WriteAlias() || gb.ReadAlias() != ga.ReadAlias() {
					t.Fatalf("a %s (%q), b %s (%q)", ga.Live().WriteAlias(), ga.ReadAlias(), gb.Live().WriteAlias(), gb.ReadAlias())
				}
				if !legacy {
					if got := s.readAliasTargets(t, d.Index); !slices.Equal(got, []string{want}) {
						t.Fatalf("read alias resolves to %v", got)
					}
				}
				// A third member configured the other way joins what exists.
				gc, err := s.sharedFence(t, nil, groupA).EnsureTable(ctx, d, !legacy)
				if err != nil || gc.Live().WriteAlias() != ga.Live().WriteAlias() {
					t.Fatalf("third member: %v", err)
				}
				for _, g := range []*Generations{ga, gb, gc} {
					s.wantWrites(t, g.Live().WriteAlias(), want)
				}
				if gb, err = b.ReclaimTable(ctx, gb); err != nil {
					t.Fatal(err)
				}
				s.wantWrites(t, ga.Live().WriteAlias(), want)

				wantShared := func(what string, err error) {
					t.Helper()
					if !errors.Is(err, ErrSharedOwner) {
						t.Fatalf("%s: %v, want ErrSharedOwner", what, err)
					}
				}
				_, err = b.BeginGeneration(ctx, gb, d)
				wantShared("BeginGeneration", err)
				_, err = b.Switch(ctx, gb, 0)
				wantShared("Switch", err)
				_, err = b.AbandonGeneration(ctx, gb)
				wantShared("AbandonGeneration", err)
				_, _, err = b.DeleteRetired(ctx, gb, time.Now())
				wantShared("DeleteRetired", err)
				if s.IndexExists(t, GenerationIndex(d.Index, 2)) {
					t.Fatal("a refused BeginGeneration created a generation")
				}
				for _, g := range []*Generations{ga, gb, gc} {
					s.wantWrites(t, g.Live().WriteAlias(), want)
				}
			})
		}
	})
}

// TestSharedDropIndices: DropIndices checks the marker against the shared owner.
func TestSharedDropIndices(t *testing.T) {
	ctx := context.Background()
	sharedEngines(t, func(t *testing.T, s *server) {
		d := s.dest("drop")
		st := statestore.NewMemory()
		ensure(t, s.sharedFence(t, st, groupA), d)
		_, err := s.sharedFence(t, st, "").DropIndices(ctx, d.Pipeline)
		if ClassOf(err) != OwnedByOther || !s.IndexExists(t, d.Index) {
			t.Fatalf("DropIndices without the shared owner: %v", err)
		}
		dropped, err := s.sharedFence(t, st, groupA).DropIndices(ctx, d.Pipeline)
		if err != nil || !slices.Equal(dropped, []string{d.Index}) || s.IndexExists(t, d.Index) {
			t.Fatalf("dropped %v, %v", dropped, err)
		}
	})
}
