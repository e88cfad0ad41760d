package main

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/sink"
)

// fakePipeline is a pipelineState with set answers.
type fakePipeline struct {
	progress cdc.Progress
	health   cdc.Health
}

func (f *fakePipeline) Progress() cdc.Progress { return f.progress }
func (f *fakePipeline) Health() cdc.Health     { return f.health }

// scrape reads the exposition text of a /metrics handler into "name{labels}" -> value.
func scrape(t *testing.T, h http.Handler, url string) map[string]float64 {
	t.Helper()
	var body io.Reader
	if h != nil {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		if rec.Code != 200 {
			t.Fatalf("/metrics: %d", rec.Code)
		}
		body = rec.Body
	} else {
		res, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("/metrics: %d", res.StatusCode)
		}
		body = res.Body
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// sum adds the values of every series of one metric.
func sum(m map[string]float64, name string) float64 {
	var s float64
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			s += v
		}
	}
	return s
}

func TestMetricsFromObservations(t *testing.T) {
	m := newMetrics("orders")
	p := &fakePipeline{health: cdc.Health{Healthy: true},
		progress: cdc.Progress{Pending: 7, Snapshot: cdc.SnapshotProgress{Active: true, RowsDone: 40, RowsEstimated: 100}}}
	m.watch(p)
	m.BatchDone(cdc.BatchStats{Events: 10, DeadLetters: 1, Attempts: 2, Duration: 30 * time.Millisecond, Checkpointed: true, Lag: 2 * time.Second})
	m.BatchDone(cdc.BatchStats{Events: 5, Attempts: 1, Duration: 10 * time.Millisecond}) // snapshot reads: no lag
	m.Backpressure(1, 250*time.Millisecond)
	m.BulkDone(sink.BulkStats{Actions: 9, Bytes: 1000, Status: 200, Applied: 6, Superseded: 2, DeadLettered: 1, Duration: 5 * time.Millisecond})
	m.BulkDone(sink.BulkStats{Actions: 9, Bytes: 1000, Status: 0, Duration: time.Second})
	m.BulkDone(sink.BulkStats{Actions: 3, Bytes: 300, Status: 429, Retried: 3})
	m.Claimed("cdc-shop.orders")
	m.UnchangedFilled(sink.UnchangedStats{Rows: 4, FromBatch: 2, FromIndex: 5, DeadLettered: 1, Requests: 1})

	got := scrape(t, m.mux(p), "")
	for name, want := range map[string]float64{
		`cdcmirror_events_total{pipeline="orders"}`:                              15,
		`cdcmirror_batches_total{pipeline="orders"}`:                             2,
		`cdcmirror_checkpoints_total{pipeline="orders"}`:                         1,
		`cdcmirror_dead_letters_total{pipeline="orders"}`:                        1,
		`cdcmirror_backpressure_retries_total{pipeline="orders"}`:                1,
		`cdcmirror_backpressure_wait_seconds_total{pipeline="orders"}`:           0.25,
		`cdcmirror_replication_lag_seconds{pipeline="orders"}`:                   2,
		`cdcmirror_batch_duration_seconds_count{pipeline="orders"}`:              2,
		`cdcmirror_bulk_requests_total{pipeline="orders",status="2xx"}`:          1,
		`cdcmirror_bulk_requests_total{pipeline="orders",status="4xx"}`:          1,
		`cdcmirror_bulk_requests_total{pipeline="orders",status="none"}`:         1,
		`cdcmirror_bulk_duration_seconds_count{pipeline="orders"}`:               3,
		`cdcmirror_bulk_request_bytes_total{pipeline="orders"}`:                  2300,
		`cdcmirror_bulk_items_total{outcome="applied",pipeline="orders"}`:        6,
		`cdcmirror_bulk_items_total{outcome="superseded",pipeline="orders"}`:     2,
		`cdcmirror_bulk_items_total{outcome="dead_lettered",pipeline="orders"}`:  1,
		`cdcmirror_bulk_items_total{outcome="retried",pipeline="orders"}`:        3,
		`cdcmirror_claims_total{index="cdc-shop.orders",pipeline="orders"}`:      1,
		`cdcmirror_unchanged_values_total{from="batch",pipeline="orders"}`:       2,
		`cdcmirror_unchanged_values_total{from="index",pipeline="orders"}`:       5,
		`cdcmirror_unchanged_values_total{from="unavailable",pipeline="orders"}`: 1,
		`cdcmirror_healthy{pipeline="orders"}`:                                   1,
		`cdcmirror_pending_events{pipeline="orders"}`:                            7,
		`cdcmirror_snapshot_active{pipeline="orders"}`:                           1,
		`cdcmirror_snapshot_rows_done{pipeline="orders"}`:                        40,
		`cdcmirror_snapshot_rows_estimated{pipeline="orders"}`:                   100,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
	if _, ok := got["go_goroutines"]; !ok {
		t.Error("the Go runtime collector is missing")
	}

	// Health turns the gauge to 0; the registry is the exporter's own, not the global one.
	p.health = cdc.Health{Reason: "stalled"}
	if v := scrape(t, m.mux(p), "")[`cdcmirror_healthy{pipeline="orders"}`]; v != 0 {
		t.Errorf("healthy = %v for an unhealthy pipeline", v)
	}
	if other := newMetrics("other"); sum(scrape(t, other.mux(p), ""), "cdcmirror_events_total") != 0 {
		t.Error("a second exporter sees the first one's counts")
	}
}

func TestHealthz(t *testing.T) {
	m := newMetrics("orders")
	p := &fakePipeline{health: cdc.Health{Healthy: true}}
	get := func() (int, string) {
		rec := httptest.NewRecorder()
		m.mux(p).ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := get(); code != 200 || body != "ok\n" {
		t.Fatalf("healthy: %d %q", code, body)
	}
	p.health = cdc.Health{Reason: "stalled: no batch succeeded for 2m0s with 5 events pending"}
	if code, body := get(); code != 503 || !strings.Contains(body, "stalled") {
		t.Fatalf("unhealthy: %d %q", code, body)
	}
}
