package searchstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/store/driver"
	"github.com/tributary-dev/tributary/store/searchstore"
)

const benchBatch = 100

// BenchmarkAdapterVsRaw measures one batch read of benchBatch records followed by a write of
// each at the revision just read, through the adapter and as hand-written, pre-encoded _mget
// and _bulk bodies over the same kind of transport against the same server, in one run. The
// adapter sub-benchmark reports raw-ns/adapter-ns as "x-raw" (the goal is >= 0.7).
func BenchmarkAdapterVsRaw(b *testing.B) {
	eachEngine(b, func(b *testing.B, srv *server) {
		index := srv.createIndex(b, "bench")
		docs := make([][]byte, benchBatch)
		ids := make([]string, benchBatch)
		for i := range docs {
			ids[i] = "doc-" + strconv.Itoa(i)
			docs[i] = fmt.Appendf(nil, `{"id":%d,"name":"record %d","tags":["a","b","c"],"score":%d.5,"text":%q}`,
				i, i, i, strings.Repeat("lorem ipsum ", 30))
		}
		var seed bytes.Buffer
		for i := range docs {
			fmt.Fprintf(&seed, `{"index":{"_index":%q,"_id":%q}}`+"\n%s\n", index, ids[i], docs[i])
		}
		srv.OK(b, esapi.BulkRequest{Body: &seed, Refresh: "true"})

		ctx := context.Background()
		mget := []byte(`{"docs":[`)
		for i, id := range ids {
			if i > 0 {
				mget = append(mget, ',')
			}
			mget = fmt.Appendf(mget, `{"_index":%q,"_id":%q}`, index, id)
		}
		mget = append(mget, "]}"...)
		prefixes := make([][]byte, len(ids))
		for i, id := range ids {
			prefixes[i] = fmt.Appendf(nil, `{"index":{"_index":%q,"_id":%q,"if_seq_no":`, index, id)
		}
		bulk := make([]byte, 0, 64<<10)
		raw := func() {
			var got struct {
				Docs []struct {
					Found       bool  `json:"found"`
					SeqNo       int64 `json:"_seq_no"`
					PrimaryTerm int64 `json:"_primary_term"`
				} `json:"docs"`
			}
			rawCall(b, srv, esapi.MgetRequest{Body: bytes.NewReader(mget)}, &got)
			bulk = bulk[:0]
			for i, d := range got.Docs {
				bulk = append(bulk, prefixes[i]...)
				bulk = strconv.AppendInt(bulk, d.SeqNo, 10)
				bulk = append(bulk, `,"if_primary_term":`...)
				bulk = strconv.AppendInt(bulk, d.PrimaryTerm, 10)
				bulk = append(bulk, "}}\n"...)
				bulk = append(bulk, docs[i]...)
				bulk = append(bulk, '\n')
			}
			var res struct {
				Errors bool `json:"errors"`
				Items  []struct {
					Index struct {
						Status int `json:"status"`
					} `json:"index"`
				} `json:"items"`
			}
			rawCall(b, srv, esapi.BulkRequest{Body: bytes.NewReader(bulk)}, &res)
			if res.Errors || len(res.Items) != benchBatch {
				b.Fatalf("raw bulk failed: %d items, errors %v", len(res.Items), res.Errors)
			}
		}

		s, err := searchstore.NewFromURLs([]string{srv.URL}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close(ctx)
		addrs := make([]driver.Address, len(ids))
		for i, id := range ids {
			addrs[i] = driver.Address{Store: "bench", Namespace: "ns", Dataset: index, Key: driver.NewStringKey(id)}
		}
		writes := make([]driver.Write, len(ids))
		adapter := func() {
			reads, err := s.Read(ctx, addrs)
			if err != nil {
				b.Fatal(err)
			}
			for i, r := range reads {
				if r.Err != nil || !r.Found {
					b.Fatalf("read %d: %v", i, r.Err)
				}
				writes[i] = driver.Write{Kind: driver.Put, Addr: addrs[i], Doc: driver.Document{JSON: docs[i]},
					Cond: driver.Condition{Kind: driver.IfRevision, Revision: r.Revision}}
			}
			res, err := s.Write(ctx, writes, driver.WriteOptions{})
			if err != nil {
				b.Fatal(err)
			}
			for i, r := range res {
				if r.Err != nil {
					b.Fatalf("write %d: %v", i, r.Err)
				}
			}
		}

		// The server's speed drifts (JIT, merges) over a run, so each sub-benchmark runs
		// both paths in alternation and times only its own: both see the same load, and
		// the ratio comes from pairs measured side by side.
		for range 100 {
			raw()
			adapter()
		}
		paired := func(b *testing.B, mine, other func()) (mineTotal, otherTotal time.Duration) {
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				if i%2 == 0 {
					t0 := time.Now()
					other()
					otherTotal += time.Since(t0)
				}
				b.StartTimer()
				t0 := time.Now()
				mine()
				mineTotal += time.Since(t0)
				if i%2 == 1 {
					b.StopTimer()
					t0 := time.Now()
					other()
					otherTotal += time.Since(t0)
					b.StartTimer()
				}
			}
			return mineTotal, otherTotal
		}
		b.Run("raw", func(b *testing.B) { paired(b, raw, adapter) })
		b.Run("adapter", func(b *testing.B) {
			adapterTotal, rawTotal := paired(b, adapter, raw)
			b.ReportMetric(float64(rawTotal)/float64(adapterTotal), "x-raw")
		})
	})
}

// rawCall sends req over the plain client and decodes a 200 answer into v.
func rawCall(b *testing.B, srv *server, req esapi.Request, v any) {
	res, err := req.Do(context.Background(), srv.Transport)
	if err != nil {
		b.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != 200 {
		b.Fatalf("status %d, %v", res.StatusCode, err)
	}
	if err := json.Unmarshal(body, v); err != nil {
		b.Fatal(err)
	}
}
