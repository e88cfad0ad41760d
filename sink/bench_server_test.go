package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"
	"github.com/elastic/go-elasticsearch/v8/esutil"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/statestore"
)

const benchBatch = 1000

// benchSchema is a ten-column table, closer to a real row than the tests' four columns.
func benchSchema() *cdc.TableSchema {
	s := ordersSchema("bench")
	s.Columns = append(s.Columns,
		cdc.Column{Name: "price", Kind: cdc.KindFloat, Bits: 64, SourceType: "double precision"},
		cdc.Column{Name: "sku", Kind: cdc.KindText, SourceType: "varchar(32)", Length: 32},
		cdc.Column{Name: "note", Kind: cdc.KindText, SourceType: "text"},
		cdc.Column{Name: "created", Kind: cdc.KindTimestamp, SourceType: "timestamptz", Precision: 6},
		cdc.Column{Name: "day", Kind: cdc.KindDate, SourceType: "date"},
		cdc.Column{Name: "units", Kind: cdc.KindInt, Bits: 64, SourceType: "bigint"},
	)
	return s
}

func benchRows(sch *cdc.TableSchema, from int64, version int64) []cdc.Event {
	out := make([]cdc.Event, benchBatch)
	for i := range out {
		id := from + int64(i)
		out[i] = ev(cdc.Insert, sch, version, nil, []cdc.Value{id, "name " + strconv.FormatInt(id, 10), id % 1000, id%2 == 0,
			float64(id) * 1.25, "SKU-" + strconv.FormatInt(id, 36), "a short note about the order, quoted \"like this\"",
			cdc.EpochMicros(1_700_000_000_000_000 + id), "2026-11-30", id * 7})
	}
	return out
}

// BenchmarkSinkVsBaselines writes the same batches of 1000 rows four ways, side by side in one
// run against the same node: the sink's Write (one request per batch, as configured by
// default); the same with the batch split into two requests in flight at once (batch.max_docs
// 500, concurrency 2); a replay of the sink's own pre-encoded _bulk body (the floor: only the
// HTTP exchange and the cluster's work); and esutil.BulkIndexer with its defaults fed the same
// rows as maps (a typical client). Each iteration runs the four in a rotating order, so that
// none always follows another (the cluster's background work after a write lands on whoever
// comes next). It reports each one's docs/s and the ratios sink/replay (goal >= 0.9),
// sink/bulkindexer (goal >= 5) and split/sink. BenchmarkSinkClientCPU measures the client side
// alone.
func BenchmarkSinkVsBaselines(b *testing.B) {
	engines(b, func(b *testing.B, s *server) {
		cfg := s.config("b")
		k := s.sink(b, cfg, statestore.NewMemory(), nil)
		sch := benchSchema()
		write(b, k, benchRows(sch, 0, 1)[:1]) // creates and claims the index
		idx := indexOf(b, k, "bench")
		alias := k.claims[idx].WriteAlias()
		ctx := context.Background()
		version := int64(1)
		maxDocs := k.cfg.Batch.MaxDocs // the default, normalized

		sinkWrite := func(docs int) func() {
			return func() {
				k.cfg.Batch.MaxDocs = docs
				defer func() { k.cfg.Batch.MaxDocs = maxDocs }()
				if dead, err := k.Write(ctx, benchRows(sch, 0, version)); err != nil || len(dead) > 0 {
					b.Fatal(err, dead)
				}
			}
		}
		contenders := []*contender{
			{name: "sink", prep: func() func() { return sinkWrite(maxDocs) }},
			{name: "split", prep: func() func() { return sinkWrite(benchBatch / 2) }},
			{name: "replay", prep: func() func() {
				// The sink's own body for this version, encoded outside the timing.
				acts, _, err := k.plan(benchRows(sch, 0, version), nil)
				if err != nil {
					b.Fatal(err)
				}
				chunks, _, _ := k.encode(acts, nil)
				var bodies [][]byte
				for _, c := range chunks {
					bodies = append(bodies, append([]byte(nil), c.body...))
				}
				k.recycle(acts, chunks) // as Write does: the sink's buffers stay warm
				return func() {
					for _, body := range bodies {
						ans, err := k.bulk(ctx, body)
						if err != nil || ans.Status != 200 {
							b.Fatalf("replay: %v %v", err, ans)
						}
						if errs, _ := answerHasErrors(ans.Body); errs {
							b.Fatal("replay: item errors")
						}
						ans.Release()
					}
				}
			}},
			{name: "bulkindexer", prep: func() func() {
				rows := benchRows(sch, 0, version)
				return func() { bulkIndexer(b, s, alias, sch, rows, version) }
			}},
		}
		rotate(b, contenders, func() { version++ })
		docs := float64(b.N * benchBatch)
		byName := map[string]*contender{}
		for _, c := range contenders {
			byName[c.name] = c
			b.ReportMetric(docs/c.took.Seconds(), c.name+"-docs/s")
		}
		ratio := func(num, den, unit string) { reportRatio(b, byName[num], byName[den], unit) }
		ratio("replay", "sink", "sink/replay")
		ratio("bulkindexer", "sink", "sink/bulkindexer")
		ratio("sink", "split", "split/sink")
		// The best any client could do against this node: the replay has no client work.
		ratio("bulkindexer", "replay", "replay/bulkindexer")
	})
}

