package mirror_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/mirrortest"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/mirror"
)

// tpcbTransactions is how many pgbench transactions each case of BenchmarkTPCBCPU catches up
// with (two clients); the default mix writes four changes per transaction.
const tpcbTransactions = 6000

// BenchmarkTPCBCPU is the mirror's own CPU time per event on pgbench's TPC-B mix: the time
// this process spent (getrusage user + system: pgoutput decoding, the runner, normalization,
// _bulk encoding, the HTTP client, dead-letter writes -- PostgreSQL and Elasticsearch are
// other processes), divided by the events handled. Per case, in a database of its own: pgbench
// -i at scale 1, a mirror reads the snapshot (snapshot-cpu-us/row), stops; pgbench runs
// tpcbTransactions transactions; a new mirror resumes and catches up (cpu-us/event,
// events/s). Cases:
//
//   - tpcb: the four pgbench tables, the keyless pgbench_history dead-lettered (keyless:
//     dead_letter), one change in four;
//   - tpcb-keyed: the same run with pgbench_history not captured, so keyed-cpu-us/event of
//     the two cases shows what dead-lettering the keyless table costs the others.
//
// A CPU profile of the catch-up alone: TRIBUTARY_TPCB_PROFILE=<dir> writes <dir>/<case>.pprof.
// Elasticsearch only (TRIBUTARY_ES_URL); one iteration is the measurement (-benchtime 1x).
func BenchmarkTPCBCPU(b *testing.B) {
	dsn := testenv.Require(b, testenv.PostgresDSN)
	esURL := testenv.Require(b, testenv.ElasticsearchURL)
	if _, err := exec.LookPath("pgbench"); err != nil {
		b.Fatal("BenchmarkTPCBCPU needs pgbench on PATH (Debian: postgresql-client)")
	}
	for _, c := range []struct {
		name    string
		history bool
	}{{"tpcb", true}, {"tpcb-keyed", false}} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				tpcbCPU(b, dsn, esURL, c.name, c.history)
			}
		})
	}
}

func tpcbCPU(b *testing.B, dsn, esURL, name string, history bool) {
	db := "mir_tpcb_" + estest.RandomHex(b, 4)
	dbDSN := tpcbDatabase(b, dsn, db)
	pgbench(b, "-i", "-s", "1", "-q", dbDSN)
	tables := "[public.pgbench_accounts, public.pgbench_branches, public.pgbench_tellers"
	if history {
		tables += ", public.pgbench_history"
	}
	tables += "]"
	dir := b.TempDir()
	index := "mir-tpcb-" + db[len("mir_tpcb_"):]
	estest.Connect(b, estest.Elasticsearch, esURL).DeleteAtCleanup(b, index+"-*")
	text := fmt.Sprintf(`pipeline: tpcb
source:
  type: postgres
  dsn: %q
  tables: %s
  slot: %s
  publication: %s
sinks:
  - type: elasticsearch
    config:
      id: es-tpcb
      url: %q
      index: "%s-{table}"
      auth: {type: none}
      keyless: dead_letter
      number_of_shards: 1
      number_of_replicas: 0
state: %s
dlq: %s
`, dbDSN, tables, db, db, esURL, index, filepath.Join(dir, "state.db"), filepath.Join(dir, "dlq.jsonl"))
	cfg := loadYAML(b, dir, text)
	dropSlotAtCleanup(b, dbDSN, db)

	// The snapshot: 100,000 accounts, 10 tellers, 1 branch.
	const snapshotRows = 100_000 + 10 + 1
	b.StopTimer()
	cpu0 := processCPU()
	runUntil(b, cfg, snapshotRows, "snapshot")
	snapCPU := processCPU() - cpu0

	pgbench(b, "-n", "-c", "2", "-t", fmt.Sprint(tpcbTransactions/2), dbDSN)
	want := int64(tpcbTransactions * 3)
	if history {
		want = tpcbTransactions * 4
	}

	var stopProfile func()
	if d := os.Getenv("TRIBUTARY_TPCB_PROFILE"); d != "" {
		stopProfile = startProfile(b, filepath.Join(d, name+".pprof"))
	}
	b.StartTimer()
	t0, cpu1 := time.Now(), processCPU()
	runUntil(b, cfg, want, "catch-up")
	cpu := processCPU() - cpu1
	wall := time.Since(t0)
	b.StopTimer()
	if stopProfile != nil {
		stopProfile()
	}
	keyed := float64(tpcbTransactions * 3)
	b.ReportMetric(float64(snapCPU.Microseconds())/snapshotRows, "snapshot-cpu-us/row")
	b.ReportMetric(float64(cpu.Microseconds())/float64(want), "cpu-us/event")
	b.ReportMetric(float64(cpu.Microseconds())/keyed, "keyed-cpu-us/event")
	b.ReportMetric(float64(want)/wall.Seconds(), "events/s")
}

// runUntil runs a mirror from cfg until its pipeline has handled want events (applied or
// dead-lettered), then stops and closes it.
func runUntil(b *testing.B, cfg *mirror.Config, want int64, what string) {
	b.Helper()
	m, err := mirror.Open(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	ended := func() error {
		select {
		case err := <-done:
			done <- err
			return fmt.Errorf("Run returned: %v", err)
		default:
			return nil
		}
	}
	mirrortest.WaitFor(b, what, ended, func() string {
		if s := m.Status()[0]; s.Progress.Events < want {
			return fmt.Sprintf("%d of %d events, state %s", s.Progress.Events, want, s.State)
		}
		return ""
	})
	cancel()
	if err := <-done; err != nil {
		b.Fatalf("%s: Run after its context ended: %v", what, err)
	}
	if err := m.Close(); err != nil {
		b.Fatal(err)
	}
}

// startProfile writes a CPU profile to path until the function it returns is called.
func startProfile(b *testing.B, path string) func() {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
	}
}

// processCPU is the user plus system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// tpcbDatabase creates database db on the server of dsn, dropped at cleanup, and returns its DSN.
func tpcbDatabase(b *testing.B, dsn, db string) string {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			b.Error(err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)"); err != nil {
			b.Error(err)
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		b.Fatal(err)
	}
	u.Path = "/" + db
	return u.String()
}

// pgbench runs pgbench with args, failing the benchmark with its output on an error.
func pgbench(b *testing.B, args ...string) {
	b.Helper()
	out, err := exec.Command("pgbench", args...).CombinedOutput()
	if err != nil {
		b.Fatalf("pgbench %s: %v\n%s", strings.Join(args[:len(args)-1], " "), err, out)
	}
}
