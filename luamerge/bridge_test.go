package luamerge

import (
	"context"
	"slices"
	"testing"

	"github.com/tributary-dev/tributary/store"
)

const identity = "return function(current) return current end"

// A document a program does not touch comes back byte for byte: key order, empty arrays and
// objects, null, exact numbers, escapes.
func TestBridgeRoundTripsUntouchedDocuments(t *testing.T) {
	e := newEngine(t, nil)
	for _, doc := range []string{
		`{}`,
		`{"z":1,"a":2,"m":{"y":[],"b":{},"a":null},"list":[3,1,2],"t":true,"f":false}`,
		`{"id":12345678901234567890,"neg":-9223372036854775808,"precise":3.14159265358979323846,"tiny":1e-400,"huge":1e400}`,
		`{"nested":[[[],{}],[{"k":[1,[2,[3]]]}]],"empty":""}`,
		`{"esc":"quote \" backslash \\ newline \n tab \t nul \u0000 unicode é 😀"}`,
		`{"b":1,"a":2,"c":{"z":0,"y":0,"x":{"3":"three","1":"one"}}}`,
		`{"n":0,"m":-0,"i":9007199254740992,"j":-9007199254740992,"k":123456789,"d":0.5,"e":1.25}`,
	} {
		wantDoc(t, e, identity, doc, `{}`, doc)
	}
}

// Integers beyond ±2^53 stay exact: untouched they come back bit for bit, arithmetic on
// them fails loudly, comparisons and tostring are exact.
func TestBridgeInt64Beyond2p53(t *testing.T) {
	e := newEngine(t, nil)
	cur := `{"id":9007199254740993,"ids":[18446744073709551615,-9223372036854775807],"small":9007199254740991}`
	wantDoc(t, e, fn(`current.copy = current.id return current`), cur, `{}`,
		`{"id":9007199254740993,"ids":[18446744073709551615,-9223372036854775807],"small":9007199254740991,"copy":9007199254740993}`)
	wantDoc(t, e, fn(`return {s = tostring(current.id), c = "id-" .. current.id, small = current.small + 1}`), cur, `{}`,
		`{"c":"id-9007199254740993","s":"9007199254740993","small":9007199254740992}`)
	for _, expr := range []string{"current.id + 1", "current.id - 1", "2 * current.id", "current.id / 2", "-current.id", "current.ids[1] % 7", "#current.id"} {
		wantFail(t, e, fn(`return {x = `+expr+`}`), cur, `{}`, store.ErrInvalid, "arithmetic on an exact number", "would round")
	}
	wantDoc(t, e, fn(`return {
	  eq = current.id == json.number("9007199254740993"),
	  ne = current.id == json.number("9007199254740992"),
	  lt = current.small < current.id,
	  gt = current.ids[1] > current.id,
	  le = current.ids[2] <= -1,
	  mixed = current.id == 9007199254740992, -- different types: never equal, as in Lua
	}`), cur, `{}`, `{"eq":true,"gt":true,"le":true,"lt":true,"mixed":false,"ne":false}`)
	wantDoc(t, e, fn(`return {n = json.number("123456789012345678901234567890"), p = json.number("0.1"), k = context.key}`), "", `{}`,
		`{"k":"ada","n":123456789012345678901234567890,"p":0.1}`)
	wantFail(t, e, fn(`return {n = json.number("12abc")}`), "", `{}`, store.ErrInvalid, "not a JSON number")
}

func TestBridgeEmptyArrayVersusEmptyObject(t *testing.T) {
	e := newEngine(t, nil)
	wantDoc(t, e, fn(`return {
	  a = current.a, o = current.o,
	  a_is_array = json.isarray(current.a), o_is_array = json.isarray(current.o),
	  new_table = {}, new_array = json.array(), marked = json.array({}), object = json.object(),
	  emptied_array = (function() local t = current.full; t[1] = nil; return t end)(),
	  sequence = {3, 2, 1},
	}`), `{"a":[],"o":{},"full":[1]}`, `{}`,
		`{"a":[],"a_is_array":true,"emptied_array":[],"marked":[],"new_array":[],"new_table":{},"o":{},"o_is_array":false,"object":{},"sequence":[3,2,1]}`)
}

