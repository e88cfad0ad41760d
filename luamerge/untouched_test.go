package luamerge

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/store"
)

// untouchedDoc holds numbers whose text is not the shortest form of their value (1.0, -0.0,
// 1e0, 1.5e3, 2.50), next to plain and exact ones, at the top level, in arrays and in objects.
const untouchedDoc = `{"f":1.0,"z":-0.0,"n":1,"i":5,"big":9007199254740993,"e":1e0,"k":1.5e3,` +
	`"arr":[1.0,-0.0,7,{"d":3.0e0}],"o":{"x":2.50,"y":[0.0],"s":"1.0"}}`

// The JSON a backend reads untouchedDoc back as, where it is not the text as written: MongoDB
// stores numbers as BSON values and writes doubles in shortest form with a fraction or an
// exponent. On FerretDB, which stores -0.0 as 0.0, the adapter refuses -0.0 (see mongostore)
// and the test stores 0.0 instead.
var untouchedRead = map[string]string{
	"mongodb": `{"f":1.0,"z":-0.0,"n":1,"i":5,"big":9007199254740993,"e":1.0,"k":1500.0,` +
		`"arr":[1.0,-0.0,7,{"d":3.0}],"o":{"x":2.5,"y":[0.0],"s":"1.0"}}`,
}

// A merge that only increments n leaves every other value's JSON text as the record read
// before the merge, on every backend: the Lua bridge writes an untouched number back with its
// own text, so 1.0 stays 1.0 (a double on MongoDB) and -0.0 stays -0.0.
func TestLuaMergeKeepsUntouchedValues(t *testing.T) {
	for _, b := range luaBackends {
		t.Run(b.name, func(t *testing.T) {
			a, ns, ds := b.adapter(t)
			s := newLuaService(t, a, false)
			t.Cleanup(func() { _ = s.Close(context.Background()) })
			ctx := context.Background()
			addr := store.Address{Store: "main", Namespace: ns, Dataset: ds, Key: store.StringKey(fmt.Sprintf("mongotypes-untouched-%d", time.Now().UnixNano()))}
			doc, want := untouchedDoc, untouchedDoc
			if w, ok := untouchedRead[b.name]; ok {
				want = w
			}
			res, err := s.Do(ctx, []store.Op{store.Put(addr, store.Document{JSON: []byte(doc)})}, store.WaitApplied)
			if err != nil {
				t.Fatal(err)
			}
			if b.name == "mongodb" && store.KindOf(res[0].Err) == store.KindInvalid && strings.Contains(res[0].Err.Error(), "FerretDB") {
				t.Logf("FerretDB refuses -0.0 (%v); storing 0.0", res[0].Err)
				doc, want = strings.ReplaceAll(doc, "-0.0", "0.0"), strings.ReplaceAll(want, "-0.0", "0.0")
				res, err = s.Do(ctx, []store.Op{store.Put(addr, store.Document{JSON: []byte(doc)})}, store.WaitApplied)
				if err != nil {
					t.Fatal(err)
				}
			}
			if res[0].Err != nil {
				t.Fatalf("put: %v", res[0].Err)
			}
			read := func() string {
				t.Helper()
				got, err := s.Do(ctx, []store.Op{store.Read(addr)}, store.WaitApplied)
				if err != nil || got[0].Err != nil {
					t.Fatal(err, got[0].Err)
				}
				return string(got[0].Doc.JSON)
			}
			if got := read(); got != want {
				t.Fatalf("after the put the record reads\n %s\nwant\n %s", got, want)
			}
			for n := 2; n <= 3; n++ {
				m, err := s.Do(ctx, []store.Op{store.Merge(addr, increment, store.Document{JSON: []byte(`{"by":1}`)})}, store.WaitApplied)
				if err != nil || m[0].Err != nil {
					t.Fatal(err, m[0].Err)
				}
				if got, w := read(), strings.Replace(want, `"n":1,`, fmt.Sprintf(`"n":%d,`, n), 1); got != w {
					t.Fatalf("after merge %d the record reads\n %s\nwant\n %s", n-1, got, w)
				}
			}
		})
	}
}

// json.datetime(context.time), the documented way to stamp a record, works on every backend:
// the Service truncates the context time to the backend's date-time precision
// (an adapter's TimePrecision: milliseconds on MongoDB, none elsewhere), and the record keeps the
// stamp exactly -- marked where the backend keeps marks (searchstore returns it as a plain
// string).
func TestLuaMergeStampsContextTime(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 11, 12, 123456789, time.UTC)
	for _, b := range luaBackends {
		t.Run(b.name, func(t *testing.T) {
			a, ns, ds := b.adapter(t)
			e := newEngine(t, &Options{MaxInstructions: 100_000})
			s, err := store.New(map[string]store.Adapter{"main": a}, &store.Options{Merger: e, Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close(context.Background()) })
			want := now
			if tp, ok := a.(interface{ TimePrecision() time.Duration }); ok {
				want = now.Truncate(tp.TimePrecision())
			}
			if b.name == "mongodb" && !want.Equal(now.Truncate(time.Millisecond)) {
				t.Fatalf("the MongoDB adapter does not declare millisecond precision")
			}
			ctx := context.Background()
			addr := store.Address{Store: "main", Namespace: ns, Dataset: ds, Key: store.StringKey(fmt.Sprintf("mongotypes-stamp-%d", time.Now().UnixNano()))}
			program := fn(`local doc = current or {} doc.t = json.datetime(context.time) return doc`)
			m, err := s.Do(ctx, []store.Op{store.Merge(addr, program, store.Document{JSON: []byte(`{}`)})}, store.WaitApplied)
			if err != nil || m[0].Err != nil {
				t.Fatal(err, m[0].Err)
			}
			got, err := s.Do(ctx, []store.Op{store.Read(addr)}, store.WaitApplied)
			if err != nil || got[0].Err != nil {
				t.Fatal(err, got[0].Err)
			}
			text := want.UTC().Format(time.RFC3339Nano)
			if string(got[0].Doc.JSON) != `{"t":"`+text+`"}` {
				t.Fatalf("read %s, want the stamp %s", got[0].Doc.JSON, text)
			}
			search := b.name == "elasticsearch" || b.name == "opensearch"
			if marked := slices.Equal(got[0].Doc.Times, []string{"/t"}); marked == search {
				t.Fatalf("times %q (backend keeps marks: %v)", got[0].Doc.Times, !search)
			}
		})
	}
}
