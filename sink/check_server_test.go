package sink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/mysqlcdc"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/esfence"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/statestore"
)

// h3Config is a sink configuration whose indices carry this file's prefix and are deleted at
// cleanup; index is the template after the prefix.
func h3Config(t *testing.T, s *server, index string) Config {
	t.Helper()
	p := estest.UniqueName(t, "h3pre")
	s.DeleteAtCleanup(t, p+"*")
	cfg := s.config("")
	cfg.Index = p + "-" + index
	if s.Engine == estest.Elasticsearch {
		cfg.Mapping = MappingConfig{Decimal: "keyword", Uint64: "keyword"}
	}
	return cfg
}

// TestSinkSecondTableIntoClaimedIndex: with a static index, a second table whose rows arrive
// after the first's claimed the index is refused as bound_to_another_relation before any row
// of its batch is written -- the first table's rows in the same batch included -- instead of
// overwriting the first table's documents by _id.
func TestSinkSecondTableIntoClaimedIndex(t *testing.T) {
	engines(t, func(t *testing.T, s *server) {
		cfg := h3Config(t, s, "all")
		k := s.sink(t, cfg, nil, nil)
		a, b := ordersSchema("a"), ordersSchema("b")
		idx := cfg.Index
		write(t, k, []cdc.Event{ev(cdc.Insert, a, 1, nil, row(1, "a one", 1)), ev(cdc.Insert, a, 2, nil, row(2, "a two", 2))})
		dead, err := k.Write(context.Background(), []cdc.Event{
			ev(cdc.Insert, a, 3, nil, row(3, "a three", 3)),
			ev(cdc.Insert, b, 4, nil, row(1, "b one", 4)),
		})
		var ce *esfence.ConflictError
		if len(dead) != 0 || !errors.As(err, &ce) || ce.Class != esfence.BoundToAnotherRelation || ce.Table != b.ID || ce.Index != idx ||
			!errors.Is(err, esfence.ErrDestinationConflict) {
			t.Fatalf("Write of a second table: dead %v, err %v; want bound_to_another_relation for %s", dead, err, b.ID)
		}
		if !strings.Contains(err.Error(), a.ID.String()) {
			t.Fatalf("the refusal does not name the table the index holds: %v", err)
		}
		docs, _ := s.docs(t, idx, []string{"1", "2", "3"})
		if len(docs) != 2 || docs["1"]["name"] != "a one" || docs["3"] != nil {
			t.Fatalf("documents %v: the refused batch must write nothing", docs)
		}
		// The first table goes on.
		write(t, k, []cdc.Event{ev(cdc.Insert, a, 5, nil, row(3, "a three", 5))})
		if docs, _ := s.docs(t, idx, []string{"3"}); docs["3"]["name"] != "a three" {
			t.Fatalf("document 3: %v", docs)
		}
	})
}

// TestSinkKeylessTableMetLaterDeadLettered: a table without key met only in Write under
// keyless: refuse has its rows dead-lettered with the fix; the other table of the batch is
// written.
func TestSinkKeylessTableMetLaterDeadLettered(t *testing.T) {
	engines(t, func(t *testing.T, s *server) {
		cfg := h3Config(t, s, "{table}")
		k := s.sink(t, cfg, nil, nil)
		noPK := ordersSchema("history")
		noPK.PrimaryKey = nil
		dead, err := k.Write(context.Background(), []cdc.Event{ev(cdc.Insert, ordersSchema("a"), 1, nil, row(1, "one", 1)),
			ev(cdc.Insert, noPK, 2, nil, row(2, "two", 2))})
		if err != nil || len(dead) != 1 || dead[0].Index != 1 || !strings.HasPrefix(dead[0].Reason, "keyless_table: ") {
			t.Fatalf("dead %+v, err %v", dead, err)
		}
		if docs, _ := s.docs(t, indexOf(t, k, "a"), []string{"1"}); docs["1"]["name"] != "one" {
			t.Fatalf("document 1 of the keyed table: %v", docs)
		}
	})
}

// run is a pipeline started by startPipeline: err is Run's result once finished is closed.
type run struct {
	finished chan struct{}
	err      error
	cancel   context.CancelFunc
}

// wait returns Run's result, failing the test when it takes longer than a generous bound.
func (r *run) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-r.finished:
		return r.err
	case <-time.After(2 * time.Minute):
		t.Fatal("the pipeline did not stop")
		return nil
	}
}

