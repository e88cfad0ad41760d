package esfence

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/internal/search/searchtest"
	"github.com/tributary-dev/tributary/statestore"
)

// Shared owners on the fake node: the protocol the server tests (shared_server_test.go) pin on
// both engines, plus the interleavings only hooks can force.

const groupA, groupB = "orders-consumers", "billing-consumers"

// member is a Fence of its own state store (its own deployment identity) on c, claiming under
// the shared owner (exclusive when owner is "").
func member(t *testing.T, c *searchtest.Cluster, st statestore.Store, owner string) *Fence {
	t.Helper()
	if st == nil {
		st = statestore.NewMemory()
	}
	f, err := New(c.Client(t), st, &Options{SharedOwner: owner})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// internalAliases are the df-w-* aliases of a fake index.
func internalAliases(c *searchtest.Cluster, index string) []string {
	var out []string
	if ix := c.Index(index); ix != nil {
		for a := range ix.Aliases {
			if strings.HasPrefix(a, internalPrefix) {
				out = append(out, a)
			}
		}
	}
	slices.Sort(out)
	return out
}

func fakeMarker(t *testing.T, c *searchtest.Cluster, index string) Marker {
	t.Helper()
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(c.Index(index).Mappings["_meta"], &meta); err != nil {
		t.Fatal(err)
	}
	var m Marker
	if err := json.Unmarshal(meta[MarkerKey], &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestCheckSharedOwner(t *testing.T) {
	for _, ok := range []string{"orders-consumers", "g", "Gruppe Nord 1", "grüppe/ä.b_c:d", strings.Repeat("x", MaxSharedOwnerBytes)} {
		if err := CheckSharedOwner(ok); err != nil {
			t.Errorf("CheckSharedOwner(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", strings.Repeat("x", MaxSharedOwnerBytes+1), " Qz7", "Qz7 ", "Qz7\n", "Qz7\x00", "Qz7\t1",
		"Qz7\xff", "Qz7\u200b", "Qz7\u00a0x"} {
		err := CheckSharedOwner(bad)
		if err == nil {
			t.Errorf("CheckSharedOwner(%q) accepted", bad)
			continue
		}
		if strings.Contains(err.Error(), "Qz7") {
			t.Errorf("the error %q quotes the name", err)
		}
		if _, err := New(searchtest.New(t, nil).Client(t), statestore.NewMemory(), &Options{SharedOwner: bad}); err == nil && bad != "" {
			t.Errorf("New accepted shared owner %q", bad)
		}
	}
	if got := SharedDeployment("g"); got != SharedOwnerPrefix+"g" || !strings.HasPrefix(got, "shared:") {
		t.Fatalf("SharedDeployment: %q", got)
	}
}

// Two members (separate state stores) of one shared owner: the first creates, the second joins
// the same write alias; claims never rotate it; the marker names the shared owner; others are
// refused.
func TestSharedJoinFake(t *testing.T) {
	ctx := context.Background()
	c := searchtest.New(t, nil)
	d := stubDest()
	stA, stB := statestore.NewMemory(), statestore.NewMemory()
	a, b := member(t, c, stA, groupA), member(t, c, stB, groupA)
	ca, err := a.Ensure(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if m := fakeMarker(t, c, d.Index); m.Owner.Deployment != SharedDeployment(groupA) || m.Owner.Pipeline != d.Pipeline || m.Instance != ca.Instance() {
		t.Fatalf("marker %+v", m)
	}
	cb, err := b.Ensure(ctx, d) // no record in b's store: adopted, not unrecorded_destination
	if err != nil {
		t.Fatal(err)
	}
	if cb.WriteAlias() != ca.WriteAlias() || cb.Instance() != ca.Instance() {
		t.Fatalf("b joined %s, a holds %s", cb.WriteAlias(), ca.WriteAlias())
	}
	r, err := stB.Get(ctx, d.Pipeline, Namespace, d.Index)
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := decodeRecord(r.Value); err != nil || rec.Instance != ca.Instance() || rec.Current != ca.Fence() || rec.Pending != "" {
		t.Fatalf("b's record %s (%v)", r.Value, err)
	}
	for i := 0; i < 3; i++ {
		if ca, err = a.Reclaim(ctx, ca); err != nil {
			t.Fatal(err)
		}
		if cb, err = b.Reclaim(ctx, cb); err != nil {
			t.Fatal(err)
		}
		if ca.WriteAlias() != cb.WriteAlias() || !slices.Equal(internalAliases(c, d.Index), []string{ca.WriteAlias()}) {
			t.Fatalf("after reclaims: a %s, b %s, index %v", ca.WriteAlias(), cb.WriteAlias(), internalAliases(c, d.Index))
		}
	}
	if _, err := b.Fields(ctx, cb); err != nil {
		t.Fatal(err)
	}
	if n := c.Count("_aliases"); n != 0 {
		t.Fatalf("%d _aliases requests: a shared claim never rotates", n)
	}

	// Another shared owner, and a deployment without one, are refused; so is a member of
	// the same owner with the same state store but without the option.
	for name, f := range map[string]*Fence{
		"other_owner": member(t, c, nil, groupB),
		"exclusive":   member(t, c, nil, ""),
		"same_store":  member(t, c, stA, ""),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := f.Ensure(ctx, d)
			ce := wantRefusal(t, err, OwnedByOther, d)
			if ce.OwnerDigest != OwnerDigest(SharedDeployment(groupA), d.Pipeline, d.Sink) || strings.Contains(err.Error(), groupA) {
				t.Fatalf("refusal %q: want the shared owner's digest, never its name", err)
			}
			if name != "other_owner" && !strings.Contains(ce.Detail, "shared owner") {
				t.Fatalf("detail %q does not say the index has a shared owner", ce.Detail)
			}
		})
	}
	// Another pipeline or sink of the same owner is another owner too.
	other := d
	other.Sink = "es-other"
	_, err = b.Ensure(ctx, other)
	wantRefusal(t, err, OwnedByOther, other)
}

// An exclusive deployment's index is refused to a shared claimant, with the same state store
// too.
func TestSharedRefusesExclusiveIndexFake(t *testing.T) {
	c := searchtest.New(t, nil)
	d := stubDest()
	st := statestore.NewMemory()
	if _, err := member(t, c, st, "").Ensure(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	for _, f := range []*Fence{member(t, c, st, groupA), member(t, c, nil, groupA)} {
		_, err := f.Ensure(context.Background(), d)
		if ce := wantRefusal(t, err, OwnedByOther, d); !strings.Contains(ce.Detail, "one deployment alone") {
			t.Fatalf("detail %q", ce.Detail)
		}
	}
}

// A member that loses the creation race joins the winner's index: b creates the index while
// a is between recording its pending creation and sending it.
func TestSharedCreationRaceFake(t *testing.T) {
	ctx := context.Background()
	c := searchtest.New(t, nil)
	d := stubDest()
	a, b := member(t, c, nil, groupA), member(t, c, nil, groupA)
	var cb *Claim
	a.afterPending = func(string) error {
		var err error
		cb, err = b.Ensure(ctx, d)
		return err
	}
	ca, err := a.Ensure(ctx, d)
	if err != nil {
		t.Fatalf("the loser of the creation: %v", err)
	}
	if cb == nil || ca.WriteAlias() != cb.WriteAlias() || !slices.Equal(internalAliases(c, d.Index), []string{ca.WriteAlias()}) {
		t.Fatalf("a %v, b %v, index aliases %v", ca, cb, internalAliases(c, d.Index))
	}
}

// A member whose own creation never finished (crash after recording it) joins the index
// another member created meanwhile.
func TestSharedUnfinishedCreationJoinsFake(t *testing.T) {
	ctx := context.Background()
	c := searchtest.New(t, nil)
	d := stubDest()
	stA := statestore.NewMemory()
	a := member(t, c, stA, groupA)
	a.afterPending = func(string) error { return errCrash }
	if _, err := a.Ensure(ctx, d); err != errCrash {
		t.Fatalf("crashing creation: %v", err)
	}
	cb, err := member(t, c, nil, groupA).Ensure(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := member(t, c, stA, groupA).Ensure(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if ca.WriteAlias() != cb.WriteAlias() {
		t.Fatalf("a %s, b %s", ca.WriteAlias(), cb.WriteAlias())
	}
}

// A deleted index: a member whose record says it existed refuses (destination_missing); one
// without a record creates it afresh, which the first then refuses as another instance.
func TestSharedDeletedIndexFake(t *testing.T) {
	ctx := context.Background()
	c := searchtest.New(t, nil)
	d := stubDest()
	a := member(t, c, nil, groupA)
	ca, err := a.Ensure(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	c.DeleteIndex(d.Index)
	_, err = a.Reclaim(ctx, ca)
	wantRefusal(t, err, DestinationMissing, d)
	_, err = a.Ensure(ctx, d)
	wantRefusal(t, err, DestinationMissing, d)
	if c.Index(d.Index) != nil {
		t.Fatal("a member with a record recreated the index")
	}
	cb, err := member(t, c, nil, groupA).Ensure(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if cb.Instance() == ca.Instance() {
		t.Fatal("the recreated index has the old instance")
	}
	_, err = a.Ensure(ctx, d)
	wantRefusal(t, err, DestinationIdentityMismatch, d)
}

// A join needs exactly one write alias of the marker's instance.
func TestSharedFenceMalformedFake(t *testing.T) {
	ctx := context.Background()
	c := searchtest.New(t, nil)
	d := stubDest()
	ca, err := member(t, c, nil, groupA).Ensure(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	b := member(t, c, nil, groupA)
	extra := writeAlias(ca.Instance(), "99-0000000000000000")
	foreign := writeAlias(strings.Repeat("ab", 16), ca.Fence())
	for name, edit := range map[string]func(ix *searchtest.Index){
		"two":      func(ix *searchtest.Index) { ix.Aliases[extra] = true },
		"none":     func(ix *searchtest.Index) { delete(ix.Aliases, ca.WriteAlias()) },
		"foreign":  func(ix *searchtest.Index) { delete(ix.Aliases, ca.WriteAlias()); ix.Aliases[foreign] = true },
		"restored": func(ix *searchtest.Index) {},
	} {
		t.Run(name, func(t *testing.T) {
			c.EditIndex(d.Index, edit)
			_, err := b.Ensure(ctx, d)
			if name == "restored" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantRefusal(t, err, FenceMalformed, d)
			c.EditIndex(d.Index, func(ix *searchtest.Index) {
				clear(ix.Aliases)
				ix.Aliases[ca.WriteAlias()] = true
			})
		})
	}
}

// Generations under a shared owner: a table another member created is joined as it exists,
// whatever this member's legacy flag says; every reindex operation is refused with
// ErrSharedOwner and sends nothing.
func TestSharedGenerationsFake(t *testing.T) {
	ctx := context.Background()
	for _, firstLegacy := range []bool{false, true} {
		name := "read_alias"
		if firstLegacy {
			name = "legacy"
		}
		t.Run(name, func(t *testing.T) {
			c := searchtest.New(t, nil)
			d := stubDest()
			a := member(t, c, nil, groupA)
			ga, err := a.EnsureTable(ctx, d, firstLegacy)
			if err != nil {
				t.Fatal(err)
			}
			want := GenerationIndex(d.Index, 1)
			if firstLegacy {
				want = d.Index
			}
			if ga.Live().Index() != want {
				t.Fatalf("live %s, want %s", ga.Live().Index(), want)
			}
			for _, legacy := range []bool{false, true} {
				b := member(t, c, nil, groupA)
				gb, err := b.EnsureTable(ctx, d, legacy)
				if err != nil {
					t.Fatalf("legacy %v: %v", legacy, err)
				}
				if gb.Live().WriteAlias() != ga.Live().WriteAlias() || gb.ReadAlias() != ga.ReadAlias() || len(gb.Targets()) != 1 {
					t.Fatalf("b joined %s (read alias %q), a holds %s (%q)", gb.Live().WriteAlias(), gb.ReadAlias(), ga.Live().WriteAlias(), ga.ReadAlias())
				}
				if gb, err = b.ReclaimTable(ctx, gb); err != nil || gb.Live().WriteAlias() != ga.Live().WriteAlias() {
					t.Fatalf("ReclaimTable: %v", err)
				}
				before := len(c.Requests())
				wantShared := func(what string, err error) {
					t.Helper()
					if !errors.Is(err, ErrSharedOwner) || errors.Is(err, ErrDestinationConflict) {
						t.Fatalf("%s: %v, want ErrSharedOwner", what, err)
					}
				}
				_, err = b.BeginGeneration(ctx, gb, d)
				wantShared("BeginGeneration", err)
				_, err = b.Switch(ctx, gb, time.Hour)
				wantShared("Switch", err)
				_, err = b.AbandonGeneration(ctx, gb)
				wantShared("AbandonGeneration", err)
				_, _, err = b.DeleteRetired(ctx, gb, time.Now())
				wantShared("DeleteRetired", err)
				if n := len(c.Requests()) - before; n != 0 {
					t.Fatalf("refused reindex operations sent %d requests", n)
				}
			}
			if n := len(c.Requests()); n == 0 || c.Count("_aliases") != 0 {
				t.Fatalf("_aliases requests: %d", c.Count("_aliases"))
			}
		})
	}
}

// A table with reindex state (made by the same state store without the shared owner) is
// refused under one.
func TestSharedRefusesReindexStateFake(t *testing.T) {
	ctx := context.Background()
	c := searchtest.New(t, nil)
	d := stubDest()
	st := statestore.NewMemory()
	ex := member(t, c, st, "")
	g, err := ex.EnsureTable(ctx, d, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ex.BeginGeneration(ctx, g, d); err != nil {
		t.Fatal(err)
	}
	if _, err := member(t, c, st, groupA).EnsureTable(ctx, d, false); !errors.Is(err, ErrSharedOwner) {
		t.Fatalf("EnsureTable of a table being reindexed: %v, want ErrSharedOwner", err)
	}
}

// DropIndices checks the marker against the shared owner: a member deletes the shared index;
// the same state store without the shared owner is refused it.
func TestSharedDropIndicesFake(t *testing.T) {
	ctx := context.Background()
	c := searchtest.New(t, nil)
	d := stubDest()
	st := statestore.NewMemory()
	if _, err := member(t, c, st, groupA).Ensure(ctx, d); err != nil {
		t.Fatal(err)
	}
	for _, f := range []*Fence{member(t, c, st, ""), member(t, c, st, groupB)} {
		dropped, err := f.DropIndices(ctx, d.Pipeline)
		if len(dropped) != 0 || ClassOf(err) != OwnedByOther || c.Index(d.Index) == nil {
			t.Fatalf("dropped %v, %v; want owned_by_other and the index kept", dropped, err)
		}
	}
	// Another member (its own record) drops it.
	b := member(t, c, nil, groupA)
	if _, err := b.Ensure(ctx, d); err != nil {
		t.Fatal(err)
	}
	dropped, err := b.DropIndices(ctx, d.Pipeline)
	if err != nil || !slices.Equal(dropped, []string{d.Index}) || c.Index(d.Index) != nil {
		t.Fatalf("dropped %v, %v", dropped, err)
	}
}
