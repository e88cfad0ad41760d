package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/luamerge"
	"github.com/tributary-dev/tributary/queue/kafkaqueue"
	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/accepted"
	"github.com/tributary-dev/tributary/store/memstore"
	"github.com/tributary-dev/tributary/store/mongostore"
	"github.com/tributary-dev/tributary/store/searchstore"
	"github.com/tributary-dev/tributary/store/worker"
)

// keepUpBackends are the stores BenchmarkWorkerKeepsUpKafka runs on; each skips without its
// server.
var keepUpBackends = []struct {
	name string
	open func(b testing.TB) backend
}{
	{"memory", func(testing.TB) backend { return backend{adapter: memstore.New(), namespace: "ns", dataset: "ds"} }},
	{"elasticsearch", func(b testing.TB) backend { return searchBench(b, estest.Elasticsearch, testenv.ElasticsearchURL) }},
	{"opensearch", func(b testing.TB) backend { return searchBench(b, estest.OpenSearch, testenv.OpenSearchURL) }},
	{"mongodb", mongoBench},
}

// BenchmarkWorkerKeepsUpKafka is issue 33's measure of the worker against its own service,
// through the real broker (TRIBUTARY_KAFKA_BROKERS) on every backend: 16 clients send
// one-operation accepted-mode Lua merges for 10 seconds -- on 50 hot records, or on keys
// spread uniformly over a million -- while a worker of the same Service applies them. It
// reports accepted/s (what the service accepted during the load), applied/s (the same
// records over the time until the worker had applied the last of them), worker/accepted
// (goal >= 1: about 1 when the worker keeps up, since it cannot apply faster than records
// arrive), behind (records accepted but not applied when the load stopped), drain-s (from
// then until the worker caught up) and drain-rec/s (behind / drain-s: the worker's pace on a
// backlog, which is what it can do; noisy when behind is only what was in flight). The records' counters are checked against the
// merges accepted: each applied exactly once. One run per backend: -benchtime has no use.
//
//	go test -run '^$' -bench WorkerKeepsUpKafka ./store/worker/
func BenchmarkWorkerKeepsUpKafka(b *testing.B) {
	for _, be := range keepUpBackends {
		for _, keys := range []struct {
			name string
			n    int
		}{{"hot50", 50}, {"uniform", 1_000_000}} {
			b.Run(be.name+"/"+keys.name, func(b *testing.B) {
				env := realKafka(b)
				bk := be.open(b)
				for range b.N {
					keepUp(b, env, bk, keys.n)
				}
			})
		}
	}
}

const (
	keepUpClients = 16
	keepUpLoad    = 10 * time.Second
)

// appliedCount counts the records the worker reported applied.
type appliedCount struct{ n atomic.Int64 }

func (a *appliedCount) FetchDone(s worker.FetchStats) { a.n.Add(int64(s.Applied)) }

