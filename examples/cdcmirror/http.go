package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/mirror"
)

// statusSource is what the endpoints use: a *mirror.Mirror.
type statusSource interface {
	Status() []cdc.Status
	Resnapshot(ctx context.Context, pipeline string, req cdc.ResnapshotRequest) (string, error)
	Reindex(ctx context.Context, pipeline, table string) (*mirror.ReindexReport, error)
}

// resnapshotBody is what POST /admin/resnapshot takes and `cdcmirror resnapshot` sends.
type resnapshotBody struct {
	Pipeline string   `json:"pipeline,omitempty"` // may be left out when there is one pipeline
	Tables   []string `json:"tables,omitempty"`   // as the configuration spells them; empty: every captured table
	Where    string   `json:"where,omitempty"`    // an SQL condition on each table's rows
	ID       string   `json:"id,omitempty"`
}

// resnapshotAnswer is its answer: the request's id, or why there is none.
type resnapshotAnswer struct {
	Pipeline string `json:"pipeline,omitempty"`
	ID       string `json:"id,omitempty"`
	Error    string `json:"error,omitempty"`
}

// newMux serves /metrics from reg, /healthz (200 only when every pipeline is healthy; the
// body has one line per pipeline, "name: ok" or "name: reason") and /status (every pipeline's
// status as JSON, what `cdcmirror status` reads). Reasons and failures name no row data and
// no credential.
func newMux(reg *prometheus.Registry, m statusSource, rx *reindexes) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		sts := m.Status()
		code := http.StatusOK
		for _, s := range sts {
			if !s.Health.Healthy {
				code = http.StatusServiceUnavailable
			}
		}
		w.WriteHeader(code)
		for _, s := range sts {
			reason := "ok"
			if !s.Health.Healthy {
				reason = s.Health.Reason
			}
			fmt.Fprintf(w, "%s: %s\n", s.Pipeline, reason)
		}
	})
	mux.HandleFunc("POST /admin/resnapshot", func(w http.ResponseWriter, r *http.Request) {
		code, ans := resnapshot(r, m)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(ans)
	})
	mux.HandleFunc("POST /admin/reindex", func(w http.ResponseWriter, r *http.Request) {
		code, job, msg := rx.reindex(r, m)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(struct {
			reindexJob
			Message string `json:"message,omitempty"`
		}{job, msg})
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		var out statusDoc
		dl, _ := m.(deadLetterCounter)
		for _, s := range m.Status() {
			p := pipelineJSON(s)
			if dl != nil {
				p.DeadLettersByTable = dl.DeadLettersByTable(s.Pipeline)
			}
			out.Pipelines = append(out.Pipelines, p)
		}
		out.Reindexes = rx.list()
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(out)
	})
	return mux
}

// resnapshot serves POST /admin/resnapshot: 202 with the request's id once the source holds
// it durably, 400 for a request the source refuses (the reason in error), 404 for an unknown
// pipeline, 415 without a JSON content type (a browser page cannot send one across origins
// without asking first, so a page the operator visits cannot start a re-snapshot), 501 for a
// source that cannot, 503 when the source's server cannot be reached.
func resnapshot(r *http.Request, m statusSource) (int, resnapshotAnswer) {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return http.StatusUnsupportedMediaType, resnapshotAnswer{Error: "the body must be JSON (Content-Type: application/json)"}
	}
	var body resnapshotBody
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		return http.StatusBadRequest, resnapshotAnswer{Error: "bad request body: " + err.Error()}
	}
	if body.Pipeline == "" {
		sts := m.Status()
		if len(sts) != 1 {
			return http.StatusBadRequest, resnapshotAnswer{Error: fmt.Sprintf("pipeline is required: %d pipelines run here", len(sts))}
		}
		body.Pipeline = sts[0].Pipeline
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	id, err := m.Resnapshot(ctx, body.Pipeline, cdc.ResnapshotRequest{Tables: body.Tables, Where: body.Where, ID: body.ID})
	ans := resnapshotAnswer{Pipeline: body.Pipeline, ID: id}
	if err == nil {
		return http.StatusAccepted, ans
	}
	ans.Error = err.Error()
	switch {
	case errors.Is(err, mirror.ErrNoPipeline):
		return http.StatusNotFound, ans
	case errors.Is(err, mirror.ErrResnapshotUnsupported):
		return http.StatusNotImplemented, ans
	case errors.Is(err, cdc.ErrResnapshotRefused):
		return http.StatusBadRequest, ans
	}
	return http.StatusServiceUnavailable, ans
}