// bulkIndexer indexes rows the way a typical client does: a map per row, encoding/json, the
// indexer's own buffering and workers.
func bulkIndexer(b *testing.B, s *server, alias string, sch *cdc.TableSchema, rows []cdc.Event, version int64) {
	bulkIndexerOver(b, s.Transport, alias, sch, rows, version)
}

func bulkIndexerOver(b *testing.B, tp esapi.Transport, alias string, sch *cdc.TableSchema, rows []cdc.Event, version int64) {
	// The indexer's defaults, as a user would take them: NumCPU workers, 5 MB flushes.
	bi, err := esutil.NewBulkIndexer(esutil.BulkIndexerConfig{Client: tp, Index: alias})
	if err != nil {
		b.Fatal(err)
	}
	var failed atomic.Int64
	for _, e := range rows {
		m := make(map[string]any, len(sch.Columns))
		for i, c := range sch.Columns {
			m[c.Name] = e.After[i]
		}
		body, err := json.Marshal(m)
		if err != nil {
			b.Fatal(err)
		}
		v := version
		if err := bi.Add(context.Background(), esutil.BulkIndexerItem{
			Action: "index", DocumentID: strconv.FormatInt(e.After[0].(int64), 10), Version: &v, VersionType: "external",
			Body:      bytes.NewReader(body),
			OnFailure: func(context.Context, esutil.BulkIndexerItem, esutil.BulkIndexerResponseItem, error) { failed.Add(1) },
		}); err != nil {
			b.Fatal(err)
		}
	}
	if err := bi.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	if n := failed.Load(); n > 0 {
		b.Fatalf("bulk indexer: %d items failed", n)
	}
}

// BenchmarkSinkEncode is the sink's CPU path without the network: _ids, coalescing and the
// _bulk body for a batch of 1000 rows. allocs/doc is the goal <= 1 figure.
func BenchmarkSinkEncode(b *testing.B) {
	k := &Sink{cfg: Config{IDSeparator: "|", Batch: Batch{MaxDocs: benchBatch, MaxBytes: DefaultMaxBytes}},
		tables: map[*cdc.TableSchema]*tableInfo{}, schemas: map[string]*cdc.TableSchema{}}
	var err error
	if k.tmpl, err = parseTemplate("bench"); err != nil {
		b.Fatal(err)
	}
	sch := benchSchema()
	batch := benchRows(sch, 0, 1)
	k.claims = nil
	b.ReportAllocs()
	b.ResetTimer()
	var allocs uint64
	for i := 0; i < b.N; i++ {
		acts, _, err := k.plan(batch, nil)
		if err != nil {
			b.Fatal(err)
		}
		chunks, _, _ := k.encodeWithAlias(acts, nil, "df-w-0123456789abcdef0123456789abcdef-1-0123456789abcdef")
		if len(chunks) != 1 {
			b.Fatal(len(chunks))
		}
		k.recycle(acts, chunks) // as Write does
	}
	b.StopTimer()
	allocs = uint64(testing.AllocsPerRun(5, func() {
		acts, _, _ := k.plan(batch, nil)
		chunks, _, _ := k.encodeWithAlias(acts, nil, "df-w-0123456789abcdef0123456789abcdef-1-0123456789abcdef")
		k.recycle(acts, chunks)
	}))
	b.ReportMetric(float64(allocs)/benchBatch, "allocs/doc")
}

