package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/mirror"
)

// drop deletes one pipeline (mirror.Drop) and says what went.
func drop(ctx context.Context, w io.Writer, cfg *mirror.Config, name string, indices bool) error {
	rep, err := mirror.Drop(ctx, cfg, name, &mirror.DropOptions{Indices: indices})
	if rep != nil {
		fmt.Fprintf(w, "pipeline %s:\n", name)
		if rep.Slot != "" {
			fmt.Fprintf(w, "  dropped replication slot %s\n", rep.Slot)
		}
		if rep.Group != "" {
			fmt.Fprintf(w, "  deleted consumer group %s and its offsets\n", rep.Group)
		}
		if rep.Publication != "" {
			fmt.Fprintf(w, "  dropped publication %s\n", rep.Publication)
		}
		for _, ix := range rep.Indices {
			fmt.Fprintf(w, "  deleted index %s\n", ix)
		}
		if rep.Checkpoint {
			fmt.Fprintln(w, "  deleted its checkpoint and ownership records")
		} else if err == nil {
			fmt.Fprintln(w, "  had no checkpoint")
		}
		if len(rep.IndicesLeft) > 0 {
			fmt.Fprintf(w, "  left its indices %s in place: a restarted pipeline is refused them until they are deleted (drop --indices)\n",
				strings.Join(rep.IndicesLeft, ", "))
		}
	}
	return err
}

// status prints, per pipeline, what the state file and the source's server say
// (mirror.Inspect) and, when a cdcmirror answers at addr, its live view.
func status(ctx context.Context, w io.Writer, cfg *mirror.Config, names []string, addr string) error {
	live, liveErr := liveStatus(ctx, addr)
	for _, name := range names {
		rep, err := mirror.Inspect(ctx, cfg, name, nil)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "pipeline %s (%s)\n", name, rep.Source)
		if l := rep.Lease; l != nil {
			if l.Held() {
				fmt.Fprintf(w, "  lease: held by %s (epoch %d, %s left)\n", l.Holder, l.Epoch, l.Remaining.Round(time.Millisecond))
			} else {
				fmt.Fprintf(w, "  lease: free (epoch %d): no process is active\n", l.Epoch)
			}
		}
		shared := rep.Lease != nil // a shared store's state is read while a process runs
		switch {
		case rep.StateInUse && !shared:
			fmt.Fprintln(w, "  checkpoint: unknown here (a running cdcmirror holds the state file)")
		case !rep.Checkpoint:
			fmt.Fprintln(w, "  checkpoint: none stored (the next run starts with the snapshot, or at the source's current position)")
		case rep.CheckpointSaved.IsZero():
			fmt.Fprintln(w, "  checkpoint: stored")
		default:
			fmt.Fprintf(w, "  checkpoint: saved %s (%s ago)\n", rep.CheckpointSaved.UTC().Format(time.RFC3339), ago(rep.CheckpointSaved))
		}
		switch {
		case rep.LagErr != nil:
			fmt.Fprintf(w, "  lag: not measured: %v\n", rep.LagErr)
		case rep.Lag != nil && rep.Source == "debezium":
			fmt.Fprintf(w, "  lag: the consumer group is %d records behind its topics' ends\n", rep.Lag.Bytes)
		case rep.Lag != nil:
			fmt.Fprintf(w, "  lag: %d bytes of change log behind the server", rep.Lag.Bytes)
			if rep.Lag.Retained >= 0 {
				fmt.Fprintf(w, "; the server retains %d bytes for the pipeline", rep.Lag.Retained)
			}
			fmt.Fprintln(w)
		case !rep.StateInUse:
			fmt.Fprintln(w, "  lag: the source does not report it")
		}
		if s := rep.Slot; s != nil {
			switch {
			case rep.SlotErr != nil:
				fmt.Fprintf(w, "  slot %s: unknown: %v\n", s.Slot, rep.SlotErr)
			case !s.SlotExists:
				fmt.Fprintf(w, "  slot %s: missing (created by the next run)\n", s.Slot)
			default:
				state := "inactive"
				if s.Active {
					state = fmt.Sprintf("active (walsender pid %d)", s.ActivePID)
				}
				fmt.Fprintf(w, "  slot %s: %s, restart %s, confirmed %s, wal %s\n", s.Slot, state, s.RestartLSN, s.ConfirmedLSN, s.WALStatus)
			}
			if rep.SlotErr == nil {
				pub := "missing"
				if s.PublicationExists {
					pub = "exists"
				}
				fmt.Fprintf(w, "  publication %s: %s\n", s.Publication, pub)
			}
		}
		switch {
		case rep.StateInUse && !shared:
		case len(rep.Indices) == 0:
			fmt.Fprintln(w, "  indices: none owned yet")
		default:
			fmt.Fprintf(w, "  indices: %s\n", strings.Join(rep.Indices, ", "))
		}
		switch {
		case rep.ClusterErr != nil:
			fmt.Fprintf(w, "  indices' health: unknown: %v\n", rep.ClusterErr)
		case rep.Cluster != nil:
			fmt.Fprintf(w, "  %s\n", clusterLine(&clusterStatus{Status: rep.Cluster.Status, Indices: rep.Cluster.Indices}))
		}
		printLive(w, name, live, liveErr, addr)
		if live != nil {
			for _, j := range live.Reindexes {
				if j.Pipeline == name {
					fmt.Fprintf(w, "  live %s\n", reindexLine(j))
				}
			}
		}
	}
	return nil
}

