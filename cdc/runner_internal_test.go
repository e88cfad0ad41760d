package cdc

import "testing"

func TestEventBytesGrowsWithValues(t *testing.T) {
	small := Event{After: []Value{int64(1), "a"}}
	big := Event{After: []Value{int64(1), string(make([]byte, 10000))}, Before: []Value{Base64("AAAA"), []Value{"x"}}}
	if s, b := eventBytes(&small), eventBytes(&big); s < eventOverhead || b < 10000 || b <= s {
		t.Fatalf("sizes %d and %d", s, b)
	}
}
