package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	recordv1 "github.com/tributary-dev/tributary/examples/recordsvc/proto/tributary/record/v1"
	"github.com/tributary-dev/tributary/internal/faultproxy"
	"github.com/tributary-dev/tributary/internal/testenv"
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
// queue-depth gauge counts the accepted writes no worker has applied yet and falls to zero
// once a worker applied them, and a deleted topic turns the Kafka service NOT_SERVING
// without touching the storage service.
func TestHealthKafkaAndQueueDepth(t *testing.T) {
	brokers := testenv.Require(t, testenv.KafkaBrokers)
	topic := uniqueName("recordsvc-health")
	deleteTopics(t, brokers, topic, topic+".dlq")
	cfg := fmt.Sprintf(`
listen: {grpc: 127.0.0.1:0, metrics: 127.0.0.1:0}
health: {interval: 200ms, timeout: 150ms}
stores:
  main:
    kind: memory
    queue: %s
`, kafkaQueue(brokers, topic))
	api := startService(t, cfg, modeServer)
	ctx := testCtx(t)
	kafkaSvc, storageSvc := queueServicePrefix+"main", storageServicePrefix+"main"
	const serving, notServing = healthpb.HealthCheckResponse_SERVING, healthpb.HealthCheckResponse_NOT_SERVING
	if got := healthOf(ctx, api, kafkaSvc); got != serving {
		t.Fatalf("kafka health with the topic in place: %s, want SERVING", got)
	}
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

	// A worker of the store's group applies them; the depth the API process reports drops.
	work := startService(t, cfg, modeWorker)
	eventually(t, ctx, "the queue depth falls to zero once the worker committed", func() bool {
		v, ok := scrape(t, api.metrics, depth)
		return ok && v == 0
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
