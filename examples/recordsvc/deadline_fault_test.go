package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	recordv1 "github.com/tributary-dev/tributary/examples/recordsvc/proto/tributary/record/v1"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/faultproxy"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// The hung-store scenario of issue 33 (item 4): a store's backend behind a proxy that stops
// forwarding (faultproxy.SetHang, a SIGSTOPped server) in the middle of a load of reads and
// writes, every call with a client deadline far above the store's timeout. Every call answers
// before the client's deadline, one result per item, each either what the store did or a
// retryable failure of the right kind: ERROR_KIND_UNAVAILABLE for a read and for a write never
// sent, ERROR_KIND_OUTCOME_UNKNOWN for a write the hung backend may have received. Every item
// of every call ends in recordsvc_items_total. After the proxy resumes the store answers
// again, and the records are checked one by one against what their callers were told:
// acknowledged writes present, unavailable ones absent, outcome-unknown ones either.
const (
	hangStoreTimeout = 3 * time.Second  // the issue's
	hangDeadline     = 10 * time.Second // the clients' deadline, the issue's
	// hangReserve is the service's deadline_reserve: generous here (the reserve is at most a
	// tenth of the deadline, 1s), so that an answer sent before the deadline reaches the
	// client before it on a loaded machine.
	hangReserve = 1500 * time.Millisecond
	hangFor     = 20 * time.Second
)

func TestFaultHungStoreElasticsearch(t *testing.T) {
	testenv.RequireFaults(t) // the proxy hangs, not the shared server: nothing is restarted
	u := testenv.Require(t, testenv.ElasticsearchURL)
	hungSearchStore(t, "elasticsearch", u)
}

func TestFaultHungStoreOpenSearch(t *testing.T) {
	testenv.RequireFaults(t)
	u := testenv.Require(t, testenv.OpenSearchURL)
	hungSearchStore(t, "opensearch", u)
}

func TestFaultHungStoreMongoDB(t *testing.T) {
	testenv.RequireFaults(t)
	uri := testenv.Require(t, testenv.MongoURI)
	u, err := url.Parse(uri)
	if err != nil {
		t.Fatal(err)
	}
	p := hangProxy(t, u.Host)
	u.Host = p.Addr()
	q := u.Query()
	q.Set("directConnection", "true") // no replica-set discovery around the proxy
	u.RawQuery = q.Encode()
	db := strings.ReplaceAll(uniqueName("d39_hang"), "-", "_")
	dropDatabase(t, uri, db)
	ferret := isFerretDB(t, uri)
	hungStoreBoth(t, p, func(timeout time.Duration) string {
		return fmt.Sprintf("{kind: mongodb, uri: %q, ferretdb: %v, timeout: %s}", u.String(), ferret, timeout)
	}, db, "people")
}

func hungSearchStore(t *testing.T, kind, rawURL string) {
	index := estest.Connect(t, kind, rawURL).TempIndex(t, "d39-hang", nil)
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	p := hangProxy(t, u.Host)
	u.Host = p.Addr()
	hungStoreBoth(t, p, func(timeout time.Duration) string {
		return fmt.Sprintf("{kind: %s, urls: [%q], timeout: %s}", kind, u.String(), timeout)
	}, "crm", index)
}

// hungStoreBoth runs the scenario with the store timeout, shorter than the clients'
// deadline, and with one longer than it, where every call the hang holds is answered by its
// deadline alone -- also those queued behind the store's hung batches.
func hungStoreBoth(t *testing.T, p *faultproxy.TCPProxy, storeYAML func(time.Duration) string, ns, ds string) {
	for _, timeout := range []time.Duration{hangStoreTimeout, 3 * hangDeadline} {
		t.Run("store_timeout_"+timeout.String(), func(t *testing.T) {
			hungStore(t, p, storeYAML(timeout), timeout, ns, ds)
		})
	}
}

