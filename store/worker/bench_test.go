package worker_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-dev/tributary/queue"
	"github.com/tributary-dev/tributary/queue/memqueue"
	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/accepted"
	"github.com/tributary-dev/tributary/store/memstore"
	"github.com/tributary-dev/tributary/store/worker"
)

// benchOps returns n operations, half puts and half merges, over 4096 records.
func benchOps(b *testing.B, n int) []store.Op { return benchOpsFrom(b, 0, n) }

// benchOpsFrom returns operations from..from+n-1 of the sequence benchOps starts.
func benchOpsFrom(b *testing.B, from, n int) []store.Op {
	ops := make([]store.Op, n)
	for j := range ops {
		i := from + j
		a := key(fmt.Sprint("k", i%4096))
		if i%2 == 0 {
			ops[j] = store.Put(a, jsonDoc(b, counter{N: i, Seq: i}))
		} else {
			ops[j] = store.Merge(a, progAdd, jsonDoc(b, counter{N: 1}))
		}
	}
	return ops
}

const benchBatch = 500 // memqueue's default fetch size: both paths see batches of this size

// doneAt signals once the worker has reported n applied records.
type doneAt struct {
	mu      sync.Mutex
	applied int
	n       int
	done    chan struct{}
}

func (d *doneAt) FetchDone(s worker.FetchStats) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.applied += s.Applied
	if d.applied >= d.n && d.done != nil {
		close(d.done)
		d.done = nil
	}
}

// timedApplier sums the time spent in Apply, to show how much of the worker's time is the
// synchronous path itself.
type timedApplier struct {
	worker.Applier
	ns atomic.Int64
}

func (t *timedApplier) ApplyInOrder(ctx context.Context, recs []store.QueuedOp) ([]store.Result, error) {
	s := time.Now()
	r, err := t.Applier.ApplyInOrder(ctx, recs)
	t.ns.Add(int64(time.Since(s)))
	return r, err
}

// gatedConsumer holds Fetch until open is closed, so a worker can be started before the clock
// and meet its records only once it runs.
type gatedConsumer struct {
	queue.Consumer
	open chan struct{}
}

