package esfence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/statestore"
)

// Generations (doc.go, "Generations"): a table's documents live in a concrete index
// <name>-g<N>, and readers use <name>, a read alias the sink owns, created with the first
// generation and moved to the next one in one atomic _aliases request once that one is full.
// Each generation is an ordinary destination (marker, instance, write alias, ownership record
// keyed by its concrete name); the table record, keyed by <name>, says which generation is
// live, which is being filled and which are retired.

// TableNamespace is the state store namespace of table records; the key is the read alias.
const TableNamespace = "esfence-table"

// tableRecord is the state store's side of a table's generations, one per (pipeline, name).
type tableRecord struct {
	Version int `json:"v"`
	// Live is the generation readers see through the read alias; 0 is a legacy index, the
	// concrete index named like the table (created before generations), which has no read alias.
	Live int `json:"live"`
	// Next is the generation being filled (0: none); Switching says the read alias is being
	// moved to it.
	Next      int  `json:"next,omitempty"`
	Switching bool `json:"switching,omitempty"`
	// Top is the highest generation ever named: numbers are never reused.
	Top     int          `json:"top"`
	Retired []retiredGen `json:"retired,omitempty"`
	// Retain is how long the outgoing generation of the switch in progress stays retired.
	Retain time.Duration `json:"retain_ns,omitempty"`
	// Emptying says the switch in progress is a Reset's: its next generation is new and empty,
	// so a claim completing the switch creates it when a crash left it uncreated.
	Emptying bool `json:"emptying,omitempty"`
	// Floor is the table's version floor (Reset): a change of the table with a lower version
	// predates the reset and is void. 0: none.
	Floor int64 `json:"floor,omitempty"`
	// Relation is the source relation identity the table is bound to ("": none yet);
	// RetiredRelations are identities retired from it, oldest first, at most
	// MaxRetiredRelations; Sink is the sink that bound them (Relations reads a sink's own).
	Relation         string            `json:"relation,omitempty"`
	RetiredRelations []RetiredRelation `json:"retired_relations,omitempty"`
	Sink             string            `json:"sink,omitempty"`
	// Source is the source table of the sink's binding (set with Sink).
	Source *MarkerSource `json:"source,omitempty"`
	// Entered is an ENTERED report not yet handled (MarkEntered, Reset, Bind; ClearEntered).
	Entered *EnteredMark `json:"entered,omitempty"`
}

// EnteredMark is a report that a relation entered the table (package sink: its index holds only
// the changes streamed since), kept with the table record from the change that made it until
// the caller handled it (ClearEntered), so a crash in between loses no report.
type EnteredMark struct {
	ID    int64         `json:"id"` // tells one report from the next
	Cause string        `json:"cause"`
	From  *MarkerSource `json:"from,omitempty"` // the table the relation came from, if any
}

// RetiredRelation is a relation identity retired from a table at a version: the relation's
// changes under the table's name with a lower version are void; one at or above it means the
// relation came back to the name (a rename undone) and is bound again.
type RetiredRelation struct {
	ID string `json:"id"`
	At int64  `json:"at"`
}

// MaxRetiredRelations bounds the relation identities a table record keeps as retired: the
// oldest is forgotten first (a change of a relation that long gone no longer reaches a sink).
const MaxRetiredRelations = 16

// retiredGen is a former live generation, deleted once its time has come.
type retiredGen struct {
	Gen   int       `json:"gen"`
	After time.Time `json:"after"`
}

func decodeTableRecord(b []byte) (tableRecord, error) {
	var r tableRecord
	if err := json.Unmarshal(b, &r); err != nil || r.Version != recordVersion || r.Live < 0 || r.Next < 0 || r.Top < r.Live || r.Top < r.Next ||
		(r.Switching && r.Next == 0) || (r.Emptying && !r.Switching) || r.Floor < 0 {
		return r, errors.New("esfence: the table record has an unknown format")
	}
	return r, nil
}

func (r tableRecord) encode() []byte {
	r.Version = recordVersion
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // integers, a bool and times always marshal
	}
	return b
}

// maxGenSuffix is the room a generation suffix takes in an index name ("-g" and ten digits).
const maxGenSuffix = 12

// GenerationIndex is the concrete index of generation gen of the table whose read alias is
// name (gen 0: the legacy index, named like the table).
func GenerationIndex(name string, gen int) string {
	if gen == 0 {
		return name
	}
	return name + "-g" + strconv.Itoa(gen)
}