func keepUp(b *testing.B, env kafkaEnv, be backend, keys int) {
	b.StopTimer()
	ctx := context.Background()
	lua, err := luamerge.New(nil)
	if err != nil {
		b.Fatal(err)
	}
	topic, dlqTopic := uniqueName("w39_keepup-in"), uniqueName("w39_keepup-dlq")
	env.createTopic(b, topic, 4)
	env.createTopic(b, dlqTopic, 1)
	svc, err := store.New(map[string]store.Adapter{"m": be.adapter}, &store.Options{
		Merger: lua, Queues: map[string]store.Queue{"m": accepted.NewPublisher(env.publisher(b, topic))}})
	if err != nil {
		b.Fatal(err)
	}
	run := uniqueName("r") // the records of this run, apart from an earlier one's on the same dataset
	at := func(k int) store.Address {
		return store.Address{Store: "m", Namespace: be.namespace, Dataset: be.dataset, Key: store.StringKey(fmt.Sprint(run, "-", k))}
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	group := uniqueName("w39_keepup")
	c, err := kafkaqueue.NewConsumer(cctx, kafkaqueue.Config{Brokers: env.brokers, Topic: topic, Group: group}, nil)
	cancel()
	if err != nil {
		b.Fatal(err)
	}
	applied := &appliedCount{}
	w, err := worker.New("m", c, svc, env.publisher(b, dlqTopic), &worker.Options{Observer: applied})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()

	var sent sync.Map // key -> *atomic.Int64: merges accepted per record
	var accepted atomic.Int64
	var failed atomic.Int64
	stop := make(chan struct{})
	var clients sync.WaitGroup
	b.StartTimer()
	start := time.Now()
	for cl := range keepUpClients {
		clients.Add(1)
		go func() {
			defer clients.Done()
			rng := rand.New(rand.NewPCG(uint64(cl), uint64(start.UnixNano())))
			for {
				select {
				case <-stop:
					return
				default:
				}
				k := rng.IntN(keys)
				res, err := svc.Do(ctx, []store.Op{store.Merge(at(k), luaAdd, store.Document{JSON: []byte(`{"n":1}`)})}, store.ReturnAccepted)
				if err != nil || res[0].Err != nil {
					failed.Add(1)
					continue
				}
				n, _ := sent.LoadOrStore(k, new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
				accepted.Add(1)
			}
		}()
	}
	time.Sleep(keepUpLoad)
	close(stop)
	clients.Wait()
	loadEnd := time.Now()
	total := accepted.Load()
	behind := total - applied.n.Load()
	deadline := time.Now().Add(30 * time.Minute) // a hang guard, not a speed assertion
	for applied.n.Load() < total {
		if time.Now().After(deadline) {
			b.Fatalf("the worker applied %d of %d records", applied.n.Load(), total)
		}
		time.Sleep(5 * time.Millisecond)
	}
	end := time.Now()
	b.StopTimer()
	if err := w.Stop(ctx); err != nil {
		b.Fatal(err)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	_ = c.Close()
	deleteGroup(b, env, group)

	// Every record holds exactly the merges accepted for it (checked on up to 200 records).
	checked := 0
	sent.Range(func(k, v any) bool {
		want := v.(*atomic.Int64).Load()
		res, err := svc.Do(ctx, []store.Op{store.Read(at(k.(int)))}, store.WaitApplied)
		if err != nil || res[0].Err != nil {
			b.Fatalf("read: %v %v", err, res[0].Err)
		}
		var d struct{ N int64 }
		if err := json.Unmarshal(res[0].Doc.JSON, &d); err != nil || d.N != want {
			b.Fatalf("record %d: n = %d (%v), want %d merges", k, d.N, err, want)
		}
		checked++
		return checked < 200
	})
	_ = svc.Close(ctx)
	if failed.Load() > 0 {
		b.Logf("%d accepted-mode calls failed", failed.Load())
	}
	acc := float64(total) / loadEnd.Sub(start).Seconds()
	app := float64(total) / end.Sub(start).Seconds()
	b.ReportMetric(acc, "accepted/s")
	b.ReportMetric(app, "applied/s")
	b.ReportMetric(app/acc, "worker/accepted")
	b.ReportMetric(float64(behind), "behind")
	b.ReportMetric(end.Sub(loadEnd).Seconds(), "drain-s")
	if d := end.Sub(loadEnd).Seconds(); behind > 0 && d > 0 {
		b.ReportMetric(float64(behind)/d, "drain-rec/s")
	}
}

func searchBench(b testing.TB, engine, envVar string) backend {
	base := testenv.Require(b, envVar)
	index := estest.Connect(b, engine, base).TempIndex(b, "w39_keepup", nil)
	a, err := searchstore.NewFromURLs([]string{base}, nil)
	if err != nil {
		b.Fatal(err)
	}
	return backend{adapter: a, namespace: "bench", dataset: index}
}

func mongoBench(b testing.TB) backend {
	uri := testenv.Require(b, testenv.MongoURI)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		b.Fatal(err)
	}
	db := client.Database(strings.ReplaceAll(uniqueName("w39_keepup"), "-", "_"))
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = db.Drop(ctx)
		_ = client.Disconnect(ctx)
	})
	var info bson.Raw
	if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err != nil {
		b.Fatal(err)
	}
	_, ferr := info.LookupErr("ferretdbVersion")
	a, err := mongostore.New(client, &mongostore.Options{FerretDB: ferr == nil})
	if err != nil {
		b.Fatal(err)
	}
	return backend{adapter: a, namespace: db.Name(), dataset: "records"}
}

// deleteGroup deletes a consumer group a test or benchmark made, once its consumer left.
func deleteGroup(tb testing.TB, env kafkaEnv, group string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := crashAdmin(tb, env.brokers).DeleteGroups(ctx, group)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		tb.Logf("deleting consumer group %s: %v", group, err)
	}
}
