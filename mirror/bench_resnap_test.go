package mirror_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/mirrortest"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/mirror"
)

// BenchmarkResnapshotPgbench is the time to re-snapshot pgbench_accounts while pgbench runs:
// pgbench -i at scale TRIBUTARY_RESNAP_SCALE (default 10: a million accounts) in a database of
// its own, a mirror that starts without a snapshot (so the accounts reach the index only
// through the re-snapshot), pgbench's TPC-B mix on two clients all through the re-snapshot;
// then pgbench stops and the index must equal the table row by row (aid, abalance). Reports
// resnap-s (request to the re-snapshot's end), equal-s (request to the index equal, pgbench
// stopped at the re-snapshot's end), rows/s and pgbench's tps meanwhile (history rows / time). Elasticsearch only; -benchtime 1x.
func BenchmarkResnapshotPgbench(b *testing.B) {
	dsn, esURL, scale := pgbenchSetup(b)
	for range b.N {
		resnapPgbench(b, dsn, esURL, scale, false)
	}
}

// pgbenchSetup is what the pgbench benchmarks need: the servers, pgbench, the scale.
func pgbenchSetup(b *testing.B) (dsn, esURL string, scale int) {
	dsn = testenv.Require(b, testenv.PostgresDSN)
	esURL = testenv.Require(b, testenv.ElasticsearchURL)
	if _, err := exec.LookPath("pgbench"); err != nil {
		b.Fatal("the benchmark needs pgbench on PATH (Debian: postgresql-client)")
	}
	scale = 10
	if v := os.Getenv("TRIBUTARY_RESNAP_SCALE"); v != "" {
		var err error
		if scale, err = strconv.Atoi(v); err != nil || scale < 1 {
			b.Fatalf("TRIBUTARY_RESNAP_SCALE=%q: want a positive integer", v)
		}
	}
	return dsn, esURL, scale
}

// BenchmarkReindexPgbench is BenchmarkResnapshotPgbench for a reindex of pgbench_accounts
// (mirror.Reindex: a second generation, dual writes, the re-snapshot filling it, the switch of
// the read alias) while pgbench runs. Reports reindex-s (the call to the switch), equal-s, rows/s
// and pgbench-tps.
func BenchmarkReindexPgbench(b *testing.B) {
	dsn, esURL, scale := pgbenchSetup(b)
	for range b.N {
		resnapPgbench(b, dsn, esURL, scale, true)
	}
}

