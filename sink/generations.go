package sink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/esfence"
)

// Generations and reindexing (doc.go, "Reindexing"). Every table is claimed through
// esfence.EnsureTable: its index name (the template's expansion) is the read alias of a
// generation <name>-g<N>, or, for an index created without read_alias (or before it existed),
// the legacy index itself. Actions are planned against the table's name; after the unchanged
// values are filled, each is sent to every target generation -- the live one, and the next one
// while a reindex fills it -- each with its own mapping knowledge and guards.

// genTarget is one generation an action of a table goes to.
type genTarget struct {
	index string
	info  *tableInfo
}

// setGens installs a table's claimed generations: the claims of its targets by concrete name
// (the old ones forgotten), and a new epoch so that actions pick the targets up.
func (s *Sink) setGens(name string, g *esfence.Generations) {
	if old := s.gens[name]; old != nil {
		for _, c := range old.Targets() {
			delete(s.claims, c.Index())
		}
	}
	s.gens[name] = g
	for _, c := range g.Targets() {
		s.claims[c.Index()] = c
	}
	s.gensEpoch++
}

// liveClaim is the claim of the generation readers see of the table whose name (the
// template's expansion) is name; nil before it is claimed.
func (s *Sink) liveClaim(name string) *esfence.Claim {
	if g := s.gens[name]; g != nil {
		return g.Live()
	}
	return nil
}

// toTargets sends every action to each target generation of its table: the action itself
// goes to the first, copies to the others (a reindex in progress), appended.
func (s *Sink) toTargets(acts []action) []action {
	n := len(acts)
	for i := 0; i < n; i++ {
		ts := s.targetsOf(&acts[i])
		if len(ts) == 0 {
			continue
		}
		acts[i].index, acts[i].info = ts[0].index, ts[0].info
		for _, t := range ts[1:] {
			c := acts[i]
			c.index, c.info = t.index, t.info
			acts = append(acts, c)
		}
	}
	return acts
}

// targetsOf is an action's target generations, kept on its table info until the generations
// change.
func (s *Sink) targetsOf(a *action) []genTarget {
	ti := a.info
	if ti != nil && ti.targetsEpoch == s.gensEpoch && ti.targets != nil {
		return ti.targets
	}
	name := a.index
	if ti != nil {
		name = ti.index
	}
	g := s.gens[name]
	if g == nil {
		return nil
	}
	var ts []genTarget
	for _, c := range g.Targets() {
		t := genTarget{index: c.Index(), info: ti}
		if ti != nil && c.Index() != ti.index {
			if ti.byIndex == nil {
				ti.byIndex = map[string]*tableInfo{}
			}
			gi := ti.byIndex[c.Index()]
			if gi == nil {
				gi = &tableInfo{index: c.Index(), cols: ti.cols, colErr: ti.colErr}
				ti.byIndex[c.Index()] = gi
			}
			t.info = gi
		}
		ts = append(ts, t)
	}
	if ti != nil {
		ti.targets, ti.targetsEpoch = ts, s.gensEpoch
	}
	return ts
}

// ErrNoTable is the error of a reindex call for a table the sink has not written to in this
// session, or whose reindex is not in the asked state.
var ErrNoTable = errors.New("elasticsearch sink: no such table in this session")

// GenerationStatus is a table's generations as the sink holds them.
type GenerationStatus struct {
	Name      string               // the table's index name: the read alias, or a legacy index
	Live      string               // the concrete index readers see
	Next      string               // the generation being filled, "" when none
	Switching bool                 // a switch to Next began and failed: SwitchReindex completes it
	Retired   map[string]time.Time // retired generations and when each is deleted
}

// Generations reports the generations of the table the sink writes id to.
func (s *Sink) Generations(id cdc.TableID) (GenerationStatus, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := s.tmpl.expand(id)
	g := s.gens[name]
	if g == nil {
		return GenerationStatus{}, false
	}
	st := GenerationStatus{Name: name, Live: g.Live().Index(), Retired: g.Retired()}
	if n := g.Next(); n != nil {
		st.Next, st.Switching = n.Index(), g.Switching()
	}
	return st, true
}

