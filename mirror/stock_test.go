package mirror_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"
	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/esfence"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/mirrortest"
	"github.com/tributary-dev/tributary/internal/search/searchtest"
	"github.com/tributary-dev/tributary/internal/stocktest"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/mirror"
	"github.com/tributary-dev/tributary/sink"
)

// The deployment requirement checked before anything is created: a pipeline whose cluster
// does not refuse to auto-create df-w-* indices (a stock cluster) is refused before its source
// is opened -- no replication slot, publication, index, dead-letter file or state record --
// with the request that fixes it, while the other pipelines run on; a cluster out of reach is
// checked again until it answers. PostgreSQL is the real server; the clusters are the fake
// node with a stock cluster's settings, and the real shared Elasticsearch while it is stock.

// stdFix is the request a stock cluster's refusal quotes.
const stdFix = `PUT _cluster/settings {"persistent":{"action.auto_create_index":"-df-w-*,+*"}}`

// stockPipeline is a PostgreSQL pipeline of table name (slot and publication of that name)
// into url.
func stockPipeline(dsn, dir, name, url string) mirror.PipelineConfig {
	return mirror.PipelineConfig{Name: name, DLQ: filepath.Join(dir, name+".dlq"),
		Source: mirror.SourceConfig{Type: "postgres", DSN: sink.Secret(dsn), Tables: []string{"public." + name}, Slot: name, Publication: name},
		Sink: sink.Config{ID: "es", URL: url, Index: "h3-{table}", Auth: sink.Auth{Type: sink.AuthNone},
			Mapping: sink.MappingConfig{Decimal: "keyword", Uint64: "keyword"}},
		Runner: mirror.RunnerConfig{BatchMaxWait: 50 * time.Millisecond, BackoffMin: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond}}
}

