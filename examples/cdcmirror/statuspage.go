package main

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tributary-dev/tributary/cdc"
)

// The status page: GET / and /status.html render every pipeline's status as one HTML page
// (server-side, html/template, so every name is escaped as text), refreshed by the browser
// every pageRefresh; /status.css is its style sheet. Everything is embedded: no script, no
// external resource, so it works offline, and a Content-Security-Policy forbids any script
// and any other origin. Like /status it shows names, figures and reasons, never row data.

//go:embed statuspage/status.html statuspage/status.css
var pageFiles embed.FS

var pageTemplate = template.Must(template.New("status.html").ParseFS(pageFiles, "statuspage/status.html"))

// Lag history: one sample per pipeline every lagSampleEvery, the last lagSampleKeep kept
// (15 minutes): bounded memory whatever the uptime.
const (
	lagSampleEvery = 5 * time.Second
	lagSampleKeep  = 180
	pageRefresh    = 5 // seconds
)

// lagSample is one reading of a pipeline's lag; Measured false: the source does not
// report lag, or has not answered a measurement yet (a gap in the line).
type lagSample struct {
	At       time.Time
	Seconds  float64
	Bytes    int64
	Measured bool
}

// lagHistory keeps the last samples of each pipeline's lag for the page's sparkline.
type lagHistory struct {
	mu    sync.Mutex
	keep  int
	rings map[string][]lagSample
}

func newLagHistory(keep int) *lagHistory {
	return &lagHistory{keep: keep, rings: make(map[string][]lagSample)}
}

// sample records every pipeline's current lag.
func (h *lagHistory) sample(sts []cdc.Status, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range sts {
		smp := lagSample{At: now}
		if !s.Lag.MeasuredAt.IsZero() {
			smp.Seconds, smp.Bytes, smp.Measured = s.Lag.Seconds, s.Lag.Bytes, true
		}
		r := append(h.rings[s.Pipeline], smp)
		if len(r) > h.keep {
			r = slices.Clone(r[len(r)-h.keep:])
		}
		h.rings[s.Pipeline] = r
	}
}

// samples is a copy of a pipeline's samples, oldest first.
func (h *lagHistory) samples(pipeline string) []lagSample {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.rings[pipeline])
}