// fakeBulk answers every _bulk with a canned body.
type fakeBulk struct{ body []byte }

func (f fakeBulk) Perform(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(f.body))}, nil
}

// BenchmarkSinkItemErrors is the per-item handling cost when an answer has errors, 1000
// items, in the shape the sink asks for (filter_path: status and error types only): all-409 is
// a replayed batch (every item a version conflict: the fast path); mixed-400 has every tenth
// item a 400 mapping error, which is decoded in full and dead-lettered. mixed-400-unfiltered is
// the same answer as a cluster sends it without the filter (reason texts, ids, shards), for
// what the filter saves.
func BenchmarkSinkItemErrors(b *testing.B) {
	for _, c := range []struct {
		name     string
		every    int // every n-th item is a 400; 0: none
		filtered bool
	}{{"all-409", 0, true}, {"mixed-400", 10, true}, {"mixed-400-unfiltered", 10, false}} {
		b.Run(c.name, func(b *testing.B) {
			var ans strings.Builder
			ans.WriteString(`{"errors":true,"took":3,"items":[`)
			if c.filtered {
				ans.Reset()
				ans.WriteString(`{"errors":true,"items":[`)
			}
			wantDead := 0
			for i := 0; i < benchBatch; i++ {
				if i > 0 {
					ans.WriteByte(',')
				}
				switch bad := c.every > 0 && i%c.every == 0; {
				case bad && c.filtered:
					wantDead++
					ans.WriteString(`{"index":{"status":400,"error":{"type":"document_parsing_exception","caused_by":{"type":"illegal_argument_exception"}}}}`)
				case bad:
					wantDead++
					ans.WriteString(`{"index":{"_index":"bench","_id":"` + strconv.Itoa(i) + `","status":400,"error":{"type":"document_parsing_exception","reason":"[1:2] failed to parse field [qty] of type [long] in document with id '1'. Preview of field's value: 'x'","caused_by":{"type":"illegal_argument_exception","reason":"For input string: \"x\""}}}}`)
				case c.filtered:
					ans.WriteString(`{"index":{"status":409,"error":{"type":"version_conflict_engine_exception"}}}`)
				default:
					ans.WriteString(`{"index":{"_index":"bench","_id":"` + strconv.Itoa(i) + `","status":409,"error":{"type":"version_conflict_engine_exception","reason":"[` +
						strconv.Itoa(i) + `]: version conflict, current version [5] is higher or equal to the one provided [4]","index_uuid":"x","shard":"0","index":"bench"}}}`)
				}
			}
			ans.WriteString(`]}`)
			k := &Sink{cfg: Config{ID: "b", RequestTimeout: Duration(time.Minute), ItemRetries: 1}, tp: fakeBulk{[]byte(ans.String())},
				schemas: map[string]*cdc.TableSchema{}}
			ch := &chunk{body: []byte("{}\n")}
			acts := make([]action, benchBatch)
			for i := range acts {
				ch.spans = append(ch.spans, span{0, 3, &acts[i]})
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if o := k.send(context.Background(), ch); o.bp != nil || o.fatal != nil || len(o.dead) != wantDead {
					b.Fatal(o)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchBatch), "ns/item")
		})
	}
}

// cannedCluster answers _bulk with a canned all-created answer of as many items as the body
// has actions -- the shape the client asked for: the filtered items the sink requests, or the
// full ones a default client gets -- and leaves every other request (claims) to a fake
// cluster. It does no work per document, so what a benchmark measures over it is the client.
type cannedCluster struct {
	*fakeCluster
	mu      sync.Mutex
	answers map[[2]int][]byte
}

