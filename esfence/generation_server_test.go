package esfence

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/statestore"
)

// readAliasTargets are the indices a name resolves to as an alias (none: not an alias).
func (s *server) readAliasTargets(t *testing.T, name string) []string {
	t.Helper()
	res := s.Do(t, esapi.IndicesGetAliasRequest{Name: []string{name}})
	if res.Status == http.StatusNotFound {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(res.Body, &m); err != nil {
		t.Fatal(err)
	}
	var out []string
	for idx := range m {
		out = append(out, idx)
	}
	slices.Sort(out)
	return out
}

// wantReadOnly asserts that a write through the read alias is refused: it has no write index.
func (s *server) wantReadOnly(t *testing.T, alias string) {
	t.Helper()
	s.version++
	_, items := s.Bulk(t, esapi.BulkRequest{}, map[string]any{"index": map[string]any{"_index": alias, "_id": "r", "version": s.version, "version_type": "external"}},
		map[string]any{"k": "v"})
	if len(items) != 1 || items[0].Error == nil {
		t.Fatalf("a write through the read alias %s was taken: %+v", alias, items)
	}
}

// TestGenerations walks a table through its generations on both engines: created as
// <name>-g1 with the read alias (read-only) in one request; a second generation filled beside
// it (both written through their own write aliases); the switch moves the read alias in one
// request and fences the old generation's writes; the retired generation goes only once its
// time has come; a new session claims the live generation only. Then a legacy index (created
// before generations) is migrated: fenced, replaced by the read alias on the new generation.
func TestGenerations(t *testing.T) {
	ctx := context.Background()
	engines(t, func(t *testing.T, s *server) {
		st := s.newStore(t)
		f := s.fence(t, st)
		d := s.dest("gens")
		g, err := f.EnsureTable(ctx, d, false)
		if err != nil {
			t.Fatal(err)
		}
		g1 := GenerationIndex(d.Index, 1)
		if g.Live().Index() != g1 || g.ReadAlias() != d.Index || g.Next() != nil || len(g.Targets()) != 1 {
			t.Fatalf("first claim: live %s, read alias %q", g.Live().Index(), g.ReadAlias())
		}
		if got := s.readAliasTargets(t, d.Index); !slices.Equal(got, []string{g1}) {
			t.Fatalf("read alias resolves to %v, want [%s]", got, g1)
		}
		s.wantWrites(t, g.Live().WriteAlias(), g1)
		s.wantReadOnly(t, d.Index)
		// Documents of the first generation, visible through the read alias.
		if it := s.write(t, g.Live().WriteAlias(), "index", "old"); it.Error != nil {
			t.Fatalf("write: %+v", it.Error)
		}

		// A second generation, with another mapping, filled beside the first.
		d2 := d
		d2.Mapping = json.RawMessage(`{"dynamic":"strict","properties":{"k":{"type":"keyword"},"extra":{"type":"long"}}}`)
		g, err = f.BeginGeneration(ctx, g, d2)
		if err != nil {
			t.Fatal(err)
		}
		g2 := GenerationIndex(d.Index, 2)
		if g.Next() == nil || g.Next().Index() != g2 || len(g.Targets()) != 2 || g.NextGen() != 2 {
			t.Fatalf("after BeginGeneration: next %v, targets %d", g.Next(), len(g.Targets()))
		}
		if got := s.readAliasTargets(t, d.Index); !slices.Equal(got, []string{g1}) {
			t.Fatalf("while filling, the read alias resolves to %v, want [%s]", got, g1)
		}
		if _, err := f.BeginGeneration(ctx, g, d2); err == nil {
			t.Fatal("a second fill of the same table was accepted")
		}
		s.wantWrites(t, g.Next().WriteAlias(), g2)
		if it := s.write(t, g.Next().WriteAlias(), "index", "new"); it.Error != nil {
			t.Fatalf("write: %+v", it.Error)
		}
		// A restart while filling claims both generations again.
		g, err = f.ReclaimTable(ctx, g)
		if err != nil || g.Next() == nil || g.Live().Index() != g1 {
			t.Fatalf("reclaim while filling: %v", err)
		}
		oldWrite := g.Live().WriteAlias()

		g, err = f.Switch(ctx, g, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if g.Live().Index() != g2 || g.Next() != nil || g.LiveGen() != 2 {
			t.Fatalf("after the switch: live %s", g.Live().Index())
		}
		if got := s.readAliasTargets(t, d.Index); !slices.Equal(got, []string{g2}) {
			t.Fatalf("after the switch the read alias resolves to %v, want [%s]", got, g2)
		}
		s.wantFencedWrites(t, oldWrite)
		s.wantReadOnly(t, d.Index)
		s.OK(t, esapi.IndicesRefreshRequest{Index: []string{d.Index}})
		if n, err := s.Count(ctx, d.Index); err != nil || n != 1 {
			t.Fatalf("the read alias shows %d documents, want the new generation's 1", n)
		}
		due := g.Retired()[g1]
		if time.Until(due) < 50*time.Minute {
			t.Fatalf("the old generation is due at %v, want in an hour", due)
		}
		if g, _, err = f.DeleteRetired(ctx, g, time.Now()); err != nil || !s.IndexExists(t, g1) {
			t.Fatalf("a generation not due was deleted (%v)", err)
		}
		var deleted []string
		if g, deleted, err = f.DeleteRetired(ctx, g, due.Add(time.Second)); err != nil || !slices.Equal(deleted, []string{g1}) || s.IndexExists(t, g1) {
			t.Fatalf("deleting the due generation: %v, %v", deleted, err)
		}

		// A new session (another Fence on the same store) claims the live generation.
		g, err = s.fence(t, st).EnsureTable(ctx, d, false)
		if err != nil || g.Live().Index() != g2 || g.Next() != nil {
			t.Fatalf("a new session: %v", err)
		}
		s.wantWrites(t, g.Live().WriteAlias(), g2)

		// Someone moves the read alias: refused, not followed.
		s.OK(t, esapi.IndicesUpdateAliasesRequest{Body: estest.JSONBody(t, map[string]any{"actions": []any{
			map[string]any{"remove": map[string]any{"index": g2, "alias": d.Index}}}})})
		if _, err := s.fence(t, st).EnsureTable(ctx, d, false); err == nil {
			t.Fatal("a table whose read alias is gone was claimed")
		} else {
			wantRefusal(t, err, FenceMalformed, d)
		}

		// A legacy index: created by Ensure under the table's name, then migrated.
		ld := s.dest("legacy")
		lc := ensure(t, f, ld)
		if it := s.write(t, lc.WriteAlias(), "index", "legacy-doc"); it.Error != nil {
			t.Fatalf("write: %+v", it.Error)
		}
		lg, err := f.EnsureTable(ctx, ld, false)
		if err != nil || lg.Live().Index() != ld.Index || lg.ReadAlias() != "" || lg.LiveGen() != 0 {
			t.Fatalf("a legacy index as a table: %v", err)
		}
		if lg, err = f.BeginGeneration(ctx, lg, ld); err != nil {
			t.Fatal(err)
		}
		lg1 := GenerationIndex(ld.Index, 1)
		if it := s.write(t, lg.Next().WriteAlias(), "index", "migrated"); it.Error != nil {
			t.Fatalf("write: %+v", it.Error)
		}
		legacyWrite := lg.Live().WriteAlias()
		if lg, err = f.Switch(ctx, lg, time.Hour); err != nil {
			t.Fatal(err)
		}
		if got := s.readAliasTargets(t, ld.Index); !slices.Equal(got, []string{lg1}) {
			t.Fatalf("after migrating, %s resolves to %v, want [%s]", ld.Index, got, lg1)
		}
		s.wantReadOnly(t, ld.Index)
		if len(lg.Retired()) != 0 {
			t.Fatalf("the legacy index is listed as retired: %v", lg.Retired())
		}
		// Its write alias went with it; a write through it must not create anything.
		estest.WantItemError(t, "index through the legacy write alias", s.write(t, legacyWrite, "index", "x"),
			http.StatusNotFound, "index_not_found_exception", "require_alias")
		if lg, err = s.fence(t, st).EnsureTable(ctx, ld, false); err != nil || lg.Live().Index() != lg1 || lg.ReadAlias() != ld.Index {
			t.Fatalf("the migrated table in a new session: %v", err)
		}

		// Dropping the pipeline deletes every generation, and is not refused by the read
		// alias standing where the legacy index was.
		dropped, err := f.DropIndices(ctx, d.Pipeline)
		if err != nil {
			t.Fatalf("drop: %v (dropped %v)", err, dropped)
		}
		slices.Sort(dropped)
		if want := []string{g2, lg1}; !slices.Equal(dropped, want) {
			t.Fatalf("dropped %v, want %v", dropped, want)
		}
	})
}

// TestGenerationSwitchResumes cuts a switch short at each point -- after the table record says
// switching, after the legacy index is fenced off -- and checks that the next claim completes it.
func TestGenerationSwitchResumes(t *testing.T) {
	ctx := context.Background()
	engines(t, func(t *testing.T, s *server) {
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
				st := statestore.NewMemory()
				f := s.fence(t, st)
				d := s.dest("resume-" + tc.name)
				var g *Generations
				var err error
				if tc.legacy {
					ensure(t, f, d)
				}
				if g, err = f.EnsureTable(ctx, d, false); err != nil {
					t.Fatal(err)
				}
				if g, err = f.BeginGeneration(ctx, g, d); err != nil {
					t.Fatal(err)
				}
				next := g.Next().Index()
				crashing := s.fence(t, st)
				tc.crash(crashing)
				if _, err := crashing.Switch(ctx, g, time.Hour); err != errCrash {
					t.Fatalf("switch: %v, want the simulated crash", err)
				}
				g, err = s.fence(t, st).EnsureTable(ctx, d, false)
				if err != nil {
					t.Fatalf("claim after the crash: %v", err)
				}
				if g.Live().Index() != next || g.Next() != nil {
					t.Fatalf("after the crash the live generation is %s, want %s", g.Live().Index(), next)
				}
				if got := s.readAliasTargets(t, d.Index); !slices.Equal(got, []string{next}) {
					t.Fatalf("the read alias resolves to %v, want [%s]", got, next)
				}
				s.wantWrites(t, g.Live().WriteAlias(), next)
			})
		}
	})
}

