// Package resnapjob is the re-snapshot job bookkeeping both native sources share (cdc/pgcdc and
// cdc/mysqlcdc, their resnap_run.go): the jobs a checkpoint carries (State, Job), their
// progress figures (Book: queueing, a table or a job done, given up, cdc.SnapshotProgress),
// and the goroutine's loop that reads chunk after chunk, waits while there is no job, backs off
// after failures and gives a job up when its failure is the request's (Book.Run). What a chunk
// is -- its query, its watermarks, how its rows are decided -- stays with each source.
package resnapjob

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/tributary-dev/tributary/cdc"
)

// Job is one re-snapshot request being carried out: the tables left, in order, the first being
// read (All: every captured table with a primary key, resolved when the job starts). T is the
// source's table name. Its JSON is part of each source's checkpoint.
type Job[T any] struct {
	ID     string `json:"id"`
	All    bool   `json:"all,omitempty"`
	Tables []T    `json:"tables"`
	Total  int    `json:"total"` // the tables of the request
	Where  string `json:"where,omitempty"`
}

// State is the re-snapshot part of a checkpoint: the jobs not finished, the first running.
type State[T any] struct {
	Jobs []Job[T] `json:"jobs"`
	// Key is the last key read of Jobs[0].Tables[0], in the source's text form (nil: the
	// table's first chunk is next).
	Key  []string `json:"key,omitempty"`
	Rows int64    `json:"rows"` // rows Jobs[0]'s chunks read so far
}

// Clone is a deep copy of s (nil for nil).
func (s *State[T]) Clone() *State[T] {
	if s == nil {
		return nil
	}
	c := &State[T]{Key: slices.Clone(s.Key), Rows: s.Rows, Jobs: make([]Job[T], len(s.Jobs))}
	for i, j := range s.Jobs {
		j.Tables = slices.Clone(j.Tables)
		c.Jobs[i] = j
	}
	return c
}

// ErrIdle is what a Loop's Step returns when there is no job to do.
var ErrIdle = errors.New("resnapjob: no re-snapshot job")

// Config is what a Book needs of its source.
type Config[T any] struct {
	// Mu guards the state and the Book: the source's mutex, which its stream's side takes too.
	Mu *sync.Mutex
	// State is the source's state (nil: none yet); with create, a nil state is replaced by an
	// empty one first. Called with Mu held.
	State func(create bool) *State[T]
	// Table is a table's TableID, for the progress.
	Table func(T) cdc.TableID
	// Now is the clock of the progress rates.
	Now func() time.Time
	// Log gets the Info, Warn and Error lines, each "<Prefix>: re-snapshot ..." with Attrs
	// (the source's name: "slot", x or "source", x) and the error under ErrKey.
	Log    *slog.Logger
	Prefix string
	Attrs  []any
	ErrKey string
}

// Book keeps a stream's re-snapshot jobs: the figures of the job running (Jobs[0]) and of the
// last that ended. Methods named Locked are called with Config.Mu held, the others take it.
type Book[T any] struct {
	c Config[T]
	// The figures of Jobs[0]: rows read by this stream since t0 (from rows0), the estimate
	// (-1: not asked yet), the last trouble; and the last job's figures once it ended.
	t0       time.Time
	rows0    int64
	estimate int64
	lastErr  string
	last     cdc.SnapshotProgress
	// ending says that a job ended with a chunk whose rows are not all in the stream's
	// channel yet: it is reported active until they are (Published).
	ending bool
	wake   chan struct{} // a job was added (capacity 1)
}

// New returns the Book of a stream whose checkpoint carried state (nil: none); its figures
// start now, with the rows state says were read.
func New[T any](c Config[T], state *State[T]) *Book[T] {
	b := &Book[T]{c: c, t0: c.Now(), estimate: -1, wake: make(chan struct{}, 1)}
	if state != nil {
		b.rows0 = state.Rows
	}
	return b
}

func (b *Book[T]) log(level slog.Level, msg string, args ...any) {
	b.c.Log.Log(context.Background(), level, b.c.Prefix+": "+msg, append(slices.Clip(b.c.Attrs), args...)...)
}