func (c *cannedCluster) Perform(r *http.Request) (*http.Response, error) {
	if !strings.HasSuffix(r.URL.Path, "/_bulk") {
		return c.fakeCluster.Perform(r)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	n := bytes.Count(body, []byte("\n")) / 2 // index actions only: action and document lines
	filtered := 0
	if r.URL.Query().Has("filter_path") {
		filtered = 1
	}
	c.mu.Lock()
	ans, ok := c.answers[[2]int{n, filtered}]
	if !ok {
		var sb strings.Builder
		sb.WriteString(`{"errors":false,"took":7,"items":[`)
		for i := 0; i < n; i++ {
			if i > 0 {
				sb.WriteByte(',')
			}
			if filtered == 1 {
				sb.WriteString(`{"index":{"status":200}}`)
				continue
			}
			sb.WriteString(`{"index":{"_index":"bench","_id":"` + strconv.Itoa(i) + `","_version":7,"result":"updated",` +
				`"_shards":{"total":1,"successful":1,"failed":0},"_seq_no":` + strconv.Itoa(1000+i) + `,"_primary_term":1,"status":200}}`)
		}
		sb.WriteString(`]}`)
		ans = []byte(sb.String())
		c.answers[[2]int{n, filtered}] = ans
	}
	c.mu.Unlock()
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(ans))}, nil
}

// BenchmarkSinkClientCPU is the client's own cost per document, without a server: the sink's
// Write and esutil.BulkIndexer (defaults, a map per row, encoding/json, as in
// BenchmarkSinkVsBaselines) over a transport that answers at once, alternating in one run.
// It is the part of the end-to-end time each client controls; against a real node on
// loopback the cluster's indexing dominates both (BenchmarkSinkVsBaselines).
func BenchmarkSinkClientCPU(b *testing.B) {
	tp := &cannedCluster{fakeCluster: newFakeCluster(b), answers: map[[2]int][]byte{}}
	k, err := New(Config{ID: "bench", URL: "http://fake.invalid:9200", Index: "bench", Auth: Auth{Type: AuthNone}}, "p", statestore.NewMemory(), &Options{Transport: tp, Engine: estest.Ptr(Elasticsearch)})

	if err != nil {
		b.Fatal(err)
	}
	sch := benchSchema()
	ctx := context.Background()
	if _, err := k.Write(ctx, benchRows(sch, 0, 1)[:1]); err != nil {
		b.Fatal(err)
	}
	alias := k.claims["bench"].WriteAlias()
	var took [2]time.Duration
	var mallocs [2]uint64
	var ms runtime.MemStats
	version := int64(1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := 0; j < 2; j++ {
			who := (i + j) % 2
			version++
			b.StopTimer()
			rows := benchRows(sch, 0, version)
			runtime.ReadMemStats(&ms)
			before := ms.Mallocs
			b.StartTimer()
			t0 := time.Now()
			if who == 0 {
				if dead, err := k.Write(ctx, rows); err != nil || len(dead) != 0 {
					b.Fatal(err, dead)
				}
			} else {
				bulkIndexerOver(b, tp, alias, sch, rows, version)
			}
			took[who] += time.Since(t0)
			b.StopTimer()
			runtime.ReadMemStats(&ms)
			mallocs[who] += ms.Mallocs - before
			b.StartTimer()
		}
	}
	b.StopTimer()
	docs := float64(b.N * benchBatch)
	b.ReportMetric(float64(took[0].Nanoseconds())/docs, "sink-ns/doc")
	b.ReportMetric(float64(took[1].Nanoseconds())/docs, "bulkindexer-ns/doc")
	b.ReportMetric(float64(mallocs[0])/docs, "sink-allocs/doc")
	b.ReportMetric(float64(mallocs[1])/docs, "bulkindexer-allocs/doc")
	b.ReportMetric(took[1].Seconds()/took[0].Seconds(), "sink/bulkindexer")
}
