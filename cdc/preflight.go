package cdc

import (
	"context"
	"errors"
	"strings"
)

// TableLister is implemented by a Stream that knows its captured tables when Open returns.
// Tables returns their schemas as of Open, in a stable order. A stream may still deliver
// events of tables it did not list (a PostgreSQL FOR ALL TABLES publication gains tables
// created later); a sink checks those when they first arrive.
type TableLister interface {
	Tables() []*TableSchema
}

// TableChecker is implemented by a Sink that can tell, from the schemas alone, that a
// configuration cannot work: a table it could never write, or two tables that would write
// into one destination. CheckTables returns a *StartError naming every such table and its
// fix, or nil. It may remember what it checked (the destination each table is bound to), so
// that later writes are held to it.
type TableChecker interface {
	CheckTables(ctx context.Context, tables []*TableSchema) error
}

// ErrStart matches every *StartError: errors.Is(err, cdc.ErrStart) is true when a pipeline
// was refused because its configuration cannot work.
var ErrStart = errors.New("cdc: the configuration cannot work")

// StartProblem is one reason a configuration cannot work: the table it concerns, what is
// wrong, and what the operator can do about it. None of them carries row data.
type StartProblem struct {
	Table   TableID
	Problem string // what is wrong, e.g. "does not exist"
	Fix     string // what to change, e.g. `did you mean public."MyOrders"?`
}

// StartError refuses a pipeline at start (or a table on its first appearance) because its
// configuration cannot work: retrying changes nothing, the operator must change the
// configuration or the database. Sources return it from Open, sinks from CheckTables and
// from Write; cdc.Runner never retries it and leaves the checkpoint unchanged.
type StartError struct {
	Component string // who refuses: "pgcdc", `elasticsearch sink "es"`, ...
	Problems  []StartProblem
}

func (e *StartError) Error() string {
	var b strings.Builder
	b.WriteString(e.Component)
	b.WriteString(": the configuration cannot work: ")
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString("table ")
		b.WriteString(p.Table.String())
		b.WriteString(": ")
		b.WriteString(p.Problem)
		if p.Fix != "" {
			b.WriteString(" (fix: ")
			b.WriteString(p.Fix)
			b.WriteByte(')')
		}
	}
	return b.String()
}

// Is makes errors.Is(err, ErrStart) and errors.Is(err, ErrPermanent) match.
// A start refusal is also permanent: reopening the stream cannot cure it.
func (e *StartError) Is(target error) bool { return target == ErrStart || target == ErrPermanent }

// preflight lets the sink check the stream's tables before any event is read: a refusal is
// fatal, the checkpoint unchanged.
func (r *Runner) preflight(ctx context.Context, st Stream) error {
	lister, ok := st.(TableLister)
	if !ok {
		return nil
	}
	checker, ok := r.sink.(TableChecker)
	if !ok {
		return nil
	}
	tables := lister.Tables()
	if err := checker.CheckTables(ctx, tables); err != nil {
		return err
	}
	r.log.Info("captured tables checked", "tables", len(tables))
	return nil
}
