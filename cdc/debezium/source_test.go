package debezium

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/queue"
)

// fakeConsumer serves fixed records in fetches of up to batch, and records what was finished
// and committed: the committed offset of a partition is one past its finished prefix.
type fakeConsumer struct {
	mu        sync.Mutex
	msgs      []queue.Message
	batch     int
	finished  map[int64]bool // by offset (one topic-partition per test)
	committed int64          // next offset to read after a restart
	commits   int
	failFetch error
	closed    bool
}

func (f *fakeConsumer) Fetch(ctx context.Context) ([]queue.Message, error) {
	f.mu.Lock()
	if f.failFetch != nil {
		err := f.failFetch
		f.mu.Unlock()
		return nil, err
	}
	if len(f.msgs) > 0 {
		n := min(f.batch, len(f.msgs))
		out := f.msgs[:n]
		f.msgs = f.msgs[n:]
		f.mu.Unlock()
		return out, nil
	}
	f.mu.Unlock()
	<-ctx.Done()
	return nil, ctx.Err()
}

func (f *fakeConsumer) Finish(msgs ...queue.Message) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range msgs {
		f.finished[m.Offset] = true
	}
}

func (f *fakeConsumer) Commit(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.finished[f.committed] {
		f.committed++
	}
	f.commits++
	return nil
}

func (f *fakeConsumer) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

func (f *fakeConsumer) offset() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.committed
}

func newFake(t *testing.T, file string, batch int) *fakeConsumer {
	f := &fakeConsumer{batch: batch, finished: map[int64]bool{}}
	for _, r := range fixture(t, file) {
		f.msgs = append(f.msgs, queue.Message{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value})
	}
	return f
}

