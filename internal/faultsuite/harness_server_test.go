package faultsuite

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestComparisonSeesTampering: the end of a case is not vacuous. A pipeline without a fault
// converges, and then the comparison finds a document deleted and a field changed behind the
// pipeline's back, on the real servers (no fault: it runs with the integration tests).
func TestComparisonSeesTampering(t *testing.T) {
	for _, spec := range []caseSpec{{source: "postgres", engine: es}, {source: "mariadb", engine: ops}} {
		t.Run(spec.source, func(t *testing.T) {
			spec.seed = rand.Uint64N(1 << 40)
			h := newHarness(t, nil, spec)
			h.run()
			h.withLoad(func() {})
			if res := h.verify(healthWant{}); len(res.problems) > 0 {
				t.Fatalf("%s without a fault: %s\npipeline log:%s", spec, strings.Join(res.problems, "\n  "), h.logs)
			}
			h.stopRun() // the pipeline must not repair what follows

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			rows, err := h.db.readRows(ctx, h.tables[1])
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for id := range rows {
				ids = append(ids, id)
				if len(ids) == 2 {
					break
				}
			}
			if len(ids) < 2 {
				t.Fatalf("only %d rows in %s", len(rows), h.tables[1].name)
			}
			index := h.indices[1]
			if _, st, err := h.eng.do(ctx, http.MethodDelete, "/"+index+"/_doc/"+url.PathEscape(ids[0]), nil); err != nil || st != http.StatusOK {
				t.Fatalf("deleting %q: status %d, %v", ids[0], st, err)
			}
			if _, st, err := h.eng.do(ctx, http.MethodPost, "/"+index+"/_update/"+url.PathEscape(ids[1]),
				map[string]any{"doc": map[string]any{"note": "tampered"}}); err != nil || st != http.StatusOK {
				t.Fatalf("updating %q: status %d, %v", ids[1], st, err)
			}
			diffs, err := h.diff(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(diffs, "\n")
			for _, want := range []string{"missing_document _id=" + strconv.Quote(ids[0]), "field_value _id=" + strconv.Quote(ids[1]) + " column=note"} {
				if !strings.Contains(got, want) {
					t.Errorf("the comparison missed %s; it found:\n%s", want, got)
				}
			}
		})
	}
}
