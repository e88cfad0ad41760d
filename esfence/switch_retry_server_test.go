package esfence

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/statestore"
)

// TestGenerationSwitchRetried cuts a switch short at each point -- after the table record says
// switching, after the cluster made it (its answer lost), after the legacy index is fenced
// off -- and calls Switch again, in the same
// process, with the value the failed Switch returned: it completes the switch with the claims
// in hand, as a claim would. Abandoning the begun switch is refused. A copy of the deployment
// whose claim completed the switch meanwhile fences the retry, which changes nothing.
func TestGenerationSwitchRetried(t *testing.T) {
	ctx := context.Background()
	engines(t, func(t *testing.T, s *server) {
		for _, tc := range []struct {
			name   string
			legacy bool
			crash  func(f *Fence)
			// applied: the cluster made the switch, its answer was lost (only the record is behind).
			applied bool
		}{
			{"recorded", false, func(f *Fence) { f.afterPending = func(string) error { return errCrash } }, false},
			{"applied", false, func(f *Fence) { f.afterPending = func(string) error { return errCrash } }, true},
			{"legacy-recorded", true, func(f *Fence) { f.afterPending = func(string) error { return errCrash } }, false},
			{"legacy-fenced", true, func(f *Fence) { f.afterRotate = func(string) error { return errCrash } }, false},
		} {
			// begun is a table whose switch f cut short, and the value Switch returned.
			begun := func(t *testing.T, f *Fence, d Destination) *Generations {
				t.Helper()
				if tc.legacy {
					ensure(t, f, d)
				}
				g, err := f.EnsureTable(ctx, d, false)
				if err != nil {
					t.Fatal(err)
				}
				if g, err = f.BeginGeneration(ctx, g, d); err != nil {
					t.Fatal(err)
				}
				tc.crash(f)
				n, err := f.Switch(ctx, g, time.Hour)
				if err != errCrash || n == nil || !n.Switching() || n.Next() == nil {
					t.Fatalf("switch: %v, %v; want the simulated crash and the begun switch", n, err)
				}
				f.afterPending, f.afterRotate = nil, nil
				if _, err := f.Switch(ctx, g, time.Hour); !errors.Is(err, Fenced) {
					t.Fatalf("a switch from the value before the failed one: %v, want fenced", err)
				}
				if _, err := f.AbandonGeneration(ctx, n); err == nil {
					t.Fatal("a begun switch was abandoned")
				}
				return n
			}

			t.Run(tc.name, func(t *testing.T) {
				st := statestore.NewMemory()
				f := s.fence(t, st)
				d := s.dest("h9-retry-" + tc.name)
				g := begun(t, f, d)
				next := g.Next().Index()
				if tc.applied {
					live := g.Live()
					s.OK(t, esapi.IndicesUpdateAliasesRequest{Body: strings.NewReader(fmt.Sprintf(`{"actions":[
						{"remove":{"index":%q,"alias":%q}},{"remove":{"index":%q,"alias":%q}},
						{"add":{"index":%q,"alias":%q,"is_write_index":false}}]}`, live.Index(), live.WriteAlias(), live.Index(), d.Index, next, d.Index))})
				}
				g, err := f.Switch(ctx, g, time.Hour)
				if err != nil {
					t.Fatalf("the retried switch: %v", err)
				}
				if g.Live().Index() != next || g.Next() != nil || g.Switching() {
					t.Fatalf("after the retried switch the live generation is %s, want %s", g.Live().Index(), next)
				}
				if got := s.readAliasTargets(t, d.Index); !slices.Equal(got, []string{next}) {
					t.Fatalf("the read alias resolves to %v, want [%s]", got, next)
				}
				s.wantWrites(t, g.Live().WriteAlias(), next)
				if !tc.legacy && len(g.Retired()) != 1 {
					t.Fatalf("retired after the retried switch: %v", g.Retired())
				}
				// A restart claims what the retry recorded.
				r, err := s.fence(t, st).EnsureTable(ctx, d, false)
				if err != nil || r.Live().Index() != next || r.Next() != nil {
					t.Fatalf("the claim after the retried switch: %v, %v", r, err)
				}
			})

			t.Run(tc.name+"-copy", func(t *testing.T) {
				st := statestore.NewMemory()
				f := s.fence(t, st)
				d := s.dest("h9-copy-" + tc.name)
				g := begun(t, f, d)
				old, next := g.Live().Index(), g.Next().Index()
				c, err := s.fence(t, st).EnsureTable(ctx, d, false) // a copy of the deployment
				if err != nil || c.Live().Index() != next {
					t.Fatalf("the copy's claim: %v, %v", c, err)
				}
				if _, err := f.Switch(ctx, g, time.Hour); !errors.Is(err, Fenced) {
					t.Fatalf("the retried switch after a copy's claim: %v, want fenced", err)
				}
				if got := s.readAliasTargets(t, d.Index); !slices.Equal(got, []string{next}) {
					t.Fatalf("the read alias resolves to %v, want [%s]", got, next)
				}
				s.wantWrites(t, c.Live().WriteAlias(), next)
				s.wantFencedWrites(t, g.Next().WriteAlias())
				if !tc.legacy && !s.IndexExists(t, old) {
					t.Fatalf("the retired generation %s was deleted", old)
				}
			})
		}
	})
}
