package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tributary-dev/tributary/cdc"
)

// console is stderr, shared by the log and the progress bar: a log line first wipes the bar,
// which the next report draws again, so the two never garble each other.
type console struct {
	mu  sync.Mutex
	w   io.Writer
	bar bool // a bar is on the current line, the cursor at its end
}

func (c *console) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clearBarLocked()
	return c.w.Write(p)
}

// clearBarLocked wipes the bar: carriage return, then erase to the end of the line.
func (c *console) clearBarLocked() {
	if c.bar {
		_, _ = io.WriteString(c.w, "\r\x1b[K")
		c.bar = false
	}
}

// drawBar replaces the bar (or starts one) with line.
func (c *console) drawBar(line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _ = io.WriteString(c.w, "\r\x1b[K"+line)
	c.bar = true
}

// keepBar ends the bar's line so that what follows starts on a fresh one, leaving the last
// state visible.
func (c *console) keepBar() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bar {
		_, _ = io.WriteString(c.w, "\n")
		c.bar = false
	}
}

// println writes a whole line.
func (c *console) println(line string) { _, _ = c.Write([]byte(line + "\n")) }

// isTerminal reports whether f is a character device, which is what a terminal is; a pipe or
// a file is not. (Enough for choosing between a bar and plain lines without a dependency.)
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Report intervals: a bar is cheap to redraw; plain lines go to logs and should be sparse,
// but the first one should come soon after the snapshot starts.
const (
	barInterval   = 250 * time.Millisecond
	plainTick     = time.Second
	plainInterval = 5 * time.Second
)

// progress reports a pipeline's snapshot progress from its runner: a bar redrawn in place on
// a terminal, else a plain line per report. Nothing is shown when no snapshot runs.
type progress struct {
	name  string // the pipeline's, prefixing plain lines when several pipelines share the console
	con   *console
	bar   bool
	every time.Duration // shortest time between two reports; 0: every tick
	read  func() cdc.SnapshotProgress
	now   func() time.Time

	active  bool // the last tick saw a snapshot running
	started time.Time
	shown   time.Time // of the last report; zero: none yet for this snapshot
	last    cdc.SnapshotProgress
}

// runProgress reports every pipeline's progress on every tick until stop is closed.
func runProgress(ps []*progress, stop <-chan struct{}, tick <-chan time.Time) {
	for {
		select {
		case <-stop:
			for _, p := range ps {
				if p.bar {
					p.con.keepBar()
				}
			}
			return
		case <-tick:
			for _, p := range ps {
				p.report()
			}
		}
	}
}

// report shows the current state, and one closing line when a snapshot has just ended.
func (p *progress) report() {
	s, now := p.read(), p.now()
	switch {
	case s.Active:
		if !p.active {
			p.active, p.started, p.shown = true, now, time.Time{}
		}
		p.last = s
		if !p.shown.IsZero() && now.Sub(p.shown) < p.every {
			return
		}
		p.shown = now
		if p.bar {
			p.con.drawBar(renderBar(s, 30))
		} else {
			p.con.println(p.prefix() + renderLine(s))
		}
	case p.active:
		p.active = false
		if p.bar {
			p.con.keepBar()
		}
		tables := "tables"
		if p.last.TablesTotal == 1 {
			tables = "table"
		}
		p.con.println(fmt.Sprintf("%s%s: done, %d %s read in %s", p.prefix(), kind(p.last), p.last.TablesTotal, tables, now.Sub(p.started).Round(time.Second)))
	}
}

func (p *progress) prefix() string {
	if p.name == "" {
		return ""
	}
	return p.name + ": "
}

// renderBar is the terminal form:
//
//	snapshot public.orders (1/2) [#######.......................]  25% 250/1,000 rows  50 rows/s  ETA 15s
//
// Without an estimate it shows the rows read and the rate only. Catalog estimates can be
// stale; once the rows read pass the estimate, the percentage stays at 99 and the ETA is "?".
func renderBar(s cdc.SnapshotProgress, width int) string {
	var b strings.Builder
	b.WriteString(kind(s) + " " + where(s))
	if s.RowsEstimated > 0 {
		frac := min(float64(s.RowsDone)/float64(s.RowsEstimated), 0.99)
		filled := int(frac * float64(width))
		fmt.Fprintf(&b, " [%s%s] %3d%% %s/%s rows", strings.Repeat("#", filled), strings.Repeat(".", width-filled),
			int(frac*100), thousands(s.RowsDone), thousands(s.RowsEstimated))
	} else {
		fmt.Fprintf(&b, " %s rows", thousands(s.RowsDone))
	}
	fmt.Fprintf(&b, "  %s rows/s", thousands(int64(s.RowsPerSecond+0.5)))
	if s.RowsEstimated > 0 {
		b.WriteString("  ETA " + eta(s))
	}
	return b.String()
}

// renderLine is the plain form for logs and pipes:
//
//	snapshot: 250/1000 rows (25%), 50 rows/s, ETA 15s, table public.orders (1/2)
func renderLine(s cdc.SnapshotProgress) string {
	var b strings.Builder
	b.WriteString(kind(s) + ": ")
	if s.RowsEstimated > 0 {
		pct := min(s.RowsDone*100/s.RowsEstimated, 99)
		fmt.Fprintf(&b, "%d/%d rows (%d%%)", s.RowsDone, s.RowsEstimated, pct)
	} else {
		fmt.Fprintf(&b, "%d rows", s.RowsDone)
	}
	fmt.Fprintf(&b, ", %d rows/s", int64(s.RowsPerSecond+0.5))
	if s.RowsEstimated > 0 {
		b.WriteString(", ETA " + eta(s))
	}
	b.WriteString(", table " + where(s))
	if s.Error != "" {
		b.WriteString(", retrying: " + s.Error)
	}
	return b.String()
}

// kind names what is being read: the initial snapshot, or a re-snapshot by its id.
func kind(s cdc.SnapshotProgress) string {
	if s.Resnapshot != "" {
		return "re-snapshot " + s.Resnapshot
	}
	return "snapshot"
}

// current is the progress to show: the initial snapshot's unless a re-snapshot runs.
func current(p cdc.Progress) cdc.SnapshotProgress {
	if p.Resnapshot.Active && !p.Snapshot.Active {
		return p.Resnapshot
	}
	return p.Snapshot
}

// where names the table being read and the table count.
func where(s cdc.SnapshotProgress) string {
	t := s.Table
	name := t.Table
	switch {
	case t.Schema != "":
		name = t.Schema + "." + t.Table
	case t.Database != "":
		name = t.Database + "." + t.Table
	}
	if len(name) > 40 {
		name = name[:39] + "~"
	}
	return fmt.Sprintf("%s (%d/%d)", name, min(s.TablesDone+1, max(s.TablesTotal, 1)), s.TablesTotal)
}

// eta is the time left at the current rate, or "?" when it cannot be told.
func eta(s cdc.SnapshotProgress) string {
	left := s.RowsEstimated - s.RowsDone
	if left <= 0 || s.RowsPerSecond <= 0 {
		return "?"
	}
	return time.Duration(float64(left) / s.RowsPerSecond * float64(time.Second)).Round(time.Second).String()
}

// thousands writes n with comma separators.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
