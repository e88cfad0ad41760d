package mirror

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/sink"
)

// ReindexReport is what a reindex did.
type ReindexReport struct {
	Table       cdc.TableID
	Generation  string        // the index readers see now
	Replaced    string        // the index they saw before (retired, or deleted when legacy)
	Resnapshot  string        // the re-snapshot that filled the new generation
	Rows        int64         // rows the re-snapshot read
	Fill, Total time.Duration // the re-snapshot until every row was stored; the whole reindex
}

// ErrReindex is the error of a reindex that could not complete (its re-snapshot was given up);
// the new generation is abandoned and readers still see the old one.
var ErrReindex = errors.New("mirror: reindex failed")

// Reindex rebuilds the index of one table of a running pipeline without downtime (package
// sink, Reindexing): a new generation is created with the mapping generated from the table's
// current schema (loaded from the source), every change is written to both generations from
// then on, a re-snapshot fills the new one, and once the re-snapshot has ended and every row it
// read is stored, the read alias readers query moves to the new generation in one request; the
// old one is deleted after the sink's retire_after. table is spelled as source.tables spells it.
// Reindex blocks until the switch (or ctx ends: the reindex then stays in progress, writes still
// go to both generations, and calling Reindex again resumes it with a new re-snapshot; after a
// switch that failed once begun -- a refused refresh, say -- calling it again completes the
// switch, with no re-snapshot: the report's Resnapshot is then empty). The
// pipeline must be running and have written a change of the table in this run, with no other
// re-snapshot running; its source must re-snapshot (PostgreSQL, MariaDB). Should another
// re-snapshot be requested while the reindex's runs, the reindex may end with ErrReindex rather
// than switch on an outcome it could not see.
func (m *Mirror) Reindex(ctx context.Context, pipeline, table string) (*ReindexReport, error) {
	p, err := m.pipe(pipeline)
	if err != nil {
		return nil, err
	}
	rs, ok := p.src.(cdc.Resnapshotter)
	if !ok {
		return nil, fmt.Errorf("%w (pipeline %q)", ErrResnapshotUnsupported, pipeline)
	}
	id, ok := p.sink.FindTable(table)
	if !ok {
		return nil, fmt.Errorf("mirror: pipeline %q: %w: %q (the pipeline must have written a change of it in this run)", pipeline, sink.ErrNoTable, table)
	}
	began := time.Now()
	before, _ := p.sink.Generations(id)
	if before.Switching {
		// A reindex of this run filled the new generation, and its switch failed once begun
		// (a refused refresh, a lost connection): the switch is completed, with no re-snapshot.
		m.log.Info("reindex resumed: completing its switch", "pipeline", pipeline, "table", id.String(), "next", before.Next)
		if err := p.sink.SwitchReindex(ctx, id); err != nil {
			return nil, fmt.Errorf("mirror: pipeline %q: %w", pipeline, err)
		}
		rep := &ReindexReport{Table: id, Generation: before.Next, Replaced: before.Live, Total: time.Since(began)}
		m.log.Info("reindex done: readers see the new generation", "pipeline", pipeline, "table", id.String(), "generation", before.Next,
			"replaced", before.Live, "seconds", rep.Total.Seconds())
		return rep, nil
	}
	var next, rid string
	if rp := p.runner.Status().Progress.Resnapshot; rp.Active {
		if before.Next == "" || !strings.HasPrefix(rp.Resnapshot, reindexPrefix(before.Next)) {
			// Its outcome must be told apart from the reindex's own re-snapshot's.
			return nil, fmt.Errorf("mirror: pipeline %q: re-snapshot %s is running; reindex once it has ended", pipeline, rp.Resnapshot)
		}
		// The re-snapshot of this reindex, resumed by the source after a restart: wait for it.
		next, rid = before.Next, rp.Resnapshot
		m.log.Info("reindex resumed: its re-snapshot runs on", "pipeline", pipeline, "table", id.String(), "next", next, "resnapshot", rid)
	} else {
		sch, err := m.currentSchema(ctx, p, id)
		if err != nil {
			return nil, err
		}
		if next, err = p.sink.BeginReindex(ctx, sch); err != nil {
			return nil, fmt.Errorf("mirror: pipeline %q: %w", pipeline, err)
		}
		m.log.Info("reindex started: changes go to both generations", "pipeline", pipeline, "table", id.String(), "live", before.Live, "next", next)
		// Changes are written to both generations from here on; the re-snapshot, requested
		// now, brings every row that exists to the new one.
		rid, err = rs.Resnapshot(ctx, cdc.ResnapshotRequest{Tables: []string{table}, ID: reindexPrefix(next) + began.UTC().Format("150405.000")})
		if errors.Is(err, errors.ErrUnsupported) {
			_ = p.sink.AbandonReindex(ctx, id)
			return nil, fmt.Errorf("%w (pipeline %q): %w", ErrResnapshotUnsupported, pipeline, err)
		}
		if err != nil {
			return nil, fmt.Errorf("mirror: pipeline %q: %w", pipeline, err)
		}
	}
	fillStart := time.Now()
	rows, err := m.awaitStored(ctx, p, rid)
	if err != nil {
		if errors.Is(err, ErrReindex) {
			if aerr := p.sink.AbandonReindex(context.WithoutCancel(ctx), id); aerr != nil {
				err = errors.Join(err, aerr)
			}
		}
		return nil, fmt.Errorf("mirror: pipeline %q: table %s: %w", pipeline, id, err)
	}
	fill := time.Since(fillStart)
	if err := p.sink.SwitchReindex(ctx, id); err != nil {
		return nil, fmt.Errorf("mirror: pipeline %q: %w", pipeline, err)
	}
	rep := &ReindexReport{Table: id, Generation: next, Replaced: before.Live, Resnapshot: rid, Rows: rows, Fill: fill, Total: time.Since(began)}
	m.log.Info("reindex done: readers see the new generation", "pipeline", pipeline, "table", id.String(), "generation", next,
		"replaced", before.Live, "rows", rows, "seconds", rep.Total.Seconds())
	return rep, nil
}

