package cdc

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"
	"time"
)

// linePos is a Position for the dead-letter line tests.
type linePos int64

func (p linePos) Version() int64 { return int64(p) }
func (p linePos) String() string {
	if p < 0 {
		return ""
	}
	return "lsn " + strconv.FormatInt(int64(p), 10)
}

// lineValues are values of every shape a row may hold, awkward text included.
var lineValues = []Value{
	nil, true, false, int64(-7), int64(math.MaxInt64), int32(5), 12, uint64(math.MaxUint64),
	EpochMicros(1_700_000_000_000_001), "plain", "<a & b>", "quote \" backslash \\ tab \t nl \n",
	"\u2028\u2029 ünïcode", "bad \xff utf-8", "\x00\x1f", Base64("AAE="), RawJSON("{\n  \"a\": [1, 2]\n}"),
	RawJSON(`not json`), 1.5, math.NaN(), math.Inf(1), 1e300, -0.0, []Value{"x", nil, int64(1), RawJSON(`{ "b" : 2 }`)},
	[]Value{}, Unchanged{}, json.Number("12.30"), struct{ X int }{3},
}

func lineRecord(r *rand.Rand) DeadLetterRecord {
	row := func() []Value {
		if r.IntN(5) == 0 {
			return nil
		}
		out := make([]Value, r.IntN(6))
		for i := range out {
			out[i] = lineValues[r.IntN(len(lineValues))]
		}
		return out
	}
	ev := Event{Op: Op(r.IntN(5)), Table: TableID{Connector: "postgres", Source: "s\xfe", Database: "db", Table: "t<1>"},
		Before: row(), After: row(), TxID: []string{"", "tx 9", "\n"}[r.IntN(3)]}
	if r.IntN(2) == 0 {
		ev.Table.Schema = "public"
	}
	if r.IntN(4) > 0 {
		ev.Position = linePos(r.IntN(5) - 1)
	}
	if r.IntN(2) == 0 {
		ev.CommitTime = time.Date(2026, 12, 2, 17, 0, 0, r.IntN(1e9), time.FixedZone("x", 3600))
	}
	if r.IntN(3) > 0 {
		ev.Schema = &TableSchema{ID: ev.Table, Columns: []Column{{Name: "id", Kind: KindInt}, {Name: "näme", Kind: KindText}}}
		if r.IntN(4) == 0 {
			ev.Schema.Columns = nil
		}
	}
	return DeadLetterRecord{Pipeline: "p\"1", Reason: "keyless_table: no key", Time: time.Unix(1_800_000_000, int64(r.IntN(1e9))), Event: ev}
}

// TestDeadLetterLineMatchesEncodingJSON: the hand-written line decodes to the same JSON as
// encoding/json's rendering of NewDeadLetterLine, for random records of every value shape, and
// is one line.
func TestDeadLetterLineMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var e lineEncoder
	for i := range 3000 {
		rec := lineRecord(r)
		got := e.appendLine(nil, &rec)
		if bytes.IndexByte(got, '\n') != len(got)-1 {
			t.Fatalf("record %d: not one line: %q", i, got)
		}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(NewDeadLetterLine(rec)); err != nil {
			t.Fatal(err)
		}
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("record %d: %v: %s", i, err, got)
		}
		if err := json.Unmarshal(want.Bytes(), &w); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("record %d:\n got %s\nwant %s", i, got, want.Bytes())
		}
	}
}

// TestDeadLetterLineTimeOutOfRange: a commit time MarshalJSON refuses is written as null, not
// a failed write (which would stop the pipeline on its dead letter).
func TestDeadLetterLineTimeOutOfRange(t *testing.T) {
	var e lineEncoder
	rec := DeadLetterRecord{Pipeline: "p", Reason: "r", Time: time.Now(), Event: Event{CommitTime: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}
	var m map[string]any
	if err := json.Unmarshal(e.appendLine(nil, &rec), &m); err != nil {
		t.Fatal(err)
	}
	if v, ok := m["commit_time"]; !ok || v != nil {
		t.Fatalf("commit_time = %v (present %v), want null", v, ok)
	}
}

// BenchmarkDeadLetterLines compares, in one run, encoding a batch of 250 pgbench_history-like
// dead letters with the line encoder and with encoding/json over NewDeadLetterLine (what
// FileDLQ did before); ratio = encoding/json time / line encoder time.
func BenchmarkDeadLetterLines(b *testing.B) {
	sch := &TableSchema{ID: TableID{Connector: "postgres", Database: "bench", Schema: "public", Table: "pgbench_history"},
		Columns: []Column{{Name: "tid", Kind: KindInt}, {Name: "bid", Kind: KindInt}, {Name: "aid", Kind: KindInt},
			{Name: "delta", Kind: KindInt}, {Name: "mtime", Kind: KindTimestamp}, {Name: "filler", Kind: KindText}}}
	recs := make([]DeadLetterRecord, 250)
	now := time.Now()
	for i := range recs {
		recs[i] = DeadLetterRecord{Pipeline: "tpcb", Reason: "keyless_table: no primary key or replica identity", Time: now,
			Event: Event{Op: Insert, Table: sch.ID, Schema: sch, Position: linePos(1000 + i), TxID: strconv.Itoa(i), CommitTime: now,
				After: []Value{int64(i % 10), int64(1), int64(i * 37), int64(i - 2500), "2026-12-02T17:00:00.123456", nil}}}
	}
	var took [2]time.Duration
	var e lineEncoder
	var buf []byte
	var jb bytes.Buffer
	for i := 0; b.Loop(); i++ {
		for j := range 2 {
			t0 := time.Now()
			if (i+j)%2 == 0 {
				buf = buf[:0]
				for k := range recs {
					buf = e.appendLine(buf, &recs[k])
				}
				took[0] += time.Since(t0)
			} else {
				jb.Reset()
				enc := json.NewEncoder(&jb)
				enc.SetEscapeHTML(false)
				for _, rec := range recs {
					if err := enc.Encode(NewDeadLetterLine(rec)); err != nil {
						b.Fatal(err)
					}
				}
				took[1] += time.Since(t0)
			}
		}
	}
	n := float64(b.N * len(recs))
	b.ReportMetric(float64(took[0].Nanoseconds())/n, "line-ns/record")
	b.ReportMetric(float64(took[1].Nanoseconds())/n, "json-ns/record")
	b.ReportMetric(float64(took[1])/float64(took[0]), "json/line")
}
