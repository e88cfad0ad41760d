package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	recordv1 "github.com/tributary-dev/tributary/examples/recordsvc/proto/tributary/record/v1"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// TestFaultKafkaHungBroker is the scenario through the gRPC API: RETURN_AFTER_ACCEPTED
// writes while the Kafka broker is SIGSTOPped (testenv pause). The call answers -- long before
// the client's deadline, which is far beyond delivery_timeout -- and every item fails
// retryably, those sent to the hung broker with ERROR_KIND_OUTCOME_UNKNOWN (not
// ERROR_KIND_UNAVAILABLE, which says the item was not enqueued). Once the broker is continued,
// accepted-mode writes succeed again.
func TestFaultKafkaHungBroker(t *testing.T) {
	srv := testenv.RequireFaults(t)
	brokers := testenv.Require(t, testenv.KafkaBrokers)
	topic := uniqueName("recordsvc-hung")
	deleteTopics(t, brokers, topic, topic+".dlq")
	s := startService(t, fmt.Sprintf(`
listen: {grpc: 127.0.0.1:0, metrics: 127.0.0.1:0}
stores:
  main:
    kind: memory
    queue: {kind: kafka, brokers: [%q], topic: %q, create_topics: {partitions: 3}, delivery_timeout: 5s}
`, brokers, topic), modeServer)
	write := func(keys ...string) (*recordv1.WriteResponse, error) {
		// The client's deadline: a minute, twelve times delivery_timeout. It measures nothing;
		// it only catches a call that does not answer.
		ctx, cancel := context.WithTimeout(testCtx(t), time.Minute)
		defer cancel()
		req := &recordv1.WriteRequest{Completion: recordv1.Completion_COMPLETION_RETURN_AFTER_ACCEPTED}
		for _, k := range keys {
			req.Items = append(req.Items, put(addr("main", "ns", "ds", k), doc(`{"n":1}`), nil))
		}
		return s.rpc.Write(ctx, req)
	}
	acceptedEventually := func(when string) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			w, err := write("a", "b", "c")
			if err != nil {
				t.Fatalf("write %s: %v", when, err)
			}
			ok := true
			for _, r := range w.Results {
				if r.Error != nil {
					ok = false
					if !r.Error.Retryable || time.Now().After(deadline) {
						t.Fatalf("write %s: %s", when, describe(r))
					}
				}
			}
			if ok {
				return
			}
		}
	}
	acceptedEventually("before the fault") // a new topic may refuse produces for a few seconds

	srv.Run("pause", "kafka")
	paused := true
	resume := func() {
		if paused {
			paused = false
			srv.Run("resume", "kafka")
		}
	}
	t.Cleanup(resume)

	start := time.Now()
	w, err := write("a", "b", "c")
	if err != nil {
		t.Fatalf("write to a stopped broker: %v, want per-item failures within delivery_timeout", err)
	}
	t.Logf("the write to the stopped broker answered after %s (delivery_timeout 5s)", time.Since(start).Round(time.Millisecond))
	unknown := 0
	for _, r := range w.Results {
		if r.Error == nil || !r.Error.Retryable {
			t.Fatalf("item written to a stopped broker: %s, want a retryable failure", describe(r))
		}
		switch r.Error.Kind {
		case recordv1.ErrorKind_ERROR_KIND_OUTCOME_UNKNOWN:
			unknown++
			if !strings.Contains(r.Error.Message, "may have been written") {
				t.Errorf("an outcome-unknown item's message does not say so: %s", r.Error.Message)
			}
		case recordv1.ErrorKind_ERROR_KIND_UNAVAILABLE:
		default:
			t.Fatalf("item written to a stopped broker: %s, want outcome unknown or unavailable", describe(r))
		}
	}
	if unknown == 0 {
		t.Fatalf("no item sent to the stopped broker came back of unknown outcome: %v", w.Results)
	}

	resume()
	acceptedEventually("after the broker was continued")
}