// Add queues a decoded request; one already queued (replayed) is not queued twice.
func (b *Book[T]) Add(job *Job[T]) {
	b.c.Mu.Lock()
	s := b.c.State(true)
	for _, j := range s.Jobs {
		if j.ID == job.ID {
			b.c.Mu.Unlock()
			return
		}
	}
	s.Jobs = append(s.Jobs, *job)
	if len(s.Jobs) == 1 {
		b.startJobLocked(s)
	}
	b.c.Mu.Unlock()
	b.log(slog.LevelInfo, "re-snapshot queued", "id", job.ID, "tables", job.Total, "all", job.All)
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// startJobLocked resets the figures for Jobs[0].
func (b *Book[T]) startJobLocked(s *State[T]) {
	b.t0, b.rows0, b.estimate, b.lastErr = b.c.Now(), s.Rows, -1, ""
}

func (b *Book[T]) rate(s *State[T]) float64 {
	if el := b.c.Now().Sub(b.t0).Seconds(); el > 0 {
		return float64(s.Rows-b.rows0) / el
	}
	return 0
}

// Progress is the re-snapshot's SnapshotProgress: Jobs[0]'s while one runs, else the last one's.
func (b *Book[T]) Progress() cdc.SnapshotProgress {
	b.c.Mu.Lock()
	defer b.c.Mu.Unlock()
	if b.ending {
		p := b.last
		p.Active = true
		return p
	}
	s := b.c.State(false)
	if s == nil || len(s.Jobs) == 0 {
		return b.last
	}
	j := &s.Jobs[0]
	p := cdc.SnapshotProgress{Active: true, Resnapshot: j.ID, TablesTotal: j.Total, TablesDone: j.Total - len(j.Tables),
		RowsDone: s.Rows, RowsEstimated: max(b.estimate, 0), Queued: len(s.Jobs) - 1, Error: b.lastErr}
	if len(j.Tables) > 0 {
		p.Table = b.c.Table(j.Tables[0])
	}
	p.RowsPerSecond = b.rate(s)
	return p
}

// Current is a copy of Jobs[0] and the key its first table's next chunk starts after (nil:
// the table's start); ok is false when there is no job.
func (b *Book[T]) Current() (job Job[T], after []string, ok bool) {
	b.c.Mu.Lock()
	defer b.c.Mu.Unlock()
	s := b.c.State(false)
	if s == nil || len(s.Jobs) == 0 {
		return job, nil, false
	}
	job = s.Jobs[0]
	job.Tables = slices.Clone(job.Tables)
	return job, slices.Clone(s.Key), true
}

// FinishLocked drops Jobs[0] (done, or given up with why), keeping its figures.
func (b *Book[T]) FinishLocked(why string) {
	s := b.c.State(false)
	j := s.Jobs[0]
	b.last = cdc.SnapshotProgress{Resnapshot: j.ID, TablesTotal: j.Total, TablesDone: j.Total - len(j.Tables),
		RowsDone: s.Rows, RowsEstimated: max(b.estimate, 0), Error: why, RowsPerSecond: b.rate(s)}
	s.Jobs = slices.Delete(s.Jobs, 0, 1)
	s.Key, s.Rows = nil, 0
	if len(s.Jobs) > 0 {
		b.startJobLocked(s)
	}
}

// NextTableLocked moves Jobs[0] to its next table, or ends it after its last: a checkpoint
// never carries a job without tables.
func (b *Book[T]) NextTableLocked() {
	s := b.c.State(false)
	j := &s.Jobs[0]
	j.Tables = slices.Delete(j.Tables, 0, 1)
	s.Key = nil
	if len(j.Tables) == 0 {
		b.log(slog.LevelInfo, "re-snapshot done", "id", j.ID, "rows", s.Rows)
		b.FinishLocked("")
	}
}

// ChunkDoneLocked records a chunk of Jobs[0]'s first table decided: its rows were read; more
// says the table may hold more after last (its last row's key), else the table is done --
// and, after the job's last table, the job, reported active until Published.
func (b *Book[T]) ChunkDoneLocked(rows int, more bool, last []string) {
	s := b.c.State(false)
	s.Rows += int64(rows)
	if more {
		s.Key = last
	} else {
		jobs := len(s.Jobs)
		b.NextTableLocked()
		b.ending = b.ending || len(s.Jobs) < jobs
	}
	b.lastErr = ""
}

// Published says that the rows of the chunk that ended a job are in the stream's channel.
func (b *Book[T]) Published() {
	b.c.Mu.Lock()
	b.ending = false
	b.c.Mu.Unlock()
}

// ResolvedLocked gives an all-tables job (Jobs[0]) the tables it reads, or ends it when there
// are none.
func (b *Book[T]) ResolvedLocked(tables []T) {
	j := &b.c.State(false).Jobs[0]
	j.All, j.Tables, j.Total = false, tables, len(tables)
	if j.Total == 0 {
		b.log(slog.LevelWarn, "a re-snapshot of every table found none with a primary key", "id", j.ID)
		b.FinishLocked("")
	}
}

// ClearErr forgets the last trouble: a chunk went through.
func (b *Book[T]) ClearErr() {
	b.c.Mu.Lock()
	b.lastErr = ""
	b.c.Mu.Unlock()
}

// EstimateNeeded says whether Jobs[0]'s rows were not estimated yet; it marks the estimate as
// asked (unknown, 0), so a failed estimate is not asked again for this job.
func (b *Book[T]) EstimateNeeded() bool {
	b.c.Mu.Lock()
	defer b.c.Mu.Unlock()
	if b.estimate >= 0 {
		return false
	}
	b.estimate = 0
	return true
}

// SetEstimate records Jobs[0]'s estimated rows.
func (b *Book[T]) SetEstimate(n int64) {
	b.c.Mu.Lock()
	b.estimate = n
	b.c.Mu.Unlock()
}

// Loop is what Run needs of a source.
type Loop struct {
	// Step reads one chunk of Jobs[0] (or resolves its tables, or skips a table), returning
	// ErrIdle when there is no job.
	Step func(ctx context.Context) error
	// Permanent says whether a failure is the request's fault (retrying cannot help), with
	// the reason the job is given up with.
	Permanent func(err error) (why string, permanent bool)
	// Failed is told of a failure that is retried (the failures-th in a row): it returns the
	// message shown in the progress and logged, and the wait before the next attempt
	// (Backoff(failures) unless the source knows better); it drops what the failure spoilt.
	Failed func(err error, failures int) (msg string, wait time.Duration)
}

// Backoff is the wait after the failures-th failure in a row: 1s, doubling, at most 30s.
func Backoff(failures int) time.Duration {
	return min(time.Duration(1<<min(failures-1, 5))*time.Second, 30*time.Second)
}

// Run is the goroutine: chunk after chunk while there are jobs, waiting for one while there
// is none, riding through failures, until ctx ends. A permanent failure gives Jobs[0] up
// (Error "given up: <why>", logged as an Error); another is retried after Loop.Failed's wait.
func (b *Book[T]) Run(ctx context.Context, l Loop) {
	failures := 0
	for {
		err := l.Step(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, ErrIdle):
			failures = 0
			select {
			case <-ctx.Done():
				return
			case <-b.wake:
			}
			continue
		case err == nil:
			failures = 0
			continue
		}
		if why, permanent := l.Permanent(err); permanent {
			b.c.Mu.Lock()
			if s := b.c.State(false); s != nil && len(s.Jobs) > 0 {
				b.log(slog.LevelError, "re-snapshot given up", "id", s.Jobs[0].ID, b.c.ErrKey, why)
				b.FinishLocked("given up: " + why)
			}
			b.c.Mu.Unlock()
			continue
		}
		failures++
		msg, wait := l.Failed(err, failures)
		b.c.Mu.Lock()
		b.lastErr = msg
		b.c.Mu.Unlock()
		b.log(slog.LevelWarn, "re-snapshot chunk failed; retrying", "attempt", failures, "retry_in", wait, b.c.ErrKey, msg)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}
