package cdc_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/statestore"
)

// The crash test's pipeline: crashTxs numbered transactions of txSize(n) events each; every
// crashMalformedEvery-th transaction's first event is malformed (it must reach the DLQ).
const (
	crashTxs            = 1500
	crashMaxTx          = 5
	crashBatch          = 8
	crashMalformedEvery = 97
	crashDirEnv         = "CDC_RUNNER_CRASH_DIR"
	crashRunEnv         = "CDC_RUNNER_CRASH_RUN"
)

func txSize(n int) int { return 1 + n*7%crashMaxTx }

// TestRunnerCrash kills a pipeline process (a subprocess running a Runner over a durable
// statestore, a sink that appends to a file, a file DLQ) at random moments, restarts it from
// its state file until it finishes, and then checks row by row that every committed
// transaction reached the sink -- none lost -- and that a restart redelivered only what came
// after the stored checkpoint: the unfinished transaction and the last unacknowledged batch.
func TestRunnerCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns subprocesses")
	}
	dir := t.TempDir()
	kills := 0
	for run := 0; ; run++ {
		if run > 200 {
			t.Fatal("the pipeline never finished")
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestRunnerCrashChild$")
		cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashRunEnv+"="+strconv.Itoa(run))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		for sc.Scan() && sc.Text() != "started" {
		}
		kill := run < 12 // then let it finish
		if kill {
			time.Sleep(time.Duration(rand.IntN(15_000)) * time.Microsecond)
			_ = cmd.Process.Kill()
		}
		for sc.Scan() {
		}
		err = cmd.Wait()
		var exit *exec.ExitError
		switch {
		case err == nil:
			t.Logf("finished in run %d after %d kills", run, kills)
			checkCrashLog(t, dir)
			return
		case kill && errors.As(err, &exit):
			kills++
		default:
			t.Fatalf("run %d: %v", run, err)
		}
	}
}

