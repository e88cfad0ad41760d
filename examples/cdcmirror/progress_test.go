package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
)

func snap(done, est int64, rate float64) cdc.SnapshotProgress {
	return cdc.SnapshotProgress{Active: true, Table: cdc.TableID{Database: "shop", Schema: "public", Table: "orders"},
		TablesDone: 1, TablesTotal: 3, RowsDone: done, RowsEstimated: est, RowsPerSecond: rate}
}

func TestRenderBar(t *testing.T) {
	const width = 20
	for _, tc := range []struct {
		name   string
		s      cdc.SnapshotProgress
		filled int
		want   []string
		absent []string
	}{
		{"a quarter", snap(2500, 10000, 500), width / 4,
			[]string{"public.orders (2/3)", " 25% ", "2,500/10,000 rows", "500 rows/s", "ETA 15s"}, nil},
		{"no rate yet", snap(0, 10000, 0), 0, []string{"  0% ", "0/10,000 rows", "ETA ?"}, nil},
		{"estimate passed", snap(12000, 10000, 100), width * 99 / 100, []string{" 99% ", "12,000/10,000 rows", "ETA ?"}, nil},
		{"no estimate", snap(1234567, 0, 1e6), -1, []string{"1,234,567 rows", "1,000,000 rows/s"}, []string{"[", "%", "ETA"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := renderBar(tc.s, width)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("%q lacks %q", got, w)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(got, a) {
					t.Errorf("%q has %q", got, a)
				}
			}
			if tc.filled < 0 {
				return
			}
			open, end := strings.Index(got, "["), strings.Index(got, "]")
			if open < 0 || end-open-1 != width {
				t.Fatalf("%q: no bar of width %d", got, width)
			}
			if n := strings.Count(got[open:end], "#"); n != tc.filled {
				t.Errorf("%q: %d of %d filled, want %d", got, n, width, tc.filled)
			}
		})
	}
}

func TestRenderLine(t *testing.T) {
	got := renderLine(snap(2500, 10000, 499.6))
	for _, w := range []string{"snapshot: 2500/10000 rows (25%)", "500 rows/s", "ETA 15s", "table public.orders (2/3)"} {
		if !strings.Contains(got, w) {
			t.Errorf("%q lacks %q", got, w)
		}
	}
	if strings.ContainsAny(got, "\r\x1b\n") {
		t.Errorf("a plain line has control characters: %q", got)
	}
	// A MySQL table has no schema: the database names it.
	s := snap(1, 0, 0)
	s.Table.Schema = ""
	if got := renderLine(s); !strings.Contains(got, "table shop.orders") || strings.Contains(got, "%") {
		t.Errorf("no estimate: %q", got)
	}
}

// fakeClock advances by a second per reading.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { c.t = c.t.Add(time.Second); return c.t }

// reports runs the reporter over a sequence of snapshot states, one per tick (and second).
func reports(bar bool, every time.Duration, states ...cdc.SnapshotProgress) string {
	var out bytes.Buffer
	i := 0
	clock := &fakeClock{t: time.Unix(0, 0)}
	p := &progress{con: &console{w: &out}, bar: bar, every: every, now: clock.now,
		read: func() cdc.SnapshotProgress { i++; return states[i-1] }}
	tick := make(chan time.Time)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { runProgress([]*progress{p}, stop, tick); close(done) }()
	for range states {
		tick <- time.Time{}
	}
	close(stop)
	<-done
	return out.String()
}

func TestProgressPlainLines(t *testing.T) {
	out := reports(false, 0, cdc.SnapshotProgress{}, snap(10, 100, 10), snap(50, 100, 10), cdc.SnapshotProgress{}, cdc.SnapshotProgress{})
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "snapshot: 10/100") || !strings.HasPrefix(lines[1], "snapshot: 50/100") ||
		lines[2] != "snapshot: done, 3 tables read in 2s" {
		t.Fatalf("plain output:\n%s", out)
	}
	if strings.ContainsAny(out, "\r\x1b") {
		t.Fatalf("plain output has terminal controls: %q", out)
	}
}

func TestProgressBarRedrawsInPlace(t *testing.T) {
	out := reports(true, 0, snap(10, 100, 10), snap(50, 100, 10), cdc.SnapshotProgress{})
	// Two draws, each starting with return+erase, then the bar's line ends and "done" follows.
	if strings.Count(out, "\r\x1b[K") != 2 || !strings.Contains(out, "50/100 rows") {
		t.Fatalf("bar output: %q", out)
	}
	if !strings.HasSuffix(out, "\nsnapshot: done, 3 tables read in 2s\n") {
		t.Fatalf("bar output does not end with its line kept and the done line: %q", out)
	}
	// No snapshot, no output.
	if out := reports(true, 0, cdc.SnapshotProgress{}, cdc.SnapshotProgress{}); out != "" {
		t.Fatalf("output without a snapshot: %q", out)
	}
}

// Plain lines are throttled: the first at once, then one per interval.
func TestProgressPlainThrottled(t *testing.T) {
	var states []cdc.SnapshotProgress
	for i := range 7 {
		states = append(states, snap(int64(i), 100, 1))
	}
	out := reports(false, 3*time.Second, states...)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "snapshot: 0/100") || !strings.HasPrefix(lines[1], "snapshot: 3/100") ||
		!strings.HasPrefix(lines[2], "snapshot: 6/100") {
		t.Fatalf("throttled output:\n%s", out)
	}
}

// With several pipelines each plain line names its pipeline.
func TestProgressNamesThePipeline(t *testing.T) {
	var out bytes.Buffer
	clock := &fakeClock{t: time.Unix(0, 0)}
	states := map[string][]cdc.SnapshotProgress{"pg": {snap(10, 100, 10), {}}, "maria": {{}, {}}}
	var ps []*progress
	for _, name := range []string{"pg", "maria"} {
		i := 0
		ps = append(ps, &progress{name: name, con: &console{w: &out}, now: clock.now,
			read: func() cdc.SnapshotProgress { i++; return states[name][i-1] }})
	}
	tick := make(chan time.Time)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { runProgress(ps, stop, tick); close(done) }()
	tick <- time.Time{}
	tick <- time.Time{}
	close(stop)
	<-done
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "pg: snapshot: 10/100") || !strings.HasPrefix(lines[1], "pg: snapshot: done") {
		t.Fatalf("output:\n%s", out.String())
	}
}

// A log line wipes the bar instead of being appended to it; stopping keeps the last bar on
// its own line.
func TestConsoleLogWipesBar(t *testing.T) {
	var out bytes.Buffer
	c := &console{w: &out}
	c.drawBar("snapshot [##..]")
	c.println("level=INFO msg=hello")
	c.drawBar("snapshot [###.]")
	c.keepBar()
	c.keepBar() // nothing left to keep
	want := "\r\x1b[Ksnapshot [##..]\r\x1b[Klevel=INFO msg=hello\n\r\x1b[Ksnapshot [###.]\n"
	if out.String() != want {
		t.Fatalf("console wrote %q, want %q", out.String(), want)
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", -1234567: "-1,234,567", 100000: "100,000"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
