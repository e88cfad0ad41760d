package estest

import (
	"net/http"
	"testing"

	"github.com/elastic/go-elasticsearch/v8/esapi"
)

// persistentAutoCreate returns the persistent action.auto_create_index, nil when unset.
func persistentAutoCreate(t testing.TB, n *Node) any {
	t.Helper()
	var cur struct {
		Persistent map[string]any `json:"persistent"`
	}
	n.OK(t, esapi.ClusterGetSettingsRequest{FlatSettings: Ptr(true)}).Decode(t, &cur)
	return cur.Persistent[AutoCreateSetting]
}

func TestEnforceAutoCreateRule(t *testing.T) {
	EachEngine(t, func(t *testing.T, n *Node) {
		// Read the value to come back to only once this process holds the settings.
		t.Run("hold", func(t *testing.T) { n.EnforceAutoCreateRule(t) })
		before := persistentAutoCreate(t, n)
		t.Run("enforced", func(t *testing.T) {
			n.EnforceAutoCreateRule(t)
			if got := persistentAutoCreate(t, n); got != AutoCreateRule {
				t.Fatalf("%s = %v during the test, want %q", AutoCreateSetting, got, AutoCreateRule)
			}
			forbidden := "df-w-" + UniqueName(t, "estest")
			n.DeleteAtCleanup(t, forbidden)
			_, items := n.Bulk(t, esapi.BulkRequest{}, map[string]any{"delete": map[string]any{
				"_index": forbidden, "_id": "1", "version": 1, "version_type": "external"}})
			WantItemError(t, "external delete into df-w-*", items[0], http.StatusNotFound, "index_not_found_exception", "forbids automatic creation")
		})
		if got := persistentAutoCreate(t, n); got != before {
			t.Fatalf("%s = %v after the test, want %v back", AutoCreateSetting, got, before)
		}
	})
}

func TestIndexLifecycle(t *testing.T) {
	EachEngine(t, func(t *testing.T, n *Node) {
		name := n.TempIndex(t, "estest", map[string]any{"settings": map[string]any{"refresh_interval": "-1"}})
		if !n.IndexExists(t, name) {
			t.Fatalf("%s does not exist after TempIndex", name)
		}
		var got map[string]struct {
			Settings map[string]any `json:"settings"`
		}
		n.OK(t, esapi.IndicesGetSettingsRequest{Index: []string{name}, FlatSettings: Ptr(true)}).Decode(t, &got)
		s := got[name].Settings
		if s["index.number_of_shards"] != "1" || s["index.number_of_replicas"] != "0" || s["index.refresh_interval"] != "-1" {
			t.Fatalf("settings %v, want one shard, no replica and the extra refresh_interval", s)
		}
		n.OK(t, esapi.IndexRequest{Index: name, DocumentID: "d", Body: JSONBody(t, map[string]any{"k": "v"})})
		if d := n.GetDoc(t, name, "d"); !d.Found || string(d.Source) != `{"k":"v"}` {
			t.Fatalf("GetDoc: %+v", d)
		}
		if d := n.GetDoc(t, name, "missing"); d.Found {
			t.Fatalf("GetDoc of a missing document: %+v", d)
		}
		// Refreshes are off: the real-time _mget sees the document, _count does not yet.
		docs, err := n.Mget(t, name, []string{"d", "missing"})
		if err != nil || len(docs) != 2 || !docs[0].Found || docs[1].Found {
			t.Fatalf("Mget: %+v, %v", docs, err)
		}
		if c, err := n.Count(t.Context(), name); err != nil || c != 0 {
			t.Fatalf("Count before a refresh: %d, %v; want 0", c, err)
		}
		// One name that never existed must not keep the others from being deleted.
		n.DeleteIndices(t, name, UniqueName(t, "estest-never-made"))
		if n.IndexExists(t, name) {
			t.Fatalf("%s still exists after DeleteIndices", name)
		}
	})
}