// startPipeline runs a runner over src into a sink with cfg; log receives the runner's lines.
func startPipeline(t *testing.T, s *server, src cdc.Source, cfg Config, log *slog.Logger) (*memDLQ, *run) {
	t.Helper()
	st := statestore.NewMemory()
	k := s.sinkOpts(t, cfg, st, Options{})
	dlq := &memDLQ{}
	r, err := cdc.NewRunner("h3pre-pipe", src, k, st, dlq, &cdc.RunnerOptions{BatchMaxWait: 50 * time.Millisecond,
		Logger: log, ReportInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &run{finished: make(chan struct{}), cancel: cancel}
	go func() { p.err = r.Run(ctx); close(p.finished) }()
	t.Cleanup(func() {
		cancel()
		<-p.finished
	})
	return dlq, p
}

// refusedAtStart waits (boundedly) for Run to fail and returns its *cdc.StartError problems.
func refusedAtStart(t *testing.T, p *run) []cdc.StartProblem {
	t.Helper()
	return startProblems(t, p.wait(t))
}

// pgTables creates tables (name -> columns) with this file's prefix and a source capturing
// them; cleanup drops them with the slot and the publication.
func pgTables(t *testing.T, dsn string, defs ...[2]string) (*pgcdc.Source, []string) {
	t.Helper()
	sfx := estest.RandomHex(t, 5)
	var names []string
	for _, d := range defs {
		name := "h3pre_" + d[0] + "_" + sfx
		pgExec(t, dsn, "CREATE TABLE "+name+" ("+d[1]+")")
		names = append(names, name)
	}
	src := pgSource(t, dsn, "h3pre_"+sfx, names...)
	return src, names
}

// TestSinkPipelineRefusedAtStart: through cdc.Runner with the real sources, configurations
// that cannot work stop the pipeline at start with a *cdc.StartError naming the table and the
// fix, before any row is written: two PostgreSQL tables into one static index; MariaDB tables
// MyOrders and myorders into {table}; a PostgreSQL table without a key (pgbench_history's
// shape).
func TestSinkPipelineRefusedAtStart(t *testing.T) {
	engines(t, func(t *testing.T, s *server) {
		t.Run("postgres static index", func(t *testing.T) {
			dsn := testenv.Require(t, testenv.PostgresDSN)
			src, names := pgTables(t, dsn, [2]string{"a", "id int PRIMARY KEY, n int"}, [2]string{"b", "id int PRIMARY KEY, n int"})
			pgExec(t, dsn, "INSERT INTO "+names[0]+" VALUES (1, 1)", "INSERT INTO "+names[1]+" VALUES (1, 2)")
			cfg := h3Config(t, s, "static")
			_, p := startPipeline(t, s, src, cfg, nil)
			probs := refusedAtStart(t, p)
			if len(probs) != 1 || probs[0].Table.Table != names[1] || !strings.Contains(probs[0].Problem, names[0]) ||
				!strings.Contains(probs[0].Fix, "{table}") {
				t.Fatalf("problems %+v", probs)
			}
			if s.IndexExists(t, cfg.Index) {
				t.Fatal("a refused pipeline created its index")
			}
		})
		t.Run("mariadb names differing in case", func(t *testing.T) {
			m := mysqlServer(t)
			sfx := estest.RandomHex(t, 5)
			upper, lower := "h3pre_MyOrders_"+sfx, "h3pre_myorders_"+sfx
			m.exec(t, "CREATE TABLE "+upper+" (id INT PRIMARY KEY, n INT)", "CREATE TABLE "+lower+" (id INT PRIMARY KEY, n INT)")
			t.Cleanup(func() { m.exec(t, "DROP TABLE IF EXISTS "+upper, "DROP TABLE IF EXISTS "+lower) })
			m.exec(t, "INSERT INTO "+upper+" VALUES (1, 1)", "INSERT INTO "+lower+" VALUES (1, 2)")
			src, err := mysqlcdc.New(m.addr, m.user, m.pass, []mysqlcdc.TableName{{Database: m.db, Table: upper}, {Database: m.db, Table: lower}}, &mysqlcdc.Options{SourceName: "shop",
				ServerID: 1<<24 + uint32(time.Now().UnixNano()%(1<<29))})
			if err != nil {
				t.Fatal(err)
			}
			cfg := h3Config(t, s, "{table}")
			_, p := startPipeline(t, s, src, cfg, nil)
			probs := refusedAtStart(t, p)
			idx := strings.ToLower(strings.ReplaceAll(cfg.Index, "{table}", lower))
			if len(probs) != 1 || probs[0].Table.Table != lower || !strings.Contains(probs[0].Problem, upper) ||
				!strings.Contains(probs[0].Problem, fmt.Sprintf("%q", idx)) || !strings.Contains(probs[0].Fix, "differ only in case") {
				t.Fatalf("problems %+v", probs)
			}
			if s.IndexExists(t, idx) {
				t.Fatal("a refused pipeline created the shared index")
			}
		})
		t.Run("postgres keyless table", func(t *testing.T) {
			dsn := testenv.Require(t, testenv.PostgresDSN)
			src, names := pgTables(t, dsn, [2]string{"orders", "id int PRIMARY KEY, n int"},
				[2]string{"history", "tid int, bid int, aid int, delta int, mtime timestamp, filler char(22)"})
			pgExec(t, dsn, "INSERT INTO "+names[0]+" VALUES (1, 1)", "INSERT INTO "+names[1]+" VALUES (1, 1, 1, 5, now(), 'x')")
			cfg := h3Config(t, s, "{table}")
			_, p := startPipeline(t, s, src, cfg, nil)
			probs := refusedAtStart(t, p)
			if len(probs) != 1 || probs[0].Table.Table != names[1] || !strings.Contains(probs[0].Problem, "no primary key") ||
				!strings.Contains(probs[0].Fix, "keyless: dead_letter") {
				t.Fatalf("problems %+v", probs)
			}
			idx, err := IndexName(cfg.Index, cdc.TableID{Table: names[0]})
			if err != nil {
				t.Fatal(err)
			}
			if s.IndexExists(t, idx) {
				t.Fatal("a refused pipeline created the other table's index")
			}
		})
	})
}

// syncLog is a slog text sink the runner and the test share.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) lines(substr string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.b.String(), "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return out
}

// TestSinkKeylessDeadLetterPipeline: with keyless: dead_letter a table without a key runs;
// its rows go to the dead-letter queue while the keyed table's rows are indexed, and the
// runner logs the dead letters at Warn -- the first at once, the rest in one summary line
// with their count when Run returns -- without row data.
func TestSinkKeylessDeadLetterPipeline(t *testing.T) {
	engines(t, func(t *testing.T, s *server) {
		dsn := testenv.Require(t, testenv.PostgresDSN)
		src, names := pgTables(t, dsn, [2]string{"orders", "id int PRIMARY KEY, n int"},
			[2]string{"history", "tid int, delta int, filler text"})
		const secret = "h3pre-row-secret"
		pgExec(t, dsn, "INSERT INTO "+names[0]+" VALUES (1, 1), (2, 2)",
			"INSERT INTO "+names[1]+" SELECT g, g, '"+secret+"' FROM generate_series(1, 5) g")
		cfg := h3Config(t, s, "{table}")
		cfg.Keyless = KeylessDeadLetter
		var logs syncLog
		dlq, p := startPipeline(t, s, src, cfg, slog.New(slog.NewTextHandler(&logs, nil)))
		done := make(chan error, 1) // waitDocs watches it: the pipeline must keep running
		go func() {
			<-p.finished
			done <- p.err
		}()
		idx, err := IndexName(cfg.Index, cdc.TableID{Table: names[0]})
		if err != nil {
			t.Fatal(err)
		}
		waitDocs(t, s, done, idx, []string{"1", "2"}, "snapshot", func(d map[string]map[string]any) bool { return len(d) == 2 })
		pgExec(t, dsn, "INSERT INTO "+names[1]+" VALUES (6, 6, '"+secret+"')")
		for i := 0; ; i++ {
			dlq.mu.Lock()
			n := len(dlq.recs)
			dlq.mu.Unlock()
			if n == 6 {
				break
			}
			if n > 6 || i > 600 {
				t.Fatalf("%d dead letters, want the 6 rows of the keyless table", n)
			}
			time.Sleep(100 * time.Millisecond)
		}
		p.cancel()
		if err := p.wait(t); !errors.Is(err, context.Canceled) {
			t.Fatalf("Run: %v", err)
		}
		for _, r := range dlq.recs {
			if r.Event.Table.Table != names[1] || !strings.Contains(r.Reason, "no primary key") {
				t.Fatalf("dead letter of %s: %q", r.Event.Table, r.Reason)
			}
		}
		first := logs.lines("msg=\"event dead-lettered\"")
		summary := logs.lines("msg=\"events dead-lettered since the last report\"")
		if len(first) != 1 || !strings.Contains(first[0], "level=WARN") || !strings.Contains(first[0], names[1]) ||
			!strings.Contains(first[0], "op=read") || !strings.Contains(first[0], "position=") {
			t.Fatalf("first dead-letter lines %q", first)
		}
		if len(summary) != 1 || !strings.Contains(summary[0], "count=5") || !strings.Contains(summary[0], "last_op=insert") {
			t.Fatalf("summary lines %q, want one counting the other 5", summary)
		}
		if all := logs.lines(secret); len(all) != 0 {
			t.Fatalf("log lines carry row data: %q", all)
		}
	})
}
