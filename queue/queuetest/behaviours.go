package queuetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/queue"
)

func testRoundTrip(ctx context.Context, t *testing.T, e *env) {
	p := e.publisher(ctx)
	c := e.consumer(ctx, e.group("roundtrip"))
	sent := []queue.Message{
		{Key: []byte("alpha"), Value: []byte(`{"v":1}`), Headers: []queue.Header{
			{Key: "h1", Value: []byte("one")}, {Key: "empty"}, {Key: "h1", Value: []byte("again")},
		}},
		{Key: []byte("beta"), Value: []byte{}},
		{Key: []byte("alpha"), Value: []byte{0, 1, 2, 0xff}, Headers: []queue.Header{{Key: "bin", Value: []byte{0, 0xfe}}}},
	}
	publish(ctx, t, p, sent)
	got := fetchN(ctx, t, c, len(sent))
	byValue := map[string]queue.Message{}
	where := map[[2]int64]bool{}
	for _, m := range got {
		byValue[string(m.Value)] = m
		pos := [2]int64{int64(m.Partition), m.Offset}
		if where[pos] {
			t.Fatalf("two messages at partition %d offset %d", m.Partition, m.Offset)
		}
		where[pos] = true
		if m.Topic != e.topic {
			t.Fatalf("message names topic %q, want %q", m.Topic, e.topic)
		}
	}
	for i, s := range sent {
		m, ok := byValue[string(s.Value)]
		if !ok {
			t.Fatalf("message %d was not delivered", i)
		}
		if !bytes.Equal(m.Key, s.Key) {
			t.Fatalf("message %d: key %q, want %q", i, m.Key, s.Key)
		}
		if len(m.Headers) != len(s.Headers) {
			t.Fatalf("message %d: %d headers, want %d", i, len(m.Headers), len(s.Headers))
		}
		for j, h := range s.Headers {
			if m.Headers[j].Key != h.Key || !bytes.Equal(m.Headers[j].Value, h.Value) {
				t.Fatalf("message %d header %d: %q=%q, want %q=%q", i, j, m.Headers[j].Key, m.Headers[j].Value, h.Key, h.Value)
			}
		}
	}
	first, second := byValue[string(sent[0].Value)], byValue[string(sent[2].Value)]
	if first.Partition != second.Partition || first.Offset >= second.Offset {
		t.Fatalf("one key's messages at %d/%d and %d/%d, want one partition in publish order",
			first.Partition, first.Offset, second.Partition, second.Offset)
	}
}

func testPerKeyOrder(ctx context.Context, t *testing.T, e *env) {
	const keys, perKey, batch = 40, 25, 100
	p := e.publisher(ctx)
	var all []queue.Message
	for seq := range perKey {
		for k := range keys {
			all = append(all, item(fmt.Sprintf("key-%d", k), seq))
		}
	}
	for len(all) > 0 {
		n := min(batch, len(all))
		publish(ctx, t, p, all[:n])
		all = all[n:]
	}
	got := fetchN(ctx, e.t, e.consumer(ctx, e.group("order")), keys*perKey)
	partitions := map[int32]bool{}
	lastOffset := map[int32]int64{}
	for _, m := range got {
		if last, ok := lastOffset[m.Partition]; ok && m.Offset <= last {
			t.Fatalf("partition %d: offset %d delivered after %d", m.Partition, m.Offset, last)
		}
		lastOffset[m.Partition] = m.Offset
		partitions[m.Partition] = true
	}
	if len(partitions) < 2 {
		t.Fatalf("%d keys landed in %d partition(s); the suite needs a topic of several partitions", keys, len(partitions))
	}
	for k := range keys {
		key := fmt.Sprintf("key-%d", k)
		sameInts(t, key, seqs(t, got, key), rangeInts(0, perKey))
		var part int32 = -1
		for _, m := range got {
			if string(m.Key) == key {
				if part >= 0 && m.Partition != part {
					t.Fatalf("%s found in partitions %d and %d", key, part, m.Partition)
				}
				part = m.Partition
			}
		}
	}
}

func testGapHoldsCommit(ctx context.Context, t *testing.T, e *env) {
	const n, gap = 10, 3
	p := e.publisher(ctx)
	var msgs []queue.Message
	for i := range n {
		msgs = append(msgs, item("gap", i))
	}
	publish(ctx, t, p, msgs)
	group := e.group("gap")

	first := e.consumer(ctx, group)
	got := fetchN(ctx, t, first, n)
	sameInts(t, "first delivery", seqs(t, got, "gap"), rangeInts(0, n))
	first.Finish(got[:gap]...)
	first.Finish(got[gap+1:]...)
	commit(ctx, t, first)
	if err := first.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	// The unfinished message and everything after it come again; the commit could not pass it.
	second := e.consumer(ctx, group)
	got = fetchN(ctx, t, second, n-gap)
	sameInts(t, "after an unfinished gap", seqs(t, got, "gap"), rangeInts(gap, n))
	second.Finish(got...)
	commit(ctx, t, second)
	if err := second.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	marker := item("gap", 1000)
	publish(ctx, t, p, []queue.Message{marker})
	if got := fetchThrough(ctx, t, e.consumer(ctx, group), marker); len(got) != 0 {
		t.Fatalf("finished and committed messages came again: %v", seqs(t, got, "gap"))
	}
}

