package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/tributary-dev/tributary/mirror"
)

// reindexBody is what POST /admin/reindex takes and `cdcmirror reindex` sends.
type reindexBody struct {
	Pipeline string `json:"pipeline,omitempty"` // may be left out when there is one pipeline
	Table    string `json:"table"`              // as source.tables spells it
}

// reindexJob is one reindex the running cdcmirror was asked for, as /status shows it.
type reindexJob struct {
	Pipeline   string    `json:"pipeline"`
	Table      string    `json:"table"`
	State      string    `json:"state"` // running, done or failed
	Started    time.Time `json:"started"`
	Generation string    `json:"generation,omitempty"` // the index readers see once done
	Replaced   string    `json:"replaced,omitempty"`
	Rows       int64     `json:"rows,omitempty"`
	Seconds    float64   `json:"seconds,omitempty"`
	Error      string    `json:"error,omitempty"`
}

// reindexes runs the reindexes asked over HTTP, each in a goroutine bounded by the run's
// context, and remembers them for /status.
type reindexes struct {
	ctx  context.Context
	mu   sync.Mutex
	jobs []*reindexJob
}

func newReindexes(ctx context.Context) *reindexes { return &reindexes{ctx: ctx} }

// list is a copy of the jobs, oldest first.
func (rx *reindexes) list() []reindexJob {
	if rx == nil {
		return nil
	}
	rx.mu.Lock()
	defer rx.mu.Unlock()
	out := make([]reindexJob, len(rx.jobs))
	for i, j := range rx.jobs {
		out[i] = *j
	}
	return out
}

// reindex serves POST /admin/reindex: 202 with the job once it is started (it runs on; /status
// follows it), 400 for a body without a table, 404 for an unknown pipeline, 409 while the
// table's previous reindex runs, 415 without a JSON content type (as /admin/resnapshot).
func (rx *reindexes) reindex(r *http.Request, m statusSource) (int, reindexJob, string) {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return http.StatusUnsupportedMediaType, reindexJob{}, "the body must be JSON (Content-Type: application/json)"
	}
	var body reindexBody
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		return http.StatusBadRequest, reindexJob{}, "bad request body: " + err.Error()
	}
	if body.Table == "" {
		return http.StatusBadRequest, reindexJob{}, "table is required"
	}
	sts := m.Status()
	if body.Pipeline == "" {
		if len(sts) != 1 {
			return http.StatusBadRequest, reindexJob{}, fmt.Sprintf("pipeline is required: %d pipelines run here", len(sts))
		}
		body.Pipeline = sts[0].Pipeline
	}
	known := false
	for _, s := range sts {
		known = known || s.Pipeline == body.Pipeline
	}
	if !known {
		return http.StatusNotFound, reindexJob{}, fmt.Sprintf("%v: %q", mirror.ErrNoPipeline, body.Pipeline)
	}
	rx.mu.Lock()
	for _, j := range rx.jobs {
		if j.Pipeline == body.Pipeline && j.Table == body.Table && j.State == "running" {
			rx.mu.Unlock()
			return http.StatusConflict, *j, "a reindex of the table is running"
		}
	}
	job := &reindexJob{Pipeline: body.Pipeline, Table: body.Table, State: "running", Started: time.Now().UTC()}
	rx.jobs = append(rx.jobs, job)
	answer := *job // the goroutine changes job under mu from now on
	rx.mu.Unlock()
	go func() {
		rep, err := m.Reindex(rx.ctx, job.Pipeline, job.Table)
		rx.mu.Lock()
		defer rx.mu.Unlock()
		job.Seconds = time.Since(job.Started).Seconds()
		if err != nil {
			job.State, job.Error = "failed", err.Error()
			return
		}
		job.State, job.Generation, job.Replaced, job.Rows = "done", rep.Generation, rep.Replaced, rep.Rows
	}()
	return http.StatusAccepted, answer, ""
}

// requestReindex asks the cdcmirror serving addr to reindex a table (POST /admin/reindex),
// then follows it in /status until it is done or failed, printing the outcome. Interrupted,
// it leaves the reindex running there.
func requestReindex(ctx context.Context, w io.Writer, addr string, body reindexBody) error {
	if addr == "" {
		return usageError{errors.New("--metrics-addr is required: the running cdcmirror does the reindex")}
	}
	if body.Table == "" {
		return usageError{errors.New("--table is required")}
	}
	var ans struct {
		reindexJob
		Message string `json:"message"`
	}
	res, err := postAdmin(ctx, addr, "/admin/reindex", body, &ans)
	if err != nil {
		return err
	}
	switch {
	case res.StatusCode == http.StatusBadRequest || res.StatusCode == http.StatusNotFound || res.StatusCode == http.StatusConflict:
		return usageError{errors.New(ans.Message)}
	case res.StatusCode != http.StatusAccepted:
		return fmt.Errorf("/admin/reindex: %s: %s", res.Status, ans.Message)
	}
	fmt.Fprintf(w, "reindex of %s started in pipeline %s; changes go to both generations until the switch\n", ans.Table, ans.Pipeline)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(w, "not waiting any longer; the reindex goes on (`cdcmirror status` follows it)")
			return nil
		case <-tick.C:
		}
		doc, err := liveStatus(ctx, addr)
		if err != nil {
			return err
		}
		for _, j := range doc.Reindexes {
			if j.Pipeline != ans.Pipeline || j.Table != ans.Table || !j.Started.Equal(ans.Started) {
				continue
			}
			switch j.State {
			case "done":
				fmt.Fprintf(w, "reindex of %s done in %.1fs: readers see %s (was %s), %d rows\n", j.Table, j.Seconds, j.Generation, j.Replaced, j.Rows)
				return nil
			case "failed":
				return fmt.Errorf("reindex of %s failed: %s", j.Table, j.Error)
			}
		}
	}
}

// reindexLine is a reindex's line in `status`.
func reindexLine(j reindexJob) string {
	switch j.State {
	case "done":
		return fmt.Sprintf("reindex %s: done in %.1fs, readers see %s (was %s), %d rows", j.Table, j.Seconds, j.Generation, j.Replaced, j.Rows)
	case "failed":
		return fmt.Sprintf("reindex %s: failed after %.1fs: %s", j.Table, j.Seconds, j.Error)
	}
	return fmt.Sprintf("reindex %s: running for %s", j.Table, ago(j.Started))
}
