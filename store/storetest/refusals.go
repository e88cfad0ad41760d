package storetest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/memstore"
)

// A refusal case: one put that some backends refuse. The letters of by name the refusals that
// refuse it: 'm' mongostore's on MongoDB (FerretDB too), 'f' FerretDB's own, 's' searchstore's
// on Elasticsearch and OpenSearch. open names those whose servers' answer depends on the index
// mapping or is not pinned down: a real adapter of such a backend is not checked on the case
// (memstore always is).
type refusalCase struct {
	name    string
	by      string
	open    string
	kind    error
	pointer string // the JSON Pointer every refusal names ("" for an address refusal)
	named   bool   // the real adapters name pointer too (memstore always does)
	addr    func(e *env) store.Address
	doc     func() store.Document
}

func jsonDoc(s string, times ...string) func() store.Document {
	return func() store.Document { return store.Document{JSON: []byte(s), Times: times} }
}

// bigDoc is one member holding a string: about 16 MiB + 1 KiB of JSON, over MongoDB's limit.
func bigDoc() store.Document {
	return store.Document{JSON: []byte(`{"big":"` + strings.Repeat("z", 16<<20+1<<10) + `"}`)}
}

func nested(levels int) string {
	return `{"deep":` + strings.Repeat(`{"a":`, levels) + "1" + strings.Repeat("}", levels) + "}"
}

var refusalCases = []refusalCase{
	{name: "NamespaceWithDot", by: "m", kind: store.ErrInvalid,
		addr: func(e *env) store.Address { a := e.key("ns-dot"); a.Namespace += ".x"; return a }},
	{name: "SystemNamespace", by: "m", kind: store.ErrInvalid,
		addr: func(e *env) store.Address { a := e.key("ns-admin"); a.Namespace = "admin"; return a }},
	{name: "UpperCaseDataset", by: "s", kind: store.ErrInvalid,
		addr: func(e *env) store.Address { a := e.key("ds-upper"); a.Dataset += "Upper"; return a }},
	{name: "ReservedKeyPrefix", by: "s", kind: store.ErrInvalid,
		addr: func(e *env) store.Address { return e.addr(store.StringKey("~~" + e.prefix)) }},
	{name: "TopLevelID", by: "ms", kind: store.ErrInvalid, pointer: "/_id", doc: jsonDoc(`{"_id":1}`)},
	{name: "MetadataField", by: "m", kind: store.ErrInvalid, pointer: "/_tributary", doc: jsonDoc(`{"_tributary":{}}`)},
	{name: "TopLevelDollar", by: "m", kind: store.ErrInvalid, pointer: "/$d3", doc: jsonDoc(`{"$d3":1}`)},
	{name: "NestedDollar", by: "f", kind: store.ErrInvalid, pointer: "/d4/$x", doc: jsonDoc(`{"d4":{"$x":1,"y":2}}`)},
	{name: "DottedName", by: "f", kind: store.ErrInvalid, pointer: "/d5.x", doc: jsonDoc(`{"d5.x":1}`)},
	{name: "NULInName", by: "m", open: "s", kind: store.ErrInvalid, pointer: "/d6\x00", doc: jsonDoc(`{"d6\u0000":1}`)},
	{name: "RepeatedName", by: "ms", kind: store.ErrInvalid, pointer: "/d7", doc: jsonDoc(`{"d7":1,"d7":2}`)},
	{name: "LoneSurrogate", by: "m", open: "s", kind: store.ErrInvalid, pointer: "/d8", doc: jsonDoc(`{"d8":"\ud800"}`)},
	{name: "NestedTooDeep", by: "m", open: "s", kind: store.ErrInvalid, doc: jsonDoc(nested(100))},
	{name: "NumberTooPrecise", by: "m", open: "s", kind: store.ErrInvalid, pointer: "/d10", doc: jsonDoc(`{"d10":1234567890123456789012345678901234567890.5}`)},
	{name: "NumberNeedsDecimal128", by: "f", open: "s", kind: store.ErrInvalid, pointer: "/d11", doc: jsonDoc(`{"d11":12345678901234567890}`)},
	{name: "NegativeZero", by: "f", kind: store.ErrInvalid, pointer: "/d12", doc: jsonDoc(`{"d12":-0}`)},
	{name: "ArrayInArray", by: "f", open: "s", kind: store.ErrInvalid, pointer: "/d13/0", doc: jsonDoc(`{"d13":[[1]]}`)},
	{name: "DollarOnlyObject", by: "m", kind: store.ErrInvalid, pointer: "/d14", doc: jsonDoc(`{"d14":{"$foo":1}}`)},
	{name: "NanosecondDateTime", by: "m", kind: store.ErrInvalid, pointer: "/d15", named: true,
		doc: jsonDoc(`{"d15":"2026-11-30T04:05:06.123456789Z"}`, "/d15")},
	{name: "Over16MiB", by: "m", kind: store.ErrTooLarge, doc: bigDoc},
}

