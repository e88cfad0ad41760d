package sink

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/statestore"
)

func twoKeySchema() *cdc.TableSchema {
	return &cdc.TableSchema{
		ID:         cdc.TableID{Connector: "postgres", Source: "s", Database: "d", Schema: "public", Table: "t"},
		Columns:    []cdc.Column{{Name: "a", Kind: cdc.KindText}, {Name: "b", Kind: cdc.KindText}, {Name: "n", Kind: cdc.KindInt, Bits: 64}},
		PrimaryKey: []int{0, 1},
	}
}

func id(t *testing.T, s *cdc.TableSchema, fields []string, row []cdc.Value, sep string) (string, error) {
	t.Helper()
	cols, err := idColumns(s, fields)
	if err != nil {
		return "", err
	}
	b, err := appendID(nil, s, cols, row, sep)
	return string(b), err
}

func TestIDEncodingIsUnambiguous(t *testing.T) {
	s := twoKeySchema()
	x, _ := id(t, s, nil, []cdc.Value{"a|b", "c", int64(1)}, "|")
	y, _ := id(t, s, nil, []cdc.Value{"a", "b|c", int64(1)}, "|")
	if x == y {
		t.Fatalf("(a|b,c) and (a,b|c) collide: %q", x)
	}
	if x != `a\|b|c` || y != `a|b\|c` {
		t.Fatalf("got %q and %q", x, y)
	}
	// Randomized: distinct tuples never give the same _id, for several separators,
	// including multi-byte and self-overlapping ones.
	alphabet := []string{"a", "|", "\\", ":", "-", "aa", "::", "é", ""}
	for _, sep := range []string{"|", "::", "-", "a", "aa", "||", "é"} {
		seen := map[string][2]string{}
		r := rand.New(rand.NewPCG(1, uint64(len(sep))))
		for i := 0; i < 20000; i++ {
			var p [2]string
			for k := range p {
				var b strings.Builder
				for j := r.IntN(4); j >= 0; j-- {
					b.WriteString(alphabet[r.IntN(len(alphabet))])
				}
				p[k] = b.String()
			}
			got, err := id(t, s, nil, []cdc.Value{p[0], p[1], nil}, sep)
			if err != nil {
				continue // empty
			}
			if prev, ok := seen[got]; ok && prev != p {
				t.Fatalf("sep %q: %q and %q both give _id %q", sep, prev, p, got)
			}
			seen[got] = p
		}
	}
}

func TestIDSources(t *testing.T) {
	s := twoKeySchema()
	if got, _ := id(t, s, []string{"n"}, []cdc.Value{"x", "y", int64(-42)}, "|"); got != "-42" {
		t.Fatalf("id_fields n: %q", got)
	}
	if got, _ := id(t, s, []string{"n"}, []cdc.Value{"x", "y", uint64(18446744073709551615)}, "|"); got != "18446744073709551615" {
		t.Fatalf("uint64: %q", got)
	}
	// A MySQL binlog TEXT key (base64) and the snapshot's text give the same _id.
	a, _ := id(t, s, nil, []cdc.Value{cdc.Base64("aMOpbGxv"), "k", nil}, "|")
	b, _ := id(t, s, nil, []cdc.Value{"héllo", "k", nil}, "|")
	if a != b {
		t.Fatalf("base64 text key %q != text key %q", a, b)
	}
	if _, err := id(t, s, []string{"zz"}, []cdc.Value{"x", "y", nil}, "|"); err == nil || !strings.Contains(err.Error(), `"zz"`) {
		t.Fatalf("missing id field: %v", err)
	}
	_, err := id(t, s, nil, []cdc.Value{nil, "y", nil}, "|")
	if err == nil || !strings.Contains(err.Error(), `"a" is NULL`) {
		t.Fatalf("null key: %v", err)
	}
	noPK := &cdc.TableSchema{Columns: s.Columns}
	if _, err := id(t, noPK, nil, []cdc.Value{"x", "y", int64(1)}, "|"); err != errNoKey {
		t.Fatalf("no primary key: %v", err)
	}
	if _, err := id(t, s, []string{"a"}, []cdc.Value{strings.Repeat("x", 513), "y", nil}, "|"); err == nil {
		t.Fatal("an _id over 512 bytes was accepted")
	}
	// Errors never carry the value.
	if _, err := id(t, s, []string{"n"}, []cdc.Value{"x", "y", []cdc.Value{"secret-value"}}, "|"); err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("array key: %v", err)
	}
}

