package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/store"
)

// benchRecords returns n encoded records shaped like the worker benchmark's: half puts, half
// merges of small counter documents, over string keys of one dataset, in one request.
func benchRecords(n int) [][]byte {
	at := time.Date(2026, 11, 30, 7, 1, 2, 123456789, time.UTC)
	hash := store.ProgramHash("add")
	out := make([][]byte, n)
	for i := range out {
		a := store.Address{Store: "m", Namespace: "ns", Dataset: "ds", Key: store.StringKey(fmt.Sprint("k", i))}
		r := store.Record{RequestID: "00112233445566778899aabbccddeeff", Index: i, AcceptedAt: at}
		if i%2 == 0 {
			r.Op = store.Put(a, store.Document{JSON: fmt.Appendf(nil, `{"n":%d,"seq":%d}`, i, i)})
		} else {
			r.Op = store.Merge(a, "add", store.Document{JSON: []byte(`{"n":1}`)})
		}
		out[i] = store.AppendRecord(nil, &r, hash)
	}
	return out
}

// BenchmarkRecordCodec measures encoding and decoding the worker benchmark's records; ns/op
// is per record. Decoding, the worker's cost, is reported with the document copied (Decode)
// and shared with the message (DecodeShared, as the worker decodes).
func BenchmarkRecordCodec(b *testing.B) {
	values := benchRecords(500)
	b.Run("encode", func(b *testing.B) {
		recs := make([]store.Record, len(values))
		for i, v := range values {
			r, err := store.DecodeRecord(v)
			if err != nil {
				b.Fatal(err)
			}
			recs[i] = r
		}
		hash := store.ProgramHash("add")
		buf := make([]byte, 0, 1024)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			buf = store.AppendRecord(buf[:0], &recs[i%len(recs)], hash)
		}
	})
	for _, shared := range []bool{false, true} {
		name := "decode"
		if shared {
			name = "decode-shared"
		}
		b.Run(name, func(b *testing.B) {
			var d store.RecordDecoder
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var err error
				if shared {
					_, err = d.DecodeShared(values[i%len(values)])
				} else {
					_, err = d.Decode(values[i%len(values)])
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