// checkCrashLog verifies the sink's log: "S <run> <checkpoint>" when a run starts, then
// "E <run> <tx> <seq>" per event the sink applied.
func checkCrashLog(t *testing.T, dir string) {
	data, err := os.ReadFile(filepath.Join(dir, "sink.log"))
	if err != nil {
		t.Fatal(err)
	}
	type ev struct{ tx, seq int }
	seenIn := map[ev]int{} // event -> the first run that delivered it
	lastRun := -1
	startCP := map[int]int{}
	var runEvents = map[int][]ev{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 3 && f[0] == "S":
			run, _ := strconv.Atoi(f[1])
			cp, _ := strconv.Atoi(f[2])
			if prev, ok := startCP[lastRun]; ok && cp < prev {
				t.Fatalf("run %d started at checkpoint %d, below run %d's %d", run, cp, lastRun, prev)
			}
			startCP[run], lastRun = cp, run
		case len(f) == 4 && f[0] == "E":
			run, _ := strconv.Atoi(f[1])
			tx, _ := strconv.Atoi(f[2])
			seq, _ := strconv.Atoi(f[3])
			runEvents[run] = append(runEvents[run], ev{tx, seq})
		case strings.TrimSpace(line) != "":
			t.Fatalf("torn sink log line %q", line)
		}
	}
	runs := 0
	dups := 0
	for run := 0; run <= lastRun; run++ {
		evs, ok := runEvents[run]
		if _, started := startCP[run]; !started {
			if ok {
				t.Fatalf("run %d delivered events without starting", run)
			}
			continue // killed before it opened the source
		}
		runs++
		cp := startCP[run]
		if len(evs) > 0 && evs[0] != firstAfter(cp) {
			t.Fatalf("run %d from checkpoint %d began with %v", run, cp, evs[0])
		}
		again := map[ev]bool{}
		for _, e := range evs {
			if e.tx <= cp {
				t.Fatalf("run %d from checkpoint %d delivered transaction %d again", run, cp, e.tx)
			}
			first, ok := seenIn[e]
			switch {
			case !ok:
				seenIn[e] = run
			case first < run:
				// Delivered by an earlier run: allowed only after that run's stored checkpoint,
				// i.e. its unfinished transaction and its last batch.
				again[e] = true
			}
		}
		// Counted once per event: replays of a batch inside one run (backpressure) are not
		// redeliveries across a crash.
		redelivered := len(again)
		if redelivered > crashMaxTx-1+crashBatch {
			t.Fatalf("run %d redelivered %d events from before its start, more than the unfinished transaction and the last batch", run, redelivered)
		}
		dups += redelivered
	}
	for tx := 1; tx <= crashTxs; tx++ {
		for seq := range txSize(tx) {
			if malformed(tx, seq) {
				continue
			}
			if _, ok := seenIn[ev{tx, seq}]; !ok {
				t.Fatalf("transaction %d event %d never reached the sink", tx, seq)
			}
		}
	}
	// Every malformed event reached the dead-letter queue.
	f, err := os.Open(filepath.Join(dir, "dlq.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines, _, err := cdc.ReadDeadLetters(f)
	if err != nil {
		t.Fatal(err)
	}
	dead := map[string]bool{}
	for _, l := range lines {
		dead[l.Position] = true
	}
	for tx := crashMalformedEvery; tx <= crashTxs; tx += crashMalformedEvery {
		if !dead[(pos{tx, 0}).String()] {
			t.Fatalf("malformed event of transaction %d is not in the DLQ", tx)
		}
	}
	t.Logf("%d runs that reached the source, %d events redelivered across crashes", runs, dups)
}

func malformed(tx, seq int) bool { return seq == 0 && tx%crashMalformedEvery == 0 }

// firstAfter is the first event the sink should see after checkpoint cp.
func firstAfter(cp int) struct{ tx, seq int } {
	for tx := cp + 1; ; tx++ {
		for seq := range txSize(tx) {
			if !malformed(tx, seq) {
				return struct{ tx, seq int }{tx, seq}
			}
		}
	}
}

// TestRunnerCrashChild is TestRunnerCrash's pipeline process; it does nothing in a normal run.
func TestRunnerCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("the subprocess of TestRunnerCrash")
	}
	run, _ := strconv.Atoi(os.Getenv(crashRunEnv))
	store, err := statestore.Open(filepath.Join(dir, "state.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	log, err := os.OpenFile(filepath.Join(dir, "sink.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	dlq, err := cdc.OpenFileDLQ(filepath.Join(dir, "dlq.jsonl"), nil)
	if err != nil {
		t.Fatal(err)
	}
	sink := &logSink{log: log, run: run, rnd: rand.New(rand.NewPCG(uint64(run), 7))}
	src := &countingSource{log: log, run: run}
	r, err := cdc.NewRunner("crash", src, sink, store, dlq, &cdc.RunnerOptions{BatchMaxEvents: crashBatch, BatchMaxWait: time.Millisecond,
		BackoffMin: 50 * time.Microsecond, BackoffMax: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("started")
	if err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// logSink appends one line per event to the log in one write per batch (what the destination
// applied), and now and then applies only a prefix and answers backpressure, as a bulk
// request that half-succeeded would.
type logSink struct {
	log *os.File
	run int
	rnd *rand.Rand
}

func (s *logSink) Write(ctx context.Context, batch []cdc.Event) ([]cdc.DeadLetter, error) {
	n := len(batch)
	pressure := s.rnd.IntN(10) == 0
	if pressure {
		n = s.rnd.IntN(n + 1)
	}
	var b strings.Builder
	for _, ev := range batch[:n] {
		p := ev.Position.(pos)
		fmt.Fprintf(&b, "E %d %d %d\n", s.run, p.tx, p.seq)
	}
	if _, err := s.log.WriteString(b.String()); err != nil {
		return nil, err
	}
	if pressure {
		return nil, &cdc.BackpressureError{Err: errors.New("partially applied")}
	}
	return nil, nil
}

// countingSource emits transactions 1..crashTxs, starting after the checkpoint (a decimal
// transaction number), and logs where each run started.
type countingSource struct {
	log *os.File
	run int
}

func (s *countingSource) Open(ctx context.Context, cp cdc.Checkpoint) (cdc.Stream, error) {
	last := 0
	if cp != nil {
		var err error
		if last, err = strconv.Atoi(string(cp)); err != nil {
			return nil, err
		}
	}
	if _, err := fmt.Fprintf(s.log, "\nS %d %d\n", s.run, last); err != nil {
		return nil, err
	}
	st := &countingStream{ch: make(chan cdc.Event, 16), done: make(chan struct{})}
	go st.emit(last + 1)
	return st, nil
}

type countingStream struct {
	ch   chan cdc.Event
	done chan struct{}
	once sync.Once
}

func (s *countingStream) emit(from int) {
	defer close(s.ch)
	for tx := from; tx <= crashTxs; tx++ {
		evs := txEvents(tx, txSize(tx))
		if tx%crashMalformedEvery == 0 {
			evs[0].Malformed = errors.New("undecodable column")
		}
		for _, ev := range evs {
			select {
			case s.ch <- ev:
			case <-s.done:
				return
			}
		}
	}
}

func (s *countingStream) Events() <-chan cdc.Event                  { return s.ch }
func (s *countingStream) Err() error                                { return nil }
func (s *countingStream) Ack(context.Context, cdc.Checkpoint) error { return nil }
func (s *countingStream) Progress() cdc.SnapshotProgress            { return cdc.SnapshotProgress{} }
func (s *countingStream) Close() error                              { s.once.Do(func() { close(s.done) }); return nil }