// statusDoc is the /status document.
type statusDoc struct {
	Pipelines []pipelineStatus `json:"pipelines"`
	Reindexes []reindexJob     `json:"reindexes,omitempty"` // asked of this process, oldest first
}

// pipelineStatus is cdc.Status as JSON: errors as their text, absent times left out.
type pipelineStatus struct {
	Pipeline    string `json:"pipeline"`
	Healthy     bool   `json:"healthy"`
	Reason      string `json:"reason,omitempty"`
	State       string `json:"state"`
	Events      int64  `json:"events"`
	Batches     int64  `json:"batches"`
	DeadLetters int64  `json:"dead_letters"`
	// DeadLettersByTable: the dead letters written since the start per table
	// (cdc.TableID.String()), as the status page shows them.
	DeadLettersByTable map[string]int64 `json:"dead_letters_by_table,omitempty"`
	Retries            int64            `json:"backpressure_retries"`
	Pending            int              `json:"pending"`
	LastBatch          *time.Time       `json:"last_batch,omitempty"`
	LastCheckpoint     *time.Time       `json:"last_checkpoint,omitempty"`
	Snapshot           *snapshotStatus  `json:"snapshot,omitempty"`
	Resnapshot         *snapshotStatus  `json:"resnapshot,omitempty"`
	Lag                *lagStatus       `json:"lag,omitempty"`
	Reconnects         int64            `json:"reconnects"`
	LastFailure        string           `json:"last_failure,omitempty"`
	FailedAt           *time.Time       `json:"failed_at,omitempty"`
	BackpressureSince  *time.Time       `json:"backpressure_since,omitempty"`
	UnansweredSince    *time.Time       `json:"unanswered_since,omitempty"` // the oldest write the engine has not answered
	Cluster            *clusterStatus   `json:"cluster,omitempty"`
	// Incomplete: tables whose index misses rows the pipeline cannot restore on its own,
	// each with the fix (cdc.Status.Incomplete).
	Incomplete []incompleteStatus `json:"incomplete,omitempty"`
	// Leadership: with a shared state store, this process's part in the active/standby pair
	// (cdc.Status.Leadership).
	Leadership *leadershipStatus `json:"leadership,omitempty"`
}

// leadershipStatus is a cdc.Leadership.
type leadershipStatus struct {
	Role                string     `json:"role"`
	Holder              string     `json:"holder,omitempty"`
	Epoch               uint64     `json:"epoch"`
	Since               *time.Time `json:"since,omitempty"`
	Takeovers           int64      `json:"takeovers"`
	LastTakeoverSeconds float64    `json:"last_takeover_seconds,omitempty"`
	StoreError          string     `json:"state_store_error,omitempty"`
}

// incompleteStatus is a cdc.IncompleteTable.
type incompleteStatus struct {
	Table  string    `json:"table"`
	Index  string    `json:"index"`
	Reason string    `json:"reason"`
	Since  time.Time `json:"since"`
}

// clusterStatus is cdc.ClusterHealth: the health of the pipeline's indices in the search
// cluster (green, yellow, red; red also makes the pipeline unhealthy, class cluster_red).
type clusterStatus struct {
	Status  string            `json:"status,omitempty"`
	Indices map[string]string `json:"indices,omitempty"`
	ReadAt  *time.Time        `json:"read_at,omitempty"`
	Error   string            `json:"error,omitempty"`
}

