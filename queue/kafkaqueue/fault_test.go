package kafkaqueue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/queue"
	"github.com/tributary-dev/tributary/queue/kafkaqueue"
	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/accepted"
	"github.com/tributary-dev/tributary/store/memstore"
)

// hungBound is the DeliveryTimeout of TestFaultHungBroker, and hungWithin how long it waits for
// any write: far beyond the bound, so only a write that does not answer at all fails it.
const (
	hungBound  = 5 * time.Second
	hungWithin = 60 * time.Second
)

// writeResult is one write of TestFaultHungBroker: the key it published and its error.
type writeResult struct {
	key []byte
	err error
}

// TestFaultHungBroker SIGSTOPs the Kafka broker (testenv pause: the process hangs, its
// sockets stay open, as on a frozen host) under accepted-mode writes, through a Publisher and
// through a store.Service, in two waves over more than twice the DeliveryTimeout. Every write
// answers, and none succeeds while the broker is stopped: each fails retryably with
// OutcomeUnknown (store.ErrOutcomeUnknown) -- the writes sent on the live connection at
// least -- or Unavailable (not sent). A publisher closes while the broker hangs. Once the
// broker is continued, publishing recovers, and no message reported Unavailable is in the
// topic (Unavailable promises it was not written); the unknown ones that were are counted.
func TestFaultHungBroker(t *testing.T) {
	srv := testenv.RequireFaults(t)
	brokers := strings.Split(testenv.Require(t, testenv.KafkaBrokers), ",")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	adm := admin(t, brokers)
	topic := uniqueName("fault-hung")
	createTopic(ctx, t, adm, topic, 4)
	cfg := kafkaqueue.Config{Brokers: brokers, Topic: topic, DeliveryTimeout: hungBound}
	pub, err := kafkaqueue.NewPublisher(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	closing, err := kafkaqueue.NewPublisher(ctx, cfg, nil) // closed while the broker hangs
	if err != nil {
		t.Fatal(err)
	}
	svc, err := store.New(map[string]store.Adapter{"kq": memstore.New()}, &store.Options{Queues: map[string]store.Queue{"kq": accepted.NewPublisher(pub)}})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close(context.Background())

	// Warm every partition's connection path: the first wave then goes out on live
	// connections to the stopped broker. A new topic may refuse produces for a few seconds
	// (Unavailable, within the bound): retry until it takes them.
	for _, p := range []*kafkaqueue.Publisher{pub, closing} {
		publishUntilAccepted(ctx, t, p, "before the fault", msg("warm-a", "w"), msg("warm-b", "w"), msg("warm-c", "w"), msg("warm-d", "w"))
	}

	srv.Run("pause", "kafka")
	paused := true
	resume := func() {
		if paused {
			paused = false
			srv.Run("resume", "kafka")
		}
	}
	t.Cleanup(resume)

	var all []writeResult
	unknown := 0
	for wave := range 2 {
		results := hungWave(ctx, t, pub, closing, svc, wave)
		for _, r := range results {
			switch {
			case r.err == nil:
				t.Fatalf("wave %d: the write of %q succeeded while the broker was stopped", wave, r.key)
			case errors.Is(r.err, store.ErrOutcomeUnknown) || queue.KindOf(r.err) == queue.OutcomeUnknown:
				unknown++
			case errors.Is(r.err, store.ErrUnavailable) || queue.KindOf(r.err) == queue.Unavailable:
			default:
				t.Fatalf("wave %d: the write of %q failed with %v, want outcome unknown or unavailable", wave, r.key, r.err)
			}
			if !store.KindOf(r.err).Retryable() && !queue.Retryable(r.err) {
				t.Fatalf("wave %d: the write of %q failed unretryably: %v", wave, r.key, r.err)
			}
		}
		if wave == 0 && unknown == 0 {
			t.Fatalf("no write sent on a live connection to the stopped broker came back of unknown outcome: %v", results)
		}
		all = append(all, results...)
	}
	t.Logf("while stopped: %d writes, %d of unknown outcome", len(all), unknown)

	closed := make(chan struct{})
	go func() { closing.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(hungWithin):
		t.Fatalf("Close did not return within %s while the broker was stopped", hungWithin)
	}

	resume()
	publishUntilAccepted(ctx, t, pub, "after the broker was continued", msg("after", "a"))
	// The Service's write may still meet a partition without a leader: again while it
	// fails retryably, for at most two minutes.
	for deadline := time.Now().Add(2 * time.Minute); ; {
		res, err := svc.Do(ctx, []store.Op{store.Put(svcAddr("after"), store.Document{JSON: []byte(`{"n":1}`)})}, store.ReturnAccepted)
		if err == nil && res[0].Err == nil {
			break
		}
		if err != nil || !store.KindOf(res[0].Err).Retryable() || time.Now().After(deadline) {
			t.Fatalf("an accepted-mode write after the broker was continued: %v %v", err, res)
		}
		time.Sleep(200 * time.Millisecond)
	}

	written := topicKeys(ctx, t, adm, brokers, topic)
	landed := 0
	for _, r := range all {
		switch n := written[string(r.key)]; {
		case n > 0 && (errors.Is(r.err, store.ErrUnavailable) || queue.KindOf(r.err) == queue.Unavailable):
			t.Errorf("%q was reported not written (%v) but is in the topic", r.key, r.err)
		case n > 0:
			landed++
		}
	}
	t.Logf("after the broker was continued: %d of the %d writes of unknown outcome are in the topic", landed, unknown)
}

// publishUntilAccepted publishes msgs again while Publish fails retryably, for at most two
// minutes.
func publishUntilAccepted(ctx context.Context, t *testing.T, p *kafkaqueue.Publisher, when string, msgs ...queue.Message) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := p.Publish(ctx, msgs)
		if err == nil {
			return
		}
		if !queue.Retryable(err) || time.Now().After(deadline) {
			t.Fatalf("publishing %s: %v", when, err)
		}
	}
}

