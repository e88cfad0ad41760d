package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	recordv1 "github.com/tributary-dev/tributary/examples/recordsvc/proto/tributary/record/v1"
	"github.com/tributary-dev/tributary/internal/faultproxy"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/queue"
	"github.com/tributary-dev/tributary/queue/kafkaqueue"
)

func healthRequest(service string) *healthpb.HealthCheckRequest {
	return &healthpb.HealthCheckRequest{Service: service}
}

// healthOf returns a service's status, or UNKNOWN when the call failed.
func healthOf(ctx context.Context, s *service, name string) healthpb.HealthCheckResponse_ServingStatus {
	h, err := s.health.Check(ctx, healthRequest(name))
	if err != nil {
		return healthpb.HealthCheckResponse_UNKNOWN
	}
	return h.Status
}

func TestHealthMemory(t *testing.T) {
	s := startService(t, `
listen: {grpc: 127.0.0.1:0, metrics: "off"}
stores:
  main: {kind: memory, queue: {kind: memory}}
  other: {kind: memory}
`, modeAll)
	ctx := testCtx(t)
	for _, name := range []string{"", recordServiceName, storageServicePrefix + "main", queueServicePrefix + "main", storageServicePrefix + "other"} {
		if got := healthOf(ctx, s, name); got != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health %q = %s, want SERVING", name, got)
		}
	}
	// A store without a queue has no queue service, and an in-process queue is not Kafka.
	for _, name := range []string{queueServicePrefix + "other", kafkaServicePrefix + "main"} {
		if _, err := s.health.Check(ctx, healthRequest(name)); status.Code(err) != codes.NotFound {
			t.Errorf("health of %q: %v, want NotFound", name, err)
		}
	}
}