func hangProxy(t *testing.T, target string) *faultproxy.TCPProxy {
	p, err := faultproxy.NewTCP(target, faultproxy.TCPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// hangCall is one call of the load and what it got.
type hangCall struct {
	read    bool
	keys    []string
	results []*recordv1.Result
	err     error
	took    time.Duration
	hung    bool // started while the proxy hung
}

func hungStore(t *testing.T, p *faultproxy.TCPProxy, storeYAML string, storeTimeout time.Duration, ns, ds string) {
	prefix := fmt.Sprintf("t%d-", storeTimeout/time.Second) // the subtests share the dataset
	s := startService(t, fmt.Sprintf(`
listen: {grpc: 127.0.0.1:0, metrics: 127.0.0.1:0}
service: {retry_attempts: 6, backoff_max: 500ms, deadline_reserve: %s}
stores:
  main: %s
`, hangReserve, storeYAML), modeServer)
	var (
		mu      sync.Mutex
		calls   []*hangCall
		hung    bool
		seq     int
		stop    = make(chan struct{})
		clients sync.WaitGroup
	)
	nextKey := func() string {
		mu.Lock()
		defer mu.Unlock()
		seq++
		return fmt.Sprintf("%sk%05d", prefix, seq)
	}
	isHung := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return hung
	}
	call := func(kind int) {
		c := &hangCall{hung: isHung()}
		cctx, cancel := context.WithTimeout(context.Background(), hangDeadline)
		defer cancel()
		start := time.Now()
		switch kind {
		case 0, 1: // a batch of three puts, or one put (coalesced with other one-item calls)
			n := 3 - 2*kind
			req := &recordv1.WriteRequest{Completion: recordv1.Completion_COMPLETION_WAIT_UNTIL_APPLIED}
			for range n {
				k := nextKey()
				c.keys = append(c.keys, k)
				req.Items = append(req.Items, put(addr("main", ns, ds, k), doc(`{"key":"`+k+`"}`), nil))
			}
			var w *recordv1.WriteResponse
			if w, c.err = s.rpc.Write(cctx, req); c.err == nil {
				c.results = w.Results
			}
		default: // a read of a key written before the hang and of one never written
			c.read = true
			c.keys = []string{prefix + "k00001", "never-" + nextKey()}
			var r *recordv1.ReadResponse
			if r, c.err = s.rpc.Read(cctx, &recordv1.ReadRequest{Addresses: []*recordv1.Address{
				addr("main", ns, ds, c.keys[0]), addr("main", ns, ds, c.keys[1])}}); c.err == nil {
				c.results = r.Results
			}
		}
		c.took = time.Since(start)
		mu.Lock()
		calls = append(calls, c)
		mu.Unlock()
	}
	call(1) // prefix+k00001, read by the reads
	for i := range 6 {
		clients.Add(1)
		go func() {
			defer clients.Done()
			for j := i; ; j++ {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
				call(j % 3)
			}
		}()
	}
	retries := func() float64 {
		r, _ := scrape(t, s.metrics, `recordsvc_unavailable_retries_total{call="read",store="main"}`)
		w, _ := scrape(t, s.metrics, `recordsvc_unavailable_retries_total{call="write",store="main"}`)
		return r + w
	}

	time.Sleep(2 * time.Second) // load on a healthy store
	retriesBefore := retries()
	mu.Lock()
	hung = true
	mu.Unlock()
	p.SetHang(true)
	time.Sleep(hangFor)
	p.SetHang(false)
	mu.Lock()
	hung = false
	mu.Unlock()
	retriesHung := retries() - retriesBefore
	time.Sleep(2 * time.Second) // load on the resumed store
	close(stop)
	clients.Wait()

	// The store answers again: a write and a read of it succeed. Each probe has a deadline,
	// so it answers; the bound on them all is generous (a client's connection pool may need a
	// heartbeat or two to trust the server again).
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	probes := 0
	var last string
	for {
		if ctx.Err() != nil {
			t.Fatalf("the store does not answer after the proxy resumed; last probe: %s\nlog:\n%s", last, s.log)
		}
		k := "after-" + nextKey()
		probes++
		pctx, pcancel := context.WithTimeout(ctx, hangDeadline)
		w, err := s.rpc.Write(pctx, &recordv1.WriteRequest{Items: []*recordv1.WriteItem{put(addr("main", ns, ds, k), doc(`{"key":"`+k+`"}`), nil)}})
		pcancel()
		if err != nil || w.Results[0].Error != nil {
			last = fmt.Sprint("write: ", err, w.GetResults())
			time.Sleep(100 * time.Millisecond)
			continue
		}
		probes++
		pctx, pcancel = context.WithTimeout(ctx, hangDeadline)
		r, err := s.rpc.Read(pctx, &recordv1.ReadRequest{Addresses: []*recordv1.Address{addr("main", ns, ds, k)}})
		pcancel()
		if err == nil && r.Results[0].Error == nil && r.Results[0].Outcome == recordv1.Outcome_OUTCOME_FOUND {
			break
		}
		last = fmt.Sprint("read: ", err, r.GetResults())
	}

	// Every call answered, before the client's deadline, one result per item of a right kind.
	var worst time.Duration
	var hungTook []time.Duration
	items, late := 0, 0
	kinds, hungKinds := map[string]int{}, map[string]int{}
	for _, c := range calls {
		items += len(c.keys)
		if c.hung {
			hungTook = append(hungTook, c.took)
			worst = max(worst, c.took)
			for _, r := range c.results {
				if r.Error != nil {
					hungKinds[r.Error.Kind.String()]++
				} else {
					hungKinds[r.Outcome.String()]++
				}
			}
		}
		if c.err != nil {
			if status.Code(c.err) == codes.DeadlineExceeded {
				late++
				t.Errorf("a call hit the client's deadline (%s, after %s): it must answer before it", hangDeadline, c.took.Round(time.Millisecond))
			} else {
				t.Errorf("a call failed as a whole: %v", c.err)
			}
			continue
		}
		for i, r := range c.results {
			e := r.Error
			switch {
			case e == nil:
				kinds[r.Outcome.String()]++
			case e.Kind == recordv1.ErrorKind_ERROR_KIND_UNAVAILABLE && e.Retryable,
				e.Kind == recordv1.ErrorKind_ERROR_KIND_OUTCOME_UNKNOWN && e.Retryable && !c.read:
				kinds[e.Kind.String()]++
			default:
				t.Errorf("item %s (read %v): %s; want success, unavailable or (a write) outcome unknown", c.keys[i], c.read, describe(r))
			}
		}
	}
	if kinds[recordv1.ErrorKind_ERROR_KIND_UNAVAILABLE.String()]+kinds[recordv1.ErrorKind_ERROR_KIND_OUTCOME_UNKNOWN.String()] == 0 {
		t.Errorf("no item failed while the store hung: %v", kinds)
	}
	if worst > hangDeadline+10*time.Second { // generous: this only catches a call that did not answer
		t.Errorf("the slowest call during the hang took %s (deadline %s)", worst, hangDeadline)
	}
	slices.Sort(hungTook)
	var median time.Duration
	if len(hungTook) > 0 {
		median = hungTook[len(hungTook)/2]
	}
	t.Logf("store timeout %s, client deadline %s, reserve %s, hung %s: %d calls, %d items (all: %v); "+
		"while hung: %d calls, latency median %s max %s, %d hit the client's deadline, resends %v, items %v",
		storeTimeout, hangDeadline, hangReserve, hangFor, len(calls), items, kinds,
		len(hungTook), median.Round(time.Millisecond), worst.Round(time.Millisecond), late, retriesHung, hungKinds)

	// Every item of every call is counted in recordsvc_items_total, the recovery probes too.
	eventually(t, ctx, "every item counted in recordsvc_items_total", func() bool {
		return seriesSum(t, s.metrics, "recordsvc_items_total{", "main") == items+probes
	})
	t.Logf("items answered at their deadline: %d; outcome-unknown writes settled later: %d",
		seriesSum(t, s.metrics, "recordsvc_deadline_cut_items_total{", "main"), seriesSum(t, s.metrics, "recordsvc_late_outcomes_total{", "main"))

	// Row by row: what each writer was told against what the store holds.
	var keys []string
	told := map[string]*recordv1.Result{}
	for _, c := range calls {
		if c.read || c.err != nil {
			continue
		}
		for i, k := range c.keys {
			keys = append(keys, k)
			told[k] = c.results[i]
		}
	}
	present, unknownPresent, unknown := 0, 0, 0
	for len(keys) > 0 {
		n := min(len(keys), 100)
		req := &recordv1.ReadRequest{}
		for _, k := range keys[:n] {
			req.Addresses = append(req.Addresses, addr("main", ns, ds, k))
		}
		r, err := s.rpc.Read(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range keys[:n] {
			got, w := r.Results[i], told[k]
			if got.Error != nil {
				t.Fatalf("reading %s back: %s", k, describe(got))
			}
			found := got.Outcome == recordv1.Outcome_OUTCOME_FOUND
			switch {
			case w.Error == nil && !found:
				t.Errorf("%s: acknowledged (%s) but absent", k, describe(w))
			case w.Error == nil && got.Document.GetJson() != `{"key":"`+k+`"}`:
				t.Errorf("%s: acknowledged but holds %s", k, got.Document.GetJson())
			case w.Error != nil && w.Error.Kind == recordv1.ErrorKind_ERROR_KIND_UNAVAILABLE && found:
				t.Errorf("%s: told unavailable (never applied) but present", k)
			case w.Error != nil && w.Error.Kind == recordv1.ErrorKind_ERROR_KIND_OUTCOME_UNKNOWN:
				unknown++
				if found {
					unknownPresent++
				}
			}
			if found {
				present++
			}
		}
		keys = keys[n:]
	}
	t.Logf("row check: %d records present; of %d outcome-unknown writes %d were applied in the end", present, unknown, unknownPresent)
}

// seriesSum sums the samples of the series starting with prefix (a name and "{") of the store.
func seriesSum(t *testing.T, metricsURL, prefix, store string) int {
	t.Helper()
	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) || !strings.Contains(line, `store="`+store+`"`) {
			continue
		}
		_, v, ok := strings.Cut(line, "} ")
		n, err := strconv.ParseFloat(v, 64)
		if !ok || err != nil {
			t.Fatal(errors.New("unparsable sample: " + line))
		}
		total += int(n)
	}
	return total
}
