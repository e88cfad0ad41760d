package main

import (
	"errors"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/store"
)

// value returns the value of the series name{labels} in m's registry.
func value(t *testing.T, m *metrics, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	families, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue series
				}
			}
			switch {
			case s.Counter != nil:
				return s.Counter.GetValue(), true
			case s.Gauge != nil:
				return s.Gauge.GetValue(), true
			case s.Histogram != nil:
				return float64(s.Histogram.GetSampleCount()), true
			}
		}
	}
	return 0, false
}

// The store's observer feeds the adapter, coalescer and retry metrics, with unknown store
// names counted as "other".
func TestStoreObserverMetrics(t *testing.T) {
	m := newMetrics([]string{"main"})
	o := storeObserver{m: m}
	o.AdapterCall(store.AdapterCall{Store: "main", Call: store.CallWrite, Size: 5, Attempt: 1, Duration: time.Millisecond, OK: 5})
	o.AdapterCall(store.AdapterCall{Store: "main", Call: store.CallRead, Size: 2, Attempt: 1, Err: errors.New("down")})
	o.AdapterCall(store.AdapterCall{Store: "elsewhere", Call: store.CallRead, Size: 1, Attempt: 1, OK: 1})
	o.CoalescedBatch(store.CoalescedBatch{Store: "main", Size: 7, Waiting: 3})
	o.QueueFull("main")
	o.Retry(store.Retry{Store: "main", Reason: store.RetryMergeConflict, Call: store.CallWrite, Ops: 2})
	o.Retry(store.Retry{Store: "main", Reason: store.RetryUnavailable, Call: store.CallRead, Ops: 4})
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"recordsvc_adapter_calls_total", map[string]string{"store": "main", "call": "write", "result": "ok"}, 1},
		{"recordsvc_adapter_calls_total", map[string]string{"store": "main", "call": "read", "result": "error"}, 1},
		{"recordsvc_adapter_calls_total", map[string]string{"store": "other", "call": "read", "result": "ok"}, 1},
		{"recordsvc_adapter_batch_size", map[string]string{"store": "main", "call": "write"}, 1},
		{"recordsvc_adapter_duration_seconds", map[string]string{"store": "main", "call": "read"}, 1},
		{"recordsvc_coalesced_batch_size", map[string]string{"store": "main"}, 1},
		{"recordsvc_coalescer_waiting", map[string]string{"store": "main"}, 3},
		{"recordsvc_coalescer_refused_total", map[string]string{"store": "main"}, 1},
		{"recordsvc_merge_cas_retries_total", map[string]string{"store": "main"}, 2},
		{"recordsvc_unavailable_retries_total", map[string]string{"store": "main", "call": "read"}, 4},
	} {
		if got, ok := value(t, m, c.name, c.labels); !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
}
