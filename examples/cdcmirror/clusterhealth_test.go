package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
)

// TestStatusShowsClusterHealth: the /status document carries the health of a pipeline's
// indices (none before the first read), and `cdcmirror status` prints it, red with what it
// means and a failed read with its error.
func TestStatusShowsClusterHealth(t *testing.T) {
	if p := pipelineJSON(cdc.Status{Pipeline: "p"}); p.Cluster != nil {
		t.Errorf("never read: %+v", p.Cluster)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := cdc.Status{Pipeline: "p", State: "streaming", Health: cdc.Health{Healthy: true},
		Cluster: cdc.ClusterHealth{Status: "yellow", Indices: map[string]string{"b-g1": "green", "a-g1": "yellow"}, ReadAt: at}}
	b, err := json.Marshal(statusDoc{Pipelines: []pipelineStatus{pipelineJSON(s)}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `"cluster":{"status":"yellow","indices":{"a-g1":"yellow","b-g1":"green"},"read_at":"2026-01-02T03:04:05Z"}`; !strings.Contains(string(b), want) {
		t.Errorf("/status: %s\nwant %s", b, want)
	}
	var doc statusDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printLive(&out, "p", &doc, nil, "127.0.0.1:1")
	if want := "  live indices' health: yellow (a-g1 yellow, b-g1 green)\n"; !strings.Contains(out.String(), want) {
		t.Errorf("status printed:\n%s\nwant the line %q", out.String(), want)
	}

	s.Cluster = cdc.ClusterHealth{Status: "red", Indices: map[string]string{"a-g1": "red"}, ReadAt: at, Err: errors.New("timeout")}
	line := clusterLine(pipelineJSON(s).Cluster)
	for _, want := range []string{"red (a-g1 red)", "writes to it fail", "the last read failed: timeout"} {
		if !strings.Contains(line, want) {
			t.Errorf("red: %q lacks %q", line, want)
		}
	}
}
