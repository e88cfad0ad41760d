package sink

import (
	"context"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/esfence"
)

// Schema events (doc.go, "Schema events"): an index mirrors the table that bears its name now.
// A Truncate gives the table a new empty generation and a version floor; a relation identity
// (cdc.TableSchema.Relation) binds the table, and a new one -- or one another table of the
// sink held -- empties it (and vacates the other), reported as ENTERED.

// EnteredCause says why a relation entered a table.
type EnteredCause string

// Causes of TableEntered.
const (
	// EnteredNew: the table's first write ever (no record, no index) was a streamed change,
	// not a snapshot read: the rows it had before are missing.
	EnteredNew EnteredCause = "new"
	// EnteredReplaced: another relation now bears the table's name (DROP and CREATE, or a
	// relation renamed from a name the sink does not mirror): the index was emptied.
	EnteredReplaced EnteredCause = "replaced"
	// EnteredRenamed: the relation another table of the sink (From) held now bears this
	// table's name (RENAME, a move to another schema or database): both indices were emptied.
	EnteredRenamed EnteredCause = "renamed"
)

// TableEntered reports a table a relation entered: its index holds only the changes streamed
// from now on, and a re-snapshot of the table fills it (package mirror requests one).
type TableEntered struct {
	Table cdc.TableID // the table, as the source names it now
	Index string      // its index name (read alias or legacy index)
	Cause EnteredCause
	From  cdc.TableID // EnteredRenamed: the table the relation was bound to before
	// Schema is the table's schema as of the change that revealed the entry (no row data).
	Schema *cdc.TableSchema

	// mark is the report's id in the table record (0: not recorded: shared_owner).
	mark int64
}

// EnteredHandled tells the sink that e was handled (a re-snapshot requested, or the failure to
// request one reported): the report recorded with the table goes. Until then a restarted sink
// reports it again when it first claims the table, so a crash between the change that made the
// report and its handling loses nothing. A report superseded by a newer one of the table is
// left alone.
func (s *Sink) EnteredHandled(ctx context.Context, e TableEntered) error {
	if e.mark == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.gens[e.Index]
	if g == nil || g.Entered() == nil || g.Entered().ID != e.mark {
		return nil
	}
	n, err := s.fence.ClearEntered(ctx, g, e.mark)
	if err != nil {
		return s.requestError(err, "clearing a handled ENTERED report")
	}
	s.setGens(e.Index, n)
	return nil
}

// newMark is a recorded ENTERED report of cause, from the table from (zero: none).
func (s *Sink) newMark(cause EnteredCause, from cdc.TableID) *esfence.EnteredMark {
	id := time.Now().UnixNano()
	if id <= s.lastMark {
		id = s.lastMark + 1
	}
	s.lastMark = id
	m := &esfence.EnteredMark{ID: id, Cause: string(cause)}
	if from != (cdc.TableID{}) {
		m.From = &esfence.MarkerSource{Connector: from.Connector, Source: from.Source, Database: from.Database, Schema: from.Schema, Table: from.Table}
	}
	return m
}

// reportMarked reports the ENTERED report recorded with a table just claimed (a restart
// between the report and its handling), once per session.
func (s *Sink) reportMarked(name string, table cdc.TableID, sch *cdc.TableSchema, g *esfence.Generations) {
	m := g.Entered()
	if m == nil || s.reported[m.ID] {
		return
	}
	s.reported[m.ID] = true
	e := TableEntered{Table: table, Index: name, Cause: EnteredCause(m.Cause), Schema: sch, mark: m.ID}
	if m.From != nil {
		e.From = cdc.TableID{Connector: m.From.Connector, Source: m.From.Source, Database: m.From.Database, Schema: m.From.Schema, Table: m.From.Table}
	}
	s.entered = append(s.entered, e)
}

// truncateSharedReason is the dead letter of a Truncate the sink cannot mirror exactly.
const truncateSharedReason = "truncate_not_mirrored: a sink under shared_owner cannot empty an index " +
	"(a new generation needs one writer); the index keeps the table's earlier documents"