// slotAndPublication reports whether the server has a replication slot and a publication of
// that name.
func slotAndPublication(t *testing.T, dsn, name string) (slot, pub bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1),
		EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)`, name).Scan(&slot, &pub); err != nil {
		t.Fatal(err)
	}
	return slot, pub
}

// wantNothingLeft checks that the refused pipeline created nothing: no slot, publication,
// checkpoint, ownership record or dead-letter file.
func wantNothingLeft(t *testing.T, cfg *mirror.Config, dsn, name string) {
	t.Helper()
	if slot, pub := slotAndPublication(t, dsn, name); slot || pub {
		t.Errorf("the refused pipeline left a slot (%v) or a publication (%v)", slot, pub)
	}
	insp, err := mirror.Inspect(context.Background(), cfg, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if insp.Checkpoint || len(insp.Indices) != 0 {
		t.Errorf("the refused pipeline left state: checkpoint %v, indices %v", insp.Checkpoint, insp.Indices)
	}
	if _, err := os.Stat(cfg.Pipeline(name).DLQ); !os.IsNotExist(err) {
		t.Errorf("the refused pipeline created its dead-letter file (%v)", err)
	}
}

// refusedAlone runs the pipeline of table name into the stock cluster at url alone: Run ends
// with the refusal, and nothing is left behind.
func refusedAlone(t *testing.T, dsn, name, url string) {
	t.Helper()
	dir := t.TempDir()
	cfg := &mirror.Config{State: filepath.Join(dir, "state.db"), Pipelines: []mirror.PipelineConfig{stockPipeline(dsn, dir, name, url)}}
	m, err := mirror.Open(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = m.Run(t.Context())
	m.Close()
	wantStockRefusal(t, err)
	wantNothingLeft(t, cfg, dsn, name)
}

// startMirror opens cfg's mirror and runs it in the background (runInBackground), stopped and
// closed when the test ends.
func startMirror(t *testing.T, cfg *mirror.Config) (m *mirror.Mirror, ended func() error, stop func() error) {
	t.Helper()
	m, err := mirror.Open(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ended, stop = runInBackground(m)
	t.Cleanup(func() {
		_ = stop()
		m.Close()
	})
	return m, ended, stop
}

// runInBackground runs m.Run until stop, which returns Run's error (again on a second call);
// ended reports, for mirrortest.WaitFor, that Run returned meanwhile.
func runInBackground(m *mirror.Mirror) (ended func() error, stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	var once sync.Once
	var runErr error
	wait := func() error {
		once.Do(func() { runErr = <-done })
		return runErr
	}
	ended = func() error {
		select {
		case err := <-done:
			done <- err
			return errors.Join(errors.New("Run returned"), err)
		default:
			return nil
		}
	}
	stop = func() error {
		cancel()
		return wait()
	}
	return ended, stop
}

// wantStockRefusal checks a start refusal: permanent, fencing_unenforced, quoting the request.
func wantStockRefusal(t *testing.T, err error) {
	t.Helper()
	var pe *mirror.PipelineError
	if !errors.As(err, &pe) || !cdc.IsPermanent(err) || esfence.ClassOf(err) != esfence.FencingUnenforced || !strings.Contains(err.Error(), stdFix) {
		t.Fatalf("Run = %v, want a permanent fencing_unenforced refusal quoting %s", err, stdFix)
	}
	t.Log("refusal:", err)
}

func TestStockClusterRefusedBeforeAnything(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	sfx := estest.RandomHex(t, 4)
	bad, good := "h3_stock_"+sfx, "h3_ok_"+sfx
	for _, name := range []string{bad, good} {
		tb := mirrortest.NewPostgres(t, dsn, name)
		dropSlotAtCleanup(t, dsn, name)
		tb.Exec(t, tb.Insert(1, 20)...)
	}
	stock := searchtest.New(t, nil)
	stocktest.New().Install(stock)
	enforced := searchtest.New(t, nil) // holds the rule

	t.Run("others_run_on", func(t *testing.T) {
		dir := t.TempDir()
		cfg := &mirror.Config{State: filepath.Join(dir, "state.db"), Pipelines: []mirror.PipelineConfig{
			stockPipeline(dsn, dir, bad, stock.URL), stockPipeline(dsn, dir, good, enforced.URL)}}
		m, ended, stop := startMirror(t, cfg)
		mirrortest.WaitFor(t, "the good pipeline's rows and the bad one's refusal", ended, func() string {
			st := m.Status()
			if ix := enforced.Index("h3-" + good); ix == nil || len(ix.Docs) != 20 {
				return "the good pipeline has not written every row"
			}
			if st[0].State != "stopped" || st[0].Health.Class != "stopped" || !strings.Contains(st[0].Health.Reason, stdFix) {
				return "the bad pipeline's status: " + st[0].State + ": " + st[0].Health.Reason
			}
			return ""
		})
		for _, r := range stock.Requests() {
			if r.Endpoint != "_cluster/settings" || r.Method != http.MethodGet {
				t.Errorf("the refused pipeline sent %s %s", r.Method, r.Path)
			}
		}
		if slot, pub := slotAndPublication(t, dsn, good); !slot || !pub {
			t.Errorf("the good pipeline has no slot (%v) or publication (%v)", slot, pub)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		m.Close()
		wantNothingLeft(t, cfg, dsn, bad)
	})

	// Alone, the refused pipeline ends Run with its refusal.
	t.Run("alone", func(t *testing.T) {
		refusedAlone(t, dsn, bad, stock.URL)
	})

	// The real shared Elasticsearch, when it is stock (nothing set): its cluster-settings lock
	// is held so that no other package's test sets the rule meanwhile; this test sets nothing.
	t.Run("real_elasticsearch", func(t *testing.T) {
		url := testenv.Require(t, testenv.ElasticsearchURL)
		testenv.HoldClusterSettings(t, url)
		node := estest.Connect(t, estest.Elasticsearch, url)
		var cur struct{ Persistent, Transient map[string]any }
		node.OK(t, esapi.ClusterGetSettingsRequest{FlatSettings: estest.Ptr(true)}).Decode(t, &cur)
		if _, ok := cur.Persistent[estest.AutoCreateSetting]; ok {
			t.Skipf("the shared cluster holds a persistent %s: it is not stock", estest.AutoCreateSetting)
		}
		if _, ok := cur.Transient[estest.AutoCreateSetting]; ok {
			t.Skipf("the shared cluster holds a transient %s: it is not stock", estest.AutoCreateSetting)
		}
		refusedAlone(t, dsn, bad, url)
		if node.IndexExists(t, "h3-"+bad) {
			t.Error("the refused pipeline created its index")
		}
	})
}

// A cluster out of reach is no refusal: the pipeline says it is checking the cluster, opens
// nothing meanwhile, and starts once the cluster answers.
func TestClusterCheckWaitsForTheCluster(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	name := "h3_wait_" + estest.RandomHex(t, 4)
	tb := mirrortest.NewPostgres(t, dsn, name)
	dropSlotAtCleanup(t, dsn, name)
	tb.Exec(t, tb.Insert(1, 10)...)
	c := searchtest.New(t, nil)
	st := stocktest.New()
	rule := esfence.StandardRule
	st.Set("persistent", &rule)
	st.Down(true)
	st.Install(c)

	dir := t.TempDir()
	cfg := &mirror.Config{State: filepath.Join(dir, "state.db"), Pipelines: []mirror.PipelineConfig{stockPipeline(dsn, dir, name, c.URL)}}
	m, ended, stop := startMirror(t, cfg)
	mirrortest.WaitFor(t, "a few failed checks", ended, func() string {
		s := m.Status()[0]
		if s.State != "starting" || s.Health.Healthy || s.Health.Class != cdc.HealthStarting ||
			!strings.HasPrefix(s.Health.Reason, "starting: checking the cluster (attempt ") || s.LastFailure == nil {
			return s.State + ": " + s.Health.Reason
		}
		if strings.HasPrefix(s.Health.Reason, "starting: checking the cluster (attempt 1,") {
			return "one attempt so far"
		}
		return ""
	})
	if slot, pub := slotAndPublication(t, dsn, name); slot || pub {
		t.Fatalf("the source was opened before the cluster was checked: slot %v, publication %v", slot, pub)
	}
	if _, err := os.Stat(cfg.Pipelines[0].DLQ); !os.IsNotExist(err) {
		t.Fatalf("the dead-letter file was created before the cluster was checked (%v)", err)
	}
	st.Down(false)
	mirrortest.WaitFor(t, "the rows, once the cluster answers", ended, func() string {
		if ix := c.Index("h3-" + name); ix == nil || len(ix.Docs) != 10 {
			return "not every row written"
		}
		if s := m.Status()[0]; !s.Health.Healthy {
			return s.State + ": " + s.Health.Reason
		}
		return ""
	})
	if _, err := os.Stat(cfg.Pipelines[0].DLQ); err != nil {
		t.Fatalf("the started pipeline has no dead-letter file: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// A dead-letter file that cannot be created stops its pipeline before the source is opened,
// and Status says why.
func TestDeadLetterFileCreatedAfterTheCheck(t *testing.T) {
	c := searchtest.New(t, nil) // holds the rule
	dir := t.TempDir()
	sub := filepath.Join(dir, "dlq")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	pc := stockPipeline("postgres://u@127.0.0.1:1/db", sub, "p", c.URL)
	cfg := &mirror.Config{State: filepath.Join(dir, "state.db"), Pipelines: []mirror.PipelineConfig{pc}}
	m, err := mirror.Open(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := os.Remove(sub); err != nil { // the file's directory is gone by the time Run creates it
		t.Fatal(err)
	}
	err = m.Run(t.Context())
	if !cdc.IsPermanent(err) || !strings.Contains(err.Error(), "dead-letter file") {
		t.Fatalf("Run = %v, want the dead-letter file's error", err)
	}
	if s := m.Status()[0]; s.State != "stopped" || !strings.Contains(s.Health.Reason, "dead-letter file") {
		t.Fatalf("status %s: %s", s.State, s.Health.Reason)
	}
}
