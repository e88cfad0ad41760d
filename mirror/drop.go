package mirror

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/esfence"
	"github.com/tributary-dev/tributary/sink"
)

// ErrRunning: Drop refused because the pipeline is running (its state file is locked by
// another process, or its PostgreSQL slot is active).
var ErrRunning = errors.New("mirror: the pipeline is running")

// DropOptions configure Drop. The zero value (or nil) gives the defaults.
type DropOptions struct {
	// Indices deletes the pipeline's indices too (with their write aliases), each only after
	// its ownership marker proved it this pipeline's. Default false: they stay, and a
	// restarted pipeline is refused them (unrecorded_destination: an index is never adopted)
	// until they are deleted or the index names change.
	Indices bool
	// LockTimeout bounds the wait for the state file's lock. Default 2s.
	LockTimeout time.Duration
}

// DropReport says what Drop removed.
type DropReport struct {
	Pipeline string
	// Slot and Publication are the PostgreSQL objects dropped ("" for MySQL, where the
	// server keeps nothing for a reader).
	Slot, Publication string
	// Group is the Kafka consumer group deleted with its offsets (debezium pipelines), so
	// that the next run reads the topics from their start.
	Group string
	// Indices are the indices deleted (DropOptions.Indices); IndicesLeft those the pipeline's
	// records named that were left in place.
	Indices, IndicesLeft []string
	// Checkpoint is set when a checkpoint was deleted.
	Checkpoint bool
}

// Drop removes the pipeline named pipeline of cfg so that it starts over -- snapshot
// included -- at its next run: the PostgreSQL slot and publication (nothing on MySQL; a
// debezium pipeline's consumer group and its offsets, refused while the group has members), with
// opts.Indices its indices, and then its checkpoint and ownership records in the state file.
// It refuses with ErrRunning while the pipeline runs: the state file is locked by a running
// mirror, or the slot is active. Each step can be repeated: a Drop that failed half way is
// finished by running it again. The dead-letter file is left alone.
func Drop(ctx context.Context, cfg *Config, pipeline string, opts *DropOptions) (*DropReport, error) {
	var o DropOptions
	if opts != nil {
		o = *opts
	}
	pc, st, err := openForPipeline(ctx, cfg, pipeline, o.LockTimeout, true)
	if err != nil {
		return nil, err
	}
	if st != nil {
		defer st.Close()
	}
	rep := &DropReport{Pipeline: pipeline}
	if pc.Source.Type == "postgres" {
		src, err := newPostgres(pc, sourceName(&pc.Source), cdc.SnapshotNever, nil, st)
		if err != nil {
			return nil, err
		}
		info, err := src.SlotInfo(ctx)
		if err != nil {
			return nil, fmt.Errorf("mirror: pipeline %q: %w", pipeline, err)
		}
		if info.Active {
			return nil, fmt.Errorf("%w: pipeline %q: replication slot %s is active (walsender pid %d); stop the pipeline first",
				ErrRunning, pipeline, info.Slot, info.ActivePID)
		}
		if err := src.Drop(ctx); err != nil {
			return nil, fmt.Errorf("mirror: pipeline %q: %w", pipeline, err)
		}
		if info.SlotExists {
			rep.Slot = info.Slot
		}
		if info.PublicationExists {
			rep.Publication = info.Publication
		}
	}
	if pc.Source.Type == "debezium" {
		if rep.Group, err = deleteGroup(ctx, pc); err != nil {
			return nil, err
		}
	}
	if st == nil {
		return rep, nil // no state file: nothing was ever stored
	}
	recs, err := st.List(ctx, pipeline, esfence.Namespace)
	if err != nil {
		return rep, fmt.Errorf("mirror: pipeline %q: %w", pipeline, err)
	}
	if o.Indices && len(recs) > 0 {
		s, err := sink.New(pc.Sink, pipeline, st, nil)
		if err != nil {
			return rep, err
		}
		rep.Indices, err = s.DropIndices(ctx)
		_ = s.Close()
		if err != nil {
			// The records stay, so that the indices left can be found again.
			return rep, fmt.Errorf("mirror: pipeline %q: deleting its indices: %w", pipeline, err)
		}
	} else {
		for _, r := range recs {
			rep.IndicesLeft = append(rep.IndicesLeft, r.Key)
		}
	}
	cp, err := st.LoadCheckpoint(ctx, pipeline)
	if err != nil {
		return rep, fmt.Errorf("mirror: pipeline %q: %w", pipeline, err)
	}
	if err := st.DeletePipeline(ctx, pipeline); err != nil {
		return rep, fmt.Errorf("mirror: pipeline %q: %w", pipeline, err)
	}
	rep.Checkpoint = cp != nil
	return rep, nil
}

func sourceName(s *SourceConfig) string {
	if s.Name != "" {
		return s.Name
	}
	return s.Type
}