// resnapPgbench runs one measurement: a re-snapshot, or with reindex a reindex.
func resnapPgbench(b *testing.B, dsn, esURL string, scale int, reindex bool) {
	b.StopTimer()
	db := "mir_rsb_" + estest.RandomHex(b, 4)
	dbDSN := tpcbDatabase(b, dsn, db)
	pgbench(b, "-i", "-s", strconv.Itoa(scale), "-q", dbDSN)
	dir := b.TempDir()
	index := "mir-rsb-" + db[len("mir_rsb_"):]
	node := estest.Connect(b, estest.Elasticsearch, esURL)
	node.EnforceAutoCreateRule(b)
	node.DeleteAtCleanup(b, index+"-*")
	text := fmt.Sprintf(`pipeline: rsb
source:
  type: postgres
  dsn: %q
  tables: [public.pgbench_accounts, public.pgbench_branches, public.pgbench_tellers]
  slot: %s
  publication: %s
  snapshot: never
  snapshot_chunk: 4096
sinks:
  - type: elasticsearch
    config:
      id: es-rsb
      url: %q
      index: "%s-{table}"
      auth: {type: none}
      number_of_shards: 1
      number_of_replicas: 0
      read_alias: %t
state: %s
dlq: %s
`, dbDSN, db, db, esURL, index, reindex, filepath.Join(dir, "state.db"), filepath.Join(dir, "dlq.jsonl"))
	cfg := loadYAML(b, dir, text)
	dropSlotAtCleanup(b, dbDSN, db)
	m, err := mirror.Open(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
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
	mirrortest.WaitFor(b, "streaming", ended, func() string {
		if s := m.Status()[0]; s.State != "streaming" {
			return s.State
		}
		return ""
	})

	// pgbench all through the re-snapshot.
	bctx, stopBench := context.WithCancel(ctx)
	cmd := exec.CommandContext(bctx, "pgbench", "-n", "-c", "2", "-T", "3600", dbDSN)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	benchStart := time.Now()
	benchDone := make(chan struct{})
	go func() { _ = cmd.Wait(); close(benchDone) }()
	defer func() { stopBench(); <-benchDone }()
	time.Sleep(2 * time.Second)

	b.StartTimer()
	t0 := time.Now()
	var rows int64
	if reindex {
		rctx, rcancel := context.WithTimeout(ctx, 20*time.Minute)
		rep, err := m.Reindex(rctx, "rsb", "public.pgbench_accounts")
		rcancel()
		if err != nil {
			b.Fatal(err)
		}
		rows = rep.Rows
	} else {
		id, err := m.Resnapshot(ctx, "rsb", cdc.ResnapshotRequest{Tables: []string{"public.pgbench_accounts"}})
		if err != nil {
			b.Fatal(err)
		}
		waitLong(b, "the re-snapshot", ended, func() string {
			if rs := m.Status()[0].Progress.Resnapshot; rs.Resnapshot != id || rs.Active {
				return fmt.Sprintf("%+v", rs)
			}
			return ""
		})
		rows = m.Status()[0].Progress.Resnapshot.RowsDone
	}
	took := time.Since(t0)
	b.StopTimer()
	stopBench()
	<-benchDone
	ran := time.Since(benchStart)
	// pgbench interrupted prints no summary: each TPC-B transaction adds a history row.
	var txns int64
	if err := pgxQueryInt(dbDSN, "SELECT count(*) FROM pgbench_history", &txns); err != nil {
		b.Fatal(err)
	}
	tps := float64(txns) / ran.Seconds()

	want := accountBalances(b, dbDSN)
	waitLong(b, "the index to equal pgbench_accounts", ended, func() string {
		got, err := indexBalances(esURL, index+"-pgbench_accounts") // the read alias after a reindex
		if err != nil {
			return err.Error()
		}
		bad := 0
		for aid, bal := range want {
			if g, ok := got[aid]; !ok || g != bal {
				bad++
			}
		}
		if bad > 0 || len(got) != len(want) {
			return fmt.Sprintf("%d of %d rows differ, %d documents", bad, len(want), len(got))
		}
		return ""
	})
	equal := time.Since(t0)
	what := "re-snapshot"
	if reindex {
		what = "reindex"
		b.ReportMetric(took.Seconds(), "reindex-s")
	} else {
		b.ReportMetric(took.Seconds(), "resnap-s")
	}
	b.ReportMetric(equal.Seconds(), "equal-s")
	b.ReportMetric(float64(rows)/took.Seconds(), "rows/s")
	b.ReportMetric(tps, "pgbench-tps")
	b.Logf("%s, scale %d: %d rows re-read in %v while pgbench ran at %.0f tps; index equal row by row %v after the request (pgbench stopped at the end)",
		what, scale, rows, took.Round(time.Millisecond), tps, equal.Round(time.Millisecond))
}

// waitLong is mirrortest.WaitFor with a bound for a large table: 20 minutes.
func waitLong(b *testing.B, what string, ended func() error, check func() string) {
	b.Helper()
	deadline := time.Now().Add(20 * time.Minute)
	last := ""
	for time.Now().Before(deadline) {
		if err := ended(); err != nil {
			b.Fatalf("%s: %v (last: %s)", what, err, last)
		}
		if last = check(); last == "" {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	b.Fatalf("%s: not reached in 20 minutes: %s", what, last)
}

// pgxQueryInt scans one integer a query returns.
func pgxQueryInt(dsn, q string, dst *int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.QueryRow(ctx, q).Scan(dst)
}

// accountBalances reads pgbench_accounts: aid -> abalance.
func accountBalances(b *testing.B, dsn string) map[int64]int64 {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, "SELECT aid, abalance FROM pgbench_accounts")
	if err != nil {
		b.Fatal(err)
	}
	out := map[int64]int64{}
	for rows.Next() {
		var aid, bal int64
		if err := rows.Scan(&aid, &bal); err != nil {
			b.Fatal(err)
		}
		out[aid] = bal
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return out
}

// indexBalances reads every document of the indices pattern names: aid -> abalance, in
// pages sorted by aid (search_after).
func indexBalances(esURL, pattern string) (map[int64]int64, error) {
	out := map[int64]int64{}
	var after []any
	for {
		q := map[string]any{"size": 10000, "_source": []string{"aid", "abalance"}, "sort": []any{map[string]any{"aid": "asc"}},
			"track_total_hits": false}
		if after != nil {
			q["search_after"] = after
		}
		body, _ := json.Marshal(q)
		res, err := http.Post(esURL+"/"+pattern+"/_search", "application/json", bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		var page struct {
			Hits struct {
				Hits []struct {
					Source struct {
						Aid, Abalance int64
					} `json:"_source"`
					Sort []any `json:"sort"`
				} `json:"hits"`
			} `json:"hits"`
		}
		err = json.NewDecoder(res.Body).Decode(&page)
		res.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("_search: %s: %w", res.Status, err)
		}
		if res.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("_search: %s", res.Status)
		}
		hits := page.Hits.Hits
		for _, h := range hits {
			out[h.Source.Aid] = h.Source.Abalance
		}
		if len(hits) < 10000 {
			return out, nil
		}
		after = hits[len(hits)-1].Sort
	}
}
