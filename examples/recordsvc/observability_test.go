package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	recordv1 "github.com/tributary-dev/tributary/examples/recordsvc/proto/tributary/record/v1"

	"github.com/tributary-dev/tributary/internal/obscheck"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// conditionalMetrics are the recordsvc metrics the dashboard or rules use that the test
// cannot make appear on a memory store: each is checked against the collectors' Describe
// output instead, so a rename still fails the test.
var conditionalMetrics = map[string]string{
	"recordsvc_merge_cas_retries_total":   "only when another writer changes a record between a merge's read and write (another process on the same backend)",
	"recordsvc_unavailable_retries_total": "only when the backend reports a read or write unavailable",
	"recordsvc_coalescer_refused_total":   "only when a store's coalescer queue is full",
}

// TestCommandObservability runs what the binary runs (--mode all, a memory store whose
// accepted writes go through a real Kafka topic) with enough activity for every metric of
// observability/'s recordsvc dashboard and rules to appear -- synchronous and accepted
// writes, reads, a merge the worker dead-letters, the queue measured against the broker --
// then scrapes /metrics and fails naming every metric or label they use that it does not
// export (those in conditionalMetrics excepted, if a collector describes them).
func TestCommandObservability(t *testing.T) {
	brokers := testenv.Require(t, testenv.KafkaBrokers)
	exprs, err := obscheck.AllExprs("recordsvc")
	if err != nil {
		t.Fatal(err)
	}
	described := obscheck.Described(newMetrics([]string{"main"}).reg)
	for m := range conditionalMetrics {
		if !described[m] {
			t.Errorf("conditional metric %s: no collector describes it", m)
		}
	}
	topic := uniqueName("db39-obs")
	deleteTopics(t, brokers, topic, topic+".dlq")
	s := startService(t, fmt.Sprintf(`
listen: {grpc: 127.0.0.1:0, metrics: 127.0.0.1:0}
health: {interval: 500ms, timeout: 400ms}
stores:
  main:
    kind: memory
    queue: %s
`, kafkaQueue(brokers, topic)), modeAll)
	// A generous bound: it catches a hang, it measures nothing.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a := addr("main", "obs", "things", "sync")
	for range 3 {
		if _, err := s.rpc.Write(ctx, &recordv1.WriteRequest{Items: []*recordv1.WriteItem{mergeSrc(a, doc(`{"name":"s","visits":1}`), addVisits)}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.rpc.Read(ctx, &recordv1.ReadRequest{Addresses: []*recordv1.Address{a, addr("main", "obs", "things", "none")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.rpc.Delete(ctx, &recordv1.DeleteRequest{Items: []*recordv1.DeleteItem{{Address: a}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("recordsvc log:\n%s", s.log)
		}
	})
	// Accepted writes through Kafka, applied by the worker; a merge whose program fails is
	// dead-lettered (at least once: a rebalance may deliver it again).
	acc := recordv1.Completion_COMPLETION_RETURN_AFTER_ACCEPTED
	b := addr("main", "obs", "things", "accepted")
	w, err := s.rpc.Write(ctx, &recordv1.WriteRequest{Completion: acc, Programs: []string{addVisits}, Items: []*recordv1.WriteItem{
		put(b, doc(`{"name":"B","visits":1}`), nil),
		mergeIdx(b, doc(`{"visits":2}`), 0),
		mergeSrc(addr("main", "obs", "things", "bad"), doc(`{}`), "return function(c) error('no') end"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	o := recordv1.Outcome_OUTCOME_ACCEPTED
	wantOutcomes(t, "accepted writes", w.Results, o, o, o)
	eventually(t, ctx, "the worker applies the accepted writes and dead-letters the failing merge", func() bool {
		r, err := s.rpc.Read(ctx, &recordv1.ReadRequest{Addresses: []*recordv1.Address{b}})
		if err != nil || r.Results[0].Outcome != recordv1.Outcome_OUTCOME_FOUND {
			return false
		}
		var got map[string]any
		if json.Unmarshal([]byte(r.Results[0].Document.GetJson()), &got) != nil || got["visits"] != float64(3) {
			return false
		}
		v, _ := scrape(t, s.metrics, `recordsvc_worker_records_total{result="dead_lettered",store="main"}`)
		return v >= 1
	})

	// The queue is measured every health.interval: poll until everything is there; the bound
	// only catches a hang.
	var missing []string
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		exported, err := obscheck.ParseExposition(get(t, s.metrics))
		if err != nil {
			t.Fatal(err)
		}
		missing = obscheck.Missing(exprs, exported, conditionalMetrics, described)
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(missing) > 0 {
		t.Errorf("observability/'s recordsvc dashboard and rules use what the running binary does not export:\n%s",
			strings.Join(missing, "\n"))
	}
}

// get returns a URL's body; the bound catches a hang.
func get(t *testing.T, url string) string {
	t.Helper()
	cl := http.Client{Timeout: 30 * time.Second}
	res, err := cl.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %v %v", url, res.Status, err)
	}
	return string(b)
}