// currentSchema is the table's schema as the source's catalog has it now (a reindex maps the
// new generation for the rows the re-snapshot will read).
func (m *Mirror) currentSchema(ctx context.Context, p *pipeline, id cdc.TableID) (*cdc.TableSchema, error) {
	if l, ok := p.src.(cdc.CurrentSchemaLoader); ok {
		sch, err := l.LoadCurrentSchema(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("mirror: pipeline %q: loading the schema of %s: %w", p.name, id, err)
		}
		return sch, nil
	}
	l, ok := p.src.(cdc.SchemaLoader)
	if !ok {
		return nil, fmt.Errorf("mirror: pipeline %q: its source cannot load table schemas", p.name)
	}
	sch, err := l.LoadSchema(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("mirror: pipeline %q: loading the schema of %s: %w", p.name, id, err)
	}
	return sch, nil
}

// awaitStored waits until re-snapshot rid has ended and every event the stream delivered up to
// then is acknowledged (the stream reports the end once the last rows are in its channel, and
// the runner acknowledges in order: Events reaching the figure of that moment plus what was
// pending then). It returns the rows read, or ErrReindex when the re-snapshot was given up.
func (m *Mirror) awaitStored(ctx context.Context, p *pipeline, rid string) (int64, error) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var target int64 = -1
	var rows int64
	seen := false
	for {
		st := p.runner.Status()
		pr := st.Progress
		rp := pr.Resnapshot
		seen = seen || rp.Resnapshot == rid
		switch {
		case target < 0 && seen && rp.Resnapshot != rid:
			// A re-snapshot requested meanwhile runs now: this one ended unseen, and whether
			// it was given up cannot be told. Never switch on a guess.
			return 0, fmt.Errorf("%w: re-snapshot %s ended while another one started; its outcome is unknown (reindex again)", ErrReindex, rid)
		case target < 0 && rp.Resnapshot == rid && !rp.Active:
			if rp.Error != "" {
				return 0, fmt.Errorf("%w: re-snapshot %s: %s", ErrReindex, rid, rp.Error)
			}
			target, rows = pr.Events+int64(pr.Pending), rp.RowsDone
		case target >= 0 && pr.Events >= target:
			return rows, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-tick.C:
		}
	}
}

// reindexPrefix begins the id of the re-snapshot that fills generation next.
func reindexPrefix(next string) string { return "reindex-" + next + "-" }

// pipe is the running term of the pipeline of that name: ErrNoPipeline when there is none,
// ErrStandby when this process is not its active one (leader.go).
func (m *Mirror) pipe(name string) (*pipeline, error) {
	for _, s := range m.seats {
		if s.name == name {
			return m.active(s)
		}
	}
	return nil, fmt.Errorf("%w: %q (it has %s)", ErrNoPipeline, name, strings.Join(m.Pipelines(), ", "))
}