// healthTransitions puts a faultproxy in front of a real server, makes it unreachable in two
// ways (connections refused, then a black hole where requests hang) and restores it each
// time. The store's service follows; the process and the healthy memory store stay SERVING.
func healthTransitions(t *testing.T, target string, storeYAML func(proxyAddr string) string) {
	p, err := faultproxy.NewTCP(target, faultproxy.TCPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	s := startService(t, fmt.Sprintf(`
listen: {grpc: 127.0.0.1:0, metrics: 127.0.0.1:0}
health: {interval: 200ms, timeout: 150ms}
stores:
  remote: %s
  local: {kind: memory}
`, storeYAML(p.Addr())), modeServer)
	ctx := testCtx(t)
	remote, local := storageServicePrefix+"remote", storageServicePrefix+"local"
	const serving, notServing = healthpb.HealthCheckResponse_SERVING, healthpb.HealthCheckResponse_NOT_SERVING
	waitFor := func(what string, want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		eventually(t, ctx, what, func() bool { return healthOf(ctx, s, remote) == want })
		for _, other := range []string{"", local} {
			if got := healthOf(ctx, s, other); got != serving {
				t.Errorf("%s: health %q = %s, want SERVING", what, other, got)
			}
		}
		gauge, _ := scrape(t, s.metrics, `recordsvc_dependency_healthy{dependency="storage",store="remote"}`)
		if (gauge == 1) != (want == serving) {
			t.Errorf("%s: dependency_healthy gauge %v disagrees with %s", what, gauge, want)
		}
	}
	waitFor("reachable at start", serving)

	if err := p.SetAcceptFault(faultproxy.AcceptRefuse); err != nil {
		t.Fatal(err)
	}
	p.ResetAll()
	waitFor("connections refused", notServing)
	if err := p.Heal(); err != nil {
		t.Fatal(err)
	}
	waitFor("restored after refusal", serving)

	p.SetBlackhole(faultproxy.Both)
	waitFor("black hole", notServing)
	if err := p.Heal(); err != nil {
		t.Fatal(err)
	}
	p.ResetAll() // connections that lost bytes in the hole are useless
	waitFor("restored after the black hole", serving)
	if !strings.Contains(s.log.String(), "dependency unhealthy") {
		t.Error("the transition to unhealthy was not logged")
	}
}

func TestHealthTransitionsElasticsearch(t *testing.T) {
	u, err := url.Parse(testenv.Require(t, testenv.ElasticsearchURL))
	if err != nil {
		t.Fatal(err)
	}
	healthTransitions(t, u.Host, func(proxy string) string {
		return fmt.Sprintf("{kind: elasticsearch, urls: [\"http://%s\"]}", proxy)
	})
}

func TestHealthTransitionsOpenSearch(t *testing.T) {
	u, err := url.Parse(testenv.Require(t, testenv.OpenSearchURL))
	if err != nil {
		t.Fatal(err)
	}
	healthTransitions(t, u.Host, func(proxy string) string {
		return fmt.Sprintf("{kind: opensearch, urls: [\"http://%s\"]}", proxy)
	})
}

func TestHealthTransitionsFerretDB(t *testing.T) {
	uri := testenv.Require(t, testenv.MongoURI)
	u, err := url.Parse(uri)
	if err != nil {
		t.Fatal(err)
	}
	ferret := isFerretDB(t, uri)
	healthTransitions(t, u.Host, func(proxy string) string {
		// directConnection: the server must not lead the driver around the proxy.
		return fmt.Sprintf("{kind: mongodb, uri: \"mongodb://%s/?directConnection=true&serverSelectionTimeoutMS=1000\", ferretdb: %v}", proxy, ferret)
	})
}

// TestHealthKafkaAndQueueDepth: a store's Kafka service is SERVING while its topic exists, the
// queue-depth gauge counts the accepted writes no worker has applied yet and the oldest age
// grows while they wait (each measured against the broker, fresh: not stale), both fall to
// zero once a worker applied them, and a deleted topic turns the Kafka service NOT_SERVING
// without touching the storage service.
func TestHealthKafkaAndQueueDepth(t *testing.T) {
	brokers := testenv.Require(t, testenv.KafkaBrokers)
	topic := uniqueName("recordsvc-health")
	deleteTopics(t, brokers, topic, topic+".dlq")
	cfg := fmt.Sprintf(`
listen: {grpc: 127.0.0.1:0, metrics: 127.0.0.1:0}
health: {interval: 500ms, timeout: 500ms}
stores:
  main:
    kind: memory
    queue: %s
`, kafkaQueue(brokers, topic))
	api := startService(t, cfg, modeServer)
	ctx := testCtx(t)
	kafkaSvc, storageSvc := queueServicePrefix+"main", storageServicePrefix+"main"
	const serving, notServing = healthpb.HealthCheckResponse_SERVING, healthpb.HealthCheckResponse_NOT_SERVING
	// A probe of a broker on a loaded machine may time out: the service must come to SERVING
	// (and the test's bound says how long it may take), not be SERVING at the first look.
	eventually(t, ctx, "kafka health SERVING with the topic in place", func() bool {
		return healthOf(ctx, api, kafkaSvc) == serving
	})
	const n = 7
	var items []*recordv1.WriteItem
	for i := range n {
		items = append(items, put(addr("main", "ns", "ds", fmt.Sprint("k", i)), doc(`{"a":1}`), nil))
	}
	w, err := api.rpc.Write(ctx, &recordv1.WriteRequest{Completion: recordv1.Completion_COMPLETION_RETURN_AFTER_ACCEPTED, Items: items})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range w.Results {
		if r.Outcome != recordv1.Outcome_OUTCOME_ACCEPTED {
			t.Fatalf("item %d: %s, want accepted", i, describe(r))
		}
	}
	depth := `recordsvc_queue_depth{store="main"}`
	eventually(t, ctx, "the queue depth counts the accepted writes", func() bool {
		v, _ := scrape(t, api.metrics, depth)
		return v == n
	})
	first := queueFigures(t, api)
	if first.age <= 0 || first.measured <= 0 {
		t.Fatalf("queue figures with %d writes waiting: %+v, want an oldest age and a measurement time", n, first)
	}
	eventually(t, ctx, "the oldest age grows, measured again and again", func() bool {
		f := queueFigures(t, api)
		return f.age > first.age && f.measured > first.measured && f.stale == 0 && f.depth == n
	})

	// A worker of the store's group applies them; the depth the API process reports drops.
	work := startService(t, cfg, modeWorker)
	eventually(t, ctx, "the queue depth and the oldest age fall to zero once the worker committed", func() bool {
		f := queueFigures(t, api)
		return f.depth == 0 && f.age == 0 && f.stale == 0
	})
	if v, _ := scrape(t, work.metrics, `recordsvc_worker_records_total{result="applied",store="main"}`); v != n {
		t.Errorf("worker applied %v records, want %d", v, n)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).DeleteTopics(ctx, topic); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "kafka health NOT_SERVING once the topic is gone", func() bool {
		return healthOf(ctx, api, kafkaSvc) == notServing
	})
	if got := healthOf(ctx, api, storageSvc); got != serving {
		t.Errorf("storage health after the topic was deleted: %s, want SERVING", got)
	}
	if v, _ := scrape(t, api.metrics, `recordsvc_dependency_healthy{dependency="kafka",store="main"}`); v != 0 {
		t.Errorf("dependency_healthy{kafka} = %v, want 0", v)
	}
}

// fakeBacklog is a backlogMonitor whose answers a test sets.
type fakeBacklog struct {
	mu      sync.Mutex
	pingErr error
	backlog kafkaqueue.Backlog
	err     error
}

