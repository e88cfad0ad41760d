package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/mysqlcdc"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/queue/kafkaqueue"
)

// ErrSwitchRefused is what Switch's refusals wrap (besides ErrRunning and ErrNoPipeline): the
// two configurations are not one pipeline on two paths, the prepare step is missing, or the
// stored checkpoint is neither path's. The message says which and the fix.
var ErrSwitchRefused = errors.New("mirror: switch refused")

// SwitchOptions configure Switch. The zero value (or nil) gives the defaults.
type SwitchOptions struct {
	// Prepare runs the step a switch to a native source needs while the Debezium pipeline
	// still runs: PostgreSQL, the new source's slot and publication are created (the slot's
	// consistent point is where the native stream will start); MySQL/MariaDB, the server's
	// current binlog position is recorded beside the state file (<state>.switch-<pipeline>).
	// It touches neither the state file nor the running pipeline.
	Prepare bool
	// Keep leaves what the old path holds in place: the PostgreSQL slot and publication of a
	// native pipeline switched to Debezium, the consumer group (and its committed offsets) of
	// a Debezium pipeline switched back. Default false: they are removed, so that no slot
	// holds WAL for a reader that is gone. With Keep a Debezium group is not checked for live
	// members either.
	Keep bool
	// LockTimeout bounds the wait for the state file's lock. Default 2s.
	LockTimeout time.Duration
}

// SwitchReport says what Switch did.
type SwitchReport struct {
	Pipeline string
	From, To string // the source types
	// Prepared says what the prepare step did (Prepare): the slot created, or the position
	// recorded and where.
	Prepared string
	// Checkpoint is set when the old path's checkpoint was reset (to none, or to the position
	// the prepare step recorded); Switched when the stored checkpoint is the new path's
	// already (a switch done before, or the new pipeline ran since): nothing was reset.
	Checkpoint, Switched bool
	// Slot and Publication are the old native PostgreSQL source's objects dropped, Group the
	// old Debezium consumer group deleted with its offsets.
	Slot, Publication, Group string
	// Kept names what Keep left in place.
	Kept []string
}

