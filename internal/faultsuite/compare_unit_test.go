package faultsuite

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
)

func ptr(s string) *string { return &s }

// TestDiffTableFindsEveryDifference: the comparison the cases end with reports each kind of
// difference, and nothing for an index that equals the source.
func TestDiffTableFindsEveryDifference(t *testing.T) {
	tb := tablesFor("x")[1] // events: tenant, seq, v, note, day
	row := func(tenant, seq, v string, note *string, day string) []*string {
		return []*string{ptr(tenant), ptr(seq), ptr(v), note, ptr(day)}
	}
	rows := map[string][]*string{}
	for _, r := range [][]*string{
		row("w|1", "7", "9223372036854775807", ptr(`it's "x"`), "2024-02-29"),
		row(`w\2`, "8", "-5", nil, "2000-01-01"),
	} {
		if err := addRow(rows, tb, r); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := rows[`w\|1|7`]; !ok {
		t.Fatalf("composite _id of (w|1, 7) not escaped as sink/doc.go says: %v", slices.Collect(maps.Keys(rows)))
	}
	doc := func(s string) map[string]json.RawMessage {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	equal := map[string]map[string]json.RawMessage{
		`w\|1|7`: doc(`{"tenant":"w|1","seq":7,"v":9223372036854775807,"note":"it's \"x\"","day":"2024-02-29"}`),
		`w\\2|8`: doc(`{"tenant":"w\\2","seq":8,"v":-5,"note":null,"day":"2000-01-01"}`),
	}
	if d := diffTable("postgres", tb, rows, equal); len(d) > 0 {
		t.Fatalf("equal index reported different: %v", d)
	}
	broken := map[string]map[string]json.RawMessage{
		`w\|1|7`: doc(`{"tenant":"w|1","seq":7,"v":9223372036854775806,"note":"it's \"x\"","day":"2024-02-29","extra":1}`),
		`other`:  doc(`{}`),
	}
	got := strings.Join(diffTable("postgres", tb, rows, broken), "\n")
	for _, want := range []string{`missing_document _id="w\\\\2|8"`, `field_value _id="w\\|1|7" column=v`,
		`extra_field _id="w\\|1|7" field="extra"`, `extra_document _id="other"`} {
		if !strings.Contains(got, want) {
			t.Errorf("differences lack %s:\n%s", want, got)
		}
	}
}

// TestFieldDiffRules: each column kind's rule, as sink/doc.go states it.
func TestFieldDiffRules(t *testing.T) {
	for _, c := range []struct {
		src  string
		kind colKind
		sql  *string
		doc  string
		same bool
	}{
		{"postgres", kInt, ptr("-2147483648"), "-2147483648", true},
		{"postgres", kInt, ptr("12"), "12.0", false},
		{"postgres", kDecimal, ptr("-12.50"), `"-12.50"`, true},
		{"postgres", kDecimal, ptr("-12.50"), `-12.5`, false},
		{"postgres", kBool, ptr("true"), "true", true},
		{"postgres", kBool, ptr("false"), "true", false},
		{"mariadb", kBool, ptr("1"), "1", true},
		{"mariadb", kFloat, ptr("-0.125"), "-1.25e-1", true},
		{"mariadb", kFloat, ptr("0.125"), "0.12", false},
		{"mariadb", kDateTime, ptr("2024-01-02 03:04:05.120000"), `"2024-01-02 03:04:05.12"`, true},
		{"mariadb", kDateTime, ptr("2024-01-02 03:04:05.000000"), `"2024-01-02 03:04:05"`, true},
		{"postgres", kDateTime, ptr("2024-01-02 03:04:05"), `"2024-01-02 03:04:06"`, false},
		{"postgres", kText, ptr("名前"), `"\u540d\u524d"`, true},
		{"postgres", kText, nil, `null`, true},
		{"postgres", kText, nil, `""`, false},
		{"postgres", kText, ptr(""), `null`, false},
	} {
		d := fieldDiff(c.src, c.kind, c.sql, json.RawMessage(c.doc))
		if (d == "") != c.same {
			t.Errorf("%s kind %d: %v vs %s: got %q, want same=%v", c.src, c.kind, c.sql, c.doc, d, c.same)
		}
	}
}