func TestBridgeNullIsNotAbsent(t *testing.T) {
	e := newEngine(t, nil)
	wantDoc(t, e, fn(`
	  current.gone = nil             -- absent
	  current.cleared = json.null    -- null
	  return {
	    doc = current,
	    was_null = json.isnull(incoming.n), was_absent = incoming.missing == nil,
	    null_is_nil = incoming.n == nil, same_null = incoming.n == json.null,
	    text = tostring(json.null),
	  }`), `{"gone":1,"cleared":2,"kept":null}`, `{"n":null}`,
		`{"doc":{"cleared":null,"kept":null},"null_is_nil":false,"same_null":true,"text":"null","was_absent":true,"was_null":true}`)
}

// Decoded objects keep their member order; members a program adds follow, sorted.
func TestBridgeKeepsKeyOrder(t *testing.T) {
	e := newEngine(t, nil)
	wantDoc(t, e, fn(`
	  current.zeta = nil
	  current.beta = "new"
	  current.alpha = "new"
	  current.inner.c = 3
	  current.mid = 0
	  return current`),
		`{"zeta":1,"mid":1,"gamma":1,"inner":{"y":1,"x":1},"omega":1}`, `{}`,
		`{"mid":0,"gamma":1,"inner":{"y":1,"x":1,"c":3},"omega":1,"alpha":"new","beta":"new"}`)
	// A repeated member keeps the position of its first occurrence and its last value.
	wantDoc(t, e, identity, `{"a":1,"b":2,"a":3}`, `{}`, `{"a":3,"b":2}`)
}

