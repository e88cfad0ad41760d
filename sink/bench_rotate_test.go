package sink

import (
	"sort"
	"testing"
	"time"
)

// contender is one way of doing a benchmark's work, timed round after round beside the others.
type contender struct {
	name   string
	prep   func() func() // untimed preparation; returns the timed part
	took   time.Duration
	rounds []float64 // seconds per round
}

// rotate runs every contender once per iteration in an order that rotates by one each time, so
// that none always follows another (the cluster's background work after a write lands on
// whoever comes next). before, when set, runs untimed ahead of each contender's preparation.
func rotate(b *testing.B, cs []*contender, before func()) {
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range cs {
			c := cs[(i+j)%len(cs)]
			b.StopTimer()
			if before != nil {
				before()
			}
			run := c.prep()
			b.StartTimer()
			t0 := time.Now()
			run()
			d := time.Since(t0)
			c.took += d
			c.rounds = append(c.rounds, d.Seconds())
		}
	}
	b.StopTimer()
}

// reportRatio reports a's total time over c's as unit, and the median of the ratios within each
// round as unit-median: the machine is shared, and a burst of someone else's load skews a total
// more than a median of rounds in which every contender ran back to back.
func reportRatio(b *testing.B, a, c *contender, unit string) {
	b.ReportMetric(a.took.Seconds()/c.took.Seconds(), unit)
	per := make([]float64, len(a.rounds))
	for i := range per {
		per[i] = a.rounds[i] / c.rounds[i]
	}
	sort.Float64s(per)
	b.ReportMetric(per[len(per)/2], unit+"-median")
}
