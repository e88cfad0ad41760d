package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/subproc"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/queue/kafkaqueue"
	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/accepted"
	"github.com/tributary-dev/tributary/store/driver"
	"github.com/tributary-dev/tributary/store/mongostore"
	"github.com/tributary-dev/tributary/store/searchstore"
	"github.com/tributary-dev/tributary/store/worker"
)

// crashChildEnv carries the child's configuration (JSON) when the test binary runs as the
// worker subprocess of TestWorkerCrashKafkaRestartLosesNothing.
const crashChildEnv = "TRIBUTARY_WORKER_CRASH_CHILD"

// crashSession is the group session timeout of the crash test's workers: the broker's
// minimum by default, so a killed worker's partitions move on after seconds, not 45.
const crashSession = 6 * time.Second

// crashConfig is what a worker subprocess needs to consume the topic and reach the store.
type crashConfig struct {
	Brokers              []string
	Topic, DLQ, Group    string
	Backend, URL         string // elasticsearch | mongodb, and its URL or URI
	Namespace, Dataset   string
	FerretDB             bool
	ApplyLog             string // the file the child appends every applied put to
	MaxFetch, Partitions int
}

// crashDoc is the content of the test's records: a put carries its operation's sequence
// number; a merge adds its operation id to the record's set and 1 to its counter, so a merge
// applied twice shows in the counter and a lost one in the set.
type crashDoc struct {
	Seq int             `json:"seq,omitempty"`
	N   int             `json:"n,omitempty"`
	Ops map[string]bool `json:"ops,omitempty"`
}

const crashProgram = "crash-add-ops"

var crashMerger = store.MergeFunc(func(_ context.Context, c *store.MergeCall) (store.MergeResult, error) {
	var cur, in crashDoc
	if c.Current != nil {
		if err := json.Unmarshal(c.Current.JSON, &cur); err != nil {
			return store.MergeResult{}, err
		}
	}
	if err := json.Unmarshal(c.Incoming.JSON, &in); err != nil {
		return store.MergeResult{}, err
	}
	cur.N += in.N
	if cur.Ops == nil {
		cur.Ops = map[string]bool{}
	}
	for id := range in.Ops {
		cur.Ops[id] = true
	}
	b, err := json.Marshal(cur)
	return store.MergeResult{Doc: store.Document{JSON: b}}, err
})

