package cdctest

// The crash harness of the sources' crash tests (TestPostgresCrashResume,
// TestMySQLCrashResume): a source's test re-executes its test binary as a pipeline
// subprocess (RunCrashChild: a cdc.Runner over the real source, a bbolt state file and a sink
// that appends every applied event to a file), SIGKILLs and restarts it while it commits
// numbered changes, and hands the sink log to CheckCrashSinkLog.

import (
	"context"
	"encoding/hex"
	"fmt"
	"maps"
	mathrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/subproc"
	"github.com/tributary-dev/tributary/statestore"
)

// CrashChange is one committed change of a crash test's writer: the row id, what happened,
// and the row's value afterwards (for a delete: the value it had).
type CrashChange struct {
	ID int
	Op cdc.Op
	V  int64
}

// CrashBatch is the child's batch size, CrashMaxTxEvents the most events a writer transaction
// may have (one per statement): together they bound the redeliveries after a kill.
const (
	CrashBatch       = 16
	CrashMaxTxEvents = 5
)

// CrashChild is one pipeline subprocess and the lines it prints.
type CrashChild = subproc.Child

// StartCrashChild runs the test binary's test (a -test.run pattern) as a pipeline subprocess
// with env added to the environment; it is killed when t ends.
func StartCrashChild(t *testing.T, test string, env []string) *CrashChild {
	t.Helper()
	return subproc.Start(t, "pipeline", test, env)
}

func ReadFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// CheckCrashSinkLog checks the sink log against the committed changes and the final table.
// The log has "S <run> <checkpoint hex or ->" when a run opened the source, then one
// "E <run> <id> <v> <version> <op> <checkpoint hex or ->" per applied event.
func CheckCrashSinkLog(t *testing.T, log string, changes []CrashChange, final map[int]int64) {
	t.Helper()
	checkCrashSinkLog(t, log, changes, final, true)
}

// CheckCrashSinkLogAtLeastOnce is CheckCrashSinkLog for a source that resumes from a position
// of its own rather than from the stored checkpoint (cdc/debezium: a consumer group's committed
// offsets, which trail the stored checkpoint by the acknowledgements a kill cut short) and
// whose partitions interleave differently in each run: a run may repeat anything not yet
// acknowledged, and commit order is checked per row. Still: every committed change reached
// the sink, each row's versions increase in commit order, and the log applied with external
// versions is the table.
func CheckCrashSinkLogAtLeastOnce(t *testing.T, log string, changes []CrashChange, final map[int]int64) {
	t.Helper()
	checkCrashSinkLog(t, log, changes, final, false)
}

// crashKey and crashEvent are one "E" line of a sink log: the row, its v, the version, the op
// and the checkpoint it carried ("-" for none).
type crashKey struct {
	id      int
	version int64
}

type crashEvent struct {
	crashKey
	v  int64
	op cdc.Op
	cp string
}

// parseE reads the fields of an "E <run> <id> <v> <version> <op> <checkpoint>" line.
func parseE(f []string) crashEvent {
	id, _ := strconv.Atoi(f[2])
	v, _ := strconv.ParseInt(f[3], 10, 64)
	ver, _ := strconv.ParseInt(f[4], 10, 64)
	op, _ := strconv.Atoi(f[5])
	return crashEvent{crashKey{id, ver}, v, cdc.Op(op), f[6]}
}

