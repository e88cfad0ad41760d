package esfence

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/internal/search/searchtest"
	"github.com/tributary-dev/tributary/statestore"
)

// takeover is the shared scene of the FenceOut tests: process A holds the pipeline's lease at
// epoch 1 and has claimed tables in every state a takeover meets; process B takes the lease
// over at epoch 2. Both write through fenced views of ONE state store.
type takeover struct {
	leaser   statestore.Leaser
	pipeline string
	a, b     *Fence
	aLease   statestore.Lease
	gens     map[string]*Generations // A's, by table part
	// aliases are A's write aliases by concrete index, as A last claimed them.
	aliases map[string]string
	// want is what B's FenceOut must report.
	want FenceOutReport
}

// The tables of the scene, by part: a table at its first generation, one with a reindex in
// progress (two generations written), a legacy index, a switched table (its first generation
// retired, without write alias), a table whose index was deleted from the cluster.
const (
	partLive     = "live"
	partReindex  = "reindex"
	partLegacy   = "legacy"
	partSwitched = "switched"
	partGone     = "gone"
)

// newTakeover builds the scene: dest makes a destination of a part, newFence a Fence over a
// store view, deleteIndex deletes a concrete index from the cluster; expire ends A's lease
// (A stops renewing: the clock moves past it, or the test sleeps past a short ttl).
func newTakeover(t *testing.T, leaser statestore.Leaser, dest func(part string) Destination, newFence func(statestore.Store) *Fence,
	deleteIndex func(name string), ttl time.Duration, expire func()) *takeover {
	t.Helper()
	ctx := context.Background()
	tk := &takeover{leaser: leaser, pipeline: dest(partLive).Pipeline, gens: map[string]*Generations{}, aliases: map[string]string{}}
	var err error
	if tk.aLease, err = leaser.Acquire(ctx, tk.pipeline, "process-a", ttl); err != nil || tk.aLease.Epoch != 1 {
		t.Fatalf("A's Acquire: %+v, %v", tk.aLease, err)
	}
	tk.a = newFence(leaser.Fenced(tk.pipeline, tk.aLease.Epoch))
	ensureTable := func(part string, legacy bool) *Generations {
		g, err := tk.a.EnsureTable(ctx, dest(part), legacy)
		if err != nil {
			t.Fatalf("A's EnsureTable %s: %v", part, err)
		}
		return g
	}
	for _, p := range []string{partLive, partReindex, partSwitched, partGone} {
		tk.gens[p] = ensureTable(p, false)
	}
	tk.gens[partLegacy] = ensureTable(partLegacy, true)
	if tk.gens[partReindex], err = tk.a.BeginGeneration(ctx, tk.gens[partReindex], dest(partReindex)); err != nil {
		t.Fatal(err)
	}
	g := tk.gens[partSwitched]
	if g, err = tk.a.BeginGeneration(ctx, g, dest(partSwitched)); err != nil {
		t.Fatal(err)
	}
	if tk.gens[partSwitched], err = tk.a.Switch(ctx, g, time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, g := range tk.gens {
		for _, c := range g.Targets() {
			tk.aliases[c.Index()] = c.WriteAlias()
		}
	}
	gone := tk.gens[partGone].Live().Index()
	deleteIndex(gone)
	delete(tk.aliases, gone)

	tk.want = FenceOutReport{
		Rotated: []string{dest(partLegacy).Index, GenerationIndex(dest(partLive).Index, 1),
			GenerationIndex(dest(partReindex).Index, 1), GenerationIndex(dest(partReindex).Index, 2),
			GenerationIndex(dest(partSwitched).Index, 2)},
		Missing:   []string{gone},
		Unaliased: []string{GenerationIndex(dest(partSwitched).Index, 1)},
	}
	slices.Sort(tk.want.Rotated)

	// A stops renewing (paused); B takes the lease over.
	expire()
	bLease, err := leaser.Acquire(ctx, tk.pipeline, "process-b", ttl)
	if err != nil || bLease.Epoch != 2 {
		t.Fatalf("B's Acquire: %+v, %v", bLease, err)
	}
	tk.b = newFence(leaser.Fenced(tk.pipeline, bLease.Epoch))
	return tk
}

// wantReport compares a FenceOut report with the scene's.
func (tk *takeover) wantReport(t *testing.T, got FenceOutReport) {
	t.Helper()
	if !slices.Equal(got.Rotated, tk.want.Rotated) || !slices.Equal(got.Missing, tk.want.Missing) || !slices.Equal(got.Unaliased, tk.want.Unaliased) {
		t.Fatalf("FenceOut report %+v, want %+v", got, tk.want)
	}
}

// wantOldActiveRefused checks that A, resumed, is refused by the state store before it sends
// any _aliases request: its claim round, a single claim and its own FenceOut. aliasRequests
// counts the _aliases requests the cluster received so far.
func (tk *takeover) wantOldActiveRefused(t *testing.T, aliasRequests func() int) {
	t.Helper()
	ctx := context.Background()
	before := aliasRequests()
	var gs []*Generations
	for _, p := range []string{partLive, partReindex, partLegacy, partSwitched} {
		gs = append(gs, tk.gens[p])
	}
	if _, err := tk.a.ReclaimTables(ctx, gs); !errors.Is(err, statestore.ErrNotLeader) || ClassOf(err) != "" {
		t.Fatalf("A's claim round after the takeover: %v, want ErrNotLeader and no refusal", err)
	}
	if _, err := tk.a.Reclaim(ctx, tk.gens[partLive].Live()); !errors.Is(err, statestore.ErrNotLeader) || ClassOf(err) != "" {
		t.Fatalf("A's claim after the takeover: %v, want ErrNotLeader and no refusal", err)
	}
	if _, err := tk.a.ReclaimTable(ctx, tk.gens[partReindex]); !errors.Is(err, statestore.ErrNotLeader) || ClassOf(err) != "" {
		t.Fatalf("A's table claim after the takeover: %v, want ErrNotLeader and no refusal", err)
	}
	if _, err := tk.a.FenceOut(ctx, tk.pipeline); !errors.Is(err, statestore.ErrNotLeader) || ClassOf(err) != "" {
		t.Fatalf("A's FenceOut after the takeover: %v, want ErrNotLeader and no refusal", err)
	}
	if n := aliasRequests() - before; n != 0 {
		t.Fatalf("the old active sent %d _aliases requests after the takeover", n)
	}
}

// bClaims has B claim every table the way its sink's first Writes do, and returns the new
// write aliases by concrete index.
func (tk *takeover) bClaims(t *testing.T, dest func(part string) Destination) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range []string{partLive, partReindex, partLegacy, partSwitched} {
		g, err := tk.b.EnsureTable(context.Background(), dest(p), p == partLegacy)
		if err != nil {
			t.Fatalf("B's EnsureTable %s after FenceOut: %v", p, err)
		}
		for _, c := range g.Targets() {
			out[c.Index()] = c.WriteAlias()
		}
	}
	if _, err := tk.b.EnsureTable(context.Background(), dest(partGone), false); ClassOf(err) != DestinationMissing {
		t.Fatalf("B's EnsureTable of the deleted table: %v, want destination_missing", err)
	}
	return out
}