// TestWorkerCrashKafkaRestartLosesNothing runs the worker in a subprocess consuming real Kafka
// and applying to a real store (Elasticsearch, else the MongoDB-wire server), SIGKILLs it at
// random moments while accepted-mode puts and merges are being published, and restarts it,
// several times; a last worker drains the backlog until the group's lag is zero. Then every
// accepted put has been applied (the child logs each put the store acknowledged, and a put
// whose log line a kill lost was not committed, so it was applied and logged again) and each
// put record holds its last put; every merge's operation id is in its record's set, and its
// counter counts at least as many applications as there were merges. Nothing is dead-lettered.
func TestWorkerCrashKafkaRestartLosesNothing(t *testing.T) {
	if raw := os.Getenv(crashChildEnv); raw != "" {
		runCrashChild(raw)
		return
	}
	brokers := strings.Split(testenv.Require(t, testenv.KafkaBrokers), ",")
	cfg := crashConfig{
		Brokers: brokers, Topic: crashName("crash-in"), Group: crashName("crash"),
		ApplyLog: filepath.Join(t.TempDir(), "applied.log"), MaxFetch: 100, Partitions: 4,
	}
	cfg.DLQ = cfg.Topic + ".dlq"
	crashBackend(t, &cfg)
	adm := crashAdmin(t, brokers)
	crashTopic(t, adm, cfg.Topic, int32(cfg.Partitions))
	crashTopic(t, adm, cfg.DLQ, 1)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = adm.DeleteGroup(ctx, cfg.Group)
	})

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute) // a hang guard only
	defer cancel()
	adapter := openCrashAdapter(ctx, t, &cfg)
	pub, err := kafkaqueue.NewPublisher(ctx, kafkaqueue.Config{Brokers: brokers, Topic: cfg.Topic}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	svc, err := store.New(map[string]store.Adapter{"s": adapter}, &store.Options{Merger: crashMerger, Queues: map[string]store.Queue{"s": accepted.NewPublisher(pub)}})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close(context.Background())
	addr := func(k string) store.Address {
		return store.Address{Store: "s", Namespace: cfg.Namespace, Dataset: cfg.Dataset, Key: store.StringKey(k)}
	}

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))

	// The publisher: requests of puts and merges until told to stop.
	const putKeys, mergeKeys = 40, 8
	var (
		lastPut  = map[string]int{}
		puts     = map[string][]int{}
		mergeOps = map[string]map[string]bool{}
		pubErr   error
	)
	stopPublishing := make(chan struct{})
	published := make(chan struct{})
	pubRng := rand.New(rand.NewPCG(seed, 12))
	// The pace keeps the backlog one worker can drain in seconds: FerretDB applies far
	// fewer records per second than Elasticsearch.
	pauseBase, pauseSpread := 10, 40
	if cfg.Backend == "mongodb" {
		pauseBase, pauseSpread = 100, 150
	}
	go func() {
		defer close(published)
		seq := 0
		for {
			select {
			case <-stopPublishing:
				return
			case <-time.After(time.Duration(pauseBase+pubRng.IntN(pauseSpread)) * time.Millisecond):
			}
			var ops []store.Op
			for range 5 + pubRng.IntN(30) {
				seq++
				if pubRng.IntN(3) == 0 {
					k, id := fmt.Sprint("m", pubRng.IntN(mergeKeys)), fmt.Sprint("op", seq)
					doc, _ := json.Marshal(crashDoc{N: 1, Ops: map[string]bool{id: true}})
					ops = append(ops, store.Merge(addr(k), crashProgram, store.Document{JSON: doc}))
					if mergeOps[k] == nil {
						mergeOps[k] = map[string]bool{}
					}
					mergeOps[k][id] = true
				} else {
					k := fmt.Sprint("p", pubRng.IntN(putKeys))
					doc, _ := json.Marshal(crashDoc{Seq: seq})
					ops = append(ops, store.Put(addr(k), store.Document{JSON: doc}))
					lastPut[k] = seq
					puts[k] = append(puts[k], seq)
				}
			}
			res, err := svc.Do(ctx, ops, store.ReturnAccepted)
			if err == nil {
				for _, r := range res {
					if r.Err != nil {
						err = r.Err
						break
					}
				}
			}
			if err != nil {
				// Only accepted operations count; a refused request would have to be
				// retried by its client, which this test does not model.
				pubErr = err
				return
			}
		}
	}()

	// Workers killed at random moments while the publisher runs.
	const kills = 5
	for i := range kills {
		child := startCrashChild(t, &cfg)
		// Killed while it works: after its first Apply (it owns partitions then, and
		// the previous worker's session has expired), at a random moment of the stream
		// of fetches, applies and commits.
		child.Await(ctx, t, "applying")
		time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond)
		child.Kill(t)
		t.Logf("worker %d killed", i+1)
	}
	close(stopPublishing)
	<-published
	if pubErr != nil {
		t.Fatalf("publishing accepted writes: %v", pubErr)
	}

	// A last worker drains the backlog: the group's lag reaches zero, so every record was
	// applied or dead-lettered and committed.
	last := startCrashChild(t, &cfg)
	last.Await(ctx, t, "ready")
	mon, err := kafkaqueue.NewMonitor(kafkaqueue.Config{Brokers: brokers, Topic: cfg.Topic, Group: cfg.Group}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	for {
		lag, err := mon.Lag(ctx)
		if err == nil && lag.Total == 0 {
			break
		}
		select {
		case <-last.Done():
			t.Fatal("the last worker exited before it drained the topic")
		case <-ctx.Done():
			t.Fatalf("the group's lag never reached zero: %+v, %v", lag, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	last.Kill(t)

	ends, err := adm.ListEndOffsets(ctx, cfg.DLQ, cfg.Topic)
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	ends.Each(func(o kadm.ListedOffset) {
		if o.Topic == cfg.DLQ && o.Offset != 0 {
			t.Errorf("%d dead letters in partition %d", o.Offset, o.Partition)
		}
		if o.Topic == cfg.Topic {
			total += o.Offset
		}
	})

	applied, putsAgain := readApplyLog(t, cfg.ApplyLog, kills+1)
	nPuts := 0
	for k, seqs := range puts {
		for _, s := range seqs {
			if !applied[k][s] {
				t.Errorf("%s: put %d was accepted and never applied", k, s)
			}
		}
		nPuts += len(seqs)
	}
	keys := make([]store.Op, 0, len(lastPut)+len(mergeOps))
	for k := range lastPut {
		keys = append(keys, store.Read(addr(k)))
	}
	for k := range mergeOps {
		keys = append(keys, store.Read(addr(k)))
	}
	res, err := svc.Do(ctx, keys, store.WaitApplied)
	if err != nil {
		t.Fatal(err)
	}
	duplicates, nMerges := 0, 0
	for i, op := range keys {
		k := op.Addr.Key.StringValue()
		if res[i].Err != nil || res[i].Outcome != store.Found {
			t.Errorf("%s: %v %v, want the record", k, res[i].Outcome, res[i].Err)
			continue
		}
		var d crashDoc
		if err := json.Unmarshal(res[i].Doc.JSON, &d); err != nil {
			t.Fatal(err)
		}
		if want, ok := lastPut[k]; ok {
			if d.Seq != want {
				t.Errorf("%s holds put %d, want the last one accepted, %d", k, d.Seq, want)
			}
			continue
		}
		ids := mergeOps[k]
		for id := range ids {
			if !d.Ops[id] {
				t.Errorf("%s: merge %s was accepted and never applied", k, id)
			}
		}
		if len(d.Ops) != len(ids) || d.N < len(ids) {
			t.Errorf("%s: %d ids applied and counter %d, want %d ids and a counter of at least %d", k, len(d.Ops), d.N, len(ids), len(ids))
		}
		duplicates += d.N - len(ids)
		nMerges += len(ids)
	}
	t.Logf("%s: %d kills, %d messages (%d puts, %d merges); applied again after a kill: %d puts, %d merges", cfg.Backend, kills, total, nPuts, nMerges, putsAgain, duplicates)
	if nPuts == 0 || nMerges == 0 {
		t.Fatal("the publisher accepted no puts or no merges; the test checked nothing")
	}
}

// crashName is a lowercase name no earlier run used.
func crashName(prefix string) string {
	return fmt.Sprintf("%s-%d-%x", prefix, os.Getpid(), rand.Uint64())
}

// crashBackend chooses the store: Elasticsearch when TRIBUTARY_ES_URL is set, else the
// MongoDB-wire server; it makes the dataset and removes it when t ends.
func crashBackend(t *testing.T, cfg *crashConfig) {
	if url := os.Getenv(testenv.ElasticsearchURL); url != "" {
		cfg.Backend, cfg.URL = "elasticsearch", strings.TrimRight(url, "/")
		// Not mapped: the merges' operation ids, one field each, would pass the index's
		// field limit; the documents stay whole in _source.
		cfg.Namespace = "crash"
		cfg.Dataset = estest.Connect(t, estest.Elasticsearch, cfg.URL).TempIndex(t, "worker-crash",
			map[string]any{"mappings": map[string]any{"dynamic": false}})
		return
	}
	cfg.Backend, cfg.URL = "mongodb", testenv.Require(t, testenv.MongoURI)
	cfg.Namespace, cfg.Dataset = strings.ReplaceAll(crashName("worker_crash"), "-", "_"), "records"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := mongo.Connect(options.Client().ApplyURI(cfg.URL).SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var info bson.Raw
	if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err != nil {
		t.Fatal(err)
	}
	_, ferr := info.LookupErr("ferretdbVersion")
	cfg.FerretDB = ferr == nil
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = client.Database(cfg.Namespace).Drop(ctx)
		_ = client.Disconnect(ctx)
	})
}

// openCrashAdapter opens the store of cfg; the child and the parent each open their own.
func openCrashAdapter(ctx context.Context, t testing.TB, cfg *crashConfig) store.Adapter {
	a, err := openCrashStore(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func openCrashStore(ctx context.Context, cfg *crashConfig) (store.Adapter, error) {
	if cfg.Backend == "elasticsearch" {
		return searchstore.NewFromURLs([]string{cfg.URL}, nil)
	}
	client, err := mongo.Connect(options.Client().ApplyURI(cfg.URL).SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		return nil, err
	}
	return mongostore.New(client, &mongostore.Options{FerretDB: cfg.FerretDB, DisconnectOnClose: true})
}

func crashAdmin(t testing.TB, brokers []string) *kadm.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// crashTopic creates a topic, waits until the metadata shows it, and deletes it when t ends.
func crashTopic(t *testing.T, adm *kadm.Client, name string, partitions int32) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = adm.DeleteTopics(ctx, name)
	})
	for {
		td, err := adm.ListTopics(ctx, name)
		if err == nil && td[name].Err == nil && len(td[name].Partitions) == int(partitions) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("topic %s not in the metadata: %v", name, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// startCrashChild runs a worker subprocess with cfg; it is killed when t ends.
func startCrashChild(t *testing.T, cfg *crashConfig) *subproc.Child {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return subproc.Start(t, "worker", "^TestWorkerCrashKafkaRestartLosesNothing$", []string{crashChildEnv + "=" + string(raw)})
}

// runCrashChild is the worker subprocess: it applies the topic's records to the store until
// it is killed. Every put the store acknowledged is appended to the apply log before the
// worker can finish (and so commit) its record.
func runCrashChild(raw string) {
	fail := func(what string, err error) {
		fmt.Fprintf(os.Stderr, "crash child: %s: %v\n", what, err)
		os.Exit(2)
	}
	var cfg crashConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fail("configuration", err)
	}
	ctx := context.Background()
	a, err := openCrashStore(ctx, &cfg)
	if err != nil {
		fail("store", err)
	}
	f, err := os.OpenFile(cfg.ApplyLog, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err == nil {
		_, err = f.Write([]byte("\n")) // ends a line a killed predecessor tore
	}
	if err != nil {
		fail("apply log", err)
	}
	svc, err := store.New(map[string]store.Adapter{"s": &applyLogger{Store: a, f: f}}, &store.Options{Merger: crashMerger})
	if err != nil {
		fail("service", err)
	}
	c, err := kafkaqueue.NewConsumer(ctx, kafkaqueue.Config{Brokers: cfg.Brokers, Topic: cfg.Topic, Group: cfg.Group,
		SessionTimeout: crashSession, MaxFetch: cfg.MaxFetch, FetchMaxWait: 500 * time.Millisecond}, nil)

	if err != nil {
		fail("consumer", err)
	}
	dlq, err := kafkaqueue.NewPublisher(ctx, kafkaqueue.Config{Brokers: cfg.Brokers, Topic: cfg.DLQ}, nil)
	if err != nil {
		fail("dead-letter publisher", err)
	}
	// Dead letters and failures go to stderr, which the test shows.
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	w, err := worker.New("s", c, &announcing{Applier: svc}, dlq, &worker.Options{BackoffBase: time.Millisecond, BackoffMax: 20 * time.Millisecond, Logger: log})
	if err != nil {
		fail("worker", err)
	}
	fmt.Println("ready")
	fail("Run returned", w.Run(ctx))
}

// announcing prints "applying" at the first Apply, when the worker has partitions.
type announcing struct {
	worker.Applier
	once sync.Once
}

func (a *announcing) ApplyInOrder(ctx context.Context, recs []store.QueuedOp) ([]store.Result, error) {
	a.once.Do(func() { fmt.Println("applying") })
	return a.Applier.ApplyInOrder(ctx, recs)
}

// applyLogger appends "<key> <seq>" for every put of a put record ("p" keys) the store
// acknowledged, in one write per batch.
type applyLogger struct {
	driver.Store
	mu sync.Mutex
	f  *os.File
}

func (l *applyLogger) Write(ctx context.Context, ws []driver.Write, o driver.WriteOptions) ([]driver.WriteResult, error) {
	res, err := l.Store.Write(ctx, ws, o)
	if err != nil {
		return res, err
	}
	var buf []byte
	for i, w := range ws {
		k := w.Addr.Key.StringValue()
		if i >= len(res) || res[i].Err != nil || w.Kind != driver.Put || !strings.HasPrefix(k, "p") {
			continue
		}
		var d crashDoc
		if json.Unmarshal(w.Doc.JSON, &d) == nil {
			buf = fmt.Appendf(buf, "%s %d\n", k, d.Seq)
		}
	}
	if len(buf) > 0 {
		l.mu.Lock()
		_, werr := l.f.Write(buf)
		l.mu.Unlock()
		if werr != nil {
			// Unlogged puts must not be committed: fail them as outcome unknown.
			for i := range res {
				res[i].Err = driver.NewError(driver.KindInternal, "apply log: "+werr.Error(), nil)
			}
		}
	}
	return res, nil
}

// readApplyLog returns, per key, the put sequence numbers the children applied. A kill can
// tear a child's last line; each child starts with a newline, so a torn line stays a line of
// its own, and it is skipped: its batch was not committed, so it was applied and logged
// again. There cannot be more torn lines than kills.
func readApplyLog(t *testing.T, path string, kills int) (_ map[string]map[int]bool, again int) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[int]bool{}
	torn := 0
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		seq, err := 0, error(nil)
		if len(f) == 2 {
			seq, err = strconv.Atoi(f[1])
		}
		if len(f) != 2 || err != nil {
			torn++
			continue
		}
		if out[f[0]] == nil {
			out[f[0]] = map[int]bool{}
		}
		if out[f[0]][seq] {
			again++
		}
		out[f[0]][seq] = true
	}
	if torn > kills {
		t.Fatalf("%d torn lines in the apply log, more than the %d kills could tear", torn, kills)
	}
	return out, again
}