func checkCrashSinkLog(t *testing.T, log string, changes []CrashChange, final map[int]int64, strict bool) {
	t.Helper()
	type key = crashKey
	type ev = crashEvent
	var canon []ev               // every distinct event in the order first delivered
	seen := map[key]int{}        // index in canon
	cpAt := map[string]int{}     // checkpoint -> index in canon of the event that carried it
	next, run, runs := -1, -1, 0 // next: canon index the current run must deliver next
	redelivered, again := 0, 0   // again: in the current run
	for _, line := range strings.Split(log, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 3 && f[0] == "S" && !strict:
			runs++
			run, _ = strconv.Atoi(f[1])
			next = len(canon) // redeliveries are recognised by their key alone
		case len(f) == 7 && f[0] == "E" && !strict:
			e := parseE(f)
			if next < 0 {
				t.Fatalf("event delivered before any run opened the source: %q", line)
			}
			if i, dup := seen[e.crashKey]; dup {
				if canon[i].v != e.v || canon[i].op != e.op {
					t.Fatalf("run %d delivered %+v, another change at the version of %+v", run, e, canon[i])
				}
				redelivered++
				continue
			}
			seen[e.crashKey] = len(canon)
			canon = append(canon, e)
		case len(f) == 3 && f[0] == "S":
			runs++
			run, _ = strconv.Atoi(f[1])
			if f[2] == "-" {
				if len(canon) > 0 {
					t.Fatalf("run %d started without a checkpoint after events were delivered", run)
				}
				next, again = 0, 0
				continue
			}
			i, ok := cpAt[f[2]]
			if !ok {
				t.Fatalf("run %d started at a checkpoint no delivered event carried", run)
			}
			next, again = i+1, 0
		case len(f) == 7 && f[0] == "E":
			e := parseE(f)
			if next < 0 {
				t.Fatalf("event delivered before any run opened the source: %q", line)
			}
			// A run delivers exactly what follows its checkpoint, in order: anything it repeats
			// lies after the stored checkpoint, and nothing is skipped.
			if next < len(canon) {
				if canon[next] != e {
					t.Fatalf("run %d delivered %+v where %+v (the next after its checkpoint) was due", run, e, canon[next])
				}
				redelivered++
				again++
				// The runner stores a batch's last transaction end after the sink applied it, so a
				// kill repeats at most the batch whose checkpoint was not yet saved and the part of
				// a transaction that an earlier batch ended inside.
				if again > CrashBatch+CrashMaxTxEvents-1 {
					t.Fatalf("run %d redelivered %d events, more than the last batch and an unfinished transaction", run, again)
				}
			} else {
				if _, dup := seen[e.crashKey]; dup {
					t.Fatalf("run %d delivered %+v twice", run, e)
				}
				seen[e.crashKey] = len(canon)
				canon = append(canon, e)
				if e.cp != "-" {
					cpAt[e.cp] = len(canon) - 1
				}
			}
			next++
		case strings.TrimSpace(line) != "":
			t.Fatalf("torn sink log line %q", line)
		}
	}

	// Every committed change reached the sink, in commit order (per row when not strict), with
	// versions increasing per row.
	at := map[CrashChange]int{}
	verOf := map[CrashChange]int64{}
	lastVer := map[int]int64{}
	for i, e := range canon {
		if e.op != cdc.Read {
			at[CrashChange{ID: e.id, Op: e.op, V: e.v}] = i
			verOf[CrashChange{ID: e.id, Op: e.op, V: e.v}] = e.version
		}
		if prev, ok := lastVer[e.id]; ok && e.version <= prev && strict {
			t.Fatalf("row %d: version %d after %d", e.id, e.version, prev)
		}
		lastVer[e.id] = e.version
	}
	prev := -1
	prevRow := map[int]int64{} // not strict: the version of each row's previous committed change
	for _, c := range changes {
		i, ok := at[c]
		if !ok {
			t.Fatalf("committed change %+v never reached the sink", c)
		}
		if !strict {
			if pv, ok := prevRow[c.ID]; ok && verOf[c] <= pv {
				t.Fatalf("committed change %+v has version %d, not above its row's previous change (%d)", c, verOf[c], pv)
			}
			prevRow[c.ID] = verOf[c]
			continue
		}
		if i <= prev {
			t.Fatalf("committed change %+v reached the sink out of commit order", c)
		}
		prev = i
	}

	// External versioning over the whole log, in delivery order with every redelivery, yields
	// exactly the table: a change applies only when its version is above the row's stored one.
	type doc struct {
		version int64
		v       int64
		deleted bool
	}
	docs := map[int]doc{}
	for _, line := range strings.Split(log, "\n") {
		f := strings.Fields(line)
		if len(f) != 7 || f[0] != "E" {
			continue
		}
		e := parseE(f)
		if d, ok := docs[e.id]; ok && e.version <= d.version {
			continue
		}
		docs[e.id] = doc{e.version, e.v, e.op == cdc.Delete}
	}
	for id, d := range docs {
		want, ok := final[id]
		switch {
		case d.deleted && ok:
			t.Fatalf("row %d is in the table but deleted in the sink", id)
		case !d.deleted && !ok:
			t.Fatalf("row %d is in the sink but not in the table", id)
		case !d.deleted && d.v != want:
			t.Fatalf("row %d: sink v %d, table v %d", id, d.v, want)
		}
	}
	for id := range final {
		if d, ok := docs[id]; !ok || d.deleted {
			t.Fatalf("row %d of the table is missing from the sink", id)
		}
	}
	t.Logf("%d runs, %d distinct events, %d redelivered after a restart", runs, len(canon), redelivered)
}

