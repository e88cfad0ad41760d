package difftest

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"testing"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/mysqlcdc"
)

// The oracle's own pieces, checked without servers: a wrong oracle would report differences
// the product does not have, or hide those it has.

func TestOracleEpochMillis(t *testing.T) {
	for in, want := range map[string]string{
		"1717243200.125":            "1717243200125",
		"1717243200.000000":         "1717243200000",
		"1714972089.123456":         "1714972089123.456",
		"0.000":                     "0",
		"0":                         "0",
		"-0.000001":                 "-0.001",
		"-0.0015":                   "-1.5",
		"-63517780800.000000":       "-63517780800000",
		"-1.000100":                 "-1000.1",
		"9224286393600.000000":      "9224286393600000",
		"2147483647.999999":         "2147483647999.999",
		"1.000000000":               "1000",
		"253402300799.999999000000": "253402300799999.999",
	} {
		got, err := epochMillis(in)
		if err != nil || got != want {
			t.Errorf("epochMillis(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"Infinity", "1.0000001", "", "1e3"} {
		if got, err := epochMillis(bad); err == nil {
			t.Errorf("epochMillis(%q) = %q, want an error", bad, got)
		}
	}
}

func TestOracleTrimFrac(t *testing.T) {
	for in, want := range map[string]string{
		"12:34:56.780":               "12:34:56.78",
		"12:34:56.000":               "12:34:56",
		"12:34:56":                   "12:34:56",
		"-838:59:59":                 "-838:59:59",
		"-00:00:00.001":              "-00:00:00.001",
		"2024-01-02 03:04:05.123450": "2024-01-02 03:04:05.12345",
		"2024-01-02 03:04:05.0":      "2024-01-02 03:04:05",
		"2024-01-02":                 "2024-01-02",
	} {
		if got := trimFrac(in); got != want {
			t.Errorf("trimFrac(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestOracleCanonicalJSON(t *testing.T) {
	for in, want := range map[string]string{
		`{"b": 2,  "a": [1, "x"]}`:                 `{"b":2,"a":[1,"x"]}`,
		"\n {\"a\" :\t{\"b\": [ ]}, \"c\":null}\n": `{"a":{"b":[]},"c":null}`,
		`{"a":1,"a":2}`:                            `{"a":1,"a":2}`,
		`"\u00e9"`:                                 `"é"`,
		`[1.50, -0, 1e300, true, false]`:           `[1.50,-0,1e300,true,false]`,
		`[[], {}, [{}]]`:                           `[[],{},[{}]]`,
		`{"k": {"x": [1, {"y": "z"}]}}`:            `{"k":{"x":[1,{"y":"z"}]}}`,
		`"a\"b\\c"`:                                `"a\"b\\c"`,
	} {
		got, err := canonicalJSON([]byte(in))
		if err != nil || got != want {
			t.Errorf("canonicalJSON(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	a, _ := canonicalJSON([]byte(`{"a":"\u00e9\ud83d\ude00"}`))
	b, _ := canonicalJSON([]byte(`{"a":"é😀"}`))
	if a != b {
		t.Errorf("escaped and literal characters differ: %s vs %s", a, b)
	}
	if x, _ := canonicalJSON([]byte(`{"a":1,"b":2}`)); x == `{"b":2,"a":1}` {
		t.Error("member order is lost")
	}
}

// TestOracleExpectedJSON: the expected document of a JSON text keeps the last member of each
// name, where it stands, at every level; names compare decoded.
func TestOracleExpectedJSON(t *testing.T) {
	for in, want := range map[string]string{
		`{"a": 1, "b": 2}`:                         `{"a":1,"b":2}`,
		`{"a": 1, "b": 2, "a": 3}`:                 `{"b":2,"a":3}`,
		`[{"k":1,"k":{"x":1,"x":2}}, {"k":0}]`:     `[{"k":{"x":2}},{"k":0}]`,
		`{"\u0061": 1, "a": 2}`:                    `{"a":2}`,
		`{"a": {"b": 1, "b": 2}, "a": {"c": 3}}`:   `{"a":{"c":3}}`,
		`{"n": 12345678901234567890123, "m": 1e5}`: `{"n":12345678901234567890123,"m":1e5}`,
		`"s"`: `"s"`,
	} {
		got, err := expectedJSON([]byte(in))
		if err != nil || got != want {
			t.Errorf("expectedJSON(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
	// The document side keeps duplicates, so a sink that left one is seen.
	if got, _ := canonicalJSON([]byte(`{"a":1,"a":2}`)); got != `{"a":1,"a":2}` {
		t.Errorf("canonicalJSON dropped a duplicate: %s", got)
	}
}

func TestOracleFlattenedRefuses(t *testing.T) {
	// What both engines answered on the test servers (see flattenedRefuses).
	for in, want := range map[string]bool{
		`"x"`: true, `1`: true, `true`: true, `["a","b"]`: true, `[{"a":1},2]`: true, `[[1]]`: true,
		`null`: false, `{}`: false, `[]`: false, `[null]`: false, `[{"a":1}]`: false, `[[{"a":1}]]`: false,
		`{"a":[1,{"b":null}],"c":"x"}`: false,
	} {
		if got := flattenedRefuses([]byte(in)); got != want {
			t.Errorf("flattenedRefuses(%s) = %v, want %v", in, got, want)
		}
	}
}

func TestOracleParsePGArray(t *testing.T) {
	s := func(v string) *string { return &v }
	leaf := func(v string) pgArray { return pgArray{val: s(v)} }
	arr := func(e ...pgArray) pgArray { return pgArray{isArr: true, elems: append([]pgArray{}, e...)} }
	for in, want := range map[string]pgArray{
		`{}`:                            arr(),
		`{1,NULL,3}`:                    arr(leaf("1"), pgArray{}, leaf("3")),
		`{{1,2},{3,4}}`:                 arr(arr(leaf("1"), leaf("2")), arr(leaf("3"), leaf("4"))),
		`[0:1]={5,6}`:                   arr(leaf("5"), leaf("6")),
		`{"a b","",NULL,"NULL","x,y"}`:  arr(leaf("a b"), leaf(""), pgArray{}, leaf("NULL"), leaf("x,y")),
		`{"q\"z","back\\\\slash"}`:      arr(leaf(`q"z`), leaf(`back\\slash`)),
		`{"\\x00","\\xff"}`:             arr(leaf(`\x00`), leaf(`\xff`)),
		`{1704067200.000000,-Infinity}`: arr(leaf("1704067200.000000"), leaf("-Infinity")),
	} {
		got, err := parsePGArray(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("parsePGArray(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{`{1,2`, `1,2}`, `{"a}`, `{1}x`} {
		if _, err := parsePGArray(bad); err == nil {
			t.Errorf("parsePGArray(%q) accepted", bad)
		}
	}
}

func TestOracleDocID(t *testing.T) {
	// The documentation's own examples.
	if a, b := docID([]string{"a|b", "c"}, "|"), docID([]string{"a", "b|c"}, "|"); a != `a\|b|c` || b != `a|b\|c` {
		t.Errorf("composite ids %q and %q", a, b)
	}
	if got := docID([]string{`x\|y`}, "|"); got != `x\|y` {
		t.Errorf("one column is its text as is: %q", got)
	}
	if got := docID([]string{`\`, ""}, "|"); got != `\\|` {
		t.Errorf("backslash part: %q", got)
	}
}

func TestOracleCompareValue(t *testing.T) {
	cases := []struct {
		w    want
		raw  string
		kind string // "" when equal
	}{
		{want{k: wStr, s: "NaN"}, `"NaN"`, ""},
		{want{k: wStr, s: "NaN"}, `null`, "type"},
		{want{k: wNum, s: "18446744073709551615"}, `18446744073709551615`, ""},
		{want{k: wNum, s: "18446744073709551615"}, `1.8446744073709552e19`, "value"},
		{want{k: wNum, s: "1700000000123.456"}, `1700000000123.456`, ""},
		{want{k: wFloat, f: 0.1, bits: 64}, `0.1`, ""},
		{want{k: wFloat, f: 0.1, bits: 64}, `0.10000000149011612`, "value"},
		{want{k: wFloat, f: 0.10000000149011612, bits: 32}, `0.1`, ""},
		{want{k: wFloat, f: math.Copysign(0, -1), bits: 64}, `0`, "value"},
		{want{k: wBool, b: true}, `true`, ""},
		{want{k: wJSON, s: `{"a":1,"a":2}`}, `{"a": 1, "a": 2}`, ""},
		{want{k: wJSON, s: `{"a":1}`}, `"{\"a\":1}"`, "value"},
		{want{k: wArr, arr: []want{{k: wStr, s: "x"}, {k: wNull}}}, `["x",null]`, ""},
		{want{k: wArr, arr: []want{{k: wStr, s: "x"}}}, `["x",null]`, "length"},
		{want{k: wArr, arr: []want{}}, `null`, "type"},
		{want{k: wNull}, `null`, ""},
		{want{k: wStr, s: "é"}, `"\u00e9"`, ""},
	}
	for _, c := range cases {
		m := compareValue(c.w, json.RawMessage(c.raw), "")
		switch {
		case c.kind == "" && m != nil:
			t.Errorf("%v vs %s: %+v, want equal", c.w, c.raw, *m)
		case c.kind != "" && (m == nil || m.kind != c.kind):
			t.Errorf("%v vs %s: %+v, want a %s mismatch", c.w, c.raw, m, c.kind)
		}
	}
}

func TestOracleFloatAndIntWants(t *testing.T) {
	if w, _ := floatWant("-Infinity", 64); w.k != wStr || w.s != "-Infinity" {
		t.Errorf("-Infinity: %v", w)
	}
	if w, _ := floatWant("1e-45", 32); w.k != wFloat || float32(w.f) != math.SmallestNonzeroFloat32 {
		t.Errorf("1e-45 as real: %v", w)
	}
	if w, _ := intWant("0000"); w.s != "0" {
		t.Errorf("YEAR 0000: %v", w)
	}
}

// TestOraclePostgresUnparsableDates: PostgreSQL dates and timestamps no date format parses are
// expected as PostgreSQL's text (sink/doc.go, Decimals), never refused; timestamptz's
// infinities, read back through extract(epoch ...) as Infinity, as "infinity"/"-infinity";
// plain ones keep their rules.
func TestOraclePostgresUnparsableDates(t *testing.T) {
	date := &colType{fam: famDate}
	ts := &colType{fam: famDateTime}
	tstz := &colType{fam: famEpoch}
	for _, c := range []struct {
		t    *colType
		in   string
		want want
	}{
		{date, "infinity", want{k: wStr, s: "infinity"}},
		{date, "-infinity", want{k: wStr, s: "-infinity"}},
		{date, "0044-03-15 BC", want{k: wStr, s: "0044-03-15 BC"}},
		{date, "10000-01-01", want{k: wStr, s: "10000-01-01"}},
		{date, "2024-02-29", want{k: wStr, s: "2024-02-29"}},
		{ts, "0044-03-15 07:08:09 BC", want{k: wStr, s: "0044-03-15 07:08:09 BC"}},
		{ts, "294276-12-31 23:59:59", want{k: wStr, s: "294276-12-31 23:59:59"}},
		{ts, "2024-05-06 07:08:09.50", want{k: wStr, s: "2024-05-06 07:08:09.5"}},
		{tstz, "Infinity", want{k: wStr, s: "infinity"}},
		{tstz, "-Infinity", want{k: wStr, s: "-infinity"}},
		{tstz, "1.5", want{k: wNum, s: "1500"}},
	} {
		w, rule, err := pgWant(c.t, c.in, mapOpts{})
		if err != nil || rule != "" || w.k != c.want.k || w.s != c.want.s {
			t.Errorf("%q: %v rule %q err %v, want %v", c.in, w, rule, err, c.want)
		}
	}
	a, err := parsePGArray(`{"0044-03-15 BC",infinity,NULL,2024-01-01}`)
	if err != nil {
		t.Fatal(err)
	}
	w, rule, err := pgArrayWant(date, a, mapOpts{})
	if err != nil || rule != "" || w.String() != `["0044-03-15 BC","infinity",null,"2024-01-01"]` {
		t.Errorf("date[]: %v rule %q err %v", w, rule, err)
	}
}

// TestOracleDeadLetterRules: each rule of the allow-list accepts its documented reason only
// for a value it covers.
func TestOracleDeadLetterRules(t *testing.T) {
	sch := &cdc.TableSchema{Columns: []cdc.Column{
		{Name: "id", Kind: cdc.KindText}, {Name: "d", Kind: cdc.KindDate}, {Name: "j", Kind: cdc.KindJSON},
		{Name: "a", Kind: cdc.KindArray, Elem: &cdc.Column{Kind: cdc.KindTimestamp}},
	}, PrimaryKey: []int{0}}
	rec := func(reason string, row ...cdc.Value) cdc.DeadLetterRecord {
		return cdc.DeadLetterRecord{Reason: reason, Event: cdc.Event{Op: cdc.Insert, Schema: sch, After: row}}
	}
	const dateReason = `serialization failure: column "d": date outside the range and forms Elasticsearch dates accept`
	const arrReason = `serialization failure: column "a": array element 1: date outside the range and forms Elasticsearch dates accept`
	const clusterReason = "rejected by the cluster: status 400 document_parsing_exception, caused by parsing_exception"
	flat, stored := mapOpts{json: "flattened"}, mapOpts{json: "stored"}
	for _, c := range []struct {
		name string
		rec  cdc.DeadLetterRecord
		o    mapOpts
		want string
	}{
		// Dates no format parses are written as text now (sink/doc.go, Decimals): a dead letter
		// for one is undocumented.
		{"infinity date", rec(dateReason, "k", "infinity", nil, nil), stored, ""},
		{"plain date", rec(dateReason, "k", "2024-01-01", nil, nil), stored, ""},
		{"array element", rec(arrReason, "k", nil, nil, []cdc.Value{cdc.EpochMicros(0), "-infinity"}), stored, ""},
		{"flattened scalar", rec(clusterReason, "k", nil, cdc.RawJSON(`"x"`), nil), flat, ruleFlattened},
		{"flattened object", rec(clusterReason, "k", nil, cdc.RawJSON(`{"x":1}`), nil), flat, ""},
		{"stored scalar", rec(clusterReason, "k", nil, cdc.RawJSON(`"x"`), nil), stored, ""},
		{"empty id", rec("serialization failure: the _id would be empty", "", nil, nil, nil), stored, ruleEmptyID},
		{"non-empty id", rec("serialization failure: the _id would be empty", "x", nil, nil, nil), stored, ""},
		{"float NaN", rec(`serialization failure: column "d": NaN or infinite float (not representable in JSON)`, "k", nil, nil, nil), stored, ""},
	} {
		if got, _ := classifyDeadLetter(c.rec, c.o, nil, nil); got != c.want {
			t.Errorf("%s: rule %q, want %q", c.name, got, c.want)
		}
	}
	malformed := rec(dateReason, "k", "infinity", nil, nil)
	malformed.Event.Malformed = errTest
	if got, _ := classifyDeadLetter(malformed, stored, nil, nil); got != "" {
		t.Errorf("a malformed event is never documented: %q", got)
	}
}

var errTest = &json.UnsupportedValueError{Str: "test"}

// testPos is a position for the oracle's unit tests.
type testPos int64

func (p testPos) Version() int64 { return int64(p) }
func (p testPos) String() string { return strconv.FormatInt(int64(p), 10) }

// TestOracleFlattenedUnchanged: an update whose JSON column is Unchanged is classified by the
// value the row held then (what the sink fills in from an older change of the batch), also
// after a key change, and stays undocumented when that value is one flattened accepts.
func TestOracleFlattenedUnchanged(t *testing.T) {
	sch := &cdc.TableSchema{Columns: []cdc.Column{{Name: "id", Kind: cdc.KindText}, {Name: "j", Kind: cdc.KindJSON}}, PrimaryKey: []int{0}}
	const clusterReason = "rejected by the cluster: status 400 document_parsing_exception, caused by parsing_exception"
	flat := mapOpts{json: "flattened"}
	h := newHistorySink(nil)
	ins := func(id, j string, p int) cdc.Event {
		return cdc.Event{Op: cdc.Insert, Schema: sch, After: []cdc.Value{id, cdc.RawJSON(j)}, Position: testPos(p)}
	}
	upd := func(old, id string, p int) cdc.Event {
		ev := cdc.Event{Op: cdc.Update, Schema: sch, After: []cdc.Value{id, cdc.Unchanged{}}, Position: testPos(p)}
		if old != id {
			ev.Before = []cdc.Value{old, nil}
		}
		return ev
	}
	moved, same, fine := upd("a", "b", 2), upd("c", "c", 4), upd("d", "d", 6)
	h.record([]cdc.Event{ins("a", `"scalar"`, 1), moved, ins("c", `[1,2]`, 3), same, ins("d", `{"x":1}`, 5), fine})
	for _, c := range []struct {
		name string
		ev   cdc.Event
		want string
	}{
		{"key change", moved, ruleFlattened},
		{"same key", same, ruleFlattened},
		{"accepted value", fine, ""},
	} {
		got, _ := classifyDeadLetter(cdc.DeadLetterRecord{Reason: clusterReason, Event: c.ev}, flat, h, nil)
		if got != c.want {
			t.Errorf("%s: rule %q, want %q", c.name, got, c.want)
		}
	}
	if got, _ := classifyDeadLetter(cdc.DeadLetterRecord{Reason: clusterReason, Event: upd("z", "z", 9)}, flat, h, nil); got != "" {
		t.Errorf("an Unchanged value of a row never seen: rule %q, want none", got)
	}
}

// TestOracleUnchangedAfterDeadLetter: an unchanged_value_unavailable dead letter is covered
// only by an earlier dead letter of the row its values come from -- as ruleUnchangedLost after
// a documented one, as a consequence (no failure of its own) after an undocumented one -- and
// fails alone otherwise.
func TestOracleUnchangedAfterDeadLetter(t *testing.T) {
	sch := &cdc.TableSchema{Columns: []cdc.Column{{Name: "id", Kind: cdc.KindText}, {Name: "j", Kind: cdc.KindJSON}}, PrimaryKey: []int{0}}
	const unchanged = `unchanged_value_unavailable: column "j": the source did not resend an unchanged TOAST value and ` +
		`the index holds no document to take it from; set REPLICA IDENTITY FULL on the table to have the source send every value`
	const flatRefused = "rejected by the cluster: status 400 document_parsing_exception, caused by parsing_exception"
	const other = `serialization failure: column "j": something undocumented`
	dl := func(reason string, op cdc.Op, before, after []cdc.Value) cdc.DeadLetterRecord {
		return cdc.DeadLetterRecord{Reason: reason, Event: cdc.Event{Op: op, Schema: sch, Before: before, After: after}}
	}
	upd := func(before, after string) cdc.DeadLetterRecord {
		var b []cdc.Value
		if before != "" {
			b = []cdc.Value{before, nil}
		}
		return dl(unchanged, cdc.Update, b, []cdc.Value{after, cdc.Unchanged{}})
	}
	flat := mapOpts{json: "flattened"}
	for _, c := range []struct {
		name         string
		dead         []cdc.DeadLetterRecord
		fails        int
		loss, undocu []string
		moved        map[string][]string
	}{
		{"alone", []cdc.DeadLetterRecord{upd("", "a")}, 1, nil, []string{"a"}, nil},
		{"after documented", []cdc.DeadLetterRecord{dl(flatRefused, cdc.Insert, nil, []cdc.Value{"a", cdc.RawJSON(`"x"`)}), upd("", "a")}, 0, []string{"a"}, nil, nil},
		{"after documented, key change", []cdc.DeadLetterRecord{dl(flatRefused, cdc.Insert, nil, []cdc.Value{"a", cdc.RawJSON(`1`)}), upd("a", "b"), upd("", "b")}, 0, []string{"b"}, nil, nil},
		{"after undocumented", []cdc.DeadLetterRecord{dl(other, cdc.Insert, nil, []cdc.Value{"a", cdc.RawJSON(`{}`)}), upd("", "a"), upd("a", "b")}, 1, nil, []string{"a", "b"}, nil},
		{"other row", []cdc.DeadLetterRecord{dl(flatRefused, cdc.Insert, nil, []cdc.Value{"a", cdc.RawJSON(`"x"`)}), upd("", "b")}, 1, nil, []string{"b"}, nil},
		{"before the loss", []cdc.DeadLetterRecord{upd("", "a"), dl(flatRefused, cdc.Insert, nil, []cdc.Value{"a", cdc.RawJSON(`"x"`)})}, 1, nil, []string{"a"}, nil},
		// A key change coalesced with the row's next update: the dead letter is the update's,
		// without a before image; the row's earlier key is known from the statements.
		{"coalesced key change", []cdc.DeadLetterRecord{dl("serialization failure: the _id would be empty", cdc.Insert, nil, []cdc.Value{"", nil}), upd("", "b")}, 0, []string{"b"}, nil,
			map[string][]string{"b": {"a"}, "a": {""}}},
		{"unrelated history", []cdc.DeadLetterRecord{dl("serialization failure: the _id would be empty", cdc.Insert, nil, []cdc.Value{"", nil}), upd("", "b")}, 1, nil, []string{"b"},
			map[string][]string{"b": {"a"}, "c": {""}}},
	} {
		d, fails := sortDeadLetters(c.dead, flat, c.moved, nil, nil, false)
		if len(fails) != c.fails {
			t.Errorf("%s: %d failures %+v, want %d", c.name, len(fails), fails, c.fails)
		}
		for _, id := range c.loss {
			if !d.documentedLoss[id] {
				t.Errorf("%s: %q not a documented loss", c.name, id)
			}
		}
		for _, id := range c.undocu {
			if !d.undocumented[id] || d.documentedLoss[id] {
				t.Errorf("%s: %q not undocumented only", c.name, id)
			}
		}
	}
}

// TestOracleRefusalsFollowKeyChanges: a row's documented refusals include those under every
// key it had before, through chains of key changes, and none of unrelated rows.
func TestOracleRefusalsFollowKeyChanges(t *testing.T) {
	documented := map[string][]refusal{"a": {{rule: ruleFlattened, col: "j"}}, "x": {{rule: ruleEmptyID}}}
	moved := map[string][]string{"b": {"a"}, "c": {"b"}, "a": {"c"}} // a cycle must end too
	if got := refusalsOf(documented, moved, "c"); len(got) != 1 || got[0].rule != ruleFlattened {
		t.Fatalf("refusals of c (moved from b, from a): %v, want a's flattened refusal", got)
	}
	if got := refusalsOf(documented, moved, "y"); len(got) != 0 {
		t.Fatalf("refusals of an unrelated row: %v", got)
	}
}

// TestOracleAmbiguousType: a MariaDB row dead-lettered because a column's type cannot be told
// (mysqlcdc.ErrAmbiguousType) is documented when every column the reason names is, in a
// relation that bore the name and has every column of the event, a type the binlog cannot
// tell from another; not for a column of another type, one no such relation has, or a reason
// naming no column.
func TestOracleAmbiguousType(t *testing.T) {
	sch := &cdc.TableSchema{Columns: []cdc.Column{{Name: "id"}, {Name: "j"}, {Name: "ip"}, {Name: "v"}}, PrimaryKey: []int{0}}
	cols := func(types ...string) []*column {
		var out []*column
		for i, n := range []string{"id", "j", "ip", "v"} {
			out = append(out, &column{name: n, t: &colType{sql: types[i]}})
		}
		return out
	}
	rel := &table{cols: cols("INT", "JSON", "INET4", "VARCHAR(10)")}
	other := &table{cols: cols("INT", "LONGTEXT CHARACTER SET latin1", "VARBINARY(4)", "VARCHAR(10)")}
	narrower := &table{cols: []*column{{name: "id", t: &colType{sql: "INT"}}, {name: "j", t: &colType{sql: "JSON"}}}}
	reason := func(named ...string) string {
		err := mysqlcdc.ErrAmbiguousType
		for i, n := range named {
			sep := ": column "
			if i > 0 {
				sep = ", column "
			}
			err = fmt.Errorf("%w%s%q (some types)", err, sep, n)
		}
		return "malformed: " + err.Error()
	}
	rec := func(r string) cdc.DeadLetterRecord {
		return cdc.DeadLetterRecord{Reason: r, Event: cdc.Event{Op: cdc.Insert, Schema: sch,
			After: []cdc.Value{int64(1), `{"a": 1}`, cdc.Base64("CgECAw=="), "x"}, Malformed: mysqlcdc.ErrAmbiguousType}}
	}
	for _, c := range []struct {
		name   string
		rec    cdc.DeadLetterRecord
		tables []*table
		want   string
	}{
		{"json and inet4", rec(reason("j", "ip")), []*table{rel}, ruleAmbiguousType},
		{"one of the relations", rec(reason("j")), []*table{other, rel}, ruleAmbiguousType},
		{"a plain column named", rec(reason("j", "v")), []*table{rel}, ""},
		{"types the binlog tells", rec(reason("j", "ip")), []*table{other}, ""},
		{"not the event's relation", rec(reason("j")), []*table{narrower}, ""},
		{"no column named", rec(reason()), []*table{rel}, ""},
		{"another malformed reason", rec("malformed: mysqlcdc: something else: column \"j\" (x)"), []*table{rel}, ""},
	} {
		if got, _ := classifyDeadLetter(c.rec, mapOpts{json: "stored"}, nil, c.tables); got != c.want {
			t.Errorf("%s: rule %q, want %q", c.name, got, c.want)
		}
	}
}