func (g gatedConsumer) Fetch(ctx context.Context) ([]queue.Message, error) {
	select {
	case <-g.open:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.Consumer.Fetch(ctx)
}

// BenchmarkWorkerVsSync applies the same b.N operations twice, side by side: through
// Service.Do with WaitApplied in batches of 500, and as accepted-mode records that a worker
// fetches 500 at a time, decodes and applies. Both run on memstore, so the worker's own costs
// (fetch, decode, waves, finish, commit) are all the difference. It reports each path's ns per
// operation, worker-rate/sync-rate (goal >= 0.8) and apply-ns/op, the part of the worker's
// time spent inside Service.Apply.
//
// The two alternate in chunks of 10000 operations, so both see the same machine conditions,
// and take turns going first, so neither always inherits the other's warm caches. Each chunk
// is published to a broker of its own (not timed); then each path, after a garbage collection
// that is not timed (so neither pays for garbage the other or the publishing left), applies
// the chunk: the sync path in Do calls, the worker from the moment its consumer's gate opens
// (the worker is started, idle, before the clock) until the observer counted the chunk. The
// first fetch of a chunk is decoded while nothing is applied, as after any idle spell. The
// operations, too, are made per chunk: b.N of them held at once would make every garbage
// collection scan them, and so charge the path that allocates more for the benchmark's own
// heap rather than for its garbage.
func BenchmarkWorkerVsSync(b *testing.B) {
	const chunk = 20 * benchBatch
	newSvc := func(queues map[string]store.Queue) *store.Service {
		s, err := store.New(map[string]store.Adapter{"m": memstore.New()}, &store.Options{Merger: testMerger, Queues: queues})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close(context.Background()) })
		return s
	}
	ctx := context.Background()
	syncSvc, applier := newSvc(nil), newSvc(nil)
	ta := &timedApplier{Applier: applier}

	b.ResetTimer()
	var syncTime, workerTime time.Duration
	for c := 0; c < b.N; c += chunk {
		b.StopTimer()
		part := benchOpsFrom(b, c, min(chunk, b.N-c))
		// A broker per chunk: memqueue keeps every message, and a history of b.N messages
		// would make each garbage collection, hence the worker's allocations, cost more than
		// a Kafka consumer's, which holds only its fetches.
		br := memqueue.New(&memqueue.Options{Partitions: 4, MaxFetch: benchBatch})
		pub, _ := br.Publisher(topic)
		dlq, _ := br.Publisher(dlqTopic)
		producer, err := store.New(map[string]store.Adapter{"m": memstore.New()}, &store.Options{Merger: testMerger, Queues: map[string]store.Queue{"m": accepted.NewPublisher(pub)}})
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < len(part); i += 1000 {
			res, err := producer.Do(ctx, part[i:min(i+1000, len(part))], store.ReturnAccepted)
			if err != nil {
				b.Fatal(err)
			}
			if res[0].Err != nil {
				b.Fatal(res[0].Err)
			}
		}
		consumer, _ := br.Consumer(topic, group)
		obs := &doneAt{n: len(part), done: make(chan struct{})}
		finished := obs.done
		gate := gatedConsumer{Consumer: consumer, open: make(chan struct{})}
		w, err := worker.New("m", gate, ta, dlq, &worker.Options{Observer: obs})
		if err != nil {
			b.Fatal(err)
		}
		runDone := make(chan error, 1)
		go func() { runDone <- w.Run(ctx) }()

		syncPart := func() {
			runtime.GC()
			b.StartTimer()
			start := time.Now()
			for i := 0; i < len(part); i += benchBatch {
				res, err := syncSvc.Do(ctx, part[i:min(i+benchBatch, len(part))], store.WaitApplied)
				if err != nil {
					b.Fatal(err)
				}
				if res[0].Err != nil {
					b.Fatal(res[0].Err)
				}
			}
			syncTime += time.Since(start)
			b.StopTimer()
		}
		workerPart := func() {
			runtime.GC()
			b.StartTimer()
			start := time.Now()
			close(gate.open)
			<-finished
			workerTime += time.Since(start)
			b.StopTimer()
		}
		if c/chunk%2 == 0 {
			syncPart()
			workerPart()
		} else {
			workerPart()
			syncPart()
		}

		if err := w.Stop(ctx); err != nil {
			b.Fatal(err)
		}
		if err := <-runDone; err != nil {
			b.Fatal(err)
		}
		_ = consumer.Close()
		_ = producer.Close(ctx)
		if n := len(br.Messages(dlqTopic)); n != 0 {
			b.Fatalf("%d dead letters", n)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(syncTime.Nanoseconds())/n, "sync-ns/op")
	b.ReportMetric(float64(workerTime.Nanoseconds())/n, "worker-ns/op")
	b.ReportMetric(syncTime.Seconds()/workerTime.Seconds(), "worker/sync-rate")
	b.ReportMetric(float64(ta.ns.Load())/n, "apply-ns/op")
}

// BenchmarkAcceptedVsRawPublish publishes the same b.N operations side by side: through
// Service.Do in accepted mode (validation, record encoding, one Publish per 128 operations),
// alternating batch by batch with the identical messages, encoded beforehand, published
// straight to memqueue. It reports each path's ns per operation and raw-time/accepted-time:
// the share of a publish the store's own work leaves (on memqueue, where publishing costs
// almost nothing, this is a floor; a real broker's round trip dilutes the store's cost).
//
// Operations, messages and brokers are made per chunk of 10000 operations, outside the
// clock, and a garbage collection precedes each chunk: memqueue keeps every message, and a
// heap holding b.N of them would make each collection, hence the allocating path, cost more
// the longer the benchmark runs.
func BenchmarkAcceptedVsRawPublish(b *testing.B) {
	const batch, chunk = 128, 10000
	ctx := context.Background()
	b.ResetTimer()
	var accTime, rawTime time.Duration
	for c := 0; c < b.N; c += chunk {
		b.StopTimer()
		ops := benchOpsFrom(b, c, min(chunk, b.N-c))
		accBroker, rawBroker := memqueue.New(nil), memqueue.New(nil)
		accPub, _ := accBroker.Publisher(topic)
		rawPub, _ := rawBroker.Publisher(topic)
		svc, err := store.New(map[string]store.Adapter{"m": memstore.New()}, &store.Options{Merger: testMerger, Queues: map[string]store.Queue{"m": accepted.NewPublisher(accPub)}})
		if err != nil {
			b.Fatal(err)
		}
		msgs := make([]queue.Message, len(ops))
		for i, op := range ops {
			hash := ""
			if op.Kind == store.OpMerge {
				hash = accepted.ProgramHash(op.Program)
			}
			msgs[i] = queue.Message{Key: accepted.MessageKey(op.Addr),
				Value: accepted.Append(nil, &accepted.Record{RequestID: "00112233445566778899aabbccddeeff", Index: i % batch, AcceptedAt: time.Now(), Op: op}, hash)}
		}
		runtime.GC()
		b.StartTimer()

		// The two paths alternate batch by batch, so both see the same machine conditions.
		for i := 0; i < len(ops); i += batch {
			j := min(i+batch, len(ops))
			start := time.Now()
			res, err := svc.Do(ctx, ops[i:j], store.ReturnAccepted)
			if err != nil {
				b.Fatal(err)
			}
			if res[0].Err != nil {
				b.Fatal(res[0].Err)
			}
			accTime += time.Since(start)
			start = time.Now()
			if err := rawPub.Publish(ctx, msgs[i:j]); err != nil {
				b.Fatal(err)
			}
			rawTime += time.Since(start)
		}
		b.StopTimer()
		_ = svc.Close(ctx)
	}
	n := float64(b.N)
	b.ReportMetric(float64(accTime.Nanoseconds())/n, "accepted-ns/op")
	b.ReportMetric(float64(rawTime.Nanoseconds())/n, "raw-ns/op")
	b.ReportMetric(rawTime.Seconds()/accTime.Seconds(), "accepted/raw-rate")
}