// run samples m every interval until ctx ends, the first sample at once.
func (h *lagHistory) run(ctx context.Context, m interface{ Status() []cdc.Status }, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		h.sample(m.Status(), time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// deadLetterCounter is what the page reads the dead letters per table from (*mirror.Mirror:
// mirror.Mirror.DeadLettersByTable); a source without it shows the pipeline's total only.
type deadLetterCounter interface {
	DeadLettersByTable(pipeline string) map[string]int64
}

// addStatusPage serves the page on mux (registered by newMux's caller, so that tests of the
// other endpoints need no history).
func addStatusPage(mux *http.ServeMux, m statusSource, rx *reindexes, hist *lagHistory) {
	page := func(w http.ResponseWriter, _ *http.Request) {
		var buf bytes.Buffer
		if err := pageTemplate.Execute(&buf, buildPage(m, rx, hist, time.Now())); err != nil {
			http.Error(w, "status page: "+err.Error(), http.StatusInternalServerError)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-store")
		_, _ = w.Write(buf.Bytes())
	}
	mux.HandleFunc("GET /{$}", page)
	mux.HandleFunc("GET /status.html", page)
	mux.HandleFunc("GET /status.css", func(w http.ResponseWriter, _ *http.Request) {
		b, _ := pageFiles.ReadFile("statuspage/status.css")
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write(b)
	})
}

// pageData is what the template renders.
type pageData struct {
	Refresh   int
	Generated string
	Pipelines []pagePipeline
}

type pagePipeline struct {
	Name, State, Class, Reason string
	Healthy                    bool
	Events, Batches            int64
	DeadLetters, Reconnects    int64
	Pending                    int
	LastBatch, LastCheckpoint  string
	LastFailure                string
	Lag                        string // the last measurement, or why there is none
	Spark                      *sparkline
	Progress                   []progressView
	Reindexes                  []string
	DeadLetterTables           []nameCount
	Incomplete                 []incompleteStatus
	ClusterStatus              string
	ClusterError               string
	Indices                    []nameValue
	Role                       *pageRole // nil without a shared state store
}

// pageRole is a pipeline's part in an active/standby pair (cdc.Status.Leadership).
type pageRole struct {
	Role  string // active, standby, taking over
	Class string // Role as a CSS class: active, standby, taking-over
	// Holder is the process holding the lease: this one when active, the active one when
	// standby; "" when none holds it.
	Holder       string
	Epoch        uint64
	Since        string // how long the role has lasted
	Takeovers    int64
	LastTakeover string // how long the last takeover here took; "" for none
	StoreError   string
}

type nameCount struct {
	Name  string
	Count int64
}

type nameValue struct{ Name, Value string }

// progressView is a snapshot's or re-snapshot's progress: its line (progress.go's
// renderLine, with rate and ETA) and a percentage for the bar (-1: no estimate).
type progressView struct {
	Title   string
	Line    string
	Percent int
	Active  bool
}

// sparkline is an inline SVG polyline of lag seconds over the kept window.
type sparkline struct {
	Width, Height int
	Lines         []string // polyline point lists, one per run of measured samples
	Max, Last     string
	Window        string
}

func buildPage(m statusSource, rx *reindexes, hist *lagHistory, now time.Time) pageData {
	d := pageData{Refresh: pageRefresh, Generated: now.UTC().Format(time.RFC3339)}
	dl, _ := m.(deadLetterCounter)
	var jobs []reindexJob
	if rx != nil {
		jobs = rx.list()
	}
	for _, s := range m.Status() {
		js := pipelineJSON(s)
		p := pagePipeline{Name: s.Pipeline, State: s.State, Class: s.Health.Class, Reason: s.Health.Reason, Healthy: s.Health.Healthy,
			Events: js.Events, Batches: js.Batches, DeadLetters: js.DeadLetters, Reconnects: js.Reconnects, Pending: js.Pending,
			LastBatch: agoAt(s.Progress.LastBatch, now), LastCheckpoint: agoAt(s.Progress.LastCheckpoint, now), LastFailure: js.LastFailure}
		if p.Class == "" {
			p.Class = map[bool]string{true: cdc.HealthOK, false: "unhealthy"}[p.Healthy]
		}
		switch l := js.Lag; {
		case l == nil:
			p.Lag = "not reported by this source"
		case l.MeasuredAt == nil:
			p.Lag = "not measured yet: " + l.Error
		default:
			p.Lag = fmt.Sprintf("%s behind, %s bytes of change log", seconds(l.Seconds), thousands(l.Bytes))
			if l.Retained >= 0 {
				p.Lag += ", " + thousands(l.Retained) + " bytes retained"
			}
			p.Lag += " (measured " + agoAt(*l.MeasuredAt, now) + " ago)"
			if l.Error != "" {
				p.Lag += "; the last measurement failed: " + l.Error
			}
		}
		p.Spark = newSparkline(hist.samples(s.Pipeline), 300, 48)
		if sp := s.Progress.Snapshot; sp.Active || sp.TablesTotal > 0 {
			p.Progress = append(p.Progress, progressOf("Snapshot", sp))
		}
		if sp := s.Progress.Resnapshot; sp.Resnapshot != "" {
			p.Progress = append(p.Progress, progressOf("Re-snapshot "+sp.Resnapshot, sp))
		}
		for _, j := range jobs {
			if j.Pipeline == s.Pipeline {
				p.Reindexes = append(p.Reindexes, reindexLine(j))
			}
		}
		if dl != nil {
			for t, n := range dl.DeadLettersByTable(s.Pipeline) {
				p.DeadLetterTables = append(p.DeadLetterTables, nameCount{t, n})
			}
			slices.SortFunc(p.DeadLetterTables, func(a, b nameCount) int { return strings.Compare(a.Name, b.Name) })
		}
		p.Incomplete = js.Incomplete
		if c := js.Cluster; c != nil {
			p.ClusterStatus, p.ClusterError = c.Status, c.Error
			for idx, h := range c.Indices {
				p.Indices = append(p.Indices, nameValue{idx, h})
			}
			slices.SortFunc(p.Indices, func(a, b nameValue) int { return strings.Compare(a.Name, b.Name) })
		}
		if ld := js.Leadership; ld != nil {
			r := &pageRole{Role: ld.Role, Class: strings.ReplaceAll(ld.Role, " ", "-"), Holder: ld.Holder, Epoch: ld.Epoch,
				Since: "never", Takeovers: ld.Takeovers, StoreError: ld.StoreError}
			if ld.Since != nil {
				r.Since = agoAt(*ld.Since, now)
			}
			if ld.LastTakeoverSeconds > 0 {
				r.LastTakeover = seconds(ld.LastTakeoverSeconds)
			}
			p.Role = r
		}
		d.Pipelines = append(d.Pipelines, p)
	}
	return d
}

func progressOf(title string, sp cdc.SnapshotProgress) progressView {
	v := progressView{Title: title, Active: sp.Active, Percent: -1}
	if sp.Active {
		v.Line = renderLine(sp)
		if sp.RowsEstimated > 0 {
			v.Percent = int(min(sp.RowsDone*100/sp.RowsEstimated, 99))
		}
		return v
	}
	v.Percent = 100
	v.Line = fmt.Sprintf("done: %s rows from %d of %d tables", thousands(sp.RowsDone), sp.TablesDone, sp.TablesTotal)
	if sp.Error != "" {
		v.Line += ", " + sp.Error
	}
	return v
}

// newSparkline draws the measured samples, time on x (the newest at the right edge), lag on
// y scaled to the largest; nil when no sample was measured.
func newSparkline(smp []lagSample, w, h int) *sparkline {
	var mx float64
	measured := 0
	for _, s := range smp {
		if s.Measured {
			measured++
			mx = max(mx, s.Seconds)
		}
	}
	if measured == 0 {
		return nil
	}
	// The x axis spans the samples kept, at least a minute's worth (so that a new history
	// does not stretch two samples across the whole width) and at most the window.
	n := max(len(smp), int(time.Minute/lagSampleEvery)+1)
	sp := &sparkline{Width: w, Height: h, Max: seconds(mx), Window: (time.Duration(n-1) * lagSampleEvery).String()}
	top := max(mx, 1) // a flat zero line sits at the bottom
	var cur []string
	var lastX, lastY float64
	flush := func() {
		if len(cur) == 1 { // one point: a short flat stroke ending at it, so that it shows
			cur = []string{point(lastX-4, lastY), cur[0]}
		}
		if len(cur) > 0 {
			sp.Lines = append(sp.Lines, strings.Join(cur, " "))
		}
		cur = nil
	}
	off := n - len(smp) // the newest sample at the right edge
	for i, s := range smp {
		if !s.Measured {
			flush()
			continue
		}
		lastX = 1 + float64(w-2)*float64(off+i)/float64(n-1)
		lastY = float64(h-2) - float64(h-4)*s.Seconds/top
		cur = append(cur, point(lastX, lastY))
		sp.Last = seconds(s.Seconds)
	}
	flush()
	return sp
}

func point(x, y float64) string {
	return strconv.FormatFloat(max(x, 1), 'f', 1, 64) + "," + strconv.FormatFloat(y, 'f', 1, 64)
}

// seconds renders a lag in seconds, rounded as a person reads it.
func seconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(100 * time.Millisecond).String()
}

func agoAt(t, now time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return now.Sub(t).Round(time.Second).String()
}