// schemaRun is a run of a batch's events of one table and relation identity, or a Truncate.
type schemaRun struct {
	event    int // the run's first event
	name     string
	table    cdc.TableID
	schema   *cdc.TableSchema // nil: a Truncate without a schema (of a table not seen since the start) or without columns
	relation string
	bare     *cdc.TableSchema // a Truncate's schema without columns (schema is nil): for reports
	version  int64            // the first event's
	read     bool             // the first event is a snapshot read
	truncate bool
}

// reported is the schema an ENTERED report of the run carries.
func (r *schemaRun) reported() *cdc.TableSchema {
	if r.schema == nil {
		return r.bare
	}
	return r.schema
}

// noteRun notes event i (its table's index name, its version) for the schema events: a new
// run when its table or relation differs from the previous event's.
func (s *Sink) noteRun(i int, ev *cdc.Event, name string, ver int64) {
	rel := ev.Schema.Relation
	if n := len(s.runs); n > 0 {
		if r := &s.runs[n-1]; !r.truncate && r.name == name && r.relation == rel {
			if r.schema != ev.Schema {
				r.schema, s.schemas[name] = ev.Schema, ev.Schema
			}
			return
		}
	}
	s.schemas[name] = ev.Schema
	s.runs = append(s.runs, schemaRun{event: i, name: name, table: ev.Table, schema: ev.Schema,
		relation: rel, version: ver, read: ev.Op == cdc.Read})
}

// noteTruncate notes a Truncate event as a run of its own, or returns why it is dead-lettered.
func (s *Sink) noteTruncate(i int, ev *cdc.Event) string {
	if s.cfg.SharedOwner != "" {
		return truncateSharedReason
	}
	if ev.Position == nil {
		return "serialization failure: the event has no position (no external version)"
	}
	ver := ev.Position.Version()
	if ver < 0 {
		return "serialization failure: negative external version"
	}
	name := s.tmpl.expand(ev.Table)
	if err := validIndexName(name); err != nil {
		return indexNameReason(ev.Table, err)
	}
	sch := ev.Schema
	if sch != nil && len(sch.Columns) == 0 {
		// Its columns are not known here (MariaDB's reader behind the DDL, see cdc.Truncate):
		// applied like a Truncate without a schema, its relation identity kept.
		s.runs = append(s.runs, schemaRun{event: i, name: name, table: ev.Table, relation: sch.Relation, bare: sch, version: ver, truncate: true})
		return ""
	}
	if sch == nil {
		if sch = s.schemas[name]; sch == nil || sch.ID != ev.Table {
			// A table not seen since the start (Debezium's Truncates carry no schema): claimed
			// as it exists, its new generation mapped like the live one (schemaEvents).
			s.runs = append(s.runs, schemaRun{event: i, name: name, table: ev.Table, version: ver, truncate: true})
			return ""
		}
	}
	// No key checks: a Truncate writes no row (a table without a key is emptied all the same,
	// and its rows are dead-lettered as ever). A column the mapping cannot hold would fail
	// the new generation's mapping.
	if reason := fieldReason(sch); reason != "" {
		return reason
	}
	s.schemas[name] = sch
	s.runs = append(s.runs, schemaRun{event: i, name: name, table: ev.Table, schema: sch,
		relation: sch.Relation, version: ver, truncate: true})
	return ""
}