// BenchmarkAcceptedVsRawProduceKafka is the publish benchmark on the real broker
// (TRIBUTARY_KAFKA_BROKERS): the same b.N operations side by side, through Service.Do in
// accepted mode (kafkaqueue, one Publish per 128 operations) and as the identical records,
// encoded beforehand, produced with franz-go directly (ProduceSync of 128 records, acks=all,
// idempotent: franz-go's defaults, as kafkaqueue uses them). It reports
// accepted/raw-rate (goal >= 0.7).
func BenchmarkAcceptedVsRawProduceKafka(b *testing.B) {
	env := realKafka(b)
	const batch = 128
	ops := benchOps(b, b.N)
	ctx := context.Background()
	accTopic, rawTopic := uniqueName("bench-acc"), uniqueName("bench-raw")
	env.createTopic(b, accTopic, 4)
	env.createTopic(b, rawTopic, 4)
	svc, err := store.New(map[string]store.Adapter{"m": memstore.New()}, &store.Options{Merger: testMerger,
		Queues: map[string]store.Queue{"m": accepted.NewPublisher(env.publisher(b, accTopic))}})
	if err != nil {
		b.Fatal(err)
	}
	defer svc.Close(ctx)
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.brokers...), kgo.DefaultProduceTopic(rawTopic))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, len(ops))
	for i, op := range ops {
		hash := ""
		if op.Kind == store.OpMerge {
			hash = accepted.ProgramHash(op.Program)
		}
		recs[i] = &kgo.Record{Key: accepted.MessageKey(op.Addr),
			Value: accepted.Append(nil, &accepted.Record{RequestID: "00112233445566778899aabbccddeeff", Index: i % batch, AcceptedAt: time.Now(), Op: op}, hash)}
	}
	// Warm both clients up (connections, metadata, producer ids) before the clock starts.
	if _, err := svc.Do(ctx, ops[:1], store.ReturnAccepted); err != nil {
		b.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("{}")}).FirstErr(); err != nil {
		b.Fatal(err)
	}

	// The two paths alternate batch by batch, so both see the same broker conditions.
	b.ResetTimer()
	var accTime, rawTime time.Duration
	for i := 0; i < len(ops); i += batch {
		j := min(i+batch, len(ops))
		start := time.Now()
		res, err := svc.Do(ctx, ops[i:j], store.ReturnAccepted)
		if err != nil {
			b.Fatal(err)
		}
		if res[0].Err != nil {
			b.Fatal(res[0].Err)
		}
		accTime += time.Since(start)
		start = time.Now()
		if err := cl.ProduceSync(ctx, recs[i:j]...).FirstErr(); err != nil {
			b.Fatal(err)
		}
		rawTime += time.Since(start)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(accTime.Nanoseconds())/n, "accepted-ns/op")
	b.ReportMetric(float64(rawTime.Nanoseconds())/n, "raw-ns/op")
	b.ReportMetric(rawTime.Seconds()/accTime.Seconds(), "accepted/raw-rate")
}
