package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/luamerge"
	"github.com/tributary-dev/tributary/queue"
	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/accepted"
	"github.com/tributary-dev/tributary/store/mongostore"
	"github.com/tributary-dev/tributary/store/searchstore"
	"github.com/tributary-dev/tributary/store/worker"
)

const (
	luaAdd = `return function(current, incoming, context)
  if current == nil then return incoming end
  current.n = current.n + incoming.n
  return current
end`
	luaFail = `return function(current, incoming, context) error("refuses every record") end`
)

// backend is a real store for the end-to-end test: an adapter, and the namespace and
// dataset it can write to.
type backend struct {
	adapter            store.Adapter
	namespace, dataset string
}

func searchBackend(t *testing.T, engine, envVar string) backend {
	base := testenv.Require(t, envVar)
	index := estest.Connect(t, engine, base).TempIndex(t, "worker-e2e", nil)
	a, err := searchstore.NewFromURLs([]string{base}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return backend{adapter: a, namespace: "e2e", dataset: index}
}

func mongoBackend(t *testing.T) backend {
	uri := testenv.Require(t, testenv.MongoURI)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	db := client.Database(strings.ReplaceAll(uniqueName("worker_e2e"), "-", "_"))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = db.Drop(ctx)
		_ = client.Disconnect(ctx)
	})
	var info bson.Raw
	if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err != nil {
		t.Fatal(err)
	}
	_, ferr := info.LookupErr("ferretdbVersion")
	a, err := mongostore.New(client, &mongostore.Options{FerretDB: ferr == nil})
	if err != nil {
		t.Fatal(err)
	}
	return backend{adapter: a, namespace: db.Name(), dataset: "records"}
}

// TestWorkerEndToEnd accepts puts, Lua merges, deletes and two poison writes on a real store
// through real Kafka, and checks that a worker applies them: the records end as the
// synchronous path would leave them, and the poison is dead-lettered.
func TestWorkerEndToEnd(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T) backend
	}{
		{"elasticsearch", func(t *testing.T) backend { return searchBackend(t, estest.Elasticsearch, testenv.ElasticsearchURL) }},
		{"opensearch", func(t *testing.T) backend { return searchBackend(t, estest.OpenSearch, testenv.OpenSearchURL) }},
		{"mongodb", mongoBackend},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := realKafka(t)
			be := tc.open(t)
			runEndToEnd(t, env, be)
		})
	}
}

func runEndToEnd(t *testing.T, env kafkaEnv, be backend) {
	lua, err := luamerge.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	topic, dlqTopic := uniqueName("e2e-in"), uniqueName("e2e-dlq")
	env.createTopic(t, topic, 4)
	env.createTopic(t, dlqTopic, 1)
	svc, err := store.New(map[string]store.Adapter{"m": be.adapter}, &store.Options{
		Merger: lua, Queues: map[string]store.Queue{"m": accepted.NewPublisher(env.publisher(t, topic))}})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close(context.Background())
	at := func(k string) store.Address {
		return store.Address{Store: "m", Namespace: be.namespace, Dataset: be.dataset, Key: store.StringKey(k)}
	}
	doc := func(n int) store.Document { return store.Document{JSON: fmt.Appendf(nil, `{"n":%d}`, n)} }

	var ops []store.Op
	for i := range 10 {
		ops = append(ops, store.Put(at(fmt.Sprint("p", i)), doc(i)))
	}
	for range 10 {
		for c := range 3 {
			ops = append(ops, store.Merge(at(fmt.Sprint("c", c)), luaAdd, doc(1)))
		}
	}
	ops = append(ops,
		store.Delete(at("p3")),
		store.Put(at("p4"), doc(99)).WithPrecondition(store.IfAbsent()), // exists: dead-lettered
		store.Merge(at("p5"), luaFail, doc(1)),                          // fails: dead-lettered
		store.Put(at("p5"), doc(55)),                                    // after the poison
	)
	res, err := svc.Do(context.Background(), ops, store.ReturnAccepted)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Outcome != store.Accepted {
			t.Fatalf("op %d: %+v", i, r)
		}
	}

	c := env.consumer(t, topic, uniqueName("e2e"))
	w, err := worker.New("m", c, svc, env.publisher(t, dlqTopic), nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()

	want := map[string]string{"p0": `{"n":0}`, "p4": `{"n":4}`, "p5": `{"n":55}`, "p9": `{"n":9}`,
		"c0": `{"n":10}`, "c1": `{"n":10}`, "c2": `{"n":10}`, "p3": ""}
	state := func() map[string]string {
		got := map[string]string{}
		for k := range want {
			res, err := svc.Do(context.Background(), []store.Op{store.Read(at(k))}, store.WaitApplied)
			if err != nil {
				t.Fatal(err)
			}
			if res[0].Err != nil {
				t.Fatal(res[0].Err)
			}
			if res[0].Outcome == store.Found {
				var compact bytes.Buffer
				_ = json.Compact(&compact, res[0].Doc.JSON)
				got[k] = compact.String()
			} else {
				got[k] = ""
			}
		}
		return got
	}
	waitFor(t, "the accepted writes to be applied", func() bool {
		got := state()
		for k, v := range want {
			if got[k] != v {
				return false
			}
		}
		return true
	})
	dc := env.consumer(t, dlqTopic, uniqueName("dlq-reader"))
	var dead []queue.Message
	waitFor(t, "two dead letters", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		msgs, _ := dc.Fetch(ctx)
		dead = append(dead, msgs...)
		return len(dead) >= 2
	})
	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run after Stop: %v", err)
	}
	kinds := map[string]bool{}
	for _, d := range dead {
		kinds[header(d, worker.HeaderErrorKind)] = true
	}
	if len(dead) != 2 || !kinds["already exists"] || !kinds["invalid"] {
		t.Fatalf("dead letters of kinds %v (%d), want already exists and invalid", kinds, len(dead))
	}
}
