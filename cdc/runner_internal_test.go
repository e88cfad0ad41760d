package cdc

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestRunnerBackoffBounds(t *testing.T) {
	r := &Runner{o: RunnerOptions{BackoffMin: 100 * time.Millisecond, BackoffMax: 3 * time.Second, Rand: rand.New(rand.NewPCG(1, 2))}}
	ceil := 100 * time.Millisecond
	for attempt := range 100 {
		if attempt > 0 {
			ceil = min(2*ceil, 3*time.Second)
		}
		for range 50 {
			d := r.backoff(attempt, 0)
			if d < ceil/2 || d > ceil {
				t.Fatalf("attempt %d: wait %v outside [%v, %v]", attempt, d, ceil/2, ceil)
			}
		}
	}
	if d := r.backoff(0, time.Minute); d != time.Minute {
		t.Fatalf("RetryAfter 1m gave %v", d)
	}
}

func TestEventBytesGrowsWithValues(t *testing.T) {
	small := Event{After: []Value{int64(1), "a"}}
	big := Event{After: []Value{int64(1), string(make([]byte, 10000))}, Before: []Value{Base64("AAAA"), []Value{"x"}}}
	if s, b := eventBytes(&small), eventBytes(&big); s < eventOverhead || b < 10000 || b <= s {
		t.Fatalf("sizes %d and %d", s, b)
	}
}
