package worker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/queue"
	"github.com/tributary-dev/tributary/queue/memqueue"
	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/accepted"
	"github.com/tributary-dev/tributary/store/worker"
)

// eventLog records what the worker did, in order: "apply" per ApplyInOrder call, "commit"
// per successful commit, "commit-failed" per failed one.
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) add(e string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.events, " ")
}

type loggedConsumer struct {
	queue.Consumer
	log *eventLog
}

func (c loggedConsumer) Commit(ctx context.Context) error {
	err := c.Consumer.Commit(ctx)
	if err != nil {
		c.log.add("commit-failed")
	} else {
		c.log.add("commit")
	}
	return err
}

type loggedApplier struct {
	worker.Applier
	log *eventLog
}

func (a loggedApplier) ApplyInOrder(ctx context.Context, ops []store.QueuedOp) ([]store.Result, error) {
	a.log.add("apply")
	return a.Applier.ApplyInOrder(ctx, ops)
}

// The worker commits after every round, and while a commit fails it retries it and starts no
// further fetch: what is applied and not committed -- applied again after a lost membership --
// never grows beyond the two rounds that may be in flight.
func TestWorkerCommitsEveryRoundAndWaitsForAFailingCommit(t *testing.T) {
	b := memqueue.New(&memqueue.Options{Partitions: 1, MaxFetch: 10})
	r := newRig(t, nil, 1)
	r.b = b
	pub, _ := b.Publisher(topic)
	for i := range 30 {
		op := store.Put(key(fmt.Sprint("k", i)), jsonDoc(t, counter{N: i}))
		if err := pub.Publish(context.Background(), []queue.Message{acceptedMessage(t, op)}); err != nil {
			t.Fatal(err)
		}
	}
	down := &queue.Error{Kind: queue.Unavailable, Queue: topic, Err: errors.New("coordinator away")}
	for range 4 {
		b.FailNext(memqueue.OpCommit, down)
	}
	log := &eventLog{}
	c, _ := b.Consumer(topic, group)
	dlq, _ := b.Publisher(dlqTopic)
	w, err := worker.New("m", loggedConsumer{Consumer: c, log: log}, loggedApplier{Applier: r.svc, log: log}, dlq,
		&worker.Options{BackoffBase: time.Millisecond, BackoffMax: 2 * time.Millisecond, MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	r.waitCommitted(t)
	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Two fetches of different records may be in flight at once; none starts while a commit
	// fails. So at any moment at most two rounds are applied and not committed, and after a
	// commit failed at most the round already started applies before a commit succeeds.
	applied, committed, failed, whileFailing, failing := 0, 0, 0, 0, false
	for _, e := range strings.Fields(log.String()) {
		switch e {
		case "apply":
			applied++
			if failing {
				whileFailing++
			}
		case "commit":
			committed++
			failing = false
		case "commit-failed":
			failed++
			failing = true
		}
		if applied-committed > 2 || whileFailing > 1 {
			t.Fatalf("events %q: more applied than the rounds in flight while commits lag", log)
		}
	}
	if applied != 3 || failed != 4 {
		t.Fatalf("events %q: want 3 rounds and the 4 failed commits", log)
	}
}

// duplicating delivers its first fetch twice, as a consumer does after a lost membership.
type duplicating struct {
	queue.Consumer
	mu    sync.Mutex
	first []queue.Message
	again bool
}

func (d *duplicating) Fetch(ctx context.Context) ([]queue.Message, error) {
	d.mu.Lock()
	if d.first != nil && !d.again {
		d.again = true
		msgs := d.first
		d.mu.Unlock()
		return msgs, nil
	}
	d.mu.Unlock()
	msgs, err := d.Consumer.Fetch(ctx)
	d.mu.Lock()
	if d.first == nil {
		d.first = msgs
	}
	d.mu.Unlock()
	return msgs, err
}

// Records delivered again at or below an offset the worker finished are counted.
func TestWorkerCountsRedeliveries(t *testing.T) {
	r := newRig(t, nil, 1)
	var ops []store.Op
	for i := range 5 {
		ops = append(ops, store.Merge(key("hot"), progAdd, jsonDoc(t, counter{N: 1, Ops: map[string]bool{fmt.Sprint(i): true}})))
	}
	r.accept(t, ops...)
	c, _ := r.b.Consumer(topic, group)
	dlq, _ := r.b.Publisher(dlqTopic)
	obs := &statsLog{}
	w, err := worker.New("m", &duplicating{Consumer: c}, r.svc, dlq, &worker.Options{Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	waitFor(t, "the fetch and its redelivery", func() bool {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		return len(obs.stats) >= 2
	})
	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	obs.mu.Lock()
	first, second := obs.stats[0], obs.stats[1]
	obs.mu.Unlock()
	if first.Redelivered != 0 || second.Redelivered != 5 || second.Records != 5 {
		t.Fatalf("fetches %+v and %+v: want the second's 5 records counted redelivered", first, second)
	}
	// The merges ran twice: what the count tells an operator.
	if got := r.read(t, key("hot")).Doc.JSON; !strings.Contains(string(got), `"n":10`) {
		t.Fatalf("record %s, want n=10 (five merges applied twice)", got)
	}
}

// acceptedMessage is op as the accepted-mode queue carries it (a put or delete: no program).
func acceptedMessage(t testing.TB, op store.Op) queue.Message {
	t.Helper()
	v := accepted.Append(nil, &accepted.Record{RequestID: "00112233445566778899aabbccddeeff", AcceptedAt: time.Now(), Op: op}, "")
	return queue.Message{Key: accepted.MessageKey(op.Addr), Value: v}
}