// Switch moves pipeline between the native source and the Debezium path on the same indices:
// cfg is the configuration it will run with, from the one it ran with. Both must name the same
// state file and the pipeline in each the same source name (the index names and ownership
// markers come from it); one source is type debezium, the other postgres or mysql.
//
// Native to Debezium: start the connector with snapshot.mode=no_data while the native
// pipeline runs, wait until its topics receive changes, stop the pipeline, then Switch: the
// native checkpoint is reset (a new consumer group reads the topics from their start) and,
// unless Keep, the PostgreSQL slot and publication are dropped.
//
// Debezium to native: while the Debezium pipeline runs, Switch with Prepare (the native
// slot, or the binlog position, the native stream will start from); wait until the Debezium
// pipeline has applied every change (its lag 0), stop it, then Switch: the Debezium
// checkpoint is reset (PostgreSQL: the next run streams from the prepared slot, after a
// snapshot when the source's snapshot is initial) or replaced by the prepared position
// (MySQL/MariaDB: a snapshot, then the stream from that position), and unless Keep the
// consumer group is deleted. The native snapshot's rows carry versions above every change the
// Debezium path applied before the prepare step and below every change the stream delivers
// after it, so no document's version goes backwards; changes the Debezium pipeline applied
// after the prepare step are delivered again at versions at least equal.
//
// Switch refuses (ErrRunning) while the state file is held, the old PostgreSQL slot is active
// or the old consumer group has live members, and (ErrSwitchRefused) a switch to a native
// source without its prepare step. The indices' ownership records and the state file's
// identity are kept: the next run claims the same indices as the same owner. Each step can be
// repeated: a Switch that failed half way is finished by running it again.
func Switch(ctx context.Context, cfg, from *Config, pipeline string, opts *SwitchOptions) (*SwitchReport, error) {
	var o SwitchOptions
	if opts != nil {
		o = *opts
	}
	if from == nil {
		return nil, errors.New("mirror: nil Config")
	}
	if err := from.Validate(); err != nil {
		return nil, err
	}
	old := from.Pipeline(pipeline)
	if old == nil {
		return nil, fmt.Errorf("%w: %q in the old configuration (it has %s)", ErrNoPipeline, pipeline, strings.Join(from.Names(), ", "))
	}
	if cfg == nil {
		return nil, errors.New("mirror: nil Config")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pc := cfg.Pipeline(pipeline)
	if pc == nil {
		return nil, fmt.Errorf("%w: %q (the configuration has %s)", ErrNoPipeline, pipeline, strings.Join(cfg.Names(), ", "))
	}
	if cfg.StateStore != nil || from.StateStore != nil {
		return nil, fmt.Errorf("%w: a switch needs the state file (state:) in both configurations; a shared state_store runs postgres and mysql pipelines only", ErrSwitchRefused)
	}
	if err := switchable(cfg, from, pc, old); err != nil {
		return nil, err
	}
	rep := &SwitchReport{Pipeline: pipeline, From: old.Source.Type, To: pc.Source.Type}
	if o.Prepare {
		return rep, prepareSwitch(ctx, cfg, pc, rep)
	}
	_, st, err := openForPipeline(ctx, cfg, pipeline, o.LockTimeout, true)
	if err != nil {
		return nil, err
	}
	if st != nil {
		defer st.Close()
	}
	// The old path must be stopped.
	var oldPG *pgcdc.Source
	switch old.Source.Type {
	case "postgres":
		if oldPG, err = newPostgres(old, sourceName(&old.Source), cdc.SnapshotNever, nil, st); err != nil {
			return nil, err
		}
		info, err := oldPG.SlotInfo(ctx)
		if err != nil {
			return nil, fmt.Errorf("mirror: pipeline %q: the old source: %w", pipeline, err)
		}
		if info.Active {
			return nil, fmt.Errorf("%w: pipeline %q: the old source's replication slot %s is active (walsender pid %d); stop the native pipeline first",
				ErrRunning, pipeline, info.Slot, info.ActivePID)
		}
	}
	var cp cdc.Checkpoint
	if st != nil {
		if cp, err = st.LoadCheckpoint(ctx, pipeline); err != nil {
			return rep, fmt.Errorf("mirror: pipeline %q: %w", pipeline, err)
		}
	}
	have := checkpointKind(cp)
	sidecar := switchFile(cfg, pipeline)
	switch {
	case have == pc.Source.Type:
		rep.Switched = true
		if old.Source.Type == "debezium" && !o.Keep {
			if rep.Group, err = deleteGroup(ctx, old); err != nil {
				return rep, err
			}
		}
	case have != "" && have != old.Source.Type:
		return rep, fmt.Errorf("%w: pipeline %q: the stored checkpoint is a %s source's, neither the old source's (%s) nor the new one's (%s); "+
			"switch from the configuration the pipeline last ran with", ErrSwitchRefused, pipeline, have, old.Source.Type, pc.Source.Type)
	default:
		var next cdc.Checkpoint
		switch pc.Source.Type {
		case "postgres":
			src, err := newPostgres(pc, sourceName(&pc.Source), cdc.SnapshotNever, nil, st)
			if err != nil {
				return rep, err
			}
			info, err := src.SlotInfo(ctx)
			if err != nil {
				return rep, fmt.Errorf("mirror: pipeline %q: the new source: %w", pipeline, err)
			}
			if !info.SlotExists {
				return rep, fmt.Errorf("%w: pipeline %q: the native source's slot %s does not exist: the prepare step is missing "+
					"(start the Debezium pipeline again, run switch --prepare while it runs, wait until its lag is 0, stop it, then switch)",
					ErrSwitchRefused, pipeline, info.Slot)
			}
		case "mysql":
			if next, err = readSwitchFile(sidecar, pipeline); err != nil {
				return rep, err
			}
		}
		if old.Source.Type == "debezium" && !o.Keep {
			// Deleting the group is the check that no process of the old pipeline runs: it is
			// refused while the group has members.
			if rep.Group, err = deleteGroup(ctx, old); err != nil {
				return rep, err
			}
		}
		if st != nil {
			if next != nil {
				err = st.SaveCheckpoint(ctx, pipeline, next)
			} else {
				err = st.(checkpointResetter).ResetCheckpoint(ctx, pipeline)
			}
			if err != nil {
				return rep, fmt.Errorf("mirror: pipeline %q: %w", pipeline, err)
			}
			rep.Checkpoint = true
		}
	}
	if pc.Source.Type == "mysql" {
		if err := os.Remove(sidecar); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return rep, fmt.Errorf("mirror: pipeline %q: removing the prepared position: %w", pipeline, err)
		}
	}
	// What the old path leaves behind.
	switch old.Source.Type {
	case "postgres":
		info, err := oldPG.SlotInfo(ctx)
		if err != nil {
			return rep, fmt.Errorf("mirror: pipeline %q: the old source: %w", pipeline, err)
		}
		if o.Keep {
			if info.SlotExists {
				rep.Kept = append(rep.Kept, "replication slot "+info.Slot)
			}
			if info.PublicationExists {
				rep.Kept = append(rep.Kept, "publication "+info.Publication)
			}
			break
		}
		if info.Active {
			return rep, fmt.Errorf("%w: pipeline %q: the old source's replication slot %s became active (walsender pid %d); stop the native pipeline",
				ErrRunning, pipeline, info.Slot, info.ActivePID)
		}
		if err := oldPG.Drop(ctx); err != nil {
			return rep, fmt.Errorf("mirror: pipeline %q: dropping the old source's slot and publication: %w", pipeline, err)
		}
		if info.SlotExists {
			rep.Slot = info.Slot
		}
		if info.PublicationExists {
			rep.Publication = info.Publication
		}
	case "debezium":
		if o.Keep {
			rep.Kept = append(rep.Kept, "consumer group "+debeziumGroup(old))
		}
	}
	if old.Source.Type == "postgres" && st != nil {
		// The native path's recorded slot and publication names go with it (last: a failed
		// drop is repeated with them): the way back takes the names its prepare step uses,
		// the configuration's or the default.
		if err := forgetPostgresNames(ctx, st, pipeline); err != nil {
			return rep, fmt.Errorf("mirror: pipeline %q: %w", pipeline, err)
		}
	}
	return rep, nil
}