func svcAddr(key string) store.Address {
	return store.Address{Store: "kq", Namespace: "ns", Dataset: "ds", Key: store.StringKey(key)}
}

// hungWave runs one wave of concurrent writes against the stopped broker: four Publish calls
// (two messages each), four accepted-mode Service writes and one Publish on closing; each must
// answer within hungWithin.
func hungWave(ctx context.Context, t *testing.T, pub, closing *kafkaqueue.Publisher, svc *store.Service, wave int) []writeResult {
	t.Helper()
	var (
		mu      sync.Mutex
		results []writeResult
		wg      sync.WaitGroup
	)
	add := func(r writeResult) { mu.Lock(); results = append(results, r); mu.Unlock() }
	publish := func(p *kafkaqueue.Publisher, name string) {
		defer wg.Done()
		msgs := []queue.Message{msg(name+"-1", "v"), msg(name+"-2", "v")}
		err := p.Publish(ctx, msgs)
		for i, m := range msgs {
			e := err
			if pe, ok := errors.AsType[*queue.PublishError](err); ok {
				e = pe.Errs[i]
			}
			add(writeResult{key: m.Key, err: e})
		}
	}
	for i := range 4 {
		wg.Add(2)
		go publish(pub, fmt.Sprintf("raw-%d-%d", wave, i))
		go func() {
			defer wg.Done()
			a := svcAddr(fmt.Sprintf("svc-%d-%d", wave, i))
			res, err := svc.Do(ctx, []store.Op{store.Put(a, store.Document{JSON: []byte(`{"n":1}`)})}, store.ReturnAccepted)
			if err != nil {
				t.Errorf("Do: %v", err)
				return
			}
			add(writeResult{key: accepted.MessageKey(a), err: res[0].Err})
		}()
	}
	if wave == 0 {
		wg.Add(1)
		go publish(closing, fmt.Sprintf("closing-%d", wave))
	}
	start := time.Now()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(hungWithin):
		t.Fatalf("wave %d: writes had not answered %s after they started (DeliveryTimeout %s)", wave, hungWithin, hungBound)
	}
	t.Logf("wave %d: every write answered after %s (DeliveryTimeout %s)", wave, time.Since(start).Round(time.Millisecond), hungBound)
	return results
}

// topicKeys reads topic whole and counts the messages of each key.
func topicKeys(ctx context.Context, t *testing.T, adm *kadm.Client, brokers []string, topic string) map[string]int {
	t.Helper()
	ends := endOffsets(ctx, t, adm, topic)
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	keys := map[string]int{}
	for len(left) > 0 {
		fs := cl.PollFetches(rctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("reading %s back: %v", topic, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			keys[string(r.Key)]++
			if end, ok := left[r.Partition]; ok && r.Offset+1 >= end {
				delete(left, r.Partition)
			}
		})
	}
	return keys
}

// endOffsets lists topic's end offsets, again while a partition answers with a retriable
// error, for at most two minutes: a broker that was just continued (or restarted) may still be
// electing leaders -- its controller fenced it while it was stopped -- and answers
// LEADER_NOT_AVAILABLE for a partition whose produce a moment before went to another.
func endOffsets(ctx context.Context, t *testing.T, adm *kadm.Client, topic string) kadm.ListedOffsets {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		if err == nil {
			return ends
		}
		if !kerr.IsRetriable(err) || time.Now().After(deadline) {
			t.Fatalf("end offsets of %s: %v", topic, err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("end offsets of %s: %v (last: %v)", topic, ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func msg(key, value string) queue.Message {
	return queue.Message{Key: []byte(key), Value: []byte(value)}
}
