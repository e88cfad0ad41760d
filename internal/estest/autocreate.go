package estest

import (
	"testing"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/internal/testenv"
)

const (
	// AutoCreateSetting is the cluster-wide setting fencing depends on.
	AutoCreateSetting = "action.auto_create_index"
	// AutoCreateRule is the deployment requirement: never auto-create a df-w-* index (the
	// fenced write aliases), auto-create everything else as by default.
	AutoCreateRule = "-df-w-*,+*"
)

// EnforceAutoCreateRule makes the cluster hold AutoCreateRule for the rest of the test, holding
// the cluster-settings lock that every package's tests share for as long as the process runs,
// and puts the previous persistent value back when the test ends. A transient value would
// override whatever the test sets, so one fails the test.
func (n *Node) EnforceAutoCreateRule(t testing.TB) {
	t.Helper()
	testenv.HoldClusterSettings(t, n.URL)
	var cur struct {
		Persistent map[string]any `json:"persistent"`
		Transient  map[string]any `json:"transient"`
	}
	n.OK(t, esapi.ClusterGetSettingsRequest{FlatSettings: Ptr(true)}).Decode(t, &cur)
	if v, set := cur.Transient[AutoCreateSetting]; set {
		t.Fatalf("a transient %s (%v) is set on the shared server; the tests do not override it", AutoCreateSetting, v)
	}
	prev, set := cur.Persistent[AutoCreateSetting]
	if set && prev == AutoCreateRule {
		return
	}
	n.putAutoCreate(t, AutoCreateRule)
	// prev is nil when the setting was unset, and null resets it to the default.
	t.Cleanup(func() { n.putAutoCreate(t, prev) })
}

func (n *Node) putAutoCreate(t testing.TB, value any) {
	t.Helper()
	n.OK(t, esapi.ClusterPutSettingsRequest{Body: JSONBody(t, map[string]any{"persistent": map[string]any{AutoCreateSetting: value}})})
}