type snapshotStatus struct {
	ID            string  `json:"id,omitempty"` // a re-snapshot's
	Active        bool    `json:"active"`
	Table         string  `json:"table,omitempty"`
	TablesDone    int     `json:"tables_done"`
	TablesTotal   int     `json:"tables_total"`
	RowsDone      int64   `json:"rows_done"`
	RowsEstimated int64   `json:"rows_estimated"`
	RowsPerSecond float64 `json:"rows_per_second"`
	ETASeconds    float64 `json:"eta_seconds,omitempty"` // while active, from the estimate and the rate
	Queued        int     `json:"queued,omitempty"`
	Error         string  `json:"error,omitempty"`
}

func snapshotJSON(sp cdc.SnapshotProgress) *snapshotStatus {
	out := &snapshotStatus{ID: sp.Resnapshot, Active: sp.Active, TablesDone: sp.TablesDone, TablesTotal: sp.TablesTotal,
		RowsDone: sp.RowsDone, RowsEstimated: sp.RowsEstimated, RowsPerSecond: sp.RowsPerSecond, Queued: sp.Queued, Error: sp.Error}
	if sp.Table != (cdc.TableID{}) {
		out.Table = sp.Table.String()
	}
	if sp.Active && sp.RowsPerSecond > 0 && sp.RowsEstimated > sp.RowsDone {
		out.ETASeconds = float64(sp.RowsEstimated-sp.RowsDone) / sp.RowsPerSecond
	}
	return out
}

type lagStatus struct {
	Seconds    float64    `json:"seconds"`
	Bytes      int64      `json:"bytes"`
	Retained   int64      `json:"retained"`
	MeasuredAt *time.Time `json:"measured_at,omitempty"`
	Error      string     `json:"error,omitempty"`
}

func pipelineJSON(s cdc.Status) pipelineStatus {
	p := s.Progress
	out := pipelineStatus{Pipeline: s.Pipeline, Healthy: s.Health.Healthy, State: s.State,
		Events: p.Events, Batches: p.Batches, DeadLetters: p.DeadLetters, Retries: p.Retries, Pending: p.Pending,
		LastBatch: when(p.LastBatch), LastCheckpoint: when(p.LastCheckpoint), Reconnects: s.Reconnects,
		FailedAt: when(s.FailedAt), BackpressureSince: when(s.BackpressureSince), UnansweredSince: when(s.UnansweredSince)}
	if !s.Health.Healthy {
		out.Reason = s.Health.Reason
	}
	if s.LastFailure != nil {
		out.LastFailure = s.LastFailure.Error()
	}
	if sp := p.Snapshot; sp.Active || sp.TablesTotal > 0 {
		out.Snapshot = snapshotJSON(sp)
	}
	if sp := p.Resnapshot; sp.Resnapshot != "" {
		out.Resnapshot = snapshotJSON(sp)
	}
	if c := s.Cluster; c.Status != "" || c.Err != nil {
		out.Cluster = &clusterStatus{Status: c.Status, Indices: c.Indices, ReadAt: when(c.ReadAt)}
		if c.Err != nil {
			out.Cluster.Error = c.Err.Error()
		}
	}
	for _, t := range s.Incomplete {
		out.Incomplete = append(out.Incomplete, incompleteStatus{Table: t.Table.String(), Index: t.Index, Reason: t.Reason, Since: t.Since})
	}
	if ld := s.Leadership; ld.Role != "" {
		out.Leadership = &leadershipStatus{Role: ld.Role, Holder: ld.Holder, Epoch: ld.Epoch, Since: when(ld.Since),
			Takeovers: ld.Takeovers, LastTakeoverSeconds: ld.LastTakeover.Seconds()}
		if ld.StoreErr != nil {
			out.Leadership.StoreError = ld.StoreErr.Error()
		}
	}
	if l := s.Lag; !l.MeasuredAt.IsZero() || l.Err != nil {
		out.Lag = &lagStatus{Seconds: l.Seconds, Bytes: l.Bytes, Retained: l.Retained, MeasuredAt: when(l.MeasuredAt)}
		if l.Err != nil {
			out.Lag.Error = l.Err.Error()
		}
	}
	return out
}

func when(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
