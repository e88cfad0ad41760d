package mirrorprom

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/sink"
)

// fakeMirror is a StatusSource with set answers.
type fakeMirror struct {
	mu sync.Mutex
	st []cdc.Status
}

func (f *fakeMirror) Status() []cdc.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]cdc.Status(nil), f.st...)
}

func (f *fakeMirror) set(i int, fn func(*cdc.Status)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(&f.st[i])
}

// gather reads every series as "name{label="v",...}" -> value, labels sorted by name.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			var labels []string
			for _, l := range m.Label {
				labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
			}
			name := mf.GetName()
			if len(labels) > 0 {
				name += "{" + strings.Join(labels, ",") + "}"
			}
			out[name] = value(mf.GetType(), m)
			if h := m.Histogram; h != nil {
				out[strings.Replace(name, "{", "_count{", 1)] = float64(h.GetSampleCount())
			}
		}
	}
	return out
}

func value(t dto.MetricType, m *dto.Metric) float64 {
	switch t {
	case dto.MetricType_COUNTER:
		return m.Counter.GetValue()
	case dto.MetricType_GAUGE:
		return m.Gauge.GetValue()
	}
	return -1
}

func TestCollectorFromObservationsAndStatus(t *testing.T) {
	c := New(&Options{Namespace: "cdcmirror"})
	reg := prometheus.NewPedanticRegistry() // also checks that Collect matches Describe
	reg.MustRegister(c)
	runObs, sinkObs := c.Observe("orders")
	if r2, _ := c.Observe("orders"); r2 != runObs {
		t.Fatal("a second Observe of one pipeline made a second observer")
	}
	c.Observe("other")
	runObs.BatchDone(cdc.BatchStats{Events: 10, DeadLetters: 1, Attempts: 2, Duration: 30 * time.Millisecond, Checkpointed: true, Lag: 2 * time.Second})
	runObs.BatchDone(cdc.BatchStats{Events: 5, Attempts: 1, Duration: 10 * time.Millisecond}) // snapshot reads: no lag
	runObs.Backpressure(1, 250*time.Millisecond)
	sinkObs.BulkDone(sink.BulkStats{Actions: 9, Bytes: 1000, Status: 200, Applied: 6, Superseded: 2, DeadLettered: 1, Duration: 5 * time.Millisecond})
	sinkObs.BulkDone(sink.BulkStats{Actions: 9, Bytes: 1000, Status: 0, Duration: time.Second})
	sinkObs.BulkDone(sink.BulkStats{Actions: 3, Bytes: 300, Status: 429, Retried: 3})
	sinkObs.Claimed("cdc-shop.orders")
	sinkObs.(sink.UnchangedObserver).UnchangedFilled(sink.UnchangedStats{Rows: 4, FromBatch: 2, FromIndex: 5, DeadLettered: 1, Requests: 1})

	// Before Watch only the observers' series exist.
	if got := gather(t, reg); got[`cdcmirror_checkpoints_total{pipeline="orders"}`] != 1 || got[`cdcmirror_healthy{pipeline="orders"}`] != 0 {
		t.Fatalf("before Watch: %v", got)
	}
	at := time.Unix(1700000000, 0)
	m := &fakeMirror{st: []cdc.Status{
		{Pipeline: "orders", Health: cdc.Health{Healthy: true}, State: "snapshotting", Reconnects: 3,
			Progress: cdc.Progress{Events: 15, Batches: 2, DeadLetters: 1, Retries: 1, Pending: 7, LastBatch: at, LastCheckpoint: at,
				Snapshot: cdc.SnapshotProgress{Active: true, TablesDone: 1, TablesTotal: 2, RowsDone: 40, RowsEstimated: 100}}},
		{Pipeline: "other", Health: cdc.Health{Class: cdc.HealthReconnecting, Reason: "reconnecting: connection refused"}, State: "reconnecting",
			Lag:        cdc.Lag{Bytes: 4096, Retained: 8192, Seconds: 66, MeasuredAt: at},
			Incomplete: []cdc.IncompleteTable{{Index: "cdc-a"}, {Index: "cdc-b"}}},
	}}
	c.Watch(m)
	got := gather(t, reg)
	for name, want := range map[string]float64{
		`cdcmirror_events_total{pipeline="orders"}`:                              15,
		`cdcmirror_batches_total{pipeline="orders"}`:                             2,
		`cdcmirror_checkpoints_total{pipeline="orders"}`:                         1,
		`cdcmirror_dead_letters_total{pipeline="orders"}`:                        1,
		`cdcmirror_backpressure_retries_total{pipeline="orders"}`:                1,
		`cdcmirror_backpressure_wait_seconds_total{pipeline="orders"}`:           0.25,
		`cdcmirror_reconnects_total{pipeline="orders"}`:                          3,
		`cdcmirror_replication_lag_seconds{pipeline="orders"}`:                   2, // no measurement: the last batch's
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
		`cdcmirror_bulk_items_total{outcome="applied",pipeline="other"}`:         0, // pre-created
		`cdcmirror_claims_total{index="cdc-shop.orders",pipeline="orders"}`:      1,
		`cdcmirror_unchanged_values_total{from="batch",pipeline="orders"}`:       2,
		`cdcmirror_unchanged_values_total{from="index",pipeline="orders"}`:       5,
		`cdcmirror_unchanged_values_total{from="unavailable",pipeline="orders"}`: 1,
		`cdcmirror_healthy{pipeline="orders"}`:                                   1,
		`cdcmirror_health_reason{pipeline="orders",reason="ok"}`:                 1,
		`cdcmirror_state{pipeline="orders",state="snapshotting"}`:                1,
		`cdcmirror_state{pipeline="orders",state="streaming"}`:                   0,
		`cdcmirror_pending_events{pipeline="orders"}`:                            7,
		`cdcmirror_last_batch_timestamp_seconds{pipeline="orders"}`:              1700000000,
		`cdcmirror_last_checkpoint_timestamp_seconds{pipeline="orders"}`:         1700000000,
		`cdcmirror_snapshot_active{pipeline="orders"}`:                           1,
		`cdcmirror_snapshot_rows_done{pipeline="orders"}`:                        40,
		`cdcmirror_snapshot_rows_estimated{pipeline="orders"}`:                   100,
		`cdcmirror_snapshot_tables_done{pipeline="orders"}`:                      1,
		`cdcmirror_snapshot_tables_total{pipeline="orders"}`:                     2,
		`cdcmirror_healthy{pipeline="other"}`:                                    0,
		`cdcmirror_incomplete_tables{pipeline="orders"}`:                         0,
		`cdcmirror_incomplete_tables{pipeline="other"}`:                          2,
		`cdcmirror_health_reason{pipeline="other",reason="reconnecting"}`:        1,
		`cdcmirror_state{pipeline="other",state="reconnecting"}`:                 1,
		`cdcmirror_replication_lag_seconds{pipeline="other"}`:                    66,
		`cdcmirror_replication_lag_bytes{pipeline="other"}`:                      4096,
		`cdcmirror_retained_bytes{pipeline="other"}`:                             8192,
		`cdcmirror_lag_measured_timestamp_seconds{pipeline="other"}`:             1700000000,
		`cdcmirror_lag_measurement_failing{pipeline="other"}`:                    0,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
	for _, absent := range []string{`cdcmirror_retained_bytes{pipeline="orders"}`, `cdcmirror_last_batch_timestamp_seconds{pipeline="other"}`} {
		if _, ok := got[absent]; ok {
			t.Errorf("%s is present", absent)
		}
	}

	// The snapshot ends: the runner keeps its figures, so do the gauges. The source becomes
	// unreachable: lag keeps being reported, with the failure; MySQL's retained -1 is left out.
	m.set(0, func(s *cdc.Status) {
		s.State, s.Progress.Snapshot.Active = "streaming", false
		s.Health = cdc.Health{Class: cdc.HealthLagging, Reason: "lagging: 120s behind the source, beyond the 1m0s threshold"}
	})
	m.set(1, func(s *cdc.Status) {
		s.Lag.Seconds, s.Lag.Retained, s.Lag.Err = 90, -1, errors.New("dial tcp: connection refused")
	})
	got = gather(t, reg)
	for name, want := range map[string]float64{
		`cdcmirror_snapshot_active{pipeline="orders"}`:                0,
		`cdcmirror_snapshot_rows_done{pipeline="orders"}`:             40,
		`cdcmirror_snapshot_tables_total{pipeline="orders"}`:          2,
		`cdcmirror_health_reason{pipeline="orders",reason="lagging"}`: 1,
		`cdcmirror_state{pipeline="orders",state="streaming"}`:        1,
		`cdcmirror_replication_lag_seconds{pipeline="other"}`:         90,
		`cdcmirror_lag_measurement_failing{pipeline="other"}`:         1,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("after: %s = %v (present %v), want %v", name, v, ok, want)
		}
	}
	if _, ok := got[`cdcmirror_retained_bytes{pipeline="other"}`]; ok {
		t.Error("retained_bytes is reported for a server that keeps nothing for the pipeline")
	}
	if _, ok := got[`cdcmirror_health_reason{pipeline="orders",reason="ok"}`]; ok {
		t.Error("the old health reason is still reported")
	}
}

