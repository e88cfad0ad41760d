package hasuite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// The engine read straight (never through a process), and the version sampler.

type engine struct {
	url string
	hc  *http.Client
}

func newEngine(url string) *engine {
	return &engine{url: strings.TrimRight(url, "/"), hc: &http.Client{Timeout: 30 * time.Second}}
}

func (e *engine) do(ctx context.Context, method, path string, body any) ([]byte, int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.url+path, rd)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.hc.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return b, resp.StatusCode, err
}

// doc is one document: its _source members (nil when not asked for) and _version.
type doc struct {
	source  map[string]json.RawMessage
	version int64
}

// maxDocs bounds one search (index.max_result_window); the tables stay far below it.
const maxDocs = 10000

// docs reads every document of index with its version; a missing index is an empty one.
// refresh first makes every acknowledged write visible.
func (e *engine) docs(ctx context.Context, index string, source, refresh bool) (map[string]doc, error) {
	if refresh {
		if _, st, err := e.do(ctx, http.MethodPost, "/"+index+"/_refresh", nil); err != nil {
			return nil, err
		} else if st == http.StatusNotFound {
			return map[string]doc{}, nil
		} else if st != http.StatusOK {
			return nil, fmt.Errorf("refresh %s: status %d", index, st)
		}
	}
	b, st, err := e.do(ctx, http.MethodPost, "/"+index+"/_search", map[string]any{"size": maxDocs, "track_total_hits": true,
		"version": true, "_source": source, "query": map[string]any{"match_all": map[string]any{}}})
	if err != nil {
		return nil, err
	}
	if st == http.StatusNotFound {
		return map[string]doc{}, nil
	}
	if st != http.StatusOK {
		return nil, fmt.Errorf("search %s: status %d", index, st)
	}
	var ans struct {
		Hits struct {
			Total struct{ Value int }
			Hits  []struct {
				ID      string          `json:"_id"`
				Version int64           `json:"_version"`
				Source  json.RawMessage `json:"_source"`
			}
		}
	}
	if err := json.Unmarshal(b, &ans); err != nil {
		return nil, fmt.Errorf("search %s: %w", index, err)
	}
	if ans.Hits.Total.Value != len(ans.Hits.Hits) {
		return nil, fmt.Errorf("search %s: %d hits of %d", index, len(ans.Hits.Hits), ans.Hits.Total.Value)
	}
	out := make(map[string]doc, len(ans.Hits.Hits))
	for _, h := range ans.Hits.Hits {
		d := doc{version: h.Version}
		if source {
			if err := json.Unmarshal(h.Source, &d.source); err != nil {
				return nil, fmt.Errorf("document %q: %w", h.ID, err)
			}
		}
		out[h.ID] = d
	}
	return out, nil
}

// get reads one document in real time: found, and its version.
func (e *engine) get(ctx context.Context, index, id string) (bool, int64, error) {
	b, st, err := e.do(ctx, http.MethodGet, "/"+index+"/_doc/"+id+"?_source=false", nil)
	if err != nil {
		return false, 0, err
	}
	if st == http.StatusNotFound {
		return false, 0, nil
	}
	if st != http.StatusOK {
		return false, 0, fmt.Errorf("get %s/%s: status %d", index, id, st)
	}
	var ans struct {
		Found   bool  `json:"found"`
		Version int64 `json:"_version"`
	}
	err = json.Unmarshal(b, &ans)
	return ans.Found, ans.Version, err
}

// versions is what the sampler saw: per index and _id the highest version so far, and every
// sighting of a lower one.
type versions struct {
	mu      sync.Mutex
	max     map[string]int64
	samples int
	back    []string
}

func newVersions() *versions { return &versions{max: map[string]int64{}} }

func (v *versions) observe(index string, docs map[string]doc) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.samples++
	for id, d := range docs {
		k := index + "/" + id
		if m, ok := v.max[k]; ok && d.version < m {
			if len(v.back) < 20 {
				v.back = append(v.back, fmt.Sprintf("%s _id=%q: version %d after %d", index, id, d.version, m))
			}
			continue
		}
		v.max[k] = d.version
	}
}

// regressions returns every version seen going backwards, and the number of samples.
func (v *versions) regressions() ([]string, int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := append([]string(nil), v.back...)
	sort.Strings(out)
	return out, v.samples
}

// sample reads both indices' versions every 500ms until ctx ends.
func (v *versions) sample(ctx context.Context, e *engine, indices []string) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, idx := range indices {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			docs, err := e.docs(cctx, idx, false, false)
			cancel()
			if err == nil {
				v.observe(idx, docs)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
