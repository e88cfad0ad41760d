package luamerge

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/store"
)

// The benchmark merge: a ~20-field profile document gets the incoming fields, a visit counter
// and an update time -- in Lua, and the same in Go.
const benchProgram = `return function(current, incoming, ctx)
  if current == nil then return incoming end
  for k, v in pairs(incoming) do
    if k ~= "visits" then current[k] = v end
  end
  current.visits = (current.visits or 0) + (incoming.visits or 0)
  current.updated = ctx.time
  return current
end`

var (
	benchCurrent = store.Document{JSON: []byte(`{"id":"u-1042","name":"Ada Lovelace","email":"ada@example.com",` +
		`"visits":41,"score":98.5,"active":true,"plan":"pro","country":"GB","city":"London","zip":"NW1 6XE",` +
		`"tags":["math","engines","poetry"],"address":{"street":"12 St James's Square","floor":2},` +
		`"created":"2026-01-05T09:00:00Z","updated":"2026-11-29T17:45:12Z","locale":"en-GB","tz":"Europe/London",` +
		`"referrer":null,"newsletter":false,"balance":1250.75,"ext_id":12345678901234567890}`),
		Times: []string{"/created", "/updated"}}
	benchIncoming = store.Document{JSON: []byte(`{"visits":1,"city":"Cambridge","score":99.25,"tags":["math","engines"],"active":true}`)}
	benchCall     = store.MergeCall{Program: benchProgram, Current: &benchCurrent, Incoming: benchIncoming,
		Context: store.MergeContext{Addr: store.Address{Store: "main", Namespace: "crm", Dataset: "people", Key: store.StringKey("ada")},
			Time: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC), Attempt: 1}}
)

// goMerge is benchProgram written in Go, exact with numbers as the Lua bridge is.
func goMerge(_ context.Context, call *store.MergeCall) (store.MergeResult, error) {
	var cur, in map[string]json.RawMessage
	if err := json.Unmarshal(call.Incoming.JSON, &in); err != nil {
		return store.MergeResult{}, err
	}
	if call.Current == nil {
		return store.MergeResult{Doc: call.Incoming}, nil
	}
	if err := json.Unmarshal(call.Current.JSON, &cur); err != nil {
		return store.MergeResult{}, err
	}
	for k, v := range in {
		if k != "visits" {
			cur[k] = v
		}
	}
	var a, b float64
	_ = json.Unmarshal(cur["visits"], &a)
	_ = json.Unmarshal(in["visits"], &b)
	cur["visits"], _ = json.Marshal(a + b)
	cur["updated"], _ = json.Marshal(call.Context.Time.UTC().Format(time.RFC3339Nano))
	out, err := json.Marshal(cur)
	return store.MergeResult{Doc: store.Document{JSON: out, Times: call.Current.Times}}, err
}

// reusedVM runs benchProgram again and again in one VM: what a fresh VM per run is measured
// against. Only the benchmark does this; Merge never reuses a VM.
type reusedVM struct {
	r *run
	p *program
}

func newReusedVM(tb testing.TB, e *Engine) *reusedVM {
	p := e.program(benchProgram)
	if p.err != nil {
		tb.Fatal(p.err)
	}
	r := e.newRun()
	r.setup()
	r.keepProgram = true
	v := &reusedVM{r: r, p: p}
	if _, err := r.execute(context.Background(), &benchCall, p, true); err != nil {
		tb.Fatal(err)
	}
	return v
}

func (v *reusedVM) merge(ctx context.Context, call *store.MergeCall) (store.MergeResult, error) {
	r := v.r
	r.steps, r.mem, r.tripped, r.failure = 0, v.p.baseline, nil, nil
	r.stop.Store(stopNone)
	clear(r.arrays)
	clear(r.order)
	return r.execute(ctx, call, v.p, false)
}

type mergeFunc func(context.Context, *store.MergeCall) (store.MergeResult, error)

func benchVariants(b *testing.B) []struct {
	name string
	run  mergeFunc
} {
	e, err := New(nil)
	if err != nil {
		b.Fatal(err)
	}
	reused := newReusedVM(b, e)
	return []struct {
		name string
		run  mergeFunc
	}{{"lua-fresh-vm", e.Merge}, {"lua-reused-vm", reused.merge}, {"go", goMerge}}
}

// BenchmarkMerge measures one merge of a ~20-field document: Lua in a fresh VM (what Merge
// does), Lua in a reused VM, and the same merge in Go.
func BenchmarkMerge(b *testing.B) {
	for _, v := range benchVariants(b) {
		b.Run(v.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.run(ctx, &benchCall); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMergeRatios interleaves the three variants in one loop, so that all see the same
// machine state, and reports the ratios the issue sets goals for: fresh/reused (goal <= 1.25)
// and lua/go (goal <= 3).
func BenchmarkMergeRatios(b *testing.B) {
	vs := benchVariants(b)
	ctx := context.Background()
	spent := make([]time.Duration, len(vs))
	for b.Loop() {
		for i, v := range vs {
			start := time.Now()
			if _, err := v.run(ctx, &benchCall); err != nil {
				b.Fatal(err)
			}
			spent[i] += time.Since(start)
		}
	}
	b.ReportMetric(float64(spent[0])/float64(spent[1]), "fresh/reused")
	b.ReportMetric(float64(spent[0])/float64(spent[2]), "lua/go")
	b.ReportMetric(float64(spent[0].Nanoseconds())/float64(b.N), "fresh-ns/merge")
}