// refusing returns the refusal letters of a backend.
func refusing(b memstore.Backend) string {
	switch b {
	case memstore.Strictest:
		return "ms"
	case memstore.MongoDB:
		return "m"
	case memstore.FerretDB:
		return "mf"
	case memstore.Search:
		return "s"
	}
	return ""
}

// testRefusals: the adapter refuses what its backend refuses (Harness.Refuses; memstore: its
// Options.Like), with the kind the backend gives, and accepts the rest; memstore names the
// field of every document refusal by its JSON Pointer, and no refusal quotes a value.
func testRefusals(ctx context.Context, t *testing.T, e *env) {
	like := e.h.Refuses
	fake, isFake := e.h.Adapter.(*memstore.Adapter)
	if isFake {
		like = fake.Like()
	} else if like == memstore.Strictest {
		t.Skip("the harness does not say which backend's refusals the adapter has (Harness.Refuses)")
	}
	letters := refusing(like)
	var wantPrec time.Duration
	if strings.Contains(letters, "m") {
		wantPrec = time.Millisecond
	}
	if got := (unclosable{e.h.Adapter}).TimePrecision(); got != wantPrec {
		t.Errorf("the adapter keeps date-times to %v, %v keeps them to %v", got, like, wantPrec)
	}
	// A service whose own size limit lets the backend's show.
	s, err := store.New(map[string]store.Adapter{storeName: unclosable{e.h.Adapter}}, &store.Options{MaxDocumentBytes: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close(ctx) }()
	for _, c := range refusalCases {
		t.Run(c.name, func(t *testing.T) {
			refused := strings.ContainsAny(c.by, letters)
			if !refused && !isFake && strings.ContainsAny(c.open, letters) {
				t.Skipf("%v's answer depends on the index mapping", like)
			}
			a := e.key("refusal-" + c.name)
			if c.addr != nil {
				a = c.addr(e)
			}
			d := store.Document{JSON: []byte(`{"v":1}`)}
			if c.doc != nil {
				d = c.doc()
			}
			res, err := s.Do(ctx, []store.Op{store.Put(a, d)}, store.WaitApplied)
			if err == nil {
				err = res[0].Err
			}
			if !refused {
				if err != nil {
					t.Fatalf("%v refuses it: %v; the backend accepts it", like, err)
				}
				return
			}
			if !errorsIs(err, c.kind) {
				t.Fatalf("%v accepts it or refuses it otherwise: %v (kind %v), want %v", like, err, store.KindOf(err), c.kind)
			}
			q := strconv.Quote(c.pointer)
			if c.pointer != "" && (isFake || c.named) && !strings.Contains(err.Error(), q[:len(q)-1]) { // the field or one inside it
				t.Errorf("the refusal %q does not name the field %q", err, c.pointer)
			}
			if c.name == "NanosecondDateTime" && strings.Contains(err.Error(), "123456789") {
				t.Errorf("the refusal %q quotes the value", err)
			}
		})
	}
}