func (f *fakeBacklog) set(pingErr error, b kafkaqueue.Backlog, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pingErr, f.backlog, f.err = pingErr, b, err
}

func (f *fakeBacklog) Ping(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pingErr
}

func (f *fakeBacklog) Backlog(context.Context) (kafkaqueue.Backlog, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.backlog, f.err
}

// TestHealthQueueLagStale drives a Kafka queue's check through a measurement, an unreachable
// broker, a backlog read failing on its own and recovery: the depth keeps its last value while
// flagged stale, the oldest age keeps growing from the last oldest timestamp (it is computed
// when scraped), the measurement time stays that of the last success, the queue's health
// follows the ping only, and the transitions are logged with the figures.
func TestHealthQueueLagStale(t *testing.T) {
	m := newMetrics([]string{"main"})
	t0 := time.Now()
	clock := t0
	m.backlogs.now = func() time.Time { return clock }
	var logs syncBuffer
	h := &healthChecker{srv: health.NewServer(), m: m, log: slog.New(slog.NewTextHandler(&logs, nil)),
		last: map[string]error{}, lagLost: map[string]bool{}}
	fake := &fakeBacklog{}
	c := check{service: queueServicePrefix + "main", store: "main", dependency: "kafka",
		probe: func(ctx context.Context) error { return h.probeKafka(ctx, "main", fake) }, figures: func() []any { return h.lagFigures("main") }}
	round := func() { h.set(c, c.probe(t.Context())) }
	series := func(name string) float64 {
		t.Helper()
		v, ok := value(t, m, name, map[string]string{"store": "main"})
		if !ok {
			t.Fatalf("%s{store=main} is not exported", name)
		}
		return v
	}
	want := func(what string, depth, age, stale float64, status healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		if got := series("recordsvc_queue_depth"); got != depth {
			t.Errorf("%s: depth %v, want %v", what, got, depth)
		}
		if got := series("recordsvc_queue_oldest_age_seconds"); got != age {
			t.Errorf("%s: oldest age %v, want %v", what, got, age)
		}
		if got := series("recordsvc_queue_stale"); got != stale {
			t.Errorf("%s: stale %v, want %v", what, got, stale)
		}
		h, err := h.srv.Check(t.Context(), healthRequest(c.service))
		if err != nil || h.Status != status {
			t.Errorf("%s: health %v, %v; want %s", what, h, err, status)
		}
	}

	fake.set(nil, kafkaqueue.Backlog{Lag: kafkaqueue.Lag{Total: 4}, Oldest: t0.Add(-2 * time.Second)}, nil)
	round()
	want("measured", 4, 2, 0, healthpb.HealthCheckResponse_SERVING)
	measuredAt := series("recordsvc_queue_measured_timestamp_seconds")
	if measuredAt <= 0 {
		t.Fatalf("measured timestamp %v after a measurement", measuredAt)
	}

	unreachable := &queue.Error{Kind: queue.Unavailable, Queue: "q", Err: errors.New("no answer from the brokers before the deadline")}
	fake.set(unreachable, kafkaqueue.Backlog{}, unreachable)
	clock = t0.Add(8 * time.Second)
	round()
	want("broker unreachable", 4, 10, 1, healthpb.HealthCheckResponse_NOT_SERVING)
	clock = t0.Add(20 * time.Second)
	round()
	want("broker still unreachable: the age grows", 4, 22, 1, healthpb.HealthCheckResponse_NOT_SERVING)
	if got := series("recordsvc_queue_measured_timestamp_seconds"); got != measuredAt {
		t.Errorf("measured timestamp moved to %v without a measurement (was %v)", got, measuredAt)
	}
	if out := logs.String(); !strings.Contains(out, "dependency unhealthy") || !strings.Contains(out, "queue_depth=4") || !strings.Contains(out, "queue_stale=true") {
		t.Errorf("the unhealthy transition does not carry the lag figures:\n%s", out)
	}

	// The brokers answer again but the backlog read fails on its own: healthy, still stale.
	fake.set(nil, kafkaqueue.Backlog{}, unreachable)
	round()
	want("backlog read failing", 4, 22, 1, healthpb.HealthCheckResponse_SERVING)

	fake.set(nil, kafkaqueue.Backlog{}, nil)
	round()
	want("recovered, queue empty", 0, 0, 0, healthpb.HealthCheckResponse_SERVING)
	if got := series("recordsvc_queue_measured_timestamp_seconds"); got < measuredAt {
		t.Errorf("measured timestamp %v after a new measurement, was %v", got, measuredAt)
	}
	if out := logs.String(); !strings.Contains(out, "dependency healthy again") || !strings.Contains(out, "queue lag measured again") {
		t.Errorf("the recovery was not logged:\n%s", out)
	}
}