func printLive(w io.Writer, name string, live *statusDoc, liveErr error, addr string) {
	if addr == "" {
		return
	}
	if liveErr != nil {
		fmt.Fprintf(w, "  live: no running cdcmirror answers at %s\n", addr)
		return
	}
	for _, p := range live.Pipelines {
		if p.Pipeline != name {
			continue
		}
		health := "healthy"
		if !p.Healthy {
			health = "unhealthy: " + p.Reason
		}
		fmt.Fprintf(w, "  live (%s): %s, %s, %d events, %d pending, %d reconnects\n", addr, health, p.State, p.Events, p.Pending, p.Reconnects)
		if ld := p.Leadership; ld != nil {
			fmt.Fprintf(w, "  live role: %s (lease holder %q, epoch %d, %d takeovers here", ld.Role, ld.Holder, ld.Epoch, ld.Takeovers)
			if ld.LastTakeoverSeconds > 0 {
				fmt.Fprintf(w, ", the last took %.1fs", ld.LastTakeoverSeconds)
			}
			fmt.Fprintln(w, ")")
			if ld.StoreError != "" {
				fmt.Fprintf(w, "  live state store unreachable: %s\n", ld.StoreError)
			}
		}
		if p.Lag != nil {
			fmt.Fprintf(w, "  live lag: %.0fs, %d bytes", p.Lag.Seconds, p.Lag.Bytes)
			if p.Lag.Error != "" {
				fmt.Fprintf(w, " (last measurement failed: %s)", p.Lag.Error)
			}
			fmt.Fprintln(w)
		}
		if c := p.Cluster; c != nil {
			fmt.Fprintf(w, "  live %s\n", clusterLine(c))
		}
		for _, t := range p.Incomplete {
			fmt.Fprintf(w, "  live incomplete %s (index %s) since %s: %s\n", t.Table, t.Index, t.Since.Format(time.RFC3339), t.Reason)
		}
		for _, sp := range []*snapshotStatus{p.Snapshot, p.Resnapshot} {
			if sp != nil && (sp.Active || sp.ID != "") {
				fmt.Fprintf(w, "  live %s\n", snapshotLine(sp))
			}
		}
		return
	}
	fmt.Fprintf(w, "  live: the cdcmirror at %s does not run this pipeline\n", addr)
}

// clusterLine is the health of a pipeline's indices:
//
//	indices' health: yellow (cdc-orders-g1 yellow, cdc-users-g1 green)
func clusterLine(c *clusterStatus) string {
	var b strings.Builder
	b.WriteString("indices' health: ")
	if c.Status == "" {
		b.WriteString("unknown")
	} else {
		b.WriteString(c.Status)
	}
	names := make([]string, 0, len(c.Indices))
	for idx := range c.Indices {
		names = append(names, idx)
	}
	slices.Sort(names)
	for i, idx := range names {
		if i == 0 {
			b.WriteString(" (")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(idx + " " + c.Indices[idx])
		if i == len(names)-1 {
			b.WriteString(")")
		}
	}
	if c.Status == "red" {
		b.WriteString("; red: a primary shard unassigned, writes to it fail")
	}
	if c.Error != "" {
		b.WriteString("; the last read failed: " + c.Error)
	}
	return b.String()
}

// snapshotLine is a snapshot's or re-snapshot's live figures:
//
//	re-snapshot rs-1: running, table public.t, 1/2 tables, 500/1000 rows, 250 rows/s, ETA 2s
func snapshotLine(sp *snapshotStatus) string {
	var b strings.Builder
	if sp.ID != "" {
		b.WriteString("re-snapshot " + sp.ID + ": ")
	} else {
		b.WriteString("snapshot: ")
	}
	state := "done"
	if sp.Active {
		state = "running"
	}
	b.WriteString(state)
	if sp.Table != "" {
		b.WriteString(", table " + sp.Table)
	}
	fmt.Fprintf(&b, ", %d/%d tables, %d/%d rows, %.0f rows/s", sp.TablesDone, sp.TablesTotal, sp.RowsDone, sp.RowsEstimated, sp.RowsPerSecond)
	if sp.ETASeconds > 0 {
		fmt.Fprintf(&b, ", ETA %s", time.Duration(sp.ETASeconds*float64(time.Second)).Round(time.Second))
	}
	if sp.Queued > 0 {
		fmt.Fprintf(&b, ", %d queued", sp.Queued)
	}
	if sp.Error != "" {
		b.WriteString(", " + sp.Error)
	}
	return b.String()
}

// liveStatus asks a running cdcmirror for its /status.
func liveStatus(ctx context.Context, addr string) (*statusDoc, error) {
	if addr == "" {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/status", nil)
	if err != nil {
		return nil, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/status: %s", res.Status)
	}
	var doc statusDoc
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&doc); err != nil {
		return nil, fmt.Errorf("/status: %w", err)
	}
	return &doc, nil
}

func ago(t time.Time) string { return time.Since(t).Round(time.Second).String() }

// resnapFlags are the resnapshot command's flags.
type resnapFlags struct {
	tables stringList
	where  *string
}

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// postAdmin POSTs body as JSON to path on the cdcmirror serving addr (bounded by 40s) and
// decodes its JSON answer into ans.
func postAdmin(ctx context.Context, addr, path string, body, ans any) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, 40*time.Second)
	defer cancel()
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", "http://"+addr+path, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("no cdcmirror answers at %s (is it running with --metrics-addr %s?): %w", addr, addr, err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(ans); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", path, res.Status, err)
	}
	return res, nil
}

