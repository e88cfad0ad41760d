package memqueue

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/tributary-dev/tributary/queue"
)

func msg(key string, v int) queue.Message {
	return queue.Message{Key: []byte(key), Value: fmt.Appendf(nil, "%d", v)}
}

func fetchN(t *testing.T, c queue.Consumer, n int) []queue.Message {
	t.Helper()
	var out []queue.Message
	for len(out) < n {
		got, err := c.Fetch(t.Context())
		if err != nil {
			t.Fatalf("Fetch after %d of %d: %v", len(out), n, err)
		}
		out = append(out, got...)
	}
	if len(out) != n {
		t.Fatalf("fetched %d messages, want %d", len(out), n)
	}
	return out
}

func TestFailNextPublishWritesNothing(t *testing.T) {
	b := New(nil)
	p, err := b.Publisher("t")
	if err != nil {
		t.Fatal(err)
	}
	down := &queue.Error{Kind: queue.Unavailable, Queue: "t", Err: errors.New("injected")}
	b.FailNext(OpPublish, down)
	err = p.Publish(t.Context(), []queue.Message{msg("a", 1), msg("b", 2)})
	var pe *queue.PublishError
	if !errors.As(err, &pe) || len(pe.Errs) != 2 || pe.Errs[0] != down || pe.Errs[1] != down {
		t.Fatalf("Publish = %v, want a PublishError with the injected error twice", err)
	}
	if !queue.Retryable(err) {
		t.Fatalf("an injected Unavailable is not retryable: %v", err)
	}
	if n := len(b.Messages("t")); n != 0 {
		t.Fatalf("a failed publish wrote %d messages", n)
	}
	if err := p.Publish(t.Context(), []queue.Message{msg("a", 1)}); err != nil {
		t.Fatalf("the fault fired twice: %v", err)
	}
}

func TestFailMessagesIsPartial(t *testing.T) {
	b := New(nil)
	p, _ := b.Publisher("t")
	tooBig := &queue.Error{Kind: queue.Invalid, Queue: "t", Err: errors.New("too large")}
	b.FailMessages(func(m queue.Message) error {
		if string(m.Key) == "bad" {
			return tooBig
		}
		return nil
	})
	err := p.Publish(t.Context(), []queue.Message{msg("ok", 1), msg("bad", 2), msg("ok", 3)})
	var pe *queue.PublishError
	if !errors.As(err, &pe) || pe.Errs[0] != nil || pe.Errs[1] != tooBig || pe.Errs[2] != nil {
		t.Fatalf("Publish = %v, want only the second message failed", err)
	}
	got := b.Messages("t")
	if len(got) != 2 || string(got[0].Value) != "1" || string(got[1].Value) != "3" {
		t.Fatalf("broker holds %d messages, want the two good ones in order", len(got))
	}
}

func TestFailNextFetchAndCommit(t *testing.T) {
	b := New(&Options{Partitions: 1})
	p, _ := b.Publisher("t")
	if err := p.Publish(t.Context(), []queue.Message{msg("k", 1)}); err != nil {
		t.Fatal(err)
	}
	c, _ := b.Consumer("t", "g")
	defer c.Close()
	boom := errors.New("injected")
	b.FailNext(OpFetch, boom)
	if _, err := c.Fetch(t.Context()); err != boom {
		t.Fatalf("Fetch = %v, want the injected error", err)
	}
	// The failed fetch delivered nothing: the message comes with the next one.
	m := fetchN(t, c, 1)
	c.Finish(m...)
	b.FailNext(OpCommit, boom)
	if err := c.Commit(t.Context()); err != boom {
		t.Fatalf("Commit = %v, want the injected error", err)
	}
	if got := b.Committed("t", "g"); len(got) != 0 {
		t.Fatalf("a failed commit committed %v", got)
	}
	if err := c.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := b.Committed("t", "g"); got[0] != 1 {
		t.Fatalf("committed %v, want partition 0 at 1", got)
	}
}

func TestRequireTopics(t *testing.T) {
	b := New(&Options{RequireTopics: true})
	if _, err := b.Publisher("missing"); queue.KindOf(err) != queue.NotFound {
		t.Fatalf("Publisher on a missing topic: %v, want NotFound", err)
	}
	if _, err := b.Consumer("missing", "g"); queue.KindOf(err) != queue.NotFound {
		t.Fatalf("Consumer on a missing topic: %v, want NotFound", err)
	}
	if err := b.CreateTopic("here", 2); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateTopic("here", 3); queue.KindOf(err) != queue.Invalid {
		t.Fatalf("recreating with another partition count: %v, want Invalid", err)
	}
	if _, err := b.Publisher("here"); err != nil {
		t.Fatal(err)
	}
}

// A member that loses a partition to a newcomer commits what it finished there; what it did
// not finish goes to the newcomer, and its late Finish calls are ignored.
func TestRevocationCommitsFinishedPrefixOnly(t *testing.T) {
	b := New(&Options{Partitions: 2})
	p, _ := b.Publisher("t")
	var batch []queue.Message
	for i := range 40 {
		batch = append(batch, msg(fmt.Sprint("k", i), i))
	}
	if err := p.Publish(t.Context(), batch); err != nil {
		t.Fatal(err)
	}
	a, _ := b.Consumer("t", "g")
	defer a.Close()
	got := fetchN(t, a, 40)
	var onP1 []queue.Message
	for _, m := range got {
		if m.Partition == 1 {
			onP1 = append(onP1, m)
		}
	}
	if len(onP1) < 2 {
		t.Fatalf("only %d messages hashed to partition 1; pick other keys", len(onP1))
	}
	a.Finish(onP1[0]) // the first of partition 1 only
	nb, _ := b.Consumer("t", "g")
	defer nb.Close()
	// Partition 1 went to the newcomer (p mod 2), from just after the finished message.
	if c := b.Committed("t", "g"); c[1] != onP1[0].Offset+1 {
		t.Fatalf("committed %v, want partition 1 at %d", c, onP1[0].Offset+1)
	}
	a.Finish(onP1[1:]...) // too late: no longer a's partition
	if err := a.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if c := b.Committed("t", "g"); c[1] != onP1[0].Offset+1 {
		t.Fatalf("a revoked partition's late finish was committed: %v", c)
	}
	again := fetchN(t, nb, len(onP1)-1)
	for i, m := range again {
		if m.Partition != 1 || m.Offset != onP1[i+1].Offset {
			t.Fatalf("newcomer got partition %d offset %d, want partition 1 offset %d", m.Partition, m.Offset, onP1[i+1].Offset)
		}
	}
}

func TestPublishCopiesBuffers(t *testing.T) {
	b := New(&Options{Partitions: 1})
	p, _ := b.Publisher("t")
	v := []byte("original")
	if err := p.Publish(context.Background(), []queue.Message{{Key: []byte("k"), Value: v}}); err != nil {
		t.Fatal(err)
	}
	copy(v, "mutated!")
	if got := string(b.Messages("t")[0].Value); got != "original" {
		t.Fatalf("stored value %q changed with the caller's buffer", got)
	}
}