func testResume(ctx context.Context, t *testing.T, e *env) {
	const n, committed = 6, 3
	p := e.publisher(ctx)
	var msgs []queue.Message
	for i := range n {
		msgs = append(msgs, item("resume", i))
	}
	publish(ctx, t, p, msgs)
	group := e.group("resume")

	first := e.consumer(ctx, group)
	got := fetchN(ctx, t, first, n)
	first.Finish(got[:committed]...)
	commit(ctx, t, first)
	// Finished but never committed: a crash here must not lose these.
	first.Finish(got[committed:]...)
	if err := first.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	second := e.consumer(ctx, group)
	got = fetchN(ctx, t, second, n-committed)
	sameInts(t, "after Close without Commit", seqs(t, got, "resume"), rangeInts(committed, n))
	second.Finish(got...)
	commit(ctx, t, second)
	if err := second.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	marker := item("resume", 1000)
	publish(ctx, t, p, []queue.Message{marker})
	if got := fetchThrough(ctx, t, e.consumer(ctx, group), marker); len(got) != 0 {
		t.Fatalf("committed messages came again: %v", seqs(t, got, "resume"))
	}
	// A group that never committed starts at the earliest message, even one published
	// before the group existed.
	got = fetchThrough(ctx, t, e.consumer(ctx, e.group("resume-new")), marker)
	sameInts(t, "a new group", seqs(t, got, "resume"), rangeInts(0, n))
}

func testFetchContext(ctx context.Context, t *testing.T, e *env) {
	c := e.consumer(ctx, e.group("ctx"))
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Fetch(canceled); err != context.Canceled {
		t.Fatalf("Fetch with a canceled context: %v, want context.Canceled unwrapped", err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := c.Fetch(short); err != context.DeadlineExceeded {
		t.Fatalf("Fetch on an empty topic until a deadline: %v, want context.DeadlineExceeded unwrapped", err)
	}

	// A waiting Fetch returns a message published while it waits.
	type result struct {
		msgs []queue.Message
		err  error
	}
	done := make(chan result, 1)
	go func() {
		m, err := c.Fetch(ctx)
		done <- result{m, err}
	}()
	want := item("late", 0)
	publish(ctx, t, e.publisher(ctx), []queue.Message{want})
	r := <-done
	if r.err != nil {
		t.Fatalf("Fetch waiting for a message: %v", r.err)
	}
	if len(r.msgs) != 1 || !bytes.Equal(r.msgs[0].Value, want.Value) {
		t.Fatalf("Fetch returned %d messages, want the one published", len(r.msgs))
	}
}

func testUseAfterClose(ctx context.Context, t *testing.T, e *env) {
	p := e.publisher(ctx)
	if err := p.Close(); err != nil {
		t.Fatalf("Publisher.Close: %v", err)
	}
	if err := p.Publish(ctx, []queue.Message{item("closed", 0)}); !errors.Is(err, queue.ErrClosed) {
		t.Fatalf("Publish after Close: %v, want ErrClosed", err)
	}

	c := e.consumer(ctx, e.group("closed"))
	done := make(chan error, 1)
	go func() {
		_, err := c.Fetch(ctx)
		done <- err
	}()
	if err := c.Close(); err != nil {
		t.Fatalf("Consumer.Close: %v", err)
	}
	// Whether it was already waiting or starts after Close, the Fetch ends with ErrClosed.
	if err := <-done; !errors.Is(err, queue.ErrClosed) {
		t.Fatalf("Fetch ended by Close: %v, want ErrClosed", err)
	}
	if _, err := c.Fetch(ctx); !errors.Is(err, queue.ErrClosed) {
		t.Fatalf("Fetch after Close: %v, want ErrClosed", err)
	}
	c.Finish(item("closed", 0)) // must not panic
	if err := c.Commit(ctx); !errors.Is(err, queue.ErrClosed) {
		t.Fatalf("Commit after Close: %v, want ErrClosed", err)
	}
}

func testLargeBatch(ctx context.Context, t *testing.T, e *env) {
	const n, keys = 5000, 100
	pad := "/" + strings.Repeat("x", 300)
	var msgs []queue.Message
	for i := range n {
		m := item(fmt.Sprintf("big-%d", i%keys), i/keys)
		m.Value = append(m.Value, pad...)
		msgs = append(msgs, m)
	}
	publish(ctx, t, e.publisher(ctx), msgs)
	got := fetchN(ctx, t, e.consumer(ctx, e.group("large")), n)
	for k := range keys {
		key := fmt.Sprintf("big-%d", k)
		sameInts(t, key, seqs(t, got, key), rangeInts(0, n/keys))
	}
}

func testConcurrentPublishers(ctx context.Context, t *testing.T, e *env) {
	const publishers, goroutines, keys, perKey, batch = 2, 3, 5, 20, 10
	var wg sync.WaitGroup
	errs := make(chan error, publishers*goroutines)
	for pi := range publishers {
		p := e.publisher(ctx)
		for gi := range goroutines {
			wg.Go(func() {
				var msgs []queue.Message
				for seq := range perKey {
					for k := range keys {
						msgs = append(msgs, item(fmt.Sprintf("p%d-g%d-k%d", pi, gi, k), seq))
					}
				}
				for len(msgs) > 0 {
					n := min(batch, len(msgs))
					if err := p.Publish(ctx, msgs[:n]); err != nil {
						errs <- err
						return
					}
					msgs = msgs[n:]
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent Publish: %v", err)
	}
	got := fetchN(ctx, t, e.consumer(ctx, e.group("concurrent")), publishers*goroutines*keys*perKey)
	for pi := range publishers {
		for gi := range goroutines {
			for k := range keys {
				key := fmt.Sprintf("p%d-g%d-k%d", pi, gi, k)
				sameInts(t, key, seqs(t, got, key), rangeInts(0, perKey))
			}
		}
	}
}