// switchable refuses two configurations that are not one pipeline on the two paths.
func switchable(cfg, from *Config, pc, old *PipelineConfig) error {
	a, errA := filepath.Abs(cfg.State)
	b, errB := filepath.Abs(from.State)
	switch {
	case errA != nil || errB != nil || a != b:
		return fmt.Errorf("%w: pipeline %q: the two configurations name different state files; the pipeline's checkpoint and the ownership of its indices are in one: give both the same state:",
			ErrSwitchRefused, pc.Name)
	case sourceName(&pc.Source) != sourceName(&old.Source):
		return fmt.Errorf("%w: pipeline %q: the sources' names differ (%q, %q); index names and ownership come from it: give the new source name: %s",
			ErrSwitchRefused, pc.Name, sourceName(&pc.Source), sourceName(&old.Source), sourceName(&old.Source))
	case (pc.Source.Type == "debezium") == (old.Source.Type == "debezium"):
		return fmt.Errorf("%w: pipeline %q: both sources are of type %s and %s: a switch goes between a native source (postgres, mysql) and debezium",
			ErrSwitchRefused, pc.Name, old.Source.Type, pc.Source.Type)
	}
	return nil
}

// prepareSwitch is Switch's prepare step (SwitchOptions.Prepare).
func prepareSwitch(ctx context.Context, cfg *Config, pc *PipelineConfig, rep *SwitchReport) error {
	switch pc.Source.Type {
	case "debezium":
		return fmt.Errorf("%w: pipeline %q: a switch to debezium has no prepare step: start the connector with snapshot.mode=no_data while the native pipeline runs, "+
			"wait until its topics receive changes, stop the pipeline, then switch", ErrSwitchRefused, pc.Name)
	case "postgres":
		// The state file is held by the running Debezium pipeline: the names come from the
		// configuration (or the pipeline's default), as a first start's do.
		src, err := newPostgres(pc, sourceName(&pc.Source), cdc.SnapshotNever, nil, nil)
		if err != nil {
			return err
		}
		info, err := src.SlotInfo(ctx)
		if err != nil {
			return fmt.Errorf("mirror: pipeline %q: %w", pc.Name, err)
		}
		if info.Active {
			return fmt.Errorf("%w: pipeline %q: replication slot %s is active (walsender pid %d): another reader uses it",
				ErrRunning, pc.Name, info.Slot, info.ActivePID)
		}
		if !info.SlotExists {
			// Opening a stream without a checkpoint creates the publication and the slot
			// (its consistent point is where the stream will start); nothing is read.
			stream, err := src.Open(ctx, nil)
			if err != nil {
				return fmt.Errorf("mirror: pipeline %q: creating the slot: %w", pc.Name, err)
			}
			if err := stream.Close(); err != nil {
				return fmt.Errorf("mirror: pipeline %q: creating the slot: %w", pc.Name, err)
			}
			if info, err = src.SlotInfo(ctx); err != nil {
				return fmt.Errorf("mirror: pipeline %q: %w", pc.Name, err)
			}
			rep.Prepared = fmt.Sprintf("created replication slot %s (consistent point %s) and publication %s", info.Slot, info.ConfirmedLSN, info.Publication)
		} else {
			rep.Prepared = fmt.Sprintf("replication slot %s exists already (confirmed %s)", info.Slot, info.ConfirmedLSN)
		}
		return nil
	case "mysql":
		src, err := newSource(pc, nil, nil)
		if err != nil {
			return err
		}
		my, ok := src.(*mysqlcdc.Source)
		if !ok {
			return fmt.Errorf("mirror: pipeline %q: the mysql source cannot take a switch position", pc.Name)
		}
		cp, err := my.SwitchCheckpoint(ctx, pc.Source.Snapshot != "never")
		if err != nil {
			return fmt.Errorf("mirror: pipeline %q: reading the binlog position: %w", pc.Name, err)
		}
		path := switchFile(cfg, pc.Name)
		b, _ := json.Marshal(switchRecord{V: 1, Pipeline: pc.Name, Checkpoint: json.RawMessage(cp)})
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return fmt.Errorf("mirror: pipeline %q: recording the binlog position: %w", pc.Name, err)
		}
		rep.Prepared = "recorded the server's current binlog position in " + path
		return nil
	}
	return fmt.Errorf("mirror: pipeline %q: unknown source type", pc.Name)
}

