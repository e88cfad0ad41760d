package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/mirrortest"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// TestCommandStatusPage runs what the binary runs over a PostgreSQL pipeline into
// Elasticsearch, changes rows, forces a dead letter (a text value in a column the index maps
// as a number), and opens the status page in headless Chromium: it polls what
// the page shows -- the pipeline's name, its health, the finished snapshot, the lag and its
// sparkline, the dead letters and their table, the index -- saves screenshots under
// .testenv/screenshots/, and opens a page whose every name is a script, which must render as
// text and run nothing. The index ends equal to the table, row by row.
func TestCommandStatusPage(t *testing.T) {
	pgDSN := testenv.Require(t, testenv.PostgresDSN)
	eng := mirrortest.Engines[0] // Elasticsearch
	esURL := testenv.Require(t, eng.URLVar)
	began := time.Now()
	phase := func(what string) { t.Logf("%s after %s", what, time.Since(began).Round(time.Second)) }
	browser := newBrowser(t)
	phase("browser started")
	node := &mirrortest.Node{Node: estest.Connect(t, eng.Name, esURL)}
	node.EnforceAutoCreateRule(t)

	sfx := estest.RandomHex(t, 4)
	pg := mirrortest.NewPostgres(t, pgDSN, "sp39_page_"+sfx)
	slot := "sp39_page_" + sfx
	index := "sp39-page-" + pg.Name()
	node.DeleteAtCleanup(t, index+"*")
	dir := t.TempDir()
	source := fmt.Sprintf("      type: postgres\n      dsn: \"${%s}\"\n      tables: [public.%s]\n      slot: %s\n      publication: %s\n",
		testenv.PostgresDSN, pg.Name(), slot, slot)
	cfgPath := writeCommandConfig(t, dir, eng, commandConfig{Pipeline: "sp39pg", Source: source, SinkID: "es-page",
		Index: "sp39-page-{table}", Runner: "{batch_max_wait: 50ms, lag_interval: 1s}"})
	pg.Exec(t, pg.Insert(1, 300)...)
	run := startCommand(t, cfgPath)
	run.waitFor("the snapshot", node.Converged(t, index, pg, 400))
	phase("snapshot mirrored")
	pg.Exec(t, mirrortest.Changes(pg, 301, 340)...)
	// qty becomes text at the source while the index maps it as a number: row 2's text value
	// is dead-lettered. Then qty is an integer again and row 2 gets a value the index takes.
	pg.Exec(t, "ALTER TABLE "+pg.Name()+" ALTER COLUMN qty TYPE text USING qty::text",
		"UPDATE "+pg.Name()+" SET qty = 'q-2' WHERE id = 2")
	run.waitFor("the dead letter", func() string {
		_, body := run.get("/status")
		var doc statusDoc
		if err := json.Unmarshal([]byte(body), &doc); err != nil || len(doc.Pipelines) != 1 {
			return fmt.Sprintf("/status: %v %s", err, body)
		}
		if p := doc.Pipelines[0]; p.DeadLetters < 1 || len(p.DeadLettersByTable) != 1 {
			return fmt.Sprintf("%d dead letters, by table %v", p.DeadLetters, p.DeadLettersByTable)
		}
		return ""
	})
	phase("dead letter written")
	pg.Exec(t, "ALTER TABLE "+pg.Name()+" ALTER COLUMN qty TYPE integer USING CASE WHEN qty ~ '^[0-9]+$' THEN qty::integer ELSE 0 END")
	pg.Exec(t, "UPDATE "+pg.Name()+" SET qty = 7 WHERE id = 2")
	run.waitFor("convergence", node.Converged(t, index, pg, 400))

	phase("changes mirrored")
	// What the page shows, polled: the browser loads it again on each poll.
	table := "postgres:postgres/"
	var seen pageView
	pageURL := "http://" + run.addr + "/"
	run.waitFor("the status page", func() string {
		v, err := browser.view(pageURL)
		if err != nil {
			return err.Error()
		}
		seen = v
		switch {
		case v.Name != "sp39pg":
			return fmt.Sprintf("pipeline name %q", v.Name)
		case v.Health != "healthy":
			return fmt.Sprintf("health %q (reason %q)", v.Health, v.Reason)
		case v.DeadLetters < 1:
			return fmt.Sprintf("dead letters %d", v.DeadLetters)
		case len(v.DLTables) != 1 || !strings.HasPrefix(v.DLTables[0], table) || !strings.HasSuffix(v.DLTables[0], ".public."+pg.Name()) ||
			len(v.DLCounts) != 1 || v.DLCounts[0] < 1:
			return fmt.Sprintf("dead letters by table %q %v", v.DLTables, v.DLCounts)
		case !strings.Contains(v.Progress, "Snapshot") || !strings.Contains(v.Progress, "done: ") || v.ProgressValue != 100:
			return fmt.Sprintf("snapshot progress %q (bar %d)", v.Progress, v.ProgressValue)
		case !strings.Contains(v.Lag, " behind, "):
			return fmt.Sprintf("lag %q", v.Lag)
		case v.SparkLines < 1 || !strings.HasPrefix(v.SparkCaption, "last ") || !strings.Contains(v.SparkCaption, ": now "):
			return fmt.Sprintf("sparkline: %d lines, caption %q", v.SparkLines, v.SparkCaption)
		case !contains(v.Indices, index+"-g1") && !contains(v.Indices, index):
			return fmt.Sprintf("indices %q", v.Indices)
		}
		return ""
	})
	phase("the page checked")
	t.Logf("the page showed: %+v", seen)
	browser.screenshot(pageURL, "statuspage-pipeline")

	// A page whose names are scripts (a fake mirror): shown as text, nothing run.
	srv := httptest.NewServer(newPageMux(newPageFake()))
	defer srv.Close()
	v, err := browser.view(srv.URL + "/status.html")
	if err != nil {
		t.Fatal(err)
	}
	if v.Pwned != "" || !strings.Contains(v.Text, `<script>window.sp39Pwned=1</script>`) || v.Health != "unhealthy: table_incomplete" ||
		!strings.Contains(v.Progress, "250/1000 rows (25%), 50 rows/s, ETA 15s") || v.SparkLines != 2 {
		t.Errorf("the hostile names' page: pwned %q, health %q, progress %q, %d sparkline runs, text:\n%s", v.Pwned, v.Health, v.Progress, v.SparkLines, v.Text)
	}
	browser.screenshot(srv.URL+"/status.html", "statuspage-escaped")
	run.stop()
	phase("stopped")
	if d := node.Converged(t, index, pg, 400)(); d != "" {
		t.Errorf("index and table differ after the stop: %s", d)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// pageView is what the first pipeline's section of the page shows, read from the DOM.
type pageView struct {
	Name, Health, Reason, Lag, SparkCaption, Progress string
	DeadLetters                                       int64
	DLTables                                          []string
	DLCounts                                          []int64
	SparkLines                                        int
	ProgressValue                                     int
	Indices                                           []string
	Pwned                                             string // window.sp39Pwned, when a script ran
	Text                                              string // the whole page's text
}

// readPage is the script reading a pageView out of the page (texts only, as rendered).
const readPage = `(() => {
  const s = document.querySelector('section.pipeline');
  const q = (sel) => { const e = s && s.querySelector(sel); return e ? e.textContent.trim() : ''; };
  const all = (sel) => s ? Array.from(s.querySelectorAll(sel), e => e.textContent.trim()) : [];
  const bar = s && s.querySelector('.progress progress');
  return {
    Name: q('h2 .name'), Health: q('h2 .health'), Reason: q('.reason'), Lag: q('.lag'),
    SparkCaption: q('.lag-window'), Progress: all('.progress').join(' | '),
    DeadLetters: parseInt(q('.dead-letters') || '-1', 10),
    DLTables: all('table.dead-letter-tables td.table'), DLCounts: all('table.dead-letter-tables td.count').map(x => parseInt(x, 10)),
    SparkLines: s ? s.querySelectorAll('svg.sparkline polyline').length : 0,
    ProgressValue: bar ? Number(bar.value) : -1,
    Indices: all('table.indices td.index'),
    Pwned: window.sp39Pwned === undefined ? '' : String(window.sp39Pwned),
    Text: document.body.innerText,
  };
})()`

// browser is one headless Chromium for the test, killed when the test ends.
type browser struct {
	t   *testing.T
	ctx context.Context
}

// newBrowser starts headless Chromium (Debian's chromium package). It fails, never skips,
// when Chromium is missing: the test servers are there, so the environment is meant to
// run the browser tests too.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		t.Fatal("chromium not found: the status page's browser test needs headless Chromium; install it with " +
			"`apt-get install chromium` (Debian), or run `scripts/testenv/testenv up`, which ensures it")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path),
		chromedp.Flag("headless", "new"), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1200, 1000))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		// Close the browser, then make sure its process is gone.
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		_ = chromedp.Cancel(cctx)
		ccancel()
		cancel()
		cancelAlloc()
	})
	// Start it now, bounded: a browser that cannot start fails here. (The first Run's
	// context must carry no deadline, since the browser lives as long as it: the bound is a
	// timer that cancels the browser instead.)
	timer := time.AfterFunc(2*mirrortest.WaitBound, cancel) // a first start builds caches
	err := chromedp.Do(ctx)
	if !timer.Stop() || err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return &browser{t: t, ctx: ctx}
}

// view loads url and reads what it shows, within a bounded time.
func (b *browser) view(url string) (pageView, error) {
	ctx, cancel := context.WithTimeout(b.ctx, mirrortest.WaitBound/2)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitReady(chromedp.CSS("body"))); err != nil {
		return pageView{}, err
	}
	return chromedp.Run(ctx, chromedp.Evaluate[pageView](readPage))
}

// screenshot loads url and saves a full-page PNG under .testenv/screenshots/ at the
// repository's root, naming the file in the test's log.
func (b *browser) screenshot(url, name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, mirrortest.WaitBound)
	defer cancel()
	err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitReady(chromedp.CSS("body")))
	var png []byte
	if err == nil {
		png, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
	}
	if err != nil {
		b.t.Fatalf("screenshot of %s: %v", url, err)
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", ".testenv", "screenshots"))
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		b.t.Fatal(err)
	}
	file := filepath.Join(dir, name+"-"+time.Now().UTC().Format("20060102T150405Z")+".png")
	if err := os.WriteFile(file, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s (%s bytes)", file, strconv.Itoa(len(png)))
}
