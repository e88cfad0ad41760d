package sink

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"
	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/search"
)

// clusterHealthWait is what the cluster is told to wait at most before answering a health
// read (its timeout parameter): an index the cluster does not know (deleted meanwhile)
// otherwise holds the answer for 30s.
const clusterHealthWait = 2 * time.Second

// ClusterHealth reads the cluster's health of the indices this sink holds (the concrete
// indices it claimed this session): one GET _cluster/health/<indices>?level=indices, bounded
// by ctx. It returns the zero ClusterHealth and nil when the sink holds no index yet (nothing
// is sent). The request names no row data; its error is the transport's or the answer's
// status (package mirror keeps the last answer beside it: cdc.ClusterHealth).
func (s *Sink) ClusterHealth(ctx context.Context) (cdc.ClusterHealth, error) {
	s.mu.Lock()
	indices := make([]string, 0, len(s.claims))
	for idx := range s.claims {
		indices = append(indices, idx)
	}
	s.mu.Unlock()
	return s.IndicesHealth(ctx, indices)
}

// IndicesHealth is ClusterHealth for the indices named (concrete names or aliases, such as
// those the pipeline's ownership records name: mirror.Inspect reads them so): an index the
// cluster does not know is red. No index: the zero ClusterHealth, nothing sent.
func (s *Sink) IndicesHealth(ctx context.Context, indices []string) (cdc.ClusterHealth, error) {
	if len(indices) == 0 {
		return cdc.ClusterHealth{}, nil
	}
	indices = slices.Clone(indices)
	slices.Sort(indices)
	ans, err := search.Do(ctx, s.tp, esapi.ClusterHealthRequest{Index: indices, Level: "indices",
		Timeout: clusterHealthWait, FilterPath: []string{"status", "indices.*.status"}})
	if err != nil {
		return cdc.ClusterHealth{}, s.requestError(err, "reading the indices' health")
	}
	defer ans.Release()
	// 408: the cluster answered within its timeout that the wait was not over; the body is
	// still the health.
	if !ans.OK() && ans.Status != http.StatusRequestTimeout {
		return cdc.ClusterHealth{}, s.statusError("reading the indices' health", ans.Status, ans.Header, ans.Body)
	}
	return parseClusterHealth(ans.Body, indices, time.Now())
}

// parseClusterHealth reads a _cluster/health?level=indices answer. An index asked for and
// absent from the answer is red: the cluster does not know it (no shard of it is there).
func parseClusterHealth(body []byte, asked []string, now time.Time) (cdc.ClusterHealth, error) {
	var doc struct {
		Status  string `json:"status"`
		Indices map[string]struct {
			Status string `json:"status"`
		} `json:"indices"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return cdc.ClusterHealth{}, fmt.Errorf("reading the indices' health: the answer is not JSON: %w", err)
	}
	out := cdc.ClusterHealth{Indices: make(map[string]string, len(asked)), ReadAt: now}
	for _, idx := range asked {
		st := "red"
		if i, ok := doc.Indices[idx]; ok && i.Status != "" {
			st = i.Status
		}
		out.Indices[idx] = st
		out.Status = worseHealth(out.Status, st)
	}
	return out, nil
}

// worseHealth returns the worse of two colors (empty < green < yellow < red; an unknown word
// counts as red).
func worseHealth(a, b string) string {
	rank := func(s string) int {
		switch s {
		case "":
			return 0
		case "green":
			return 1
		case "yellow":
			return 2
		}
		return 3
	}
	if rank(b) > rank(a) {
		return b
	}
	return a
}