// switchRecord is the prepared position of a switch to a MySQL/MariaDB source, in the file
// switchFile names: a mysqlcdc checkpoint (SwitchCheckpoint).
type switchRecord struct {
	V          int             `json:"v"`
	Pipeline   string          `json:"pipeline"`
	Checkpoint json.RawMessage `json:"checkpoint"`
}

// switchFile is where the prepare step of a switch to MySQL/MariaDB records its position.
func switchFile(cfg *Config, pipeline string) string {
	return cfg.State + ".switch-" + pgcdc.DefaultName(pipeline)
}

func readSwitchFile(path, pipeline string) (cdc.Checkpoint, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: pipeline %q: no prepared binlog position (%s): the prepare step is missing "+
			"(start the Debezium pipeline again, run switch --prepare while it runs, wait until its lag is 0, stop it, then switch)",
			ErrSwitchRefused, pipeline, path)
	}
	if err != nil {
		return nil, fmt.Errorf("mirror: pipeline %q: the prepared binlog position: %w", pipeline, err)
	}
	var r switchRecord
	if json.Unmarshal(b, &r) != nil || r.V != 1 || r.Pipeline != pipeline || !mysqlcdc.IsCheckpoint(cdc.Checkpoint(r.Checkpoint)) {
		return nil, fmt.Errorf("%w: pipeline %q: the prepared binlog position %s is malformed; run switch --prepare again while the Debezium pipeline runs",
			ErrSwitchRefused, pipeline, path)
	}
	return cdc.Checkpoint(r.Checkpoint), nil
}

// deleteGroup deletes a debezium pipeline's consumer group with its offsets, refusing
// (ErrRunning) while it has members; it returns the group's name when one was deleted.
func deleteGroup(ctx context.Context, p *PipelineConfig) (string, error) {
	mon, err := kafkaqueue.NewMonitor(debeziumQueue(p), nil)
	if err != nil {
		return "", err
	}
	deleted, err := mon.DeleteGroup(ctx)
	mon.Close()
	switch {
	case errors.Is(err, kafkaqueue.ErrGroupInUse):
		return "", fmt.Errorf("%w: pipeline %q: consumer group %s has live members; stop every process of the pipeline first",
			ErrRunning, p.Name, debeziumGroup(p))
	case err != nil:
		return "", fmt.Errorf("mirror: pipeline %q: %w", p.Name, err)
	case deleted:
		return debeziumGroup(p), nil
	}
	return "", nil
}

// checkpointKind names the source type whose checkpoint cp is: "" for none, "postgres",
// "mysql", "debezium", or "unknown".
func checkpointKind(cp cdc.Checkpoint) string {
	switch {
	case len(cp) == 0:
		return ""
	case strings.HasPrefix(string(cp), "debezium"):
		return "debezium"
	case mysqlcdc.IsCheckpoint(cp):
		return "mysql"
	}
	if _, err := pgcdc.CheckpointLSN(cp); err == nil {
		return "postgres"
	}
	return "unknown"
}

// checkpointResetter is what Switch needs of the state file besides a Store.
type checkpointResetter interface {
	ResetCheckpoint(ctx context.Context, pipeline string) error
}
