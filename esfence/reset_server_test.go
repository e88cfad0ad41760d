package esfence

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestResetResumes cuts a Reset short at each point -- after the table record says so (before
// the empty generation exists), after a legacy index is fenced off -- and checks that the next
// claim completes it: the new generation live and empty behind the read alias, the floor and
// the relation recorded.
func TestResetResumes(t *testing.T) {
	ctx := context.Background()
	enginesAndStores(t, func(t *testing.T, s *server) {
		for _, tc := range []struct {
			name   string
			legacy bool
			crash  func(f *Fence)
		}{
			{"recorded", false, func(f *Fence) { f.afterPending = func(string) error { return errCrash } }},
			{"legacy-recorded", true, func(f *Fence) { f.afterPending = func(string) error { return errCrash } }},
			{"legacy-fenced", true, func(f *Fence) { f.afterRotate = func(string) error { return errCrash } }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				st := s.newStore(t)
				f := s.fence(t, st)
				d := s.dest("reset-" + tc.name)
				d.Index = "s32-" + d.Index
				s.DeleteAtCleanup(t, d.Index+"*")
				g, err := f.EnsureTable(ctx, d, tc.legacy)
				if err != nil {
					t.Fatal(err)
				}
				s.write(t, g.Live().WriteAlias(), "index", "old")
				crashing := s.fence(t, st)
				tc.crash(crashing)
				if _, err := crashing.Reset(ctx, g, d, Reset{Floor: 42, Relation: "r2", Retire: "r1", RetireAt: 42}, time.Hour); err != errCrash {
					t.Fatalf("reset: %v, want the simulated crash", err)
				}
				g, err = s.fence(t, st).EnsureTable(ctx, d, tc.legacy)
				if err != nil {
					t.Fatalf("claim after the crash: %v", err)
				}
				want := GenerationIndex(d.Index, 1)
				if !tc.legacy {
					want = GenerationIndex(d.Index, 2)
				}
				if g.Live().Index() != want || g.Next() != nil || g.Floor() != 42 || g.Relation() != "r2" || !g.RelationRetired("r1", 41) || g.RelationRetired("r1", 42) {
					t.Fatalf("after the crash: live %s (want %s), floor %d, relation %q, retired %v", g.Live().Index(), want, g.Floor(), g.Relation(), g.RetiredRelations())
				}
				if got := s.readAliasTargets(t, d.Index); !slices.Equal(got, []string{want}) {
					t.Fatalf("the read alias resolves to %v, want [%s]", got, want)
				}
				if n, err := s.Count(ctx, want); err != nil || n != 0 {
					t.Fatalf("the new generation holds %d documents (%v), want none", n, err)
				}
				s.wantWrites(t, g.Live().WriteAlias(), want)
				bound, retired, err := f.Relations(ctx, d.Pipeline, d.Sink)
				if err != nil || bound["r2"].Name != d.Index || bound["r2"].Table != d.Table || retired["r1"].Name != d.Index {
					t.Fatalf("Relations: %v %v %v", bound, retired, err)
				}
			})
		}
	})
}