// schemaEvents applies the batch's runs in order (every table claimed already), then drops the
// actions they void: a version below the table's floor, a relation retired from the table.
func (s *Sink) schemaEvents(ctx context.Context, acts []action) ([]action, error) {
	if len(s.runs) == 0 {
		return acts, nil
	}
	defer func() { clear(s.runs); s.runs = s.runs[:0] }()
	shared := s.cfg.SharedOwner != ""
	for i := range s.runs {
		r := &s.runs[i]
		if _, ok := s.gens[r.name]; !ok {
			continue
		}
		fresh := s.fresh[r.name]
		delete(s.fresh, r.name)
		moved := false
		if !shared && r.relation != "" {
			var err error
			if moved, err = s.bindRelation(ctx, r, fresh); err != nil {
				return nil, err
			}
		}
		// A table whose first write ever is a Truncate misses no row: it was empty there (a
		// new table, or a name a relation entered: then a second identity follows, see
		// package mysqlcdc, and reports it once, EnteredReplaced).
		if fresh && !moved && !r.read && !r.truncate {
			e := TableEntered{Table: r.table, Index: r.name, Cause: EnteredNew, Schema: r.reported()}
			if !shared {
				m := s.newMark(EnteredNew, cdc.TableID{})
				n, err := s.fence.MarkEntered(ctx, s.gens[r.name], m)
				if err != nil {
					// Claimed again before the next write (the record as it is), and still
					// reported as new then.
					s.forgetGens(r.name)
					s.fresh[r.name] = true
					return nil, s.requestError(err, "recording a table a relation entered")
				}
				s.setGens(r.name, n)
				e.mark = m.ID
				s.reported[m.ID] = true
			}
			s.entered = append(s.entered, e)
		}
		if r.truncate && !shared {
			g := s.gens[r.name]
			if g.RelationRetired(r.relation, r.version) || r.version <= g.Floor() {
				continue // a truncate of a relation gone from here, or one applied already
			}
			if err := s.reset(ctx, r.name, r.table, r.schema, esfence.Reset{Floor: r.version}); err != nil {
				return nil, err
			}
		}
	}
	n := 0
	var last string
	var g *esfence.Generations
	for i := range acts {
		a := &acts[i]
		if a.index != last || g == nil {
			last, g = a.index, s.gens[a.index]
		}
		if g != nil && (a.version < g.Floor() || (!shared && a.schema != nil && a.schema.Relation != g.Relation() &&
			g.RelationRetired(a.schema.Relation, a.version))) {
			s.voided.Add(1)
			continue
		}
		acts[n] = *a
		n++
	}
	clear(acts[n:])
	return acts[:n], nil
}