// Generations is a table's generations as one claim: the live one, and the next one while it
// is being filled. A sink writes every change to each of Targets, through each claim's write
// alias; readers use ReadAlias.
type Generations struct {
	dest Destination // Index is the table's name (the read alias)
	rec  tableRecord
	rev  statestore.Revision
	live *Claim
	next *Claim
	// created says the claim that made this value created the table (no record, no index).
	created bool
}

// Created says whether the EnsureTable that returned g created the table: neither a table
// record nor an index of this pipeline existed. Values derived from g say false.
func (g *Generations) Created() bool { return g.created }

// Floor is the table's version floor (see Reset): changes with a lower version are void.
func (g *Generations) Floor() int64 { return g.rec.Floor }

// Relation is the relation identity the table is bound to ("": none).
func (g *Generations) Relation() string { return g.rec.Relation }

// RelationRetired says whether a change of relation at version is void in the table: the
// relation was retired from it at a higher version.
func (g *Generations) RelationRetired(relation string, version int64) bool {
	if relation == "" {
		return false
	}
	for _, r := range g.rec.RetiredRelations {
		if r.ID == relation {
			return version < r.At
		}
	}
	return false
}

// Entered is the table's ENTERED report not yet handled, nil when none.
func (g *Generations) Entered() *EnteredMark { return g.rec.Entered }

// RetiredRelations are the identities retired from the table, oldest first.
func (g *Generations) RetiredRelations() []RetiredRelation {
	return slices.Clone(g.rec.RetiredRelations)
}

// Name is the table's name: its read alias, or its legacy index.
func (g *Generations) Name() string { return g.dest.Index }

// ReadAlias is the name readers query: the table's name. Empty for a legacy index (then the
// name is the index itself).
func (g *Generations) ReadAlias() string {
	if g.rec.Live == 0 {
		return ""
	}
	return g.dest.Index
}

// Live is the claim of the generation readers see.
func (g *Generations) Live() *Claim { return g.live }

// Next is the claim of the generation being filled, nil when none is.
func (g *Generations) Next() *Claim { return g.next }

// Switching says the switch to the next generation has begun (the table record says so) and
// was cut short: only Switch, called with this value again, or the next claim completes it.
func (g *Generations) Switching() bool { return g.rec.Switching }

// LiveGen and NextGen are the generations' numbers (NextGen 0: none).
func (g *Generations) LiveGen() int { return g.rec.Live }
func (g *Generations) NextGen() int { return g.rec.Next }

// Targets are the claims every change goes to: the live generation's and, while one is
// filled, the next one's.
func (g *Generations) Targets() []*Claim {
	if g.next != nil {
		return []*Claim{g.live, g.next}
	}
	return []*Claim{g.live}
}

// Retired lists the retired generations not deleted yet and when each is due.
func (g *Generations) Retired() map[string]time.Time {
	out := map[string]time.Time{}
	for _, r := range g.rec.Retired {
		out[GenerationIndex(g.dest.Index, r.Gen)] = r.After
	}
	return out
}

func (f *Fence) loadTable(ctx context.Context, d Destination) (tableRecord, statestore.Revision, error) {
	r, err := f.state.Get(ctx, d.Pipeline, TableNamespace, d.Index)
	if err != nil {
		return tableRecord{}, 0, fmt.Errorf("esfence: reading the table record: %w", err)
	}
	if r.Revision == 0 {
		return tableRecord{}, 0, nil
	}
	rec, err := decodeTableRecord(r.Value)
	if err != nil {
		return tableRecord{}, 0, fmt.Errorf("%w (pipeline %q, table %q)", err, d.Pipeline, d.Index)
	}
	return rec, r.Revision, nil
}

func (f *Fence) putTable(ctx context.Context, d Destination, rec tableRecord, rev statestore.Revision) (statestore.Revision, error) {
	n, err := f.state.Put(ctx, d.Pipeline, TableNamespace, d.Index, rec.encode(), rev)
	if errors.Is(err, statestore.ErrConflict) {
		return 0, f.refuse(d, Fenced, "the table record changed meanwhile (another copy of this deployment)")
	}
	if err != nil {
		return 0, fmt.Errorf("esfence: writing the table record: %w", err)
	}
	return n, nil
}

// destOf is g's destination (none for a nil g).
func destOf(g *Generations) Destination {
	if g == nil {
		return Destination{}
	}
	return g.dest
}

// gen is d for generation n of its table (the read alias only on the first one, created with
// it; a later generation gets it when it goes live).
func gen(d Destination, n int, first bool) Destination {
	g := d
	g.Index = GenerationIndex(d.Index, n)
	g.ReadAlias = ""
	if first {
		g.ReadAlias = d.Index
	}
	return g
}