// requestResnapshot asks the cdcmirror serving addr to re-snapshot (POST /admin/resnapshot)
// and prints the request's id. A refusal (the tables, the condition) is a usage error.
func requestResnapshot(ctx context.Context, w io.Writer, addr string, body resnapshotBody) error {
	if addr == "" {
		return usageError{errors.New("--metrics-addr is required: the running cdcmirror takes the request")}
	}
	var ans resnapshotAnswer
	res, err := postAdmin(ctx, addr, "/admin/resnapshot", body, &ans)
	if err != nil {
		return err
	}
	switch {
	case res.StatusCode == http.StatusAccepted:
		fmt.Fprintf(w, "re-snapshot %s requested for pipeline %s; `cdcmirror status` shows its progress\n", ans.ID, ans.Pipeline)
		return nil
	case res.StatusCode == http.StatusBadRequest || res.StatusCode == http.StatusNotFound:
		return usageError{errors.New(ans.Error)}
	}
	return fmt.Errorf("/admin/resnapshot: %s: %s", res.Status, ans.Error)
}

// switchFlags are the switch command's flags.
type switchFlags struct {
	from          *string
	prepare, keep *bool
}

// switchPipeline moves one pipeline between the native source and the Debezium path
// (mirror.Switch) and says what it did and what comes next. A refusal of the switch itself
// (the configurations, a missing prepare step) is a usage error.
func switchPipeline(ctx context.Context, w io.Writer, cfgPath string, cfg, from *mirror.Config, name string, f switchFlags) error {
	rep, err := mirror.Switch(ctx, cfg, from, name, &mirror.SwitchOptions{Prepare: *f.prepare, Keep: *f.keep})
	if rep != nil && (err == nil || rep.Group != "" || rep.Checkpoint) {
		fmt.Fprintf(w, "pipeline %s (%s -> %s):\n", name, rep.From, rep.To)
		if rep.Prepared != "" {
			fmt.Fprintf(w, "  %s\n", rep.Prepared)
		}
		if rep.Group != "" {
			fmt.Fprintf(w, "  deleted consumer group %s and its offsets\n", rep.Group)
		}
		switch {
		case rep.Checkpoint && rep.To == "mysql":
			fmt.Fprintln(w, "  replaced the Debezium checkpoint by the prepared binlog position (the next run snapshots, then streams from it)")
		case rep.Checkpoint:
			fmt.Fprintf(w, "  reset the %s checkpoint, keeping the indices and their ownership\n", rep.From)
		case rep.Switched:
			fmt.Fprintf(w, "  the checkpoint is the %s source's already\n", rep.To)
		}
		if rep.Slot != "" {
			fmt.Fprintf(w, "  dropped replication slot %s\n", rep.Slot)
		}
		if rep.Publication != "" {
			fmt.Fprintf(w, "  dropped publication %s\n", rep.Publication)
		}
		for _, k := range rep.Kept {
			fmt.Fprintf(w, "  kept %s (--keep)\n", k)
		}
		if err == nil && *f.prepare {
			fmt.Fprintln(w, "  next: wait until the Debezium pipeline's lag is 0 (cdcmirror status), stop it, then run switch again without --prepare")
		} else if err == nil {
			fmt.Fprintf(w, "  next: cdcmirror run --config %s\n", cfgPath)
		}
	}
	if errors.Is(err, mirror.ErrSwitchRefused) {
		return usageError{err}
	}
	return err
}
