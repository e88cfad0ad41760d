package resnapjob

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
)

type book struct {
	mu    sync.Mutex
	state *State[string]
	now   time.Time
	b     *Book[string]
}

func newBook(state *State[string]) *book {
	k := &book{state: state, now: time.Unix(1000, 0)}
	k.b = New(Config[string]{
		Mu: &k.mu,
		State: func(create bool) *State[string] {
			if create && k.state == nil {
				k.state = &State[string]{}
			}
			return k.state
		},
		Table:  func(t string) cdc.TableID { return cdc.TableID{Table: t} },
		Now:    func() time.Time { return k.now },
		Log:    slog.New(slog.DiscardHandler),
		Prefix: "test", Attrs: []any{"source", "s"}, ErrKey: "err",
	}, state)
	return k
}

// TestBookJobs: a job queued once (a replay is not queued again), its progress table by table
// and chunk by chunk, a job that ends reported active until Published, the next job started
// with fresh figures, an all-tables job resolved to none finished at once.
func TestBookJobs(t *testing.T) {
	k := newBook(nil)
	if p := k.b.Progress(); p.Active || p.Resnapshot != "" {
		t.Fatalf("no job: %+v", p)
	}
	if _, _, ok := k.b.Current(); ok {
		t.Fatal("Current without a job")
	}
	k.b.Add(&Job[string]{ID: "a", Tables: []string{"t1", "t2"}, Total: 2})
	k.b.Add(&Job[string]{ID: "a", Tables: []string{"t1", "t2"}, Total: 2})
	k.b.Add(&Job[string]{ID: "b", All: true})
	if len(k.state.Jobs) != 2 {
		t.Fatalf("jobs %+v", k.state.Jobs)
	}
	if !k.b.EstimateNeeded() || k.b.EstimateNeeded() {
		t.Fatal("the estimate is asked once per job")
	}
	k.b.SetEstimate(100)
	k.now = k.now.Add(2 * time.Second)
	k.mu.Lock()
	k.b.ChunkDoneLocked(10, true, []string{"k10"})
	k.mu.Unlock()
	if j, after, ok := k.b.Current(); !ok || j.ID != "a" || len(after) != 1 || after[0] != "k10" {
		t.Fatalf("Current: %+v %v %v", j, after, ok)
	} else {
		j.Tables[0], after[0] = "changed", "changed" // a copy
	}
	p := k.b.Progress()
	want := cdc.SnapshotProgress{Active: true, Resnapshot: "a", Table: cdc.TableID{Table: "t1"}, TablesTotal: 2, RowsDone: 10,
		RowsEstimated: 100, RowsPerSecond: 5, Queued: 1}
	if p != want || k.state.Key[0] != "k10" {
		t.Fatalf("after a chunk: %+v, want %+v", p, want)
	}
	k.mu.Lock()
	k.b.ChunkDoneLocked(3, false, nil) // t1 done
	k.b.ChunkDoneLocked(4, false, nil) // t2 done: the job ends
	k.mu.Unlock()
	p = k.b.Progress()
	if !p.Active || p.Resnapshot != "a" || p.TablesDone != 2 || p.RowsDone != 17 {
		t.Fatalf("a job whose last rows are not published yet: %+v", p)
	}
	k.b.Published()
	p = k.b.Progress()
	if !p.Active || p.Resnapshot != "b" || p.RowsDone != 0 || p.RowsEstimated != 0 {
		t.Fatalf("the next job: %+v", p)
	}
	if !k.b.EstimateNeeded() {
		t.Fatal("the next job's estimate is not asked")
	}
	k.mu.Lock()
	k.b.ResolvedLocked(nil)
	k.mu.Unlock()
	if p := k.b.Progress(); p.Active || p.Resnapshot != "b" || len(k.state.Jobs) != 0 {
		t.Fatalf("an all-tables job that found none: %+v", p)
	}
}

// TestBookRun: Run waits for a job, retries a failure with Loop.Failed's wait and message
// shown in the progress, gives a job up on a permanent failure, and returns when ctx ends.
func TestBookRun(t *testing.T) {
	k := newBook(&State[string]{Jobs: []Job[string]{{ID: "a", Tables: []string{"t"}, Total: 1}}, Rows: 7})
	errPerm, errOnce := errors.New("refused"), errors.New("lost")
	steps := make(chan string, 10)
	var calls int
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		k.b.Run(ctx, Loop{
			Step: func(context.Context) error {
				k.mu.Lock()
				defer k.mu.Unlock()
				if len(k.state.Jobs) == 0 {
					steps <- "idle"
					return ErrIdle
				}
				calls++
				switch calls {
				case 1:
					steps <- "fail"
					return errOnce
				case 2:
					steps <- "give up"
					return errPerm
				}
				k.b.ChunkDoneLocked(1, false, nil)
				steps <- "done"
				return nil
			},
			Permanent: func(err error) (string, bool) { return err.Error(), errors.Is(err, errPerm) },
			Failed: func(err error, failures int) (string, time.Duration) {
				if failures != 1 {
					t.Errorf("failures %d", failures)
				}
				return "msg: " + err.Error(), time.Millisecond
			},
		})
	}()
	for _, want := range []string{"fail", "give up", "idle"} {
		if got := <-steps; got != want {
			t.Fatalf("step %q, want %q", got, want)
		}
	}
	if p := k.b.Progress(); p.Active || p.Resnapshot != "a" || p.Error != "given up: refused" || p.RowsDone != 7 {
		t.Fatalf("given up: %+v", p)
	}
	k.b.Add(&Job[string]{ID: "b", Tables: []string{"u"}, Total: 1})
	if got := <-steps; got != "done" {
		t.Fatalf("after a job was added: %q", got)
	}
	if got := <-steps; got != "idle" {
		t.Fatalf("after the job: %q", got)
	}
	k.b.Published()
	if p := k.b.Progress(); p.Active || p.Resnapshot != "b" || p.Error != "" || p.RowsDone != 1 {
		t.Fatalf("done: %+v", p)
	}
	cancel()
	<-done
}

// TestStateJSON: the checkpoint form of a state, and Clone's independence.
func TestStateJSON(t *testing.T) {
	s := &State[string]{Jobs: []Job[string]{{ID: "a", Tables: []string{"t"}, Total: 1, Where: "x > 1"}, {ID: "b", All: true}}, Key: []string{"k"}, Rows: 3}
	b, err := json.Marshal(s)
	if err != nil || string(b) != `{"jobs":[{"id":"a","tables":["t"],"total":1,"where":"x \u003e 1"},{"id":"b","all":true,"tables":null,"total":0}],"key":["k"],"rows":3}` {
		t.Fatalf("%s %v", b, err)
	}
	c := s.Clone()
	c.Jobs[0].Tables[0], c.Key[0] = "u", "l"
	if s.Jobs[0].Tables[0] != "t" || s.Key[0] != "k" {
		t.Fatal("Clone shares slices")
	}
	if (*State[string])(nil).Clone() != nil {
		t.Fatal("Clone of nil")
	}
	if Backoff(1) != time.Second || Backoff(3) != 4*time.Second || Backoff(9) != 30*time.Second {
		t.Fatal("Backoff")
	}
}