// EnsureTable claims d's table: d.Index is the table's name. A table never seen is created as
// generation 1, <name>-g1, with the read alias <name> (index, write alias and read alias in one
// request). A legacy index -- one this pipeline created under the table's name before
// generations, or any index of that name, which the claim then proves or refuses as Ensure
// does -- is claimed as generation 0, without a read alias. Otherwise the live generation is
// claimed (and the next one, while it is filled), after checking that the read alias names the
// live generation (or, while switching, the next one; a switch cut short is completed here).
// Refusals are *ConflictErrors, as for Ensure. With legacy, a table never seen is created as a
// legacy index instead (generation 0, no read alias), which a later BeginGeneration migrates.
// Under a shared owner every claim joins (see Ensure); a table another member created is
// joined as it exists -- its first generation behind the read alias, or a legacy index --
// whatever legacy says; a table with reindex state (a generation past the first, one being
// filled, a switch, retired ones) fails with ErrSharedOwner.
func (f *Fence) EnsureTable(ctx context.Context, d Destination, legacy bool) (*Generations, error) {
	if err := d.validate(); err != nil {
		return nil, err
	}
	if d.ReadAlias != "" {
		return nil, errors.New("esfence: EnsureTable takes the table's name as Index and no ReadAlias")
	}
	if !legacy && len(d.Index) > statestore.MaxNameBytes-maxGenSuffix {
		return nil, fmt.Errorf("esfence: %q leaves no room for a generation suffix", d.Index)
	}
	if len(d.Mapping) > 0 {
		if _, err := mappingWithMarker(d.Mapping, Marker{}); err != nil {
			return nil, err
		}
	}
	return f.ensureTable(ctx, d, true, legacy)
}

// ReclaimTable claims g's generations again (a reconnect, a client recreation); the returned
// value replaces g, whose write aliases no longer work.
func (f *Fence) ReclaimTable(ctx context.Context, g *Generations) (*Generations, error) {
	if g == nil {
		return nil, errors.New("esfence: nil generations")
	}
	return f.ensureTable(ctx, g.dest, false, false)
}

