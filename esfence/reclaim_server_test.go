package esfence

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"

	"github.com/elastic/go-elasticsearch/v8/esapi"
)

// countingTransport counts the requests a fence sends, by method and whether the path is
// _aliases.
type countingTransport struct {
	next esapi.Transport
	mu   sync.Mutex
	gets int
	// aliases counts _aliases requests; other counts every other non-GET request.
	aliases, other int
}

func (c *countingTransport) Perform(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	switch {
	case req.Method == http.MethodGet || req.Method == http.MethodHead:
		c.gets++
	case req.URL.Path == "/_aliases":
		c.aliases++
	default:
		c.other++
	}
	c.mu.Unlock()
	return c.next.Perform(req)
}

func (c *countingTransport) reset() (gets, aliases, other int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	gets, aliases, other = c.gets, c.aliases, c.other
	c.gets, c.aliases, c.other = 0, 0, 0
	return
}

// TestReclaimTablesRound: a round claims a legacy index, a table behind its read alias and a
// table with a generation being filled in three GETs and one _aliases request; every old write
// alias is fenced and every new one writes. A round cut short after the cluster rotated (the
// records not updated) is carried on by the next. A copy of the state store that claimed one
// of the tables since fences the round (fenced, naming that index), and no copy of the
// round's rotations is left behind for the other tables' old aliases.
func TestReclaimTablesRound(t *testing.T) {
	ctx := context.Background()
	enginesAndStores(t, func(t *testing.T, s *server) {
		orig := s.newStore(t)
		ct := &countingTransport{next: s.Transport}
		f, err := New(ct, orig, nil)
		if err != nil {
			t.Fatal(err)
		}
		dLeg, dGen, dFill := s.dest("leg"), s.dest("gen"), s.dest("fill")
		for _, d := range []*Destination{&dLeg, &dGen, &dFill} {
			d.Table.Table = d.Index // one table per index
		}
		leg, err := f.EnsureTable(ctx, dLeg, true)
		if err != nil {
			t.Fatal(err)
		}
		gen, err := f.EnsureTable(ctx, dGen, false)
		if err != nil {
			t.Fatal(err)
		}
		fill, err := f.EnsureTable(ctx, dFill, false)
		if err != nil {
			t.Fatal(err)
		}
		if fill, err = f.BeginGeneration(ctx, fill, dFill); err != nil {
			t.Fatal(err)
		}
		gs := []*Generations{leg, gen, fill}
		targets := func(gs []*Generations) []*Claim {
			var out []*Claim
			for _, g := range gs {
				out = append(out, g.Targets()...)
			}
			return out
		}
		before := targets(gs)
		if len(before) != 4 {
			t.Fatalf("%d targets, want 4", len(before))
		}

		ct.reset()
		ns, err := f.ReclaimTables(ctx, gs)
		if err != nil {
			t.Fatalf("ReclaimTables: %v", err)
		}
		if gets, aliases, other := ct.reset(); gets != 3 || aliases != 1 || other != 0 {
			t.Fatalf("a round of 3 tables sent %d GETs, %d _aliases and %d other requests; want 3, 1, 0", gets, aliases, other)
		}
		after := targets(ns)
		for i, c := range after {
			if c.Index() != before[i].Index() || c.Fence() == before[i].Fence() {
				t.Fatalf("target %d: %s fence %s after %s", i, c.Index(), c.Fence(), before[i].Fence())
			}
			s.wantFencedWrites(t, before[i].WriteAlias())
			s.wantWrites(t, c.WriteAlias(), c.Index())
		}
		if ns[1].ReadAlias() != dGen.Index || ns[2].NextGen() != 2 {
			t.Fatalf("generations lost: read alias %q, next %d", ns[1].ReadAlias(), ns[2].NextGen())
		}

		// Cut short after the cluster rotated every fence, before any record said so.
		f.afterRotate = func(string) error { return errCrash }
		if _, err := f.ReclaimTables(ctx, ns); !errors.Is(err, errCrash) {
			t.Fatalf("cut-short round: %v", err)
		}
		f.afterRotate = nil
		if ns, err = f.ReclaimTables(ctx, ns); err != nil {
			t.Fatalf("the round after a cut-short one: %v", err)
		}
		for _, c := range targets(ns) {
			s.wantWrites(t, c.WriteAlias(), c.Index())
		}

		// A copy claims one table: the next round is fenced for it.
		b := s.fence(t, s.copyStore(t, orig))
		if _, err := b.EnsureTable(ctx, dGen, false); err != nil {
			t.Fatalf("the copy's claim: %v", err)
		}
		kept := targets(ns)
		_, err = f.ReclaimTables(ctx, ns)
		wantRefusal(t, err, Fenced, gen1(dGen))
		s.wantFencedWrites(t, ns[1].Live().WriteAlias())
		_ = kept
	})
}

// gen1 is d's first generation as the claims name it.
func gen1(d Destination) Destination { return gen(d, 1, true) }
