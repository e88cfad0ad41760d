package sink

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/statestore"
)

// TestReindexOnFake walks a table through a reindex on the fake node: with read_alias the
// index is created as <name>-g1 behind a read-only alias; after BeginReindex (a schema whose
// qty became text) every change goes to both generations; after SwitchReindex the alias names the
// new generation, writes go there only, and the old one is deleted once retire_after passed.
func TestReindexOnFake(t *testing.T) {
	f := newFakeCluster(t)
	k := fakeSink(t, f, Config{ReadAlias: true, RetireAfter: Duration(time.Minute)}, statestore.NewMemory(), Options{})
	ctx := context.Background()
	v1 := ordersSchema("orders")
	if _, err := k.Write(ctx, fakeEvents(v1, 1, 3)); err != nil {
		t.Fatal(err)
	}
	name := indexOf(t, k, "orders")
	g1, g2 := name+"-g1", name+"-g2"
	if ix := f.Index(g1); ix == nil || !ix.Aliases[name] || !ix.ReadOnly[name] || len(ix.Docs) != 3 {
		t.Fatalf("the first generation: %+v", ix)
	}
	if f.Index(name) != nil {
		t.Fatalf("a concrete index named %s exists", name)
	}

	v2 := *v1
	v2.Columns = append([]cdc.Column(nil), v1.Columns...)
	v2.Columns[2] = cdc.Column{Name: "qty", Kind: cdc.KindText, SourceType: "text", Nullable: true}
	next, err := k.BeginReindex(ctx, &v2)
	if err != nil || next != g2 {
		t.Fatalf("BeginReindex: %q, %v", next, err)
	}
	want, _ := FieldMapping(&v2.Columns[2], MappingOptions{Engine: Elasticsearch})
	if got := f.Index(g2).Props["qty"]; string(got) != string(want) {
		t.Fatalf("the new generation maps qty as %s, want %s", got, want)
	}
	if again, err := k.BeginReindex(ctx, &v2); err != nil || again != g2 {
		t.Fatalf("a second BeginReindex: %q, %v, want the same generation", again, err)
	}
	if st, _ := k.Generations(v1.ID); st.Live != g1 || st.Next != g2 {
		t.Fatalf("generations while filling: %+v", st)
	}
	textRow := []cdc.Value{int64(2), "n2", "many", true}
	// (The real engines reject the text qty in the old generation's integer field, a dead
	// letter; the fake does not check types: TestReindexAlterColumnType pins that.)
	if _, err := k.Write(ctx, []cdc.Event{ev(cdc.Update, &v2, 10, nil, textRow), ev(cdc.Insert, v1, 11, nil, row(4, "n4", 4))}); err != nil {
		t.Fatal(err)
	}
	if d := f.Index(g2).Docs["2"]; d.Version != 10 || !strings.Contains(string(d.Source), `"many"`) {
		t.Fatalf("the new generation's document 2: %+v", d)
	}
	if _, ok := f.Index(g2).Docs["4"]; !ok {
		t.Fatal("an insert did not reach the new generation")
	}
	if d := f.Index(g1).Docs["4"]; d.Version != 11 {
		t.Fatalf("an insert did not reach the old generation: %+v", d)
	}

	if err := k.SwitchReindex(ctx, v1.ID); err != nil {
		t.Fatal(err)
	}
	if ix := f.Index(g2); !ix.Aliases[name] || !ix.ReadOnly[name] {
		t.Fatalf("after the switch the new generation's aliases are %v", ix.Aliases)
	}
	if ix := f.Index(g1); ix.Aliases[name] || len(ix.Aliases) != 0 {
		t.Fatalf("after the switch the old generation keeps aliases %v", ix.Aliases)
	}
	if _, err := k.Write(ctx, []cdc.Event{ev(cdc.Insert, &v2, 12, nil, []cdc.Value{int64(5), "n5", "x", false})}); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Index(g1).Docs["5"]; ok {
		t.Fatal("a write after the switch reached the old generation")
	}
	if _, ok := f.Index(g2).Docs["5"]; !ok {
		t.Fatal("a write after the switch missed the new generation")
	}
	if gone, err := k.DeleteRetired(ctx, time.Now()); err != nil || len(gone) != 0 {
		t.Fatalf("deleted %v (%v) before retire_after", gone, err)
	}
	if gone, err := k.DeleteRetired(ctx, time.Now().Add(2*time.Minute)); err != nil || len(gone) != 1 || gone[0] != g1 || f.Index(g1) != nil {
		t.Fatalf("deleted %v (%v) after retire_after, want %s", gone, err, g1)
	}
	if err := k.SwitchReindex(ctx, v1.ID); err == nil {
		t.Fatal("a switch without a reindex in progress was accepted")
	}
}
