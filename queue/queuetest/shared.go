package queuetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/queue"
)

// heldKey's messages are never finished by the members of the shared group, so whichever
// member owns their partition can never commit past them.
const heldKey = "held"

// sharedState is what the members of the shared group have received.
type sharedState struct {
	mu   sync.Mutex
	seen map[string]bool // by value
	got  [2]int          // messages received per member
}

func (s *sharedState) count(member int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got[member]
}

func (s *sharedState) covers(values []string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range values {
		if !s.seen[v] {
			return false
		}
	}
	return true
}

// member consumes until ctx ends: it finishes every message but heldKey's and commits after
// each fetch. A failed commit is only logged: one that meets a rebalance may fail, and the
// work it could not commit is delivered again, which is what the behaviour checks.
func member(ctx context.Context, t *testing.T, c queue.Consumer, id int, s *sharedState) error {
	for {
		msgs, err := c.Fetch(ctx)
		if err != nil {
			return err
		}
		var finished []queue.Message
		s.mu.Lock()
		for _, m := range msgs {
			s.seen[string(m.Value)] = true
			s.got[id]++
			if string(m.Key) != heldKey {
				finished = append(finished, m)
			}
		}
		s.mu.Unlock()
		c.Finish(finished...)
		if err := c.Commit(context.WithoutCancel(ctx)); err != nil {
			t.Logf("member %d: Commit: %v", id, err)
		}
	}
}

// waitFor polls cond until it holds or ctx ends.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("gave up waiting for %s: %v", what, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func testSharedGroup(ctx context.Context, t *testing.T, e *env) {
	const keys, held = 30, 4
	p := e.publisher(ctx)
	var values []string
	seq := 0
	publishRound := func() {
		var msgs []queue.Message
		for k := range keys {
			msgs = append(msgs, item(fmt.Sprintf("shared-%d", k), seq))
		}
		if seq < held {
			msgs = append(msgs, item(heldKey, seq))
		}
		seq++
		publish(ctx, t, p, msgs)
		for _, m := range msgs {
			values = append(values, string(m.Value))
		}
	}
	publishRound()

	group := e.group("shared")
	s := &sharedState{seen: map[string]bool{}}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	members := make([]queue.Consumer, 2)
	start := func(id int) {
		members[id] = e.consumer(ctx, group)
		wg.Go(func() { errs[id] = member(runCtx, t, members[id], id, s) })
	}
	start(0)
	waitFor(ctx, t, "the first member's first message", func() bool { return s.count(0) > 0 })
	start(1)
	// Keep publishing until the newcomer has taken over partitions and received work: a
	// real group needs a moment to rebalance.
	for seq < 5 || s.count(1) == 0 {
		if ctx.Err() != nil {
			t.Fatalf("the second member of the group received nothing: %v", ctx.Err())
		}
		publishRound()
		time.Sleep(50 * time.Millisecond)
	}
	waitFor(ctx, t, "every message to reach a member", func() bool { return s.covers(values) })
	stop()
	wg.Wait()
	for id, err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("member %d stopped with %v, want context.Canceled", id, err)
		}
	}
	if s.count(0) == 0 || s.count(1) == 0 {
		t.Fatalf("members received %d and %d messages; the group did not share the work", s.count(0), s.count(1))
	}
	for _, c := range members {
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}

	// Nothing the members left unfinished was committed: the next member gets all of it.
	marker := item(heldKey, 1000)
	publish(ctx, t, p, []queue.Message{marker})
	got := fetchThrough(ctx, t, e.consumer(ctx, group), marker)
	sameInts(t, "unfinished messages after the group's members left", seqs(t, got, heldKey), rangeInts(0, held))
}
