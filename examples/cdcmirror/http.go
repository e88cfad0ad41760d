package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tributary-dev/tributary/cdc"
)

// statusSource is what the endpoints read: a *mirror.Mirror.
type statusSource interface {
	Status() []cdc.Status
}

// newMux serves /metrics from reg, /healthz (200 only when every pipeline is healthy; the
// body has one line per pipeline, "name: ok" or "name: reason") and /status (every pipeline's
// status as JSON, what `cdcmirror status` reads). Reasons and failures name no row data and
// no credential.
func newMux(reg *prometheus.Registry, m statusSource) *http.ServeMux {
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
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		var out statusDoc
		for _, s := range m.Status() {
			out.Pipelines = append(out.Pipelines, pipelineJSON(s))
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(out)
	})
	return mux
}

// statusDoc is the /status document.
type statusDoc struct {
	Pipelines []pipelineStatus `json:"pipelines"`
}

// pipelineStatus is cdc.Status as JSON: errors as their text, absent times left out.
type pipelineStatus struct {
	Pipeline          string          `json:"pipeline"`
	Healthy           bool            `json:"healthy"`
	Reason            string          `json:"reason,omitempty"`
	State             string          `json:"state"`
	Events            int64           `json:"events"`
	Batches           int64           `json:"batches"`
	DeadLetters       int64           `json:"dead_letters"`
	Retries           int64           `json:"backpressure_retries"`
	Pending           int             `json:"pending"`
	LastBatch         *time.Time      `json:"last_batch,omitempty"`
	LastCheckpoint    *time.Time      `json:"last_checkpoint,omitempty"`
	Snapshot          *snapshotStatus `json:"snapshot,omitempty"`
	Lag               *lagStatus      `json:"lag,omitempty"`
	Reconnects        int64           `json:"reconnects"`
	LastFailure       string          `json:"last_failure,omitempty"`
	FailedAt          *time.Time      `json:"failed_at,omitempty"`
	BackpressureSince *time.Time      `json:"backpressure_since,omitempty"`
}

type snapshotStatus struct {
	Active        bool  `json:"active"`
	TablesDone    int   `json:"tables_done"`
	TablesTotal   int   `json:"tables_total"`
	RowsDone      int64 `json:"rows_done"`
	RowsEstimated int64 `json:"rows_estimated"`
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
		FailedAt: when(s.FailedAt), BackpressureSince: when(s.BackpressureSince)}
	if !s.Health.Healthy {
		out.Reason = s.Health.Reason
	}
	if s.LastFailure != nil {
		out.LastFailure = s.LastFailure.Error()
	}
	if sp := p.Snapshot; sp.Active || sp.TablesTotal > 0 {
		out.Snapshot = &snapshotStatus{Active: sp.Active, TablesDone: sp.TablesDone, TablesTotal: sp.TablesTotal,
			RowsDone: sp.RowsDone, RowsEstimated: sp.RowsEstimated}
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