// figures are a store's queue lag series as scraped.
type figures struct{ depth, age, stale, measured float64 }

// queueFigures scrapes the lag series of store main from s's metrics endpoint (each -1 when
// absent).
func queueFigures(t *testing.T, s *service) figures {
	t.Helper()
	get := func(name string) float64 {
		v, ok := scrape(t, s.metrics, name+`{store="main"}`)
		if !ok {
			return -1
		}
		return v
	}
	return figures{depth: get("recordsvc_queue_depth"), age: get("recordsvc_queue_oldest_age_seconds"),
		stale: get("recordsvc_queue_stale"), measured: get("recordsvc_queue_measured_timestamp_seconds")}
}

// TestFaultKafkaQueueLag SIGSTOPs the Kafka broker (testenv pause) while accepted writes wait
// in a store's queue with no worker: the queue's health turns NOT_SERVING, the depth keeps its
// last value flagged stale, the measurement time stops, and the oldest age keeps growing (it
// did freeze before issue 33). Once the broker is continued the figures are fresh again, and
// a worker brings depth and age to zero.
func TestFaultKafkaQueueLag(t *testing.T) {
	srv := testenv.RequireFaults(t)
	brokers := testenv.Require(t, testenv.KafkaBrokers)
	topic := uniqueName("l39_recordsvc-lag")
	deleteTopics(t, brokers, topic, topic+".dlq")
	cfg := fmt.Sprintf(`
listen: {grpc: 127.0.0.1:0, metrics: 127.0.0.1:0}
health: {interval: 500ms, timeout: 500ms}
stores:
  main:
    kind: memory
    queue: %s
`, kafkaQueue(brokers, topic))
	api := startService(t, cfg, modeServer)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const n = 5
	for deadline := time.Now().Add(2 * time.Minute); ; { // a new topic may refuse produces for a few seconds
		var items []*recordv1.WriteItem
		for i := range n {
			items = append(items, put(addr("main", "ns", "ds", fmt.Sprint("k", i)), doc(`{"a":1}`), nil))
		}
		w, err := api.rpc.Write(ctx, &recordv1.WriteRequest{Completion: recordv1.Completion_COMPLETION_RETURN_AFTER_ACCEPTED, Items: items})
		if err != nil {
			t.Fatal(err)
		}
		failed := 0
		for _, r := range w.Results {
			if r.Error != nil {
				if !r.Error.Retryable || time.Now().After(deadline) {
					t.Fatalf("accepted write before the fault: %s", describe(r))
				}
				failed++
			}
		}
		if failed == 0 {
			break
		}
	}
	queueSvc := queueServicePrefix + "main"
	const serving, notServing = healthpb.HealthCheckResponse_SERVING, healthpb.HealthCheckResponse_NOT_SERVING
	eventually(t, ctx, "the accepted writes counted, fresh", func() bool {
		f := queueFigures(t, api)
		return f.depth >= n && f.age > 0 && f.stale == 0
	})

	srv.Run("pause", "kafka")
	paused := true
	resume := func() {
		if paused {
			paused = false
			srv.Run("resume", "kafka")
		}
	}
	t.Cleanup(resume)
	var stale figures
	eventually(t, ctx, "the queue NOT_SERVING and its figures stale while the broker is stopped", func() bool {
		stale = queueFigures(t, api)
		return stale.stale == 1 && healthOf(ctx, api, queueSvc) == notServing
	})
	t.Logf("broker stopped: %+v", stale)
	eventually(t, ctx, "the oldest age grows while the broker is stopped", func() bool {
		f := queueFigures(t, api)
		if f.depth != stale.depth || f.measured != stale.measured || f.stale != 1 {
			t.Fatalf("figures moved while the broker was stopped: %+v, then %+v", stale, f)
		}
		return f.age > stale.age
	})
	if out := api.log.String(); !strings.Contains(out, "dependency unhealthy") || !strings.Contains(out, "queue_stale=true") {
		t.Errorf("the unhealthy transition was not logged with the lag figures:\n%s", out)
	}

	resume()
	eventually(t, ctx, "fresh figures and SERVING once the broker is continued", func() bool {
		f := queueFigures(t, api)
		return f.stale == 0 && f.measured > stale.measured && f.depth >= n && healthOf(ctx, api, queueSvc) == serving
	})
	startService(t, cfg, modeWorker)
	eventually(t, ctx, "depth and age zero once a worker applied everything", func() bool {
		f := queueFigures(t, api)
		return f.depth == 0 && f.age == 0 && f.stale == 0
	})
}
