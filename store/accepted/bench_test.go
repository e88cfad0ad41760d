package accepted_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/accepted"
)

// benchRecords returns n encoded records shaped like the worker benchmark's: half puts, half
// merges of small counter documents, over string keys of one dataset, in one request.
func benchRecords(n int) [][]byte {
	at := time.Date(2026, 11, 30, 7, 1, 2, 123456789, time.UTC)
	hash := accepted.ProgramHash("add")
	out := make([][]byte, n)
	for i := range out {
		a := store.Address{Store: "m", Namespace: "ns", Dataset: "ds", Key: store.StringKey(fmt.Sprint("k", i))}
		r := accepted.Record{RequestID: "00112233445566778899aabbccddeeff", Index: i, AcceptedAt: at}
		if i%2 == 0 {
			r.Op = store.Put(a, store.Document{JSON: fmt.Appendf(nil, `{"n":%d,"seq":%d}`, i, i)})
		} else {
			r.Op = store.Merge(a, "add", store.Document{JSON: []byte(`{"n":1}`)})
		}
		out[i] = accepted.Append(nil, &r, hash)
	}
	return out
}

// BenchmarkRecordCodec measures encoding and decoding the worker benchmark's records; ns/op
// is per record. Decoding, the worker's cost, is reported with the document copied (Decode),
// shared with the message (DecodeShared, as the worker decodes) and, side by side in the same
// run, by encoding/json into a struct followed by the same conversions and checks
// (decode-encoding-json): the hand-written decoder is kept only while it clearly wins.
func BenchmarkRecordCodec(b *testing.B) {
	values := benchRecords(500)
	b.Run("encode", func(b *testing.B) {
		recs := make([]accepted.Record, len(values))
		for i, v := range values {
			r, err := accepted.Decode(v)
			if err != nil {
				b.Fatal(err)
			}
			recs[i] = r
		}
		hash := accepted.ProgramHash("add")
		buf := make([]byte, 0, 1024)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			buf = accepted.Append(buf[:0], &recs[i%len(recs)], hash)
		}
	})
	for _, shared := range []bool{false, true} {
		name := "decode"
		if shared {
			name = "decode-shared"
		}
		b.Run(name, func(b *testing.B) {
			var d accepted.Decoder
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
	b.Run("decode-encoding-json", func(b *testing.B) {
		var d jsonDecoder
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := d.decode(values[i%len(values)]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// jsonWire is the version-1 record as encoding/json reads it.
type jsonWire struct {
	V             int             `json:"v"`
	Request       string          `json:"request"`
	Index         int             `json:"index"`
	AcceptedAt    time.Time       `json:"accepted_at"`
	Op            string          `json:"op"`
	Store         string          `json:"store"`
	Namespace     string          `json:"namespace"`
	Dataset       string          `json:"dataset"`
	KeyType       string          `json:"key_type"`
	Key           string          `json:"key"`
	If            string          `json:"if"`
	Revision      string          `json:"revision"`
	Program       *string         `json:"program"`
	ProgramSHA256 string          `json:"program_sha256"`
	Doc           json.RawMessage `json:"doc"`
	Times         []string        `json:"times"`
}

// jsonDecoder is the decoder one would write with encoding/json: the benchmark's baseline. It
// does the work Decoder does for the benchmark's records (string keys, no preconditions),
// including verifying a program's hash once per run of records sharing it.
type jsonDecoder struct{ program, hash string }

func (d *jsonDecoder) decode(value []byte) (accepted.Record, error) {
	var w jsonWire
	if err := json.Unmarshal(value, &w); err != nil {
		return accepted.Record{}, err
	}
	if w.V != accepted.Version || w.KeyType != "string" {
		return accepted.Record{}, errors.New("unsupported record")
	}
	a := store.Address{Store: w.Store, Namespace: w.Namespace, Dataset: w.Dataset, Key: store.StringKey(w.Key)}
	r := accepted.Record{RequestID: w.Request, Index: w.Index, AcceptedAt: w.AcceptedAt}
	doc := store.Document{JSON: w.Doc, Times: w.Times}
	switch w.Op {
	case "put":
		r.Op = store.Put(a, doc)
	case "merge":
		if w.Program == nil {
			return accepted.Record{}, errors.New("a merge without a program")
		}
		if *w.Program != d.program || w.ProgramSHA256 != d.hash {
			if accepted.ProgramHash(*w.Program) != w.ProgramSHA256 {
				return accepted.Record{}, errors.New("program hash mismatch")
			}
			d.program, d.hash = *w.Program, w.ProgramSHA256
		}
		r.Op = store.Merge(a, d.program, doc)
	case "delete":
		r.Op = store.Delete(a)
	default:
		return accepted.Record{}, errors.New("unknown op")
	}
	return r, nil
}