// bindRelation applies run r's relation identity to its table (see "Schema events"): nothing
// when it is the bound one or one retired from the table; bound when the table has none (and
// came from no other table); otherwise the table gets a new empty generation bound to it,
// after the sink's other table holding it (if any) was vacated. moved says the relation came
// from another table (reported as EnteredRenamed).
func (s *Sink) bindRelation(ctx context.Context, r *schemaRun, fresh bool) (moved bool, err error) {
	g := s.gens[r.name]
	bound := g.Relation()
	if r.relation == bound || g.RelationRetired(r.relation, r.version) {
		return false, nil
	}
	if !s.relsKnown {
		if s.rels, s.relsGone, err = s.fence.Relations(ctx, s.pipeline, s.cfg.ID); err != nil {
			return false, s.requestError(err, "reading the tables' relations")
		}
		s.relsKnown = true
	}
	from, held := s.rels[r.relation]
	if held && from.Name == r.name {
		held = false // the records disagree with this session's claim: bind it here
	}
	gone := false
	if !held {
		from, gone = s.relsGone[r.relation]
		gone = gone && from.Name != r.name
	}
	if held {
		// Vacate the other table: its relation is this one's now.
		sch := s.schemas[from.Name]
		if (sch == nil || sch.ID != from.Table) && r.schema != nil {
			c := *r.schema
			c.ID = from.Table
			sch = &c
		} else if sch != nil && sch.ID != from.Table {
			sch = nil // mapped like the live generation
		}
		if err := s.claimTable(ctx, &action{index: from.Name, table: from.Table, schema: sch}); err != nil {
			return false, err
		}
		delete(s.fresh, from.Name)
		if err := s.reset(ctx, from.Name, from.Table, sch, esfence.Reset{Retire: r.relation, RetireAt: r.version}); err != nil {
			return false, err
		}
		delete(s.rels, r.relation)
		s.relsGone[r.relation] = from
	}
	// A table with no binding but retired identities was vacated (its relation left for
	// another table): the relation binding it now is another one, whose rows are not in the
	// index and whose columns the vacate's generation was not mapped for.
	vacated := bound == "" && len(g.RetiredRelations()) > 0
	var e *TableEntered
	switch {
	case held || gone:
		e = &TableEntered{Table: r.table, Index: r.name, Cause: EnteredRenamed, From: from.Table, Schema: r.reported()}
	case bound != "" || vacated:
		e = &TableEntered{Table: r.table, Index: r.name, Cause: EnteredReplaced, Schema: r.reported()}
	}
	var m *esfence.EnteredMark
	if e != nil {
		m = s.newMark(e.Cause, e.From)
		e.mark = m.ID
	}
	switch {
	case bound == "" && !vacated && (fresh || (!held && !gone)):
		n, err := s.fence.Bind(ctx, g, r.relation, m)
		if err != nil {
			s.forgetGens(r.name) // claimed again, the record as it is (a report in it reported then)
			if fresh {
				s.fresh[r.name] = true
			}
			return false, s.requestError(err, "binding a table to its relation")
		}
		s.setGens(r.name, n)
	default:
		if err := s.reset(ctx, r.name, r.table, r.schema, esfence.Reset{Relation: r.relation, Retire: bound, RetireAt: r.version, Entered: m}); err != nil {
			return false, err
		}
	}
	here := esfence.RelationTable{Name: r.name, Table: r.table}
	if bound != "" {
		delete(s.rels, bound)
		s.relsGone[bound] = here
	}
	s.rels[r.relation] = here
	delete(s.relsGone, r.relation)
	if e != nil {
		s.reported[e.mark] = true
		s.entered = append(s.entered, *e)
	}
	return held || gone, nil
}

// reset gives the table name a new empty generation (esfence Reset) with sch's mapping. Without
// a schema the generation is mapped like the live one, unless another relation binds the table
// (r.Relation): its columns may differ from the fields of the relation before, so the new
// generation gets no fields, and the rows to come add theirs (extendMapping). On an error the
// table is claimed again before its next write, which completes a reset whose record was
// written.
func (s *Sink) reset(ctx context.Context, name string, table cdc.TableID, sch *cdc.TableSchema, r esfence.Reset) error {
	g := s.gens[name]
	d, err := s.destination(ctx, &action{index: name, table: table, schema: sch})
	if err != nil {
		return err
	}
	if sch == nil && s.cfg.AutoCreate() && r.Relation == "" {
		// No schema to generate the mapping from: the new generation is mapped like the live one.
		if d.Mapping, err = s.fence.Mapping(ctx, g.Live()); err != nil {
			return s.requestError(err, "reading the live generation's mapping")
		}
	}
	n, err := s.fence.Reset(ctx, g, d, r, time.Duration(s.cfg.RetireAfter))
	if err != nil {
		s.forgetGens(name)
		return s.requestError(err, "emptying the table's index (a new generation)")
	}
	s.claimEpoch.Add(1) // chunks in flight to the old generation are not fenced out
	s.setGens(name, n)
	s.observer().Claimed(n.Live().Index())
	return nil
}

// forgetGens drops a table's generations from the session: its next write claims it again.
func (s *Sink) forgetGens(name string) {
	if old := s.gens[name]; old != nil {
		for _, c := range old.Targets() {
			delete(s.claims, c.Index())
		}
	}
	delete(s.gens, name)
	s.gensEpoch++
}

// deliverEntered hands the ENTERED reports to Options.OnEntered, outside the mutex.
func (s *Sink) deliverEntered() {
	s.mu.Lock()
	es := s.entered
	s.entered = nil
	s.mu.Unlock()
	if s.opts.OnEntered == nil {
		return
	}
	for _, e := range es {
		s.opts.OnEntered(e)
	}
}
