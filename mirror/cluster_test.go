package mirror_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/esfence"
	"github.com/tributary-dev/tributary/internal/search/searchtest"
	"github.com/tributary-dev/tributary/internal/stocktest"
	"github.com/tributary-dev/tributary/mirror"
)

// PrepareClusters on fake nodes: one report per distinct cluster (two pipelines on one
// cluster share it), a dry run sends nothing, a user without the privilege gets the request
// and the privilege named, an allowed one applies it, and a second run finds it enforced.
func TestPrepareClusters(t *testing.T) {
	stock := searchtest.New(t, nil)
	st := stocktest.New()
	st.Install(stock)
	other := searchtest.New(t, &searchtest.Options{ClusterUUID: "other-uuid"}) // holds the rule
	dir := t.TempDir()
	cfg := &mirror.Config{State: filepath.Join(dir, "state.db"), Pipelines: []mirror.PipelineConfig{
		stockPipeline("postgres://u@127.0.0.1:1/db", dir, "a", stock.URL),
		stockPipeline("postgres://u@127.0.0.1:1/db", dir, "b", other.URL),
		stockPipeline("postgres://u@127.0.0.1:1/db", dir, "c", stock.URL),
	}}
	ctx := t.Context()
	reps, err := mirror.PrepareClusters(ctx, cfg, &mirror.PrepareOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 2 || reps[0].ClusterUUID != "fake-cluster-uuid" || strings.Join(reps[0].Pipelines, ",") != "a,c" ||
		reps[1].ClusterUUID != "other-uuid" || !reps[1].Enforced() || reps[1].Request != "" {
		t.Fatalf("reports %+v", reps)
	}
	if r := reps[0]; r.Enforced() || r.Applied || r.Request != stdFix || r.Before.Level != "default" || len(st.Updates()) != 0 {
		t.Fatalf("dry run on the stock cluster: %+v, %d updates", r, len(st.Updates()))
	}

	st.Deny(false, true)
	reps, err = mirror.PrepareClusters(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := reps[0]; r.Enforced() || r.Applied || r.Request != stdFix || r.Err == nil || !strings.Contains(r.Lacks, "manage") {
		t.Fatalf("without the privilege: %+v", r)
	}

	st.Deny(false, false)
	reps, err = mirror.PrepareClusters(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := reps[0]; !r.Enforced() || !r.Applied || r.After.Value != esfence.StandardRule || len(st.Updates()) != 1 {
		t.Fatalf("applied: %+v, updates %q", r, st.Updates())
	}
	reps, err = mirror.PrepareClusters(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := reps[0]; !r.Enforced() || r.Applied || r.Request != "" || len(st.Updates()) != 1 {
		t.Fatalf("a second run: %+v, updates %q", r, st.Updates())
	}

	// A cluster out of reach is reported, with its url.
	st.Down(true)
	reps, err = mirror.PrepareClusters(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := reps[0]; r.Enforced() || r.Err == nil || r.URL != stock.URL || strings.Join(r.Pipelines, ",") != "a,c" {
		t.Fatalf("out of reach: %+v", r)
	}
}