func TestReasonClass(t *testing.T) {
	for _, c := range []string{cdc.HealthNotRunning, cdc.HealthStarting, cdc.HealthStopped, cdc.HealthStalled,
		cdc.HealthReconnecting, cdc.HealthBackpressure, cdc.HealthUnavailable, cdc.HealthNotAnswering, cdc.HealthLagging, cdc.HealthClusterRed,
		cdc.HealthTableIncomplete} {
		if got := ReasonClass(cdc.Health{Class: c, Reason: "whatever the text says"}); got != c {
			t.Errorf("class %q: label %s", c, got)
		}
	}
	if got := ReasonClass(cdc.Health{Reason: "a health without a class"}); got != "other" {
		t.Errorf("no class: label %s, want other", got)
	}
	if ReasonClass(cdc.Health{Healthy: true}) != "ok" {
		t.Error("healthy is not ok")
	}
	for _, healthy := range []bool{true, false} {
		if got := ReasonClass(cdc.Health{Healthy: healthy, Class: cdc.HealthStandby}); got != "standby" {
			t.Errorf("standby (healthy %v): label %s", healthy, got)
		}
	}
}

// TestCollectorLeadership: with a shared state store (Leadership.Role set) the role, takeover,
// epoch and store-error series follow Status.Leadership; without one none of them exists.
func TestCollectorLeadership(t *testing.T) {
	c := New(&Options{Namespace: "cdcmirror"})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	m := &fakeMirror{st: []cdc.Status{
		{Pipeline: "file", State: "streaming", Health: cdc.Health{Healthy: true}},
		{Pipeline: "ha", State: "standby", Health: cdc.Health{Healthy: true, Class: cdc.HealthStandby, Reason: "standby: b is active"},
			Leadership: cdc.Leadership{Role: cdc.RoleStandby, Holder: "b", Epoch: 4}},
	}}
	c.Watch(m)
	got := gather(t, reg)
	for name, want := range map[string]float64{
		`cdcmirror_role{pipeline="ha",role="active"}`:             0,
		`cdcmirror_role{pipeline="ha",role="standby"}`:            1,
		`cdcmirror_role{pipeline="ha",role="taking_over"}`:        0,
		`cdcmirror_takeovers_total{pipeline="ha"}`:                0,
		`cdcmirror_lease_epoch{pipeline="ha"}`:                    4,
		`cdcmirror_state_store_error{pipeline="ha"}`:              0,
		`cdcmirror_state{pipeline="ha",state="standby"}`:          1,
		`cdcmirror_state{pipeline="ha",state="taking_over"}`:      0,
		`cdcmirror_state{pipeline="file",state="standby"}`:        0,
		`cdcmirror_health_reason{pipeline="ha",reason="standby"}`: 1,
		`cdcmirror_healthy{pipeline="ha"}`:                        1,
		`cdcmirror_health_reason{pipeline="file",reason="ok"}`:    1,
		`cdcmirror_state{pipeline="file",state="streaming"}`:      1,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("standby: %s = %v (present %v), want %v", name, v, ok, want)
		}
	}
	for name := range got {
		for _, family := range []string{"role", "takeovers_total", "lease_epoch", "last_takeover_seconds", "state_store_error"} {
			if strings.HasPrefix(name, "cdcmirror_"+family+"{") && strings.Contains(name, `pipeline="file"`) {
				t.Errorf("%s is exported for a pipeline without a shared state store", name)
			}
		}
	}
	if _, ok := got[`cdcmirror_last_takeover_seconds{pipeline="ha"}`]; ok {
		t.Error("last_takeover_seconds is exported before the first takeover")
	}

	// The standby takes over, becomes active; later the store becomes unreachable.
	m.set(1, func(s *cdc.Status) {
		s.State, s.Health = "taking over", cdc.Health{Class: cdc.HealthStarting, Reason: "taking over"}
		s.Leadership = cdc.Leadership{Role: cdc.RoleTakingOver, Holder: "a", Epoch: 5}
	})
	got = gather(t, reg)
	for name, want := range map[string]float64{
		`cdcmirror_role{pipeline="ha",role="taking_over"}`:   1,
		`cdcmirror_role{pipeline="ha",role="standby"}`:       0,
		`cdcmirror_state{pipeline="ha",state="taking_over"}`: 1,
		`cdcmirror_lease_epoch{pipeline="ha"}`:               5,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("taking over: %s = %v (present %v), want %v", name, v, ok, want)
		}
	}
	m.set(1, func(s *cdc.Status) {
		s.State, s.Health = "streaming", cdc.Health{Healthy: true}
		s.Leadership = cdc.Leadership{Role: cdc.RoleActive, Holder: "a", Epoch: 5, Takeovers: 1, LastTakeover: 1500 * time.Millisecond,
			StoreErr: errors.New("statestore: store unavailable")}
	})
	got = gather(t, reg)
	for name, want := range map[string]float64{
		`cdcmirror_role{pipeline="ha",role="active"}`:        1,
		`cdcmirror_role{pipeline="ha",role="taking_over"}`:   0,
		`cdcmirror_takeovers_total{pipeline="ha"}`:           1,
		`cdcmirror_last_takeover_seconds{pipeline="ha"}`:     1.5,
		`cdcmirror_state_store_error{pipeline="ha"}`:         1,
		`cdcmirror_health_reason{pipeline="ha",reason="ok"}`: 1,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("active: %s = %v (present %v), want %v", name, v, ok, want)
		}
	}
}
