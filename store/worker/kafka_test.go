package worker_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/queue"
	"github.com/tributary-dev/tributary/queue/kafkaqueue"
	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/accepted"
	"github.com/tributary-dev/tributary/store/memstore"
	"github.com/tributary-dev/tributary/store/worker"
)

// kafkaEnv is a Kafka cluster the tests make topics on: kfake in-process, or the real broker.
type kafkaEnv struct {
	brokers      []string
	fetchMaxWait time.Duration
	createTopic  func(t testing.TB, name string, partitions int32)
}

func uniqueName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// forEachKafka runs f on kfake and, when TRIBUTARY_KAFKA_BROKERS is set, on the real broker.
func forEachKafka(t *testing.T, f func(t *testing.T, env kafkaEnv)) {
	t.Run("kfake", func(t *testing.T) { f(t, fakeKafka(t)) })
	t.Run("kafka", func(t *testing.T) { f(t, realKafka(t)) })
}

func fakeKafka(t testing.TB) kafkaEnv {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	// kfake answers a group's first fetch from a committed offset only when the fetch wait
	// runs out: a short wait keeps restarts quick.
	return kafkaEnv{brokers: cluster.ListenAddrs(), fetchMaxWait: 200 * time.Millisecond,
		createTopic: func(t testing.TB, name string, partitions int32) {
			if err := cluster.CreateTopic(name, partitions, nil); err != nil {
				t.Fatal(err)
			}
		}}
}

// realKafka is the broker TRIBUTARY_KAFKA_BROKERS names; the test skips without it.
func realKafka(t testing.TB) kafkaEnv {
	brokers := strings.Split(testenv.Require(t, testenv.KafkaBrokers), ",")
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	return kafkaEnv{brokers: brokers, createTopic: func(t testing.TB, name string, partitions int32) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := adm.CreateTopic(ctx, partitions, 1, nil, name)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatalf("create topic %s: %v", name, err)
		}
		// Creation returns before every broker's metadata knows the topic.
		waitFor(t, "topic "+name+" in the metadata", func() bool {
			td, err := adm.ListTopics(ctx, name)
			return err == nil && td.Has(name) && td[name].Err == nil && len(td[name].Partitions) == int(partitions)
		})
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, _ = adm.DeleteTopics(ctx, name)
		})
	}}
}

