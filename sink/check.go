package sink

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/esfence"
)

// Keyless modes (Config.Keyless).
const (
	// KeylessRefuse stops the pipeline when a table has neither a primary key nor the
	// id_fields columns: at start (CheckTables) or when the table first appears (Write).
	KeylessRefuse = "refuse"
	// KeylessDeadLetter sends every row of such a table to the dead-letter queue.
	KeylessDeadLetter = "dead_letter"
)

// CheckTables implements cdc.TableChecker: it refuses, with one *cdc.StartError naming each
// table and its fix, a configuration under which tables could never be written -- an index
// name the template makes invalid, a table without a key (unless keyless: dead_letter), a
// column name that cannot be a field, two tables whose rows would go into one index. Nothing
// is sent to the cluster. The tables it accepts are bound to their indices for the session:
// a later table whose rows would go into one of them is refused by Write before any of its
// rows is written (bound_to_another_relation).
func (s *Sink) CheckTables(ctx context.Context, tables []*cdc.TableSchema) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var probs []cdc.StartProblem
	into := map[string]cdc.TableID{}
	for _, sch := range tables {
		if sch == nil {
			continue
		}
		id := sch.ID
		name := s.tmpl.expand(id)
		if err := validIndexName(name); err != nil {
			probs = append(probs, indexProblem(id, err))
			continue
		}
		if _, err := idColumns(sch, s.cfg.IDFields); err != nil && s.cfg.Keyless != KeylessDeadLetter {
			probs = append(probs, s.keyProblem(id, err))
		}
		probs = append(probs, fieldProblems(sch)...)
		other, ok := into[name]
		if !ok {
			other, ok = s.bound[name]
		}
		if !ok {
			if c := s.liveClaim(name); c != nil {
				other, ok = c.Destination().Table, true
			}
		}
		switch {
		case !ok:
			into[name] = id
		case other != id:
			probs = append(probs, cdc.StartProblem{Table: id,
				Problem: fmt.Sprintf("its rows would go into index %q, like those of table %s, and overwrite each other by _id", name, other),
				Fix:     sharedIndexFix})
		}
	}
	if len(probs) > 0 {
		return s.refuse(probs...)
	}
	for name, id := range into {
		s.bound[name] = id
	}
	return nil
}

// sharedIndexFix is how to separate two tables that expand to one index name.
const sharedIndexFix = "give each table its own index: put {table} in index: (with {schema} or {db} when table names repeat " +
	"across them; index names are lowercased, so tables whose names differ only in case need another distinguishing part), " +
	"or capture only one of them"

// refuse is the sink's *cdc.StartError.
func (s *Sink) refuse(probs ...cdc.StartProblem) error {
	return &cdc.StartError{Component: "elasticsearch sink " + strconv.Quote(s.cfg.ID), Problems: probs}
}

func indexProblem(id cdc.TableID, err error) cdc.StartProblem {
	return cdc.StartProblem{Table: id, Problem: err.Error(),
		Fix: "change the index template (index:) so that every captured table yields a valid name, or stop capturing the table"}
}

// keyProblem says why a table's rows can get no _id (err from idColumns) and what to do.
func (s *Sink) keyProblem(id cdc.TableID, err error) cdc.StartProblem {
	p := cdc.StartProblem{Table: id}
	if errors.Is(err, errNoKey) {
		p.Problem = "the table has no primary key and id_fields is not set, so its rows can get no _id (the sink never generates one)"
		p.Fix = "add a primary key, set id_fields to columns that identify a row, stop capturing the table, " +
			"or set keyless: dead_letter to send its rows to the dead-letter queue"
	} else {
		p.Problem = trimSerialization(err.Error()) + ", so its rows can get no _id"
		p.Fix = "set id_fields to columns every captured table has, stop capturing the table, " +
			"or set keyless: dead_letter to send its rows to the dead-letter queue"
	}
	return p
}

// trimSerialization drops the per-row prefix of an idColumns error.
func trimSerialization(s string) string {
	const prefix = "serialization failure: "
	if len(s) > len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):]
	}
	return s
}

// fieldProblems names the columns that cannot be a top-level field: every row of the table
// would be refused (and with auto_create_index its mapping could not be generated).
func fieldProblems(sch *cdc.TableSchema) []cdc.StartProblem {
	var probs []cdc.StartProblem
	for i := range sch.Columns {
		if reason := checkFieldName(sch.Columns[i].Name); reason != "" {
			probs = append(probs, cdc.StartProblem{Table: sch.ID,
				Problem: fmt.Sprintf("column %q cannot be a document field: %s", sch.Columns[i].Name, reason),
				Fix:     "rename the column at the source, or stop capturing the table"})
		}
	}
	return probs
}

// checkBindings refuses, before anything of the batch is written, an action whose index is
// bound to another table in this session -- by CheckTables, by a claim, or by an earlier
// action -- as the fence itself would on a later run (bound_to_another_relation). Without it
// the second table's rows would overwrite the first's by _id until a restart noticed.
func (s *Sink) checkBindings(acts []action) error {
	var lastIndex string
	var lastTable cdc.TableID
	for i := range acts {
		a := &acts[i]
		if a.index == lastIndex && a.table == lastTable {
			continue
		}
		lastIndex, lastTable = a.index, a.table
		owner, ok := s.bound[a.index]
		if !ok {
			if c := s.liveClaim(a.index); c != nil {
				owner, ok = c.Destination().Table, true
			}
		}
		if !ok {
			s.bound[a.index] = a.table
			continue
		}
		if owner != a.table {
			return &esfence.ConflictError{Class: esfence.BoundToAnotherRelation, Index: a.index, Table: a.table,
				Detail: "in this session the index already mirrors table " + owner.String() + "; " + sharedIndexFix}
		}
	}
	return nil
}

var _ cdc.TableChecker = (*Sink)(nil)