// Date-time marks stay on the values that stay where they were, and json.datetime marks new ones.
func TestBridgeDateTimeMarks(t *testing.T) {
	e := newEngine(t, nil)
	call := &store.MergeCall{
		Program: fn(`
	  current.moved = current.created; current.created = nil       -- moved: no longer marked
	  current.plain = context.time                                  -- a string: not marked
	  current.stamped = json.datetime(context.time)                 -- marked
	  current.seen = incoming.seen                                  -- marked in incoming at /seen
	  current.list[2] = "2026-01-01T00:00:00Z"                      -- changed: no longer marked
	  return current`),
		Current: &store.Document{JSON: []byte(`{"created":"2026-01-01T00:00:00Z","updated":"2026-02-01T00:00:00Z","list":["2026-03-01T00:00:00Z","2026-04-01T00:00:00Z"]}`),
			Times: []string{"/created", "/updated", "/list/0", "/list/1"}},
		Incoming: store.Document{JSON: []byte(`{"seen":"2026-05-01T00:00:00+02:00"}`), Times: []string{"/seen"}},
		Context:  store.MergeContext{Addr: testAddr, Time: testTime, Attempt: 1},
	}
	res, err := e.Merge(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"updated":"2026-02-01T00:00:00Z","list":["2026-03-01T00:00:00Z","2026-01-01T00:00:00Z"],"moved":"2026-01-01T00:00:00Z","plain":"2026-11-30T09:00:00Z","seen":"2026-05-01T00:00:00+02:00","stamped":"2026-11-30T09:00:00Z"}`
	if string(res.Doc.JSON) != want {
		t.Fatalf("got  %s\nwant %s", res.Doc.JSON, want)
	}
	got := slices.Sorted(slices.Values(res.Doc.Times))
	if !slices.Equal(got, []string{"/list/0", "/seen", "/stamped", "/updated"}) {
		t.Fatalf("times %v", got)
	}
	wantFail(t, e, fn(`return {t = json.datetime("yesterday")}`), "", `{}`, store.ErrInvalid, "not an RFC 3339 date-time")
}

// What JSON cannot hold fails the run with the place it was found.
func TestBridgeRefusesWhatJSONCannotHold(t *testing.T) {
	e := newEngine(t, nil)
	for _, c := range []struct{ body, want string }{
		{`return {f = function() end}`, "the result at /f is a function"},
		{`return {n = 0/0}`, "the result at /n is NaN or infinite"},
		{`return {n = math.huge * 2}`, "the result at /n is NaN or infinite"},
		{`return {l = {1, 2, x = 3}}`, "the result at /l mixes array indexes with member names"},
		{`return {l = {1, nil, 3}}`, "the result at /l is an array with holes"},
		{`return {l = {[1.5] = 1}}`, "has the key 1.5"},
		{`return {l = {[true] = 1}}`, "has a boolean key"},
		{`local t = {} t.self = t return t`, "the result at /self contains itself"},
		{`return {s = "\255"}`, "the result at /s is a string that is not valid UTF-8"},
		{`return {["\255"] = 1}`, "member name that is not valid UTF-8"},
		{`return {d = merge.DELETE}`, "holds merge.DELETE"},
		{`current.a[1] = nil current.a.k = 1 return current`, "is an array with the member name"},
	} {
		wantFail(t, e, fn(c.body), `{"a":[1]}`, `{}`, store.ErrInvalid, c.want)
	}
}

func TestBridgeRefusesBadInput(t *testing.T) {
	e := newEngine(t, nil)
	for _, doc := range []string{`[]`, `{"a":}`, `{"a":1}x`, `{"a":"\x01"}`, `{"a":01}`, `{"a":"\ud800"`, `{"a":tru}`} {
		wantFail(t, e, identity, doc, `{}`, store.ErrInvalid, "current document")
	}
}

func TestBridgeNumberClassification(t *testing.T) {
	for _, c := range []struct {
		lit   string
		plain bool
	}{
		{"0", true}, {"-0", true}, {"123456789012345", true}, {"9007199254740991", true}, {"9007199254740992", true},
		{"9007199254740993", false}, {"-9007199254740993", false}, {"18014398509481984", false}, // 2^54: exact, but beyond 2^53
		{"0.1", true}, {"1.50", true}, {"1e2", true}, {"2.5e-3", true},
		{"3.14159265358979323846", false}, {"1e400", false}, {"1e-400", false}, {"0.30000000000000000001", false},
	} {
		if _, plain := numberValue(c.lit); plain != c.plain {
			t.Errorf("%s: plain %v, want %v", c.lit, plain, c.plain)
		}
	}
	// Untouched numbers come back with their own text; numbers the program computes, moves or
	// builds are written in shortest form.
	e := newEngine(t, nil)
	wantDoc(t, e, identity, `{"a":1.50,"b":1e2,"c":2.5E-3,"d":1e21,"e":1e-7}`, `{}`, `{"a":1.50,"b":1e2,"c":2.5E-3,"d":1e21,"e":1e-7}`)
	wantDoc(t, e, fn(`return {a = current.a * 1, b = current.b + 0, c = {current.c}, e = -current.e}`),
		`{"a":1.50,"b":1e2,"c":2.5E-3,"e":1e-7}`, `{}`, `{"a":1.5,"b":100,"c":[0.0025],"e":-1e-07}`)
}

// A number the program leaves in its place is written back with the text it was read with, so
// 1.0 stays 1.0 and -0.0 stays -0.0 (MongoDB stores 1.0 as a double, 1 as an int32; the search
// engines keep _source as written). The slot remembers the text while it holds the same
// float64: assigning the same number keeps it, any other number (0 for -0.0 included) does not.
func TestBridgeKeepsUntouchedNumberText(t *testing.T) {
	e := newEngine(t, nil)
	cur := `{"f":1.0,"z":-0.0,"n":1,"e":1e0,"k":1.5e3,"E":2E+2,"half":0.50,"m":-0,"big":9007199254740993,` +
		`"arr":[1.0,-0.0,2,{"d":3.0e0}],"obj":{"x":10.0,"y":[0.10]}}`
	wantDoc(t, e, fn(`current.n = current.n + 1 return current`), cur, `{}`,
		`{"f":1.0,"z":-0.0,"n":2,"e":1e0,"k":1.5e3,"E":2E+2,"half":0.50,"m":-0,"big":9007199254740993,`+
			`"arr":[1.0,-0.0,2,{"d":3.0e0}],"obj":{"x":10.0,"y":[0.10]}}`)
	wantDoc(t, e, fn(`
	  current.f = 1            -- the same number: still 1.0
	  current.z = 0            -- +0 is another float64 than -0
	  current.e = current.e + 1
	  current.arr[1] = 2       -- another number in the slot
	  current.obj.x = nil      -- gone
	  current.copy = current.k -- a new slot: shortest form
	  table.insert(current.obj.y, 1, 7)
	  return current`), cur, `{}`,
		`{"f":1.0,"z":0,"n":1,"e":2,"k":1.5e3,"E":2E+2,"half":0.50,"m":-0,"big":9007199254740993,`+
			`"arr":[2,-0.0,2,{"d":3.0e0}],"obj":{"y":[7,0.1]},"copy":1500}`)
	// A table moved elsewhere keeps its texts: they belong to the table's slots.
	wantDoc(t, e, fn(`return {moved = current.obj, inc = incoming}`), cur, `{"v":5.0}`,
		`{"inc":{"v":5.0},"moved":{"x":10.0,"y":[0.10]}}`)
	// A repeated member name: the last value wins, with its own text.
	wantDoc(t, e, identity, `{"a":1.0,"a":1}`, `{}`, `{"a":1}`)
	wantDoc(t, e, identity, `{"a":1,"a":1.0}`, `{}`, `{"a":1.0}`)
}
