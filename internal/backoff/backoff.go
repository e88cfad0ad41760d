// Package backoff is the one jittered exponential backoff of the CDC half: the runner's waits
// before a pushed-back batch is offered again and before a failed stream is reopened.
package backoff

import (
	"math"
	"math/rand/v2"
	"time"
)

// Policy is an exponential backoff from Min doubling up to Max, with "equal jitter": each wait
// is a random point in the upper half of its step, so that pipelines pushed back together do
// not come back together, and never below half of Min.
type Policy struct {
	Min, Max time.Duration
}

// Delay is the wait before retry number attempt (0 for the first retry), drawn from rnd; a
// longer floor (a server's Retry-After) wins.
func (p Policy) Delay(attempt int, rnd *rand.Rand, floor time.Duration) time.Duration {
	ceil := p.Max
	if attempt < 62 && p.Min > 0 && p.Min <= math.MaxInt64>>attempt {
		ceil = min(p.Min<<attempt, p.Max)
	}
	if ceil <= 0 {
		return max(floor, 0)
	}
	d := ceil/2 + time.Duration(rnd.Int64N(int64(ceil/2)+1))
	return max(d, floor)
}