// RunCrashChild runs the pipeline: the runner over src, a bbolt state file and a sink that
// appends to dir/sink.log. It prints "opened" once the source is open and "checkpointed"
// after the first checkpoint was saved.
func RunCrashChild(t *testing.T, dir string, run int, src cdc.Source) {
	store, err := statestore.Open(filepath.Join(dir, "state.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	log, err := os.OpenFile(filepath.Join(dir, "sink.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	dlq, err := cdc.OpenFileDLQ(filepath.Join(dir, "dlq.jsonl"), nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := cdc.NewRunner("crash", &loggedSource{src: src, log: log, run: run}, &fileSink{log: log, run: run},
		&announcingStore{CheckpointStore: store}, dlq, &cdc.RunnerOptions{BatchMaxEvents: CrashBatch, BatchMaxWait: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func cpText(cp cdc.Checkpoint) string {
	if cp == nil {
		return "-"
	}
	return hex.EncodeToString(cp)
}

// loggedSource records in the sink log which checkpoint each run opened the source at: the
// checker needs it to tell redeliveries after the checkpoint from anything else.
type loggedSource struct {
	src cdc.Source
	log *os.File
	run int
}

func (s *loggedSource) Open(ctx context.Context, cp cdc.Checkpoint) (cdc.Stream, error) {
	st, err := s.src.Open(ctx, cp)
	if err != nil {
		return nil, err
	}
	// The leading newline ends a line a killed predecessor may have torn.
	if _, err := fmt.Fprintf(s.log, "\nS %d %s\n", s.run, cpText(cp)); err != nil {
		return nil, err
	}
	if err := s.log.Sync(); err != nil {
		return nil, err
	}
	fmt.Println("opened")
	return st, nil
}

// announcingStore tells the parent when the first checkpoint is durable.
type announcingStore struct {
	cdc.CheckpointStore
	said bool
}

func (s *announcingStore) SaveCheckpoint(ctx context.Context, pipeline string, cp cdc.Checkpoint) error {
	if err := s.CheckpointStore.SaveCheckpoint(ctx, pipeline, cp); err != nil {
		return err
	}
	if !s.said {
		s.said = true
		fmt.Println("checkpointed")
	}
	return nil
}

// fileSink applies a batch by appending one line per event in one write, fsynced before it
// returns: the log is at least as durable as the checkpoint saved after it.
type fileSink struct {
	log *os.File
	run int
}

func (s *fileSink) Write(ctx context.Context, batch []cdc.Event) ([]cdc.DeadLetter, error) {
	var b strings.Builder
	for _, ev := range batch {
		row := ev.After
		if ev.Op == cdc.Delete {
			row = ev.Before
		}
		if len(row) < 2 {
			return nil, fmt.Errorf("event at %v has no row image", ev.Position)
		}
		fmt.Fprintf(&b, "E %d %v %v %d %d %s\n", s.run, row[0], row[1], ev.Position.Version(), ev.Op, cpText(ev.Checkpoint))
	}
	if _, err := s.log.WriteString(b.String()); err != nil {
		return nil, err
	}
	return nil, s.log.Sync()
}

// CrashScenario is one crash test's schedule: start the pipeline subprocess, and once it has
// stored its first checkpoint start the writer; then Kills times wait a random moment,
// SIGKILL the child and start the next run from the state file; finally stop the writer and let
// the last run catch up until the writer's sentinel row reaches the sink.
type CrashScenario struct {
	ChildTest string   // -test.run pattern selecting the pipeline subprocess
	Env       []string // the subprocess's environment
	RunEnv    string   // variable that tells the subprocess its run number
	Dir       string   // the directory the subprocess writes sink.log into
	Kills     int
	Sentinel  int // id and v of the writer's last committed row
	// Write commits transactions until stop is closed, then the sentinel row, and returns.
	Write func(ctx context.Context, stop <-chan struct{}) error
}

// Run plays the scenario and returns the sink log once the last run has delivered the sentinel.
func (sc CrashScenario) Run(ctx context.Context, t *testing.T) string {
	t.Helper()
	stop := make(chan struct{})
	writerDone := make(chan error, 1)
	var child *CrashChild // the last one started catches up at the end
	for run := 0; run <= sc.Kills; run++ {
		child = StartCrashChild(t, sc.ChildTest, append(slices.Clone(sc.Env), sc.RunEnv+"="+strconv.Itoa(run)))
		if run == 0 {
			// The first run stores a checkpoint (from its snapshot) before anything is written,
			// so no later run starts without one.
			child.Await(ctx, t, "checkpointed")
			go func() { writerDone <- sc.Write(ctx, stop) }()
		} else {
			child.Await(ctx, t, "opened")
		}
		if run == sc.Kills {
			break
		}
		time.Sleep(time.Duration(50+mathrand.IntN(400)) * time.Millisecond)
		child.Kill(t)
	}
	close(stop)
	if err := <-writerDone; err != nil {
		t.Fatal(err)
	}
	// The sentinel is the last commit: once the sink has it, it has everything before it.
	log := filepath.Join(sc.Dir, "sink.log")
	for !strings.Contains(ReadFile(t, log), fmt.Sprintf(" %d %d ", sc.Sentinel, sc.Sentinel)) {
		select {
		case <-ctx.Done():
			t.Fatal("the last run never delivered the final transaction")
		case <-child.Done():
			t.Fatal("the last run exited before it delivered the final transaction")
		case <-time.After(20 * time.Millisecond):
		}
	}
	child.Kill(t)
	return ReadFile(t, log)
}

// CrashWriter commits numbered transactions of 2 to CrashMaxTxEvents random inserts, updates and
// deletes over rows 1..Keys of a table with columns (id, v), and remembers every committed change
// in commit order. Each change writes a distinct v, so the sink log shows which change it is
// (deletes by the v of the row they removed). The SQL is the same for both sources.
type CrashWriter struct {
	Table    string // quoted for the source's dialect
	Keys     int
	Sentinel int // id and v of the last row, committed once stop is closed
	// Commit runs stmts in one transaction.
	Commit func(ctx context.Context, stmts []string) error

	// Quiet, when set, runs after every 16th transaction: a quiet spell of the captured table,
	// in which a source may move its server position without a change (pgcdc's idle
	// checkpoints while other tables write), so that kills also land there.
	Quiet func(ctx context.Context) error

	Rows    map[int]int64 // committed contents; seed it with rows committed beforehand
	Changes []CrashChange // committed changes in commit order
	Txs     int
}

// Run commits transactions until stop is closed, then the sentinel row. It fits
// CrashScenario.Write.
func (w *CrashWriter) Run(ctx context.Context, stop <-chan struct{}) error {
	for tx := 1; ; tx++ {
		final := false
		select {
		case <-stop:
			final = true
		default:
		}
		rows := maps.Clone(w.Rows)
		var stmts []string
		var chs []CrashChange
		if final {
			stmts = append(stmts, fmt.Sprintf("INSERT INTO %s VALUES (%d, %d)", w.Table, w.Sentinel, w.Sentinel))
			chs = append(chs, CrashChange{ID: w.Sentinel, Op: cdc.Insert, V: int64(w.Sentinel)})
		} else {
			for seq := range 2 + mathrand.IntN(CrashMaxTxEvents-1) {
				id := 1 + mathrand.IntN(w.Keys)
				v := int64(tx)*100 + int64(seq)
				old, exists := rows[id]
				switch {
				case !exists:
					stmts = append(stmts, fmt.Sprintf("INSERT INTO %s VALUES (%d, %d)", w.Table, id, v))
					chs, rows[id] = append(chs, CrashChange{ID: id, Op: cdc.Insert, V: v}), v
				case mathrand.IntN(3) == 0:
					stmts = append(stmts, fmt.Sprintf("DELETE FROM %s WHERE id = %d", w.Table, id))
					chs = append(chs, CrashChange{ID: id, Op: cdc.Delete, V: old})
					delete(rows, id)
				default:
					stmts = append(stmts, fmt.Sprintf("UPDATE %s SET v = %d WHERE id = %d", w.Table, v, id))
					chs, rows[id] = append(chs, CrashChange{ID: id, Op: cdc.Update, V: v}), v
				}
			}
		}
		if err := w.Commit(ctx, stmts); err != nil {
			return err
		}
		w.Rows, w.Changes, w.Txs = rows, append(w.Changes, chs...), tx
		if final {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		// A short pause keeps the volume moderate, so the test stays quick.
		if w.Quiet != nil && tx%16 == 0 {
			if err := w.Quiet(ctx); err != nil {
				return err
			}
			continue
		}
		time.Sleep(time.Duration(mathrand.IntN(3)) * time.Millisecond)
	}
}
