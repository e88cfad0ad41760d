package mirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/sink"
)

// Schema events (doc.go, "Schema events"): the sink reports every table a relation entered
// (sink.TableEntered: its index emptied, or created by a streamed change) and the pipeline
// asks its source for a re-snapshot of the table, in the background, retried a bounded
// number of times. A source that cannot re-snapshot, or a request that fails for good, is
// logged as an Error naming the table and the fix, and listed in the pipeline's Status
// (Incomplete, health table_incomplete) until a later request for the table succeeds.

// Retries of a re-snapshot request for an entered table: attempts in all, the first pause
// (doubled per attempt, at most enteredMaxBackoff).
const (
	enteredAttempts   = 8
	enteredBackoff    = time.Second
	enteredMaxBackoff = 30 * time.Second
)

// enteredHook carries out one pipeline's ENTERED reports.
type enteredHook struct {
	pipeline string
	log      *slog.Logger
	src      func() cdc.Source
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	backoff  time.Duration
	// handled, when set, is the sink's EnteredHandled: told once a report was handled.
	handled func(context.Context, sink.TableEntered) error

	mu         sync.Mutex
	incomplete map[cdc.TableID]cdc.IncompleteTable
}

func newEnteredHook(pipeline string, log *slog.Logger, src func() cdc.Source) *enteredHook {
	ctx, cancel := context.WithCancel(context.Background())
	return &enteredHook{pipeline: pipeline, log: log, src: src, ctx: ctx, cancel: cancel, backoff: enteredBackoff,
		incomplete: map[cdc.TableID]cdc.IncompleteTable{}}
}

// entered is the sink's OnEntered: it returns at once, the request runs in the background.
func (h *enteredHook) entered(e sink.TableEntered) {
	args := []any{"pipeline", h.pipeline, "table", e.Table.String(), "index", e.Index, "cause", string(e.Cause)}
	if e.Cause == sink.EnteredRenamed {
		args = append(args, "from", e.From.String())
	}
	h.log.Warn("a relation entered the table's index (doc: Schema events); requesting a re-snapshot of the table", args...)
	if h.ctx.Err() != nil {
		return
	}
	h.wg.Go(func() { h.resnapshot(e) })
}

// resnapshot asks the source for a re-snapshot of e's table, retrying failures that may pass,
// and then tells the sink that the report was handled (requested, or its failure reported).
func (h *enteredHook) resnapshot(e sink.TableEntered) {
	if h.request(e) && h.handled != nil {
		if err := h.handled(h.ctx, e); err != nil && h.ctx.Err() == nil {
			h.log.Warn("recording that a table's ENTERED report was handled failed; a restart reports it again",
				"pipeline", h.pipeline, "table", e.Table.String(), "error", err)
		}
	}
}

// request is resnapshot's request; false when the hook was closed first.
func (h *enteredHook) request(e sink.TableEntered) bool {
	rs, ok := h.src().(cdc.Resnapshotter)
	if !ok {
		h.fail(e, "the source cannot re-snapshot a table while streaming", unsupportedFix)
		return true
	}
	req := cdc.ResnapshotRequest{Tables: []string{requestTable(e.Table)}}
	pause := h.backoff
	for attempt := 1; ; attempt++ {
		id, err := rs.Resnapshot(h.ctx, req)
		if err == nil {
			h.log.Info("re-snapshot requested for a table a relation entered", "pipeline", h.pipeline,
				"table", e.Table.String(), "id", id)
			h.mu.Lock()
			delete(h.incomplete, e.Table)
			h.mu.Unlock()
			return true
		}
		if h.ctx.Err() != nil {
			return false
		}
		switch {
		case errors.Is(err, cdc.ErrTableNotFound):
			// Renamed or dropped before its re-snapshot: the name denotes no relation now (a
			// relation bearing it later is reported again), and the index keeps what it has,
			// as for any table that left the capture -- here only what was streamed.
			h.log.Warn("a table a relation entered was renamed or dropped before its re-snapshot: its index keeps only the changes streamed to it",
				"pipeline", h.pipeline, "table", e.Table.String(), "index", e.Index)
			h.mu.Lock()
			delete(h.incomplete, e.Table)
			h.mu.Unlock()
			return true
		case errors.Is(err, errors.ErrUnsupported):
			h.fail(e, "the source cannot re-snapshot a table while streaming ("+err.Error()+")", unsupportedFix)
			return true
		case errors.Is(err, cdc.ErrResnapshotRefused), attempt >= enteredAttempts:
			h.fail(e, "requesting its re-snapshot failed: "+err.Error(), fmt.Sprintf(
				"request it once the cause is fixed: cdcmirror resnapshot --pipeline %s --table %s (or mirror.Resnapshot)",
				h.pipeline, requestTable(e.Table)))
			return true
		}
		h.log.Warn("requesting a re-snapshot failed; trying again", "pipeline", h.pipeline, "table", e.Table.String(),
			"attempt", attempt, "error", err)
		select {
		case <-h.ctx.Done():
			return false
		case <-time.After(pause):
		}
		pause = min(2*pause, enteredMaxBackoff)
	}
}

// unsupportedFix is the fix when the source cannot re-snapshot (MySQL without MariaDB, the
// Debezium path).
const unsupportedFix = "fill the table's index another way: on the Debezium path send the connector an " +
	"incremental snapshot signal for the table; otherwise rebuild the pipeline (stop it, cdcmirror drop " +
	"--indices, start it: a new initial snapshot) -- or use MariaDB, whose source re-snapshots"

// fail reports a table whose index misses rows: an Error line and a Status entry.
func (h *enteredHook) fail(e sink.TableEntered, why, fix string) {
	reason := fmt.Sprintf("table %s entered its index %s (%s) without the rows it had before, and %s; fix: %s",
		e.Table, e.Index, e.Cause, why, fix)
	h.log.Error("a table's index misses rows that cannot be restored automatically", "pipeline", h.pipeline,
		"table", e.Table.String(), "index", e.Index, "cause", string(e.Cause), "reason", why, "fix", fix)
	h.mu.Lock()
	h.incomplete[e.Table] = cdc.IncompleteTable{Table: e.Table, Index: e.Index, Reason: reason, Since: time.Now().UTC()}
	h.mu.Unlock()
}

// status adds the incomplete tables to st (health table_incomplete when it was healthy).
func (h *enteredHook) status(st cdc.Status) cdc.Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.incomplete) == 0 {
		return st
	}
	st.Incomplete = make([]cdc.IncompleteTable, 0, len(h.incomplete))
	for _, t := range h.incomplete {
		st.Incomplete = append(st.Incomplete, t)
	}
	slices.SortFunc(st.Incomplete, func(a, b cdc.IncompleteTable) int { return strings.Compare(a.Table.String(), b.Table.String()) })
	if st.Health.Healthy {
		st.Health = cdc.Health{Class: cdc.HealthTableIncomplete, Reason: st.Incomplete[0].Reason}
		if n := len(st.Incomplete); n > 1 {
			st.Health.Reason = fmt.Sprintf("%s (and %d more tables: see Status.Incomplete)", st.Health.Reason, n-1)
		}
	}
	return st
}

// close ends the requests in flight and waits for them.
func (h *enteredHook) close() {
	h.cancel()
	h.wg.Wait()
}

// requestTable is a table as a re-snapshot request spells it: schema.table (PostgreSQL),
// db.table (MySQL).
func requestTable(id cdc.TableID) string {
	if id.Schema != "" {
		return id.Schema + "." + id.Table
	}
	return id.Database + "." + id.Table
}