// TestGenerationsFenceCopies: the fence holds across generations. A copy of the state store
// claiming a table that is being filled fences the other copy's writes to both generations,
// and the other copy's switch is refused (fenced) and changes nothing; another deployment's
// store is refused the table's generations (owned_by_other).
func TestGenerationsFenceCopies(t *testing.T) {
	ctx := context.Background()
	enginesAndStores(t, func(t *testing.T, s *server) {
		orig := s.newStore(t)
		d := s.dest("copies")
		a := s.fence(t, orig)
		ga, err := a.EnsureTable(ctx, d, false)
		if err != nil {
			t.Fatal(err)
		}
		if ga, err = a.BeginGeneration(ctx, ga, d); err != nil {
			t.Fatal(err)
		}
		b := s.fence(t, s.copyStore(t, orig))
		gb, err := b.EnsureTable(ctx, d, false)
		if err != nil {
			t.Fatalf("the copy's claim: %v", err)
		}
		if len(gb.Targets()) != 2 {
			t.Fatalf("the copy claims %d generations, want 2", len(gb.Targets()))
		}
		for _, c := range ga.Targets() {
			s.wantFencedWrites(t, c.WriteAlias())
		}
		for _, c := range gb.Targets() {
			s.wantWrites(t, c.WriteAlias(), c.Index())
		}
		if _, err := a.Switch(ctx, ga, time.Hour); err == nil {
			t.Fatal("the fenced copy switched the read alias")
		} else {
			wantRefusal(t, err, Fenced, d)
		}
		if got := s.readAliasTargets(t, d.Index); !slices.Equal(got, []string{GenerationIndex(d.Index, 1)}) {
			t.Fatalf("after the refused switch the read alias resolves to %v", got)
		}
		if gb, err = b.Switch(ctx, gb, time.Hour); err != nil {
			t.Fatalf("the claiming copy's switch: %v", err)
		}
		if _, err := s.fence(t, s.newStore(t)).EnsureTable(ctx, d, false); err == nil {
			t.Fatal("another deployment claimed the table")
		}
		other := d
		other.Index = GenerationIndex(d.Index, 2)
		if _, err := s.fence(t, s.newStore(t)).Ensure(ctx, other); err == nil {
			t.Fatal("another deployment claimed a generation")
		} else {
			wantRefusal(t, err, OwnedByOther, other)
		}
	})
}