func openFake(t *testing.T, f *fakeConsumer, opts *Options) cdc.Stream {
	t.Helper()
	src, err := New(func(context.Context) (queue.Consumer, error) { return f, nil }, opts)
	if err != nil {
		t.Fatal(err)
	}
	st, err := src.Open(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func next(t *testing.T, st cdc.Stream) cdc.Event {
	t.Helper()
	select {
	case ev, ok := <-st.Events():
		if !ok {
			t.Fatalf("events closed: %v", st.Err())
		}
		return ev
	case <-time.After(30 * time.Second):
		t.Fatal("no event within 30s")
	}
	return cdc.Event{}
}

// Offsets move only past acknowledged events: an event's acknowledgement commits it and the
// records without events before it, never a later one.
func TestStreamCommitsOnlyAcknowledged(t *testing.T) {
	f := newFake(t, "mariadb-3.5.0.jsonl", 3)
	st := openFake(t, f, &Options{InferTypes: true})
	var evs []cdc.Event
	for range 8 { // the 8 events of the file (2 reads, update, insert, delete, insert, delete, truncate)
		evs = append(evs, next(t, st))
	}
	if f.offset() != 0 {
		t.Fatalf("committed %d before any ack", f.offset())
	}
	ctx := context.Background()
	if err := st.Ack(ctx, evs[3].Checkpoint); err != nil { // the insert at offset 3
		t.Fatal(err)
	}
	if got := f.offset(); got != 4 {
		t.Fatalf("committed %d after acknowledging offset 3, want 4", got)
	}
	// The delete at 4; its tombstone (5) ends that fetch ([3,4,5]) and goes with it.
	if err := st.Ack(ctx, evs[4].Checkpoint); err != nil {
		t.Fatal(err)
	}
	if got := f.offset(); got != 6 {
		t.Fatalf("committed %d, want 6", got)
	}
	// A checkpoint of another stream is ignored.
	if err := st.Ack(ctx, cdc.Checkpoint("debezium1:0000000000000000:99")); err != nil || f.offset() != 6 {
		t.Fatalf("foreign checkpoint: %v, committed %d", err, f.offset())
	}
	if err := st.Ack(ctx, evs[7].Checkpoint); err != nil {
		t.Fatal(err)
	}
	// The truncate at 9; the transaction records after it (10..16) carry no event and nothing
	// was pending when they arrived, or they went with the truncate: either way all is committed.
	deadline := time.Now().Add(30 * time.Second)
	for f.offset() != 17 {
		if time.Now().After(deadline) {
			t.Fatalf("committed %d, want 17 (everything)", f.offset())
		}
		time.Sleep(10 * time.Millisecond)
	}
	seen := map[string]bool{}
	for _, ev := range evs {
		if seen[string(ev.Checkpoint)] {
			t.Fatalf("checkpoint %s twice", ev.Checkpoint)
		}
		seen[string(ev.Checkpoint)] = true
	}
}

// A table whose events lack source types stops the stream with a permanent error; a queue
// that refuses the configuration too; one out of reach is retried by the runner.
func TestStreamFailures(t *testing.T) {
	f := newFake(t, "postgres-3.6.1.jsonl", 100)
	st := openFake(t, f, nil)
	for range st.Events() {
		t.Fatal("an event from a table without source types")
	}
	if err := st.Err(); !cdc.IsPermanent(err) || !errors.Is(err, errNoSourceTypes) {
		t.Fatalf("err %v, want a permanent one naming the missing source types", err)
	}
	if f.offset() != 0 {
		t.Fatalf("committed %d", f.offset())
	}

	for _, tc := range []struct {
		kind      queue.Kind
		permanent bool
	}{{queue.Unavailable, false}, {queue.NotFound, false}, {queue.Invalid, true}, {queue.Denied, true}} {
		f := &fakeConsumer{finished: map[int64]bool{}, failFetch: &queue.Error{Kind: tc.kind, Queue: "t", Err: errors.New("x")}}
		st := openFake(t, f, nil)
		for range st.Events() {
		}
		if err := st.Err(); err == nil || cdc.IsPermanent(err) != tc.permanent {
			t.Errorf("%v: err %v, permanent %v", tc.kind, err, cdc.IsPermanent(err))
		}
	}
}

// Close ends the stream without an error and closes the consumer; Ack after it says so.
func TestStreamClose(t *testing.T) {
	f := newFake(t, "mariadb-3.5.0.jsonl", 1)
	st := openFake(t, f, &Options{InferTypes: true, Buffer: 1})
	ev := next(t, st)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	for range st.Events() {
	}
	if st.Err() != nil || !f.closed {
		t.Fatalf("err %v closed %v", st.Err(), f.closed)
	}
	if err := st.Ack(context.Background(), ev.Checkpoint); !errors.Is(err, cdc.ErrSourceClosed) {
		t.Fatalf("ack after close: %v", err)
	}
	if !slices.Equal([]int64{f.offset()}, []int64{0}) {
		t.Fatalf("committed %d", f.offset())
	}
}

// With Options.Lag the source reports the group's lag on its own axis; without, it is no
// LagReporter.
func TestSourceLag(t *testing.T) {
	consumers := func(context.Context) (queue.Consumer, error) { return nil, errors.New("unused") }
	plain, err := New(consumers, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := plain.(cdc.LagReporter); ok {
		t.Fatal("a source without Options.Lag reports lag")
	}
	src, err := New(consumers, &Options{Lag: func(context.Context) (int64, int64, error) { return 120, 100, nil }})
	if err != nil {
		t.Fatal(err)
	}
	l, err := src.(cdc.LagReporter).Lag(context.Background(), nil)
	if err != nil || l.Head != 120 || l.Applied != 100 || l.Bytes != 20 || l.Retained != -1 {
		t.Fatalf("lag %+v, %v", l, err)
	}
	failing, _ := New(consumers, &Options{Lag: func(context.Context) (int64, int64, error) { return 0, 0, errors.New("down") }})
	if _, err := failing.(cdc.LagReporter).Lag(context.Background(), nil); err == nil {
		t.Fatal("a failed measurement reported no error")
	}
}

// A large fetch is decoded partition by partition in parallel; events still leave in fetch
// order, so every partition's records keep their order.
func TestStreamParallelDecodeKeepsOrder(t *testing.T) {
	recs := fixture(t, "mariadb-3.5.0.jsonl")
	f := &fakeConsumer{batch: 1000, finished: map[int64]bool{}}
	var want []string
	for round := range 20 {
		for p := int32(0); p < 3; p++ {
			for _, r := range recs[2:4] { // an update and an insert
				off := int64(len(f.msgs))
				f.msgs = append(f.msgs, queue.Message{Topic: r.Topic, Partition: p, Offset: off, Key: r.Key, Value: r.Value})
				want = append(want, fmt.Sprintf("%d@%d", p, off))
			}
		}
		_ = round
	}
	st := openFake(t, f, &Options{InferTypes: true})
	for i, w := range want {
		ev := next(t, st)
		pos := ev.Position.(Position)
		if got := fmt.Sprintf("%d@%d", pos.Partition, pos.Offset); got != w {
			t.Fatalf("event %d: %s, want %s (fetch order)", i, got, w)
		}
	}
}