// BeginReindex starts a new generation of the index of sch's table, with the mapping generated
// from sch (its current schema, typically just loaded from the source): from now on every
// change of the table is written to both generations. The table must have been claimed in
// this session (a change of it written); the caller fills the new generation (a re-snapshot
// of the table requested after this returns) and then calls SwitchReindex. It returns the new
// generation's index. A reindex already in progress is resumed: its generation is returned.
// Under shared_owner it fails (permanent, errors.Is esfence.ErrSharedOwner): a reindex needs
// one writer.
func (s *Sink) BeginReindex(ctx context.Context, sch *cdc.TableSchema) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := s.tmpl.expand(sch.ID)
	g := s.gens[name]
	if g == nil {
		return "", fmt.Errorf("%w: %s (index %q)", ErrNoTable, sch.ID, name)
	}
	if n := g.Next(); n != nil {
		return n.Index(), nil
	}
	if s.cfg.SharedOwner != "" {
		return "", cdc.Permanent(fmt.Errorf("elasticsearch sink %q: reindexing table %s: %w", s.cfg.ID, sch.ID, esfence.ErrSharedOwner))
	}
	if !s.cfg.AutoCreate() {
		return "", cdc.Permanent(fmt.Errorf("elasticsearch sink %q: reindexing needs auto_create_index (the sink owns no mapping without it)", s.cfg.ID))
	}
	a := action{index: name, schema: sch, table: sch.ID}
	d, err := s.destination(ctx, &a)
	if err != nil {
		return "", err
	}
	n, err := s.fence.BeginGeneration(ctx, g, d)
	if err != nil {
		return "", s.requestError(err, "starting a new generation")
	}
	s.setGens(name, n)
	s.observer().Claimed(n.Next().Index())
	return n.Next().Index(), nil
}

// SwitchReindex makes the generation BeginReindex started the one readers see (the read alias
// moves to it in one request; a legacy index is replaced by the alias) and retires the old
// one for retire_after (DeleteRetired deletes it then). The caller switches only once the new
// generation holds every row: the re-snapshot ended and every change up to its end is
// acknowledged. Chunks still in flight to the old generation come back as backpressure and
// go to the new one. A switch that fails once begun (the table record says switching: a
// refused refresh, a lost connection) stays begun (Generations reports Switching): calling
// SwitchReindex again completes it as the next claim would, unless another copy of the
// deployment changed the table record meanwhile (fenced). AbandonReindex refuses it then.
func (s *Sink) SwitchReindex(ctx context.Context, id cdc.TableID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := s.tmpl.expand(id)
	g := s.gens[name]
	if g == nil || g.Next() == nil {
		return fmt.Errorf("%w: %s has no reindex in progress", ErrNoTable, id)
	}
	n, err := s.fence.Switch(ctx, g, time.Duration(s.cfg.RetireAfter))
	if err != nil {
		if n != nil { // begun: the record's new revision, which the next call completes from
			s.setGens(name, n)
		}
		return s.requestError(err, "switching to the new generation")
	}
	s.claimEpoch.Add(1)
	s.setGens(name, n)
	return nil
}

// AbandonReindex gives up the reindex of id's table: the new generation is deleted and
// changes go to the live one only. A switch begun (Generations reports Switching) is never
// abandoned: the read alias may name the new generation already; SwitchReindex completes it.
func (s *Sink) AbandonReindex(ctx context.Context, id cdc.TableID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := s.tmpl.expand(id)
	g := s.gens[name]
	if g == nil || g.Next() == nil {
		return nil
	}
	if g.Switching() {
		return fmt.Errorf("elasticsearch sink %q: table %s: its switch to %s has begun; SwitchReindex completes it", s.cfg.ID, id, g.Next().Index())
	}
	n, err := s.fence.AbandonGeneration(ctx, g)
	if err != nil {
		return s.requestError(err, "abandoning a new generation")
	}
	s.claimEpoch.Add(1)
	s.setGens(name, n)
	return nil
}

// FindTable returns the table id of a table this session has written to whose source spelling
// is table: schema.table, db.table or a bare table name (when only one table has it).
func (s *Sink) FindTable(table string) (cdc.TableID, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var found []cdc.TableID
	for sch := range s.tables {
		id := sch.ID
		if slices.Contains(found, id) {
			continue
		}
		q := id.Schema
		if q == "" {
			q = id.Database
		}
		if table == q+"."+id.Table || table == id.Table {
			found = append(found, id)
		}
	}
	if len(found) != 1 {
		return cdc.TableID{}, false
	}
	return found[0], true
}

// DeleteRetired deletes the retired generations whose time has come, of every table claimed
// in this session, and returns their names. Under shared_owner, which never reindexes, it
// does nothing.
func (s *Sink) DeleteRetired(ctx context.Context, now time.Time) ([]string, error) {
	if s.cfg.SharedOwner != "" {
		return nil, nil // a shared owner never reindexes, so it never retires a generation
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for name, g := range s.gens {
		n, deleted, err := s.fence.DeleteRetired(ctx, g, now)
		out = append(out, deleted...)
		if err != nil {
			return out, s.requestError(err, "deleting a retired generation")
		}
		if n != g {
			s.setGens(name, n)
		}
	}
	return out, nil
}
