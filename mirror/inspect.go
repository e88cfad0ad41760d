package mirror

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/esfence"
	"github.com/tributary-dev/tributary/sink"
	"github.com/tributary-dev/tributary/statestore"
)

// InspectOptions configure Inspect. The zero value (or nil) gives the defaults.
type InspectOptions struct {
	// LockTimeout bounds the wait for the state file's lock. Default 2s.
	LockTimeout time.Duration
}

// Report is what Inspect finds about one pipeline from outside a running mirror: its stored
// state and what its source's server says. A running mirror's own view is its Status.
type Report struct {
	Pipeline, Source string // the pipeline's name and its source's type
	// StateInUse is set when a running mirror holds the state file: the stored state and the
	// lag are then unknown here (ask that mirror). With a shared state store it is set while a
	// process holds the pipeline's lease, and the stored state is read all the same.
	StateInUse bool
	// Lease is the pipeline's lease in a shared state store as read (nil with a state file):
	// its Holder is the active process while Lease.Held().
	Lease *statestore.Lease
	// Checkpoint says whether a checkpoint is stored, CheckpointSaved when it was last saved
	// (zero when unknown).
	Checkpoint      bool
	CheckpointSaved time.Time
	// Indices are the indices the pipeline's ownership records name.
	Indices []string
	// Lag is the source's measurement of how far the stored checkpoint trails the server
	// (cdc.LagReporter; for debezium: how far the consumer group trails its topics, Bytes
	// counting records); nil when the source cannot measure it or the state is in use. LagErr
	// is set when the measurement failed.
	Lag    *cdc.SourceLag
	LagErr error
	// Slot is the PostgreSQL slot's and publication's state (nil for MySQL); SlotErr is set
	// when it could not be read.
	Slot    *pgcdc.SlotInfo
	SlotErr error
	// Cluster is the health of Indices in the sink's cluster (one read bounded by
	// inspectHealthBound; an index the cluster lacks is red); nil when no index is owned or
	// the state is in use (a running mirror's Status has it). ClusterErr is set when the read
	// failed.
	Cluster    *cdc.ClusterHealth
	ClusterErr error
}

// inspectHealthBound bounds Inspect's read of the indices' health.
const inspectHealthBound = 5 * time.Second

// Inspect reports on the pipeline named pipeline of cfg: its stored checkpoint and ownership
// records, the source's lag behind the server, and for PostgreSQL the slot. It does not
// create a missing state file, and a running mirror holding the file is no error
// (Report.StateInUse). Failures to reach the source are in the report, not the error.
func Inspect(ctx context.Context, cfg *Config, pipeline string, opts *InspectOptions) (*Report, error) {
	var o InspectOptions
	if opts != nil {
		o = *opts
	}
	pc, st, err := openForPipeline(ctx, cfg, pipeline, o.LockTimeout, false)
	inUse := errors.Is(err, ErrRunning)
	if err != nil && !inUse {
		return nil, err
	}
	if pc == nil {
		pc = cfg.Pipeline(pipeline)
	}
	rep := &Report{Pipeline: pipeline, Source: pc.Source.Type, StateInUse: inUse}
	if l, ok := st.(statestore.Leaser); ok && cfg.StateStore != nil {
		lease, err := l.ReadLease(ctx, pipeline)
		if err != nil {
			_ = st.Close()
			return nil, fmt.Errorf("mirror: pipeline %q: %w", pipeline, err)
		}
		rep.Lease = &lease
	}
	var cp cdc.Checkpoint
	if st != nil {
		defer st.Close()
		if cp, err = st.LoadCheckpoint(ctx, pipeline); err != nil {
			return nil, fmt.Errorf("mirror: pipeline %q: %w", pipeline, err)
		}
		rep.Checkpoint = cp != nil
		if rep.CheckpointSaved, err = st.CheckpointSaved(ctx, pipeline); err != nil {
			return nil, fmt.Errorf("mirror: pipeline %q: %w", pipeline, err)
		}
		recs, err := st.List(ctx, pipeline, esfence.Namespace)
		if err != nil {
			return nil, fmt.Errorf("mirror: pipeline %q: %w", pipeline, err)
		}
		for _, r := range recs {
			rep.Indices = append(rep.Indices, r.Key)
		}
		if len(rep.Indices) > 0 {
			rep.Cluster, rep.ClusterErr = indicesHealth(ctx, pc, st, rep.Indices)
		}
	}
	src, err := newSource(pc, slog.New(slog.DiscardHandler), st)
	if err != nil {
		return nil, fmt.Errorf("mirror: pipeline %q: %w", pipeline, err)
	}
	if c, ok := src.(io.Closer); ok {
		defer c.Close()
	}
	if pg, ok := src.(*pgcdc.Source); ok {
		info, err := pg.SlotInfo(ctx)
		if err == nil && inUse && !info.SlotExists {
			// The running mirror holds the record of the names: a pipeline that kept an
			// earlier version's slot reads that one (source.go, postgresNames).
			if old, lerr := legacyPostgres(pc); lerr == nil {
				if li, lerr := old.SlotInfo(ctx); lerr == nil && li.SlotExists {
					info = li
				}
			}
		}
		rep.Slot, rep.SlotErr = &info, err
	}
	// A debezium pipeline's lag is its consumer group's, whatever the state file holds.
	if lr, ok := src.(cdc.LagReporter); ok && (!inUse || pc.Source.Type == "debezium" || rep.Lease != nil) {
		lag, err := lr.Lag(ctx, cp)
		if err != nil {
			rep.LagErr = err
		} else {
			rep.Lag = &lag
		}
	}
	return rep, nil
}

// indicesHealth reads the health of indices with the pipeline's sink settings.
func indicesHealth(ctx context.Context, pc *PipelineConfig, st statestore.Store, indices []string) (*cdc.ClusterHealth, error) {
	k, err := sink.New(pc.Sink, pc.Name, st, nil)
	if err != nil {
		return nil, err
	}
	defer k.Close()
	ctx, cancel := context.WithTimeout(ctx, inspectHealthBound)
	defer cancel()
	h, err := k.IndicesHealth(ctx, indices)
	if err != nil {
		return nil, err
	}
	return &h, nil
}