func (env kafkaEnv) publisher(t testing.TB, topic string) *kafkaqueue.Publisher {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := kafkaqueue.NewPublisher(ctx, kafkaqueue.Config{Brokers: env.brokers, Topic: topic}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func (env kafkaEnv) consumer(t *testing.T, topic, group string) *kafkaqueue.Consumer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := kafkaqueue.NewConsumer(ctx, kafkaqueue.Config{Brokers: env.brokers, Topic: topic, Group: group, FetchMaxWait: env.fetchMaxWait}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// kafkaRig is a service publishing to a Kafka topic, over a recording memory adapter.
type kafkaRig struct {
	env                    kafkaEnv
	topic, dlqTopic, group string
	rec                    *recording
	svc                    *store.Service
	dlq                    *kafkaqueue.Publisher
}

func newKafkaRig(t *testing.T, env kafkaEnv, adapter store.Adapter) *kafkaRig {
	r := &kafkaRig{env: env, topic: uniqueName("worker-in"), dlqTopic: uniqueName("worker-dlq"), group: uniqueName("worker")}
	env.createTopic(t, r.topic, 4)
	env.createTopic(t, r.dlqTopic, 1)
	if adapter == nil {
		r.rec = &recording{Store: memstore.New(), seqs: map[store.Address][]int{}}
		adapter = r.rec
	}
	var err error
	r.svc, err = store.New(map[string]store.Adapter{"m": adapter}, &store.Options{
		Merger: testMerger, Queues: map[string]store.Queue{"m": accepted.NewPublisher(env.publisher(t, r.topic))}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.svc.Close(context.Background()) })
	r.dlq = env.publisher(t, r.dlqTopic)
	return r
}

// run starts a worker on a new consumer of the group. kill ends it abruptly (its consumer
// commits nothing more and is closed); stop ends it gracefully and returns Run's error.
func (r *kafkaRig) run(t *testing.T, applier worker.Applier) (kill func(), stop func() error) {
	c := r.env.consumer(t, r.topic, r.group)
	m := &mortal{Consumer: c}
	w, err := worker.New("m", m, applier, r.dlq, &worker.Options{BackoffBase: time.Millisecond, BackoffMax: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	kill = func() {
		once.Do(func() {
			m.dead.Store(true)
			cancel()
			<-done
			_ = c.Close()
		})
	}
	stop = func() error {
		var err error
		once.Do(func() {
			if err = w.Stop(context.Background()); err == nil {
				err = <-done
			}
			cancel()
			_ = c.Close()
		})
		return err
	}
	t.Cleanup(kill)
	return kill, stop
}

// waitFor polls cond until it holds; the deadline only guards against a hang.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// putsPlan accepts puts with increasing seqs on keys and remembers them.
type putsPlan struct {
	seq  int
	sent map[string][]int
}

func (p *putsPlan) accept(t *testing.T, svc *store.Service, keys, requests int) {
	t.Helper()
	for range requests {
		var ops []store.Op
		for range 20 {
			p.seq++
			k := fmt.Sprint("k", p.seq*7919%keys)
			p.sent[k] = append(p.sent[k], p.seq)
			ops = append(ops, store.Put(key(k), jsonDoc(t, counter{Seq: p.seq})))
		}
		res, err := svc.Do(context.Background(), ops, store.ReturnAccepted)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range res {
			if x.Outcome != store.Accepted {
				t.Fatalf("accepted-mode put on Kafka: %+v", x)
			}
		}
	}
}

// lastApplied reports whether every key's last put reached the adapter.
func (p *putsPlan) lastApplied(rec *recording) bool {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for k, seqs := range p.sent {
		got := rec.seqs[key(k)]
		if len(got) == 0 || got[len(got)-1] != seqs[len(seqs)-1] {
			return false
		}
	}
	return true
}

// TestWorkerDeadLetterAndOrderOnKafka runs the worker on kafkaqueue: accepted → applied in
// per-key order across four partitions, while poison records (undecodable, and a merge whose
// program fails) end in the dead-letter topic with their headers and the records after them,
// on the same keys and partitions, are applied.
func TestWorkerDeadLetterAndOrderOnKafka(t *testing.T) {
	forEachKafka(t, func(t *testing.T, env kafkaEnv) {
		r := newKafkaRig(t, env, nil)
		plan := &putsPlan{sent: map[string][]int{}}
		const keys = 60

		plan.accept(t, r.svc, keys, 10)
		raw := env.publisher(t, r.topic)
		if err := raw.Publish(context.Background(), []queue.Message{{Key: accepted.MessageKey(key("k1")), Value: []byte("not a record")}}); err != nil {
			t.Fatal(err)
		}
		res, err := r.svc.Do(context.Background(), []store.Op{store.Merge(key("k1"), progFail, jsonDoc(t, counter{N: 1}))}, store.ReturnAccepted)
		if err != nil || res[0].Outcome != store.Accepted {
			t.Fatal(err, res)
		}
		plan.accept(t, r.svc, keys, 5) // after the poison, on the same keys and partitions
		_, stop := r.run(t, r.svc)
		waitFor(t, "every put applied", func() bool { return plan.lastApplied(r.rec) })
		if err := stop(); err != nil {
			t.Fatalf("Run after Stop: %v", err)
		}
		r.rec.mu.Lock()
		for k, sent := range plan.sent {
			if got := r.rec.seqs[key(k)]; !slices.Equal(got, sent) {
				t.Errorf("%s: puts applied as %v, accepted as %v", k, got, sent)
			}
		}
		r.rec.mu.Unlock()

		dc := env.consumer(t, r.dlqTopic, uniqueName("dlq-reader"))
		var dead []queue.Message
		waitFor(t, "two dead letters", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			msgs, _ := dc.Fetch(ctx)
			dead = append(dead, msgs...)
			return len(dead) >= 2
		})
		reasons := []string{header(dead[0], worker.HeaderReason), header(dead[1], worker.HeaderReason)}
		slices.Sort(reasons)
		if !slices.Equal(reasons, []string{worker.ReasonFailed, worker.ReasonMalformed}) || len(dead) != 2 {
			t.Fatalf("dead letters with reasons %v (%d), want one failed and one malformed", reasons, len(dead))
		}
		for _, d := range dead {
			if header(d, worker.HeaderTopic) != r.topic || header(d, worker.HeaderOffset) == "" || header(d, worker.HeaderErrorKind) != "invalid" {
				t.Errorf("dead letter headers %q", d.Headers)
			}
		}
	})
}

// TestWorkerCrashOnKafka kills a worker in the middle of its backlog -- its consumer commits
// nothing more and leaves the group -- and starts another of the group: every accepted put is
// applied at least once, the last one of each record last. The first worker is slowed down
// so that the kill lands with fetched records unfinished.
func TestWorkerCrashOnKafka(t *testing.T) {
	forEachKafka(t, func(t *testing.T, env kafkaEnv) {
		r := newKafkaRig(t, env, nil)
		plan := &putsPlan{sent: map[string][]int{}}
		const keys = 60
		applied := func() int {
			r.rec.mu.Lock()
			defer r.rec.mu.Unlock()
			n := 0
			for _, s := range r.rec.seqs {
				n += len(s)
			}
			return n
		}
		plan.accept(t, r.svc, keys, 30)
		kill, _ := r.run(t, slowApplier{r.svc, 20 * time.Millisecond})
		waitFor(t, "the first worker to apply some puts", func() bool { return applied() > 50 })
		kill()
		killedAt := applied()
		if plan.lastApplied(r.rec) {
			t.Log("the first worker finished before it was killed: the crash tested nothing")
		}
		_, stop := r.run(t, r.svc)
		waitFor(t, "every put applied after the crash", func() bool { return plan.lastApplied(r.rec) })
		if err := stop(); err != nil {
			t.Fatalf("Run after Stop: %v", err)
		}
		r.rec.mu.Lock()
		defer r.rec.mu.Unlock()
		redelivered := 0
		for k, sent := range plan.sent {
			redelivered += len(r.rec.seqs[key(k)]) - len(sent)
			applied := map[int]bool{}
			for _, s := range r.rec.seqs[key(k)] {
				applied[s] = true
			}
			for _, s := range sent {
				if !applied[s] {
					t.Errorf("%s: put %d was accepted and never applied", k, s)
				}
			}
		}
		t.Logf("killed after %d of the new puts; %d puts applied again after the restart", killedAt, redelivered)
	})
}

// slowApplier delays every Apply call.
type slowApplier struct {
	worker.Applier
	delay time.Duration
}

func (s slowApplier) ApplyInOrder(ctx context.Context, recs []store.QueuedOp) ([]store.Result, error) {
	time.Sleep(s.delay)
	return s.Applier.ApplyInOrder(ctx, recs)
}
