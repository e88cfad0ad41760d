package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"
	"github.com/elastic/go-elasticsearch/v8/esutil"

	"github.com/tributary-dev/tributary/cdc"
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

// BenchmarkSinkVsBaselines writes the same batches of 1000 rows three ways, side by side in one
// run against the same node: the sink's Write; a replay of the sink's own pre-encoded _bulk
// bodies (the floor: only the HTTP exchange and the cluster's work); and esutil.BulkIndexer fed
// the same rows as maps (a typical client). It reports each one's docs/s and the ratios
// sink/replay (goal >= 0.9) and sink/bulkindexer (goal >= 5; the goal assumes the indexer's
// per-document overheads dominate, which a fast loopback node makes visible).
func BenchmarkSinkVsBaselines(b *testing.B) {
	for _, e := range []struct{ name, env string }{{"elasticsearch", "TRIBUTARY_ES_URL"}, {"opensearch", "TRIBUTARY_OPENSEARCH_URL"}} {
		b.Run(e.name, func(b *testing.B) {
			raw := benchEnv(b, e.env)
			s := &server{engine: e.name, url: raw, prefix: "snkb-" + randomHex(b, 4)}
			s.tp = newBenchTransport(b, raw)
			b.Cleanup(func() { s.do(b, esapi.IndicesDeleteRequest{Index: []string{s.prefix + "*"}}) })
			enforceBench(b, s)
			cfg := s.config("b")
			cfg.Batch.MaxDocs = benchBatch
			k := s.sink(b, cfg, statestore.NewMemory(), nil)
			sch := benchSchema()
			write(b, k, benchRows(sch, 0, 1)[:1]) // creates and claims the index
			idx := indexOf(b, k, "bench")
			alias := k.claims[idx].WriteAlias()
			ctx := context.Background()

			var tSink, tReplay, tBI time.Duration
			version := int64(1)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				version++
				batch := benchRows(sch, 0, version)

				t0 := time.Now()
				if dead, err := k.Write(ctx, batch); err != nil || len(dead) > 0 {
					b.Fatal(err, dead)
				}
				tSink += time.Since(t0)

				// The replay: the sink's own body for the next version, encoded outside
				// the timing.
				version++
				acts, _, err := k.plan(benchRows(sch, 0, version), nil)
				if err != nil {
					b.Fatal(err)
				}
				chunks, _, _ := k.encode(acts, nil)
				t0 = time.Now()
				for _, c := range chunks {
					st, _, ans, err := k.bulk(ctx, c.body)
					if err != nil || st != 200 {
						b.Fatalf("replay: %v %d", err, st)
					}
					if errs, _ := answerHasErrors(ans.Bytes()); errs {
						b.Fatal("replay: item errors")
					}
					putAnswer(ans)
				}
				tReplay += time.Since(t0)

				version++
				rows := benchRows(sch, 0, version)
				t0 = time.Now()
				bulkIndexer(b, s, alias, sch, rows, version)
				tBI += time.Since(t0)
			}
			b.StopTimer()
			docs := float64(b.N * benchBatch)
			b.ReportMetric(docs/tSink.Seconds(), "sink-docs/s")
			b.ReportMetric(docs/tReplay.Seconds(), "replay-docs/s")
			b.ReportMetric(docs/tBI.Seconds(), "bulkindexer-docs/s")
			b.ReportMetric(tReplay.Seconds()/tSink.Seconds(), "sink/replay")
			b.ReportMetric(tBI.Seconds()/tSink.Seconds(), "sink/bulkindexer")
		})
	}
}

// bulkIndexer indexes rows the way a typical client does: a map per row, encoding/json, the
// indexer's own buffering and workers.
func bulkIndexer(b *testing.B, s *server, alias string, sch *cdc.TableSchema, rows []cdc.Event, version int64) {
	bi, err := esutil.NewBulkIndexer(esutil.BulkIndexerConfig{Client: s.tp, Index: alias, FlushBytes: 10 << 20})
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
		tables: map[*cdc.TableSchema]*tableInfo{}}
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
// items: all-409 is a replayed batch (every item a version conflict: the fast path); mixed has
// every tenth item a 400 mapping error, which is decoded in full and dead-lettered.
func BenchmarkSinkItemErrors(b *testing.B) {
	for _, c := range []struct {
		name  string
		every int // every n-th item is a 400; 0: none
	}{{"all-409", 0}, {"mixed-400", 10}} {
		b.Run(c.name, func(b *testing.B) {
			var ans strings.Builder
			ans.WriteString(`{"errors":true,"took":3,"items":[`)
			wantDead := 0
			for i := 0; i < benchBatch; i++ {
				if i > 0 {
					ans.WriteByte(',')
				}
				if c.every > 0 && i%c.every == 0 {
					wantDead++
					ans.WriteString(`{"index":{"_index":"bench","_id":"` + strconv.Itoa(i) + `","status":400,"error":{"type":"document_parsing_exception","reason":"[1:2] failed to parse field [qty] of type [long] in document with id '1'. Preview of field's value: 'x'","caused_by":{"type":"illegal_argument_exception","reason":"For input string: \"x\""}}}}`)
					continue
				}
				ans.WriteString(`{"index":{"_index":"bench","_id":"` + strconv.Itoa(i) + `","status":409,"error":{"type":"version_conflict_engine_exception","reason":"[` +
					strconv.Itoa(i) + `]: version conflict, current version [5] is higher or equal to the one provided [4]","index_uuid":"x","shard":"0","index":"bench"}}}`)
			}
			ans.WriteString(`]}`)
			k := &Sink{cfg: Config{ID: "b", RequestTimeout: Duration(time.Minute), ItemRetries: 1}, tp: fakeBulk{[]byte(ans.String())}}
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