func TestIndexNames(t *testing.T) {
	pg := cdc.TableID{Connector: "postgres", Database: "Shop", Schema: "Sales", Table: "Orders"}
	my := cdc.TableID{Connector: "mysql", Database: "Shop", Table: "Orders"}
	for _, c := range []struct {
		tmpl string
		id   cdc.TableID
		want string
	}{
		{"cdc-{db}.{table}", pg, "cdc-shop.orders"},
		{"cdc-{schema}.{table}", pg, "cdc-sales.orders"},
		{"cdc-{schema}.{table}", my, "cdc-shop.orders"}, // {schema} falls back to the database
		{"Customers", my, "customers"},
	} {
		got, err := IndexName(c.tmpl, c.id)
		if err != nil || got != c.want {
			t.Errorf("%s %v: %q %v, want %q", c.tmpl, c.id, got, err, c.want)
		}
	}
	if _, err := IndexName("{table}", cdc.TableID{Database: "d", Table: "bad name"}); err == nil || !strings.Contains(err.Error(), "space") {
		t.Fatalf("a table name with a space: %v", err)
	}
	if _, err := IndexName("{table}", cdc.TableID{Database: "d", Table: "_hidden"}); err == nil {
		t.Fatal("a name starting with _ was accepted")
	}
	if _, err := IndexName("{table}", cdc.TableID{Database: "d", Table: strings.Repeat("x", 256)}); err == nil {
		t.Fatal("a 256-byte name was accepted")
	}
}

// A table whose concrete index name breaks the rules, met in Write (CheckTables refuses it at
// start), has its rows dead-lettered with a reason naming the index and the fix, before
// anything is sent (the sink points at a closed port) -- never an error that stops the pipeline
// for a table that appeared after start, nor a batch the cluster rejects.
func TestWriteBadIndexNameDeadLetters(t *testing.T) {
	k, err := New(Config{ID: "x", URL: "http://127.0.0.1:1", Index: "cdc-{table}"}, "p", statestore.NewMemory(), nil)
	if err != nil {
		t.Fatal(err)
	}
	sch := ordersSchema("bad name")
	for range 2 {
		dead, err := k.Write(context.Background(), []cdc.Event{ev(cdc.Insert, sch, 1, nil, row(1, "one", 1)),
			ev(cdc.Delete, sch, 2, row(1, "one", 1), nil)})
		if err != nil || len(dead) != 2 || dead[0].Index != 0 || dead[1].Index != 1 {
			t.Fatalf("got %v, dead %v", err, dead)
		}
		for _, d := range dead {
			if !strings.HasPrefix(d.Reason, "invalid_index_name: ") || !strings.Contains(d.Reason, `"cdc-bad name"`) ||
				!strings.Contains(d.Reason, "space") || !strings.Contains(d.Reason, "index template") {
				t.Fatalf("reason %q", d.Reason)
			}
		}
	}
}

func TestAllSuperseded(t *testing.T) {
	for _, c := range []struct {
		ans            string
		items          int
		want           bool
		wantSuperseded int
	}{
		{`{"errors":true,"items":[{"index":{"status":201}},{"index":{"status":409,"error":{"type":"version_conflict_engine_exception","reason":"x \"status\":400"}}}]}`, 2, true, 1},
		{`{"errors":true,"items":[{"index":{"status":409}},{"delete":{"status":409}},{"index":{"status":200}}]}`, 3, true, 2},
		{`{"errors":true,"items":[{"index":{"status":201}},{"index":{"status":400,"error":{}}}]}`, 2, false, 0},
		{`{"errors":true,"items":[{"index":{"status":201}},{"delete":{"status":404}}]}`, 2, false, 0},
		{`{"errors":true,"items":[{"index":{"status":409}}]}`, 2, false, 0},
		{`{"errors":true,"items":[{"index":{"status":4090}}]}`, 1, false, 0},
		{`{"errors":true,"items":[{"index":{"status" : 409}}]}`, 1, false, 0},
	} {
		n, got := allSuperseded([]byte(c.ans), c.items)
		if got != c.want || (got && n != c.wantSuperseded) {
			t.Errorf("%s: %v %d, want %v %d", c.ans, got, n, c.want, c.wantSuperseded)
		}
	}
}

func TestAnswerHasErrors(t *testing.T) {
	for ans, want := range map[string][2]bool{
		`{"errors":false,"took":200,"items":[]}`:                      {false, true},
		`{"took":25,"errors":true,"items":[]}`:                        {true, true},
		`{"items":[{"index":{"status":201}}],"took":1,"errors":true}`: {true, true},
		`{"took":1}`:      {false, false},
		`not json at all`: {false, false},
	} {
		e, ok := answerHasErrors([]byte(ans))
		if [2]bool{e, ok} != want {
			t.Errorf("%s: %v %v, want %v", ans, e, ok, want)
		}
	}
}