func (f *Fence) ensureTable(ctx context.Context, d Destination, mayCreate, asLegacy bool) (*Generations, error) {
	rec, rev, err := f.loadTable(ctx, d)
	if err != nil {
		return nil, err
	}
	created := false
	if rev != 0 && f.shared() && (rec.Live > 1 || rec.Next != 0 || rec.Switching || len(rec.Retired) > 0) {
		return nil, refuseShared(d, "claiming a table with reindex state")
	}
	if rev == 0 {
		legacy, _, err := f.loadRecord(ctx, d)
		if err != nil {
			return nil, err
		}
		// Under a shared owner what another member created decides, not this member's legacy
		// flag: a first generation behind the read alias is joined as such, a legacy index as
		// such.
		taken := legacy.Instance != "" || (asLegacy && !f.shared())
		if !taken { // a name someone else took is refused by the claim, never aliased over
			st, err := f.getIndex(ctx, d.Index)
			if err != nil {
				return nil, err
			}
			firstByOther := f.shared() && st.exists && !st.concrete &&
				len(st.resolvesTo) == 1 && st.resolvesTo[0] == GenerationIndex(d.Index, 1)
			taken = !firstByOther && (st.exists || asLegacy)
		}
		if taken {
			// A legacy index (or one to create as such), or a name taken: Ensure's claim
			// proves it or refuses it.
			c, err := f.claim(ctx, d, mayCreate)
			if err != nil {
				return nil, err
			}
			return &Generations{dest: d, live: c, created: legacy.Instance == "" && !f.shared()}, nil
		}
		if !mayCreate {
			return nil, f.refuse(d, DestinationMissing, "the table's index does not exist; it is never recreated")
		}
		rec = tableRecord{Live: 1, Top: 1}
		if rev, err = f.putTable(ctx, d, rec, 0); err != nil {
			return nil, err
		}
		created = legacy.Instance == "" && !f.shared()
	}
	g := &Generations{dest: d, rec: rec, rev: rev, created: created}
	if rec.Switching {
		return f.finishSwitch(ctx, g, false)
	}
	if err := f.checkReadAlias(ctx, g, rec.Live); err != nil {
		return nil, err
	}
	if g.live, err = f.claim(ctx, gen(d, rec.Live, rec.Live == 1), mayCreate && rec.Live == 1); err != nil {
		return nil, err
	}
	if rec.Next != 0 {
		if g.next, err = f.claim(ctx, gen(d, rec.Next, false), true); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// checkReadAlias proves that the read alias resolves to exactly generation want, or to nothing
// when generation 1 has not been created yet. Generation 0 has no read alias: the name is the
// legacy index, which the claim checks.
func (f *Fence) checkReadAlias(ctx context.Context, g *Generations, want int) error {
	if g.rec.Live == 0 && !g.rec.Switching {
		return nil
	}
	st, err := f.getIndex(ctx, g.dest.Index)
	if err != nil {
		return err
	}
	if st.concrete {
		if g.rec.Live == 0 { // switching from a legacy index: it is still there
			return nil
		}
		return f.refuse(g.dest, AliasNotSupported, "the table's name is a concrete index, not the sink's read alias")
	}
	if !st.exists && g.rec.Live == 1 && g.rec.Top == 1 {
		if first, err := f.getIndex(ctx, GenerationIndex(g.dest.Index, 1)); err != nil || !first.exists {
			return err // the first generation was never created: the claim creates both
		}
		// Created since the name was read (under a shared owner, by another member: with the
		// read alias, in the same request): read the name again.
		if st, err = f.getIndex(ctx, g.dest.Index); err != nil {
			return err
		}
	}
	if len(st.resolvesTo) == 1 && st.resolvesTo[0] == GenerationIndex(g.dest.Index, want) {
		return nil
	}
	return f.refuse(g.dest, FenceMalformed, fmt.Sprintf("the read alias resolves to %d indices, not to the live generation", len(st.resolvesTo)))
}

// BeginGeneration starts filling a new generation of g's table with d's mapping and settings
// (d.Index the table's name, as for EnsureTable): the table record names it first, then the
// index is created (without the read alias) and claimed. From now on every change must go to
// both generations (Targets); the caller fills the new one (a re-snapshot) and then calls
// Switch. A generation already being filled is an error. Under a shared owner it fails with
// ErrSharedOwner, sending nothing.
func (f *Fence) BeginGeneration(ctx context.Context, g *Generations, d Destination) (*Generations, error) {
	if g == nil || d.Index != g.dest.Index {
		return nil, errors.New("esfence: BeginGeneration needs the table's generations and a destination of the same name")
	}
	if f.shared() {
		return nil, refuseShared(d, "starting a new generation")
	}
	if err := d.validate(); err != nil {
		return nil, err
	}
	if len(d.Index) > statestore.MaxNameBytes-maxGenSuffix {
		return nil, fmt.Errorf("esfence: %q leaves no room for a generation suffix", d.Index)
	}
	rec, rev, err := f.loadTable(ctx, d)
	if err != nil {
		return nil, err
	}
	if rev != g.rev {
		return nil, f.refuse(d, Fenced, "the table record changed since the claim")
	}
	if rec.Next != 0 {
		return nil, fmt.Errorf("esfence: table %q: generation %d is already being filled", d.Index, rec.Next)
	}
	rec.Top++
	rec.Next = rec.Top
	if rev, err = f.putTable(ctx, d, rec, rev); err != nil {
		return nil, err
	}
	n := &Generations{dest: d, rec: rec, rev: rev, live: g.live}
	if n.next, err = f.claim(ctx, gen(d, rec.Next, false), true); err != nil {
		return nil, err
	}
	return n, nil
}

// AbandonGeneration gives up filling g's next generation: the table record forgets it and the
// index is deleted (after its marker proved it is this pipeline's). Under a shared owner it
// fails with ErrSharedOwner.
func (f *Fence) AbandonGeneration(ctx context.Context, g *Generations) (*Generations, error) {
	if f.shared() {
		return nil, refuseShared(destOf(g), "abandoning a generation")
	}
	if g == nil || g.next == nil {
		return g, nil
	}
	if g.rec.Switching {
		// The read alias may already name the next generation: it is never deleted now.
		return nil, fmt.Errorf("esfence: table %q: the switch to generation %d has begun; only Switch completes it", g.dest.Index, g.rec.Next)
	}
	rec := g.rec
	next := rec.Next
	rec.Next, rec.Switching = 0, false
	rev, err := f.putTable(ctx, g.dest, rec, g.rev)
	if err != nil {
		return nil, err
	}
	if err := f.deleteGeneration(ctx, g.dest, next); err != nil {
		return nil, err
	}
	return &Generations{dest: g.dest, rec: rec, rev: rev, live: g.live}, nil
}

// Switch makes g's next generation the live one: it is refreshed, then one _aliases request
// removes the live generation's write alias (it must still exist: this proves the claim, and
// stops writes to the outgoing generation) and the read alias from it, and adds the read alias
// to the next generation, so a reader sees the old generation or the new one, never a mix and
// never a partly filled one. A legacy index, which cannot carry an alias of its own name, is
// fenced off the same way and then replaced by the alias in a second request (remove_index and
// add run together): it is deleted at once. Another generation stays retired until retain has
// passed (DeleteRetired deletes it). The returned value replaces g; its only target is the new
// generation. Under a shared owner it fails with ErrSharedOwner, sending nothing.
//
// A switch that fails once the table record says switching (a refused refresh, a lost
// connection, an _aliases error) returns, with its error, the value that replaces g: it holds
// the record's new revision, and Switch called with it again completes the switch cut short as
// a claim would (the read alias already moved: only the record is written; a legacy index
// fenced off: only the second request is sent), with the claims in hand and after proving the
// table record unchanged -- a record another copy of the deployment changed meanwhile (its
// claim completed the switch, say) is refused as Fenced, changing nothing. Otherwise the
// returned value is nil on an error and g stays valid.
func (f *Fence) Switch(ctx context.Context, g *Generations, retain time.Duration) (*Generations, error) {
	if f.shared() {
		return nil, refuseShared(destOf(g), "switching generations")
	}
	if g == nil || g.next == nil {
		return nil, errors.New("esfence: no generation is being filled")
	}
	if g.rec.Switching { // this value's switch was cut short: complete it
		if g.next == nil {
			return nil, errors.New("esfence: the switch was cut short before its generation was claimed; claim the table again")
		}
		if _, rev, err := f.loadTable(ctx, g.dest); err != nil {
			return g, err
		} else if rev != g.rev {
			return nil, f.refuse(g.dest, Fenced, "the table record changed since the switch began (another copy of this deployment)")
		}
		n, err := f.finishSwitch(ctx, g, true)
		if err != nil {
			return g, err
		}
		return n, nil
	}
	rec := g.rec
	rec.Switching, rec.Retain = true, max(retain, 0)
	rev, err := f.putTable(ctx, g.dest, rec, g.rev)
	if err != nil {
		return nil, err
	}
	g = &Generations{dest: g.dest, rec: rec, rev: rev, live: g.live, next: g.next}
	if f.afterPending != nil {
		if err := f.afterPending(g.dest.Index); err != nil {
			return g, err
		}
	}
	n, err := f.switchAliases(ctx, g)
	if err != nil {
		return g, err
	}
	return n, nil
}

// switchAliases carries out a recorded switch (Switching set) with the live claim in hand.
func (f *Fence) switchAliases(ctx context.Context, g *Generations) (*Generations, error) {
	d, rec := g.dest, g.rec
	next := GenerationIndex(d.Index, rec.Next)
	const refresh = "refreshing the new generation"
	a, err := f.do(ctx, refresh, esapi.IndicesRefreshRequest{Index: []string{next}})
	if err != nil {
		return nil, err
	}
	if !a.ok() {
		return nil, a.serverError(refresh)
	}
	readAlias := map[string]any{"index": next, "alias": d.Index, "is_write_index": false}
	fenceOff := map[string]any{"remove": map[string]any{"index": g.live.Index(), "alias": g.live.WriteAlias(), "must_exist": true}}
	if rec.Live == 0 {
		if err := f.aliases(ctx, d, "fencing off the legacy index", fenceOff); err != nil {
			return nil, err
		}
		if f.afterRotate != nil {
			if err := f.afterRotate(d.Index); err != nil {
				return nil, err
			}
		}
		if err := f.aliases(ctx, d, "replacing the legacy index by the read alias",
			map[string]any{"remove_index": map[string]any{"index": d.Index}}, map[string]any{"add": readAlias}); err != nil {
			return nil, err
		}
	} else if err := f.aliases(ctx, d, "switching the read alias", fenceOff,
		map[string]any{"remove": map[string]any{"index": g.live.Index(), "alias": d.Index, "must_exist": true}},
		map[string]any{"add": readAlias}); err != nil {
		return nil, err
	}
	return f.recordSwitch(ctx, g)
}

// recordSwitch records a switch the cluster has made.
func (f *Fence) recordSwitch(ctx context.Context, g *Generations) (*Generations, error) {
	rec := g.rec
	if rec.Live != 0 {
		rec.Retired = append(rec.Retired, retiredGen{Gen: rec.Live, After: time.Now().Add(rec.Retain).UTC()})
	}
	rec.Live, rec.Next, rec.Switching, rec.Retain, rec.Emptying = rec.Next, 0, false, 0, false
	rev, err := f.putTable(ctx, g.dest, rec, g.rev)
	if err != nil {
		return nil, err
	}
	return &Generations{dest: g.dest, rec: rec, rev: rev, live: g.next}, nil
}

// finishSwitch completes a switch a crash cut short, as the cluster shows it: the read alias
// already on the next generation (only the record is behind), or still on the live one (the
// switch is made again, after claiming both). With held, g's claims are this process's own,
// still in hand (a Switch retried): they are used as they are, never claimed again, so the
// switch's must_exist removal of the live write alias still proves them.
func (f *Fence) finishSwitch(ctx context.Context, g *Generations, held bool) (*Generations, error) {
	d, rec := g.dest, g.rec
	st, err := f.getIndex(ctx, d.Index)
	if err != nil {
		return nil, err
	}
	targets, concrete := st.resolvesTo, st.concrete
	nextName := GenerationIndex(d.Index, rec.Next)
	if held {
		g = &Generations{dest: g.dest, rec: g.rec, rev: g.rev, live: g.live, next: g.next}
	} else if g.next, err = f.claim(ctx, gen(d, rec.Next, false), rec.Emptying); err != nil {
		// A Reset's generation is new and empty: one a crash left uncreated is created now.
		return nil, err
	}
	if !concrete && len(targets) == 1 && targets[0] == nextName {
		return f.recordSwitch(ctx, g)
	}
	if rec.Live == 0 && concrete {
		fenced := true
		for _, a := range st.aliases {
			fenced = fenced && !strings.HasPrefix(a, internalPrefix)
		}
		if fenced { // the legacy index was fenced off; the second request is what remains
			if err := f.aliases(ctx, d, "replacing the legacy index by the read alias",
				map[string]any{"remove_index": map[string]any{"index": d.Index}},
				map[string]any{"add": map[string]any{"index": nextName, "alias": d.Index, "is_write_index": false}}); err != nil {
				return nil, err
			}
			return f.recordSwitch(ctx, g)
		}
	} else if err := f.checkReadAlias(ctx, g, rec.Live); err != nil {
		return nil, err
	}
	if !held {
		if g.live, err = f.claim(ctx, gen(d, rec.Live, false), false); err != nil {
			return nil, err
		}
	}
	return f.switchAliases(ctx, g)
}

// aliases sends one _aliases request; a must_exist remove that finds nothing means another
// claim moved the fence: fenced.
func (f *Fence) aliases(ctx context.Context, d Destination, what string, actions ...any) error {
	a, err := f.do(ctx, what, esapi.IndicesUpdateAliasesRequest{Body: jsonBody(map[string]any{"actions": actions})})
	if err != nil {
		return err // outcome unknown: the record says switching, the next claim finds out
	}
	if !a.ok() {
		se := a.serverError(what)
		if a.status == http.StatusNotFound && se.Type == "aliases_not_found_exception" {
			return f.refuse(d, Fenced, "the write alias was rotated by another claim")
		}
		if a.status == http.StatusNotFound && se.Type == "index_not_found_exception" {
			return f.refuse(d, DestinationMissing, "a generation of the table was deleted")
		}
		return se
	}
	return aliasActionsFailed(a.body)
}

// DeleteRetired deletes g's retired generations whose time has come (now or later than their
// due time), each after its marker proved it is this pipeline's, and returns their names.
// Under a shared owner (which never retires a generation) it fails with ErrSharedOwner.
func (f *Fence) DeleteRetired(ctx context.Context, g *Generations, now time.Time) (*Generations, []string, error) {
	if f.shared() {
		return g, nil, refuseShared(destOf(g), "deleting retired generations")
	}
	if g == nil || len(g.rec.Retired) == 0 {
		return g, nil, nil
	}
	rec := g.rec
	var keep []retiredGen
	var due []int
	for _, r := range rec.Retired {
		if now.Before(r.After) {
			keep = append(keep, r)
		} else {
			due = append(due, r.Gen)
		}
	}
	if len(due) == 0 {
		return g, nil, nil
	}
	var deleted []string
	for _, n := range due {
		if err := f.deleteGeneration(ctx, g.dest, n); err != nil {
			return g, deleted, err
		}
		deleted = append(deleted, GenerationIndex(g.dest.Index, n))
	}
	rec.Retired = keep
	rev, err := f.putTable(ctx, g.dest, rec, g.rev)
	if err != nil {
		return g, deleted, err
	}
	return &Generations{dest: g.dest, rec: rec, rev: rev, live: g.live, next: g.next}, deleted, nil
}

// deleteGeneration deletes generation n of d's table as DropIndices deletes an index: only
// after its marker and record proved it is this pipeline's; already gone is fine. Its
// ownership record stays, so it is never recreated.
func (f *Fence) deleteGeneration(ctx context.Context, d Destination, n int) error {
	name := GenerationIndex(d.Index, n)
	r, err := f.state.Get(ctx, d.Pipeline, Namespace, name)
	if err != nil {
		return fmt.Errorf("esfence: reading the ownership record: %w", err)
	}
	if r.Revision == 0 {
		return nil // never created
	}
	_, err = f.dropIndex(ctx, d.Pipeline, name, r.Value)
	return err
}

// Reset is what Fence.Reset records with a table's new empty generation.
type Reset struct {
	// Floor raises the table's version floor to it (a lower value keeps the floor).
	Floor int64
	// Relation, when set, is the relation identity bound to the table from now on.
	Relation string
	// Retire, when set, is a relation identity retired from the table at version RetireAt
	// (its changes with lower versions are void from now on); the binding is cleared when it
	// is the one retired and Relation is empty.
	Retire   string
	RetireAt int64
	// Entered, when set, is recorded as the table's ENTERED report.
	Entered *EnteredMark
}

// Reset gives g's table a new, empty generation that readers see at once, as a TRUNCATE (or a
// relation leaving the table) left it, and records r with it: the table record names the new
// generation as switching (Emptying), with r's floor and relation changes, before anything is
// sent; then the generation is created with d's mapping and settings (d.Index the table's
// name) and the read alias is moved to it as Switch moves it (a legacy index is fenced off
// and replaced by the alias, deleted at once; another generation is retired for retain). A
// generation being filled (a reindex) is abandoned first: the table is empty now; one whose
// switch has begun is completed first. A Reset cut short after its record is completed by
// the next claim of the table (EnsureTable, ReclaimTable), which creates the empty generation
// when it is missing: the record is the decision. On such an error the returned value is nil
// and the caller claims the table again. Under a shared owner it fails with ErrSharedOwner,
// sending nothing.
func (f *Fence) Reset(ctx context.Context, g *Generations, d Destination, r Reset, retain time.Duration) (*Generations, error) {
	if f.shared() {
		return nil, refuseShared(destOf(g), "emptying a table")
	}
	if g == nil || d.Index != g.dest.Index {
		return nil, errors.New("esfence: Reset needs the table's generations and a destination of the same name")
	}
	if err := d.validate(); err != nil {
		return nil, err
	}
	if len(d.Index) > statestore.MaxNameBytes-maxGenSuffix {
		return nil, fmt.Errorf("esfence: %q leaves no room for a generation suffix", d.Index)
	}
	if r.Floor < 0 {
		return nil, errors.New("esfence: a negative version floor")
	}
	if g.next != nil {
		var err error
		if g.rec.Switching {
			g, err = f.Switch(ctx, g, retain)
		} else {
			g, err = f.AbandonGeneration(ctx, g)
		}
		if err != nil {
			return nil, err
		}
	}
	rec, rev, err := f.loadTable(ctx, d)
	if err != nil {
		return nil, err
	}
	if rev != g.rev {
		return nil, f.refuse(d, Fenced, "the table record changed since the claim")
	}
	rec.Top++
	rec.Next, rec.Switching, rec.Emptying, rec.Retain = rec.Top, true, true, max(retain, 0)
	rec.Floor = max(rec.Floor, r.Floor)
	rec.bind(r, d)
	if r.Entered != nil {
		rec.Entered = r.Entered
	}
	if rev, err = f.putTable(ctx, d, rec, rev); err != nil {
		return nil, err
	}
	n := &Generations{dest: d, rec: rec, rev: rev, live: g.live}
	if f.afterPending != nil {
		if err := f.afterPending(d.Index); err != nil {
			return nil, err
		}
	}
	if n.next, err = f.claim(ctx, gen(d, rec.Next, false), true); err != nil {
		return nil, err
	}
	return f.switchAliases(ctx, n)
}

// bind applies r's relation changes to the record of d's table.
func (rec *tableRecord) bind(r Reset, d Destination) {
	if r.Retire != "" {
		if rec.Relation == r.Retire {
			rec.Relation = ""
		}
		rec.RetiredRelations = slices.DeleteFunc(rec.RetiredRelations, func(x RetiredRelation) bool { return x.ID == r.Retire })
		rec.RetiredRelations = append(rec.RetiredRelations, RetiredRelation{ID: r.Retire, At: r.RetireAt})
		if k := len(rec.RetiredRelations) - MaxRetiredRelations; k > 0 {
			rec.RetiredRelations = slices.Delete(rec.RetiredRelations, 0, k)
		}
	}
	if r.Relation != "" {
		rec.Relation = r.Relation
		rec.RetiredRelations = slices.DeleteFunc(rec.RetiredRelations, func(x RetiredRelation) bool { return x.ID == r.Relation })
	}
	if r.Relation != "" || r.Retire != "" {
		src := sourceOf(d.Table)
		rec.Sink, rec.Source = d.Sink, &src
	}
}

// Bind binds relation to g's table without emptying it (a table bound to none yet): the table
// record says so (with entered, when set, as its ENTERED report), and Relations lists it. A legacy index without a table record gets one
// (generation 0). The returned value replaces g. Under a shared owner it fails with
// ErrSharedOwner, sending nothing.
func (f *Fence) Bind(ctx context.Context, g *Generations, relation string, entered *EnteredMark) (*Generations, error) {
	if f.shared() {
		return nil, refuseShared(destOf(g), "binding a relation")
	}
	if g == nil || relation == "" {
		return nil, errors.New("esfence: Bind needs the table's generations and a relation")
	}
	rec := g.rec
	rec.bind(Reset{Relation: relation}, g.dest)
	if entered != nil {
		rec.Entered = entered
	}
	rev, err := f.putTable(ctx, g.dest, rec, g.rev)
	if err != nil {
		return nil, err
	}
	return &Generations{dest: g.dest, rec: rec, rev: rev, live: g.live, next: g.next}, nil
}

// MarkEntered records m as g's table's ENTERED report (nil: none); ClearEntered removes the
// report whose ID is id, when it is still the table's. The returned value replaces g. Under a
// shared owner they fail with ErrSharedOwner, sending nothing.
func (f *Fence) MarkEntered(ctx context.Context, g *Generations, m *EnteredMark) (*Generations, error) {
	if f.shared() {
		return nil, refuseShared(destOf(g), "recording an entered relation")
	}
	if g == nil {
		return nil, errors.New("esfence: nil generations")
	}
	rec := g.rec
	rec.Entered = m
	rev, err := f.putTable(ctx, g.dest, rec, g.rev)
	if err != nil {
		return nil, err
	}
	return &Generations{dest: g.dest, rec: rec, rev: rev, live: g.live, next: g.next, created: g.created}, nil
}

// ClearEntered: see MarkEntered.
func (f *Fence) ClearEntered(ctx context.Context, g *Generations, id int64) (*Generations, error) {
	if g == nil || g.rec.Entered == nil || g.rec.Entered.ID != id {
		return g, nil
	}
	return f.MarkEntered(ctx, g, nil)
}

// RelationTable is a table of a sink as Relations lists it.
type RelationTable struct {
	Name  string      // the table's name: its read alias or legacy index
	Table cdc.TableID // its source table
}

// Relations reads the relation identities of a pipeline's tables written by sink: bound maps
// each identity bound to a table to that table, retired each identity retired from a table
// (and bound to none) to that table.
func (f *Fence) Relations(ctx context.Context, pipeline, sink string) (bound, retired map[string]RelationTable, err error) {
	rs, err := f.state.List(ctx, pipeline, TableNamespace)
	if err != nil {
		return nil, nil, fmt.Errorf("esfence: listing the table records: %w", err)
	}
	bound, retired = map[string]RelationTable{}, map[string]RelationTable{}
	for _, r := range rs {
		rec, err := decodeTableRecord(r.Value)
		if err != nil {
			return nil, nil, fmt.Errorf("%w (pipeline %q, table %q)", err, pipeline, r.Key)
		}
		if rec.Sink != sink || rec.Source == nil {
			continue
		}
		t := RelationTable{Name: r.Key, Table: cdc.TableID{Connector: rec.Source.Connector, Source: rec.Source.Source,
			Database: rec.Source.Database, Schema: rec.Source.Schema, Table: rec.Source.Table}}
		if rec.Relation != "" {
			bound[rec.Relation] = t
		}
		for _, x := range rec.RetiredRelations {
			retired[x.ID] = t
		}
	}
	for x := range bound {
		delete(retired, x)
	}
	return bound, retired, nil
}
