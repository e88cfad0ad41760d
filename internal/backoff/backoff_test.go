package backoff

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestDelayBounds(t *testing.T) {
	p := Policy{Min: 100 * time.Millisecond, Max: 5 * time.Second}
	rnd := rand.New(rand.NewPCG(1, 2))
	for attempt := range 100 {
		step := p.Max
		if attempt < 6 {
			step = min(p.Min<<attempt, p.Max)
		}
		for range 50 {
			d := p.Delay(attempt, rnd, 0)
			if d < step/2 || d > step {
				t.Fatalf("attempt %d: delay %v outside [%v, %v]", attempt, d, step/2, step)
			}
		}
	}
	if d := p.Delay(0, rnd, time.Minute); d != time.Minute {
		t.Fatalf("a longer floor must win: got %v", d)
	}
	if d := (Policy{}).Delay(3, rnd, 0); d != 0 {
		t.Fatalf("zero policy: got %v", d)
	}
}