// fakeTakeover is the scene on the fake node, on a Memory leaser whose clock the test moves.
func fakeTakeover(t *testing.T) (*takeover, *searchtest.Cluster, func(part string) Destination) {
	t.Helper()
	c := searchtest.New(t, nil)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	st := statestore.NewMemoryWithOptions(&statestore.MemoryOptions{Now: clock})
	s := &server{prefix: "ha"}
	dest := func(part string) Destination { return s.dest(part) }
	newFence := func(v statestore.Store) *Fence {
		f, err := New(c.Client(t), v, nil)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	tk := newTakeover(t, st, dest, newFence, c.DeleteIndex, time.Minute, func() {
		mu.Lock()
		now = now.Add(2 * time.Minute)
		mu.Unlock()
	})
	return tk, c, dest
}

// wantFakeFencedOut checks the fake's aliases: none of A's write aliases remains, and every
// index B rotated carries exactly the fence its record names as current.
func wantFakeFencedOut(t *testing.T, tk *takeover, c *searchtest.Cluster) {
	t.Helper()
	for index, alias := range tk.aliases {
		ix := c.Index(index)
		if ix == nil || ix.Aliases[alias] {
			t.Fatalf("%s still carries A's write alias %s", index, alias)
		}
	}
	for _, index := range tk.want.Rotated {
		r, err := tk.leaser.Get(context.Background(), tk.pipeline, Namespace, index)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := decodeRecord(r.Value)
		if err != nil || rec.Pending != "" {
			t.Fatalf("record of %s after FenceOut: %+v, %v", index, rec, err)
		}
		if ix := c.Index(index); !ix.Aliases[writeAlias(rec.Instance, rec.Current)] {
			t.Fatalf("%s does not carry the recorded fence %s: %v", index, rec.Current, ix.Aliases)
		}
	}
}

// TestFenceOutFake: B's FenceOut rotates every write alias of the pipeline in one _aliases
// request -- both generations of a reindex, a legacy index, a switched table's live
// generation -- reports the deleted index and the retired generation, and leaves A's write
// aliases gone; A resumed is refused by the store (ErrNotLeader) before any _aliases request;
// B then claims every table normally.
func TestFenceOutFake(t *testing.T) {
	tk, c, dest := fakeTakeover(t)
	before := c.Count("_aliases")
	rep, err := tk.b.FenceOut(context.Background(), tk.pipeline)
	if err != nil {
		t.Fatal(err)
	}
	tk.wantReport(t, rep)
	if n := c.Count("_aliases") - before; n != 1 {
		t.Fatalf("FenceOut sent %d _aliases requests, want 1", n)
	}
	wantFakeFencedOut(t, tk, c)
	tk.wantOldActiveRefused(t, func() int { return c.Count("_aliases") })
	fresh := tk.bClaims(t, dest)
	for index, alias := range fresh {
		if ix := c.Index(index); ix == nil || !ix.Aliases[alias] || len(internalAliases(c, index)) != 1 {
			t.Fatalf("%s after B's claim: %v", index, ix)
		}
	}
	// A second FenceOut (a takeover retried) rotates again, and B claims again.
	if rep, err := tk.b.FenceOut(context.Background(), tk.pipeline); err != nil {
		t.Fatal(err)
	} else {
		tk.wantReport(t, rep)
	}
	tk.bClaims(t, dest)
}

// TestFenceOutResumesFake cuts FenceOut short between its pending records and its _aliases
// request (as a crash would): nothing rotated, A's aliases still in place; a second FenceOut
// completes, from the fences the first one left pending.
func TestFenceOutResumesFake(t *testing.T) {
	tk, c, _ := fakeTakeover(t)
	before := c.Count("_aliases")
	calls := 0
	tk.b.afterPending = func(string) error {
		calls++
		if calls == 3 {
			return errCrash
		}
		return nil
	}
	if _, err := tk.b.FenceOut(context.Background(), tk.pipeline); !errors.Is(err, errCrash) {
		t.Fatalf("FenceOut cut short: %v", err)
	}
	if n := c.Count("_aliases") - before; n != 0 {
		t.Fatalf("FenceOut cut before its _aliases request sent %d", n)
	}
	for index, alias := range tk.aliases {
		if !c.Index(index).Aliases[alias] {
			t.Fatalf("%s lost A's alias though nothing was rotated", index)
		}
	}
	// And cut after the _aliases request, before the current fences are recorded.
	tk.b.afterPending = nil
	tk.b.afterRotate = func(string) error { return errCrash }
	if _, err := tk.b.FenceOut(context.Background(), tk.pipeline); !errors.Is(err, errCrash) {
		t.Fatalf("FenceOut cut short: %v", err)
	}
	tk.b.afterRotate = nil
	rep, err := tk.b.FenceOut(context.Background(), tk.pipeline)
	if err != nil {
		t.Fatal(err)
	}
	tk.wantReport(t, rep)
	wantFakeFencedOut(t, tk, c)
	tk.wantOldActiveRefused(t, func() int { return c.Count("_aliases") })
}

// TestFenceOutRacesOldRotationFake: A recorded a pending fence (its claim was about to rotate)
// and was paused before its _aliases request; B takes over, and A's request lands between B's
// reads and B's _aliases request. B's request is refused as a whole (A moved a fence); B's
// next pass carries on from A's fence, which a record named during this FenceOut -- the one
// A's record had as pending before B's own pending record replaced it.
func TestFenceOutRacesOldRotationFake(t *testing.T) {
	tk, c, _ := fakeTakeover(t)
	live := tk.gens[partLive].Live()
	// The pending fence A's claim recorded while it held the lease (written here through the
	// store itself: the content is what A's view of epoch 1 wrote before the takeover).
	r, err := tk.leaser.Get(context.Background(), tk.pipeline, Namespace, live.Index())
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := decodeRecord(r.Value)
	aNext := "9-00000000000000aa"
	rec.Pending = aNext
	if _, err := tk.leaser.Put(context.Background(), tk.pipeline, Namespace, live.Index(), rec.encode(), r.Revision); err != nil {
		t.Fatal(err)
	}
	landed := false
	c.Intercept(func(r *searchtest.Request) *searchtest.Reply {
		if r.Endpoint == "_aliases" && !landed {
			landed = true
			c.EditIndex(live.Index(), func(ix *searchtest.Index) {
				delete(ix.Aliases, live.WriteAlias())
				ix.Aliases[writeAlias(live.Instance(), aNext)] = true
			})
		}
		return nil
	})
	before := c.Count("_aliases")
	rep, err := tk.b.FenceOut(context.Background(), tk.pipeline)
	if err != nil {
		t.Fatal(err)
	}
	tk.wantReport(t, rep)
	if n := c.Count("_aliases") - before; !landed || n != 2 {
		t.Fatalf("A's rotation landed %v; B sent %d _aliases requests, want 2 (the refused one, then the rotation)", landed, n)
	}
	if ix := c.Index(live.Index()); ix.Aliases[writeAlias(live.Instance(), aNext)] || len(internalAliases(c, live.Index())) != 1 {
		t.Fatalf("A's late fence is still in place: %v", ix.Aliases)
	}
	wantFakeFencedOut(t, tk, c)
}

// TestFenceOutRefusalsFake: an index whose fence another copy of the state store moved is
// refused (fenced) and left as it is; every other index is still rotated, in one request.
// Under a shared owner FenceOut sends nothing.
func TestFenceOutRefusalsFake(t *testing.T) {
	tk, c, _ := fakeTakeover(t)
	live := tk.gens[partLive].Live()
	c.EditIndex(live.Index(), func(ix *searchtest.Index) {
		delete(ix.Aliases, live.WriteAlias())
		ix.Aliases[writeAlias(live.Instance(), "7-00000000000000cc")] = true
	})
	before := c.Count("_aliases")
	rep, err := tk.b.FenceOut(context.Background(), tk.pipeline)
	if ClassOf(err) != Fenced {
		t.Fatalf("FenceOut with a moved fence: %v, want fenced", err)
	}
	var ce *ConflictError
	if !errors.As(err, &ce) || ce.Index != live.Index() || ce.Table.Table != "orders" {
		t.Fatalf("the refusal names %+v", ce)
	}
	if n := c.Count("_aliases") - before; n != 1 {
		t.Fatalf("%d _aliases requests, want 1", n)
	}
	want := slices.DeleteFunc(slices.Clone(tk.want.Rotated), func(s string) bool { return s == live.Index() })
	if !slices.Equal(rep.Rotated, want) {
		t.Fatalf("rotated %v, want %v", rep.Rotated, want)
	}
	for index, alias := range tk.aliases {
		if index != live.Index() && c.Index(index).Aliases[alias] {
			t.Fatalf("%s still carries A's alias", index)
		}
	}

	shared, err := New(c.Client(t), statestore.NewMemory(), &Options{SharedOwner: "group"})
	if err != nil {
		t.Fatal(err)
	}
	n := len(c.Requests())
	if _, err := shared.FenceOut(context.Background(), tk.pipeline); !errors.Is(err, ErrSharedOwner) {
		t.Fatalf("FenceOut under a shared owner: %v", err)
	}
	if len(c.Requests()) != n {
		t.Fatal("FenceOut under a shared owner sent requests")
	}
}

// TestFenceOutNothingRecordedFake: a pipeline without records sends nothing.
func TestFenceOutNothingRecordedFake(t *testing.T) {
	f, c := fakeFence(t, nil)
	rep, err := f.FenceOut(context.Background(), "nothing-here")
	if err != nil || len(rep.Rotated)+len(rep.Missing)+len(rep.Unaliased) != 0 || len(c.Requests()) != 0 {
		t.Fatalf("FenceOut of an empty pipeline: %+v, %v, %d requests", rep, err, len(c.Requests()))
	}
}

// TestFenceOutManyIndicesFake: the reads of many long index names are split into GETs of at
// most maxNamesPerGet bytes of names, and every index is still rotated by ONE _aliases request.
func TestFenceOutManyIndicesFake(t *testing.T) {
	ctx := context.Background()
	f, c := fakeFence(t, nil)
	var names []string
	for i := range 40 {
		d := stubDest()
		d.Index = fmt.Sprintf("%s-%03d", strings.Repeat("x", 200), i)
		names = append(names, d.Index)
		if _, err := f.Ensure(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	n := len(c.Requests())
	aliases := c.Count("_aliases")
	rep, err := f.FenceOut(ctx, stubDest().Pipeline)
	if err != nil || !slices.Equal(rep.Rotated, names) {
		t.Fatalf("FenceOut: %v, rotated %d of %d", err, len(rep.Rotated), len(names))
	}
	if got := c.Count("_aliases") - aliases; got != 1 {
		t.Fatalf("%d _aliases requests, want 1", got)
	}
	gets, seen := 0, map[string]bool{}
	for _, r := range c.Requests()[n:] {
		if r.Method != "GET" || !strings.HasPrefix(r.Path, "/xxx") {
			continue
		}
		gets++
		path := strings.TrimPrefix(r.Path, "/")
		if len(path) > maxNamesPerGet {
			t.Fatalf("a GET of %d bytes of names", len(path))
		}
		for _, name := range strings.Split(path, ",") {
			seen[name] = true
		}
	}
	if want := (len(names)*205 + maxNamesPerGet - 1) / maxNamesPerGet; gets < want || len(seen) != len(names) {
		t.Fatalf("%d GETs naming %d indices, want at least %d GETs naming %d", gets, len(seen), want, len(names))
	}
}
