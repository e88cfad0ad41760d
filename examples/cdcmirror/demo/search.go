package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/tributary-dev/tributary/internal/testenv"
)

// search is the Elasticsearch or OpenSearch node, spoken to over plain HTTP: the demo only
// looks, through requests both engines serve alike.
type search struct{ url string }

func (s *search) do(ctx context.Context, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

const autoCreate = "action.auto_create_index"

// enforceFencing makes the cluster refuse to auto-create df-w-* indices, which the sink
// requires before it claims an index (the specification's deployment requirement), and returns
// a function that puts the previous value back. While the demo runs it holds the lock that the
// integration tests take around this cluster-wide setting, so it never changes it under them.
func (s *search) enforceFencing() (restore func(), err error) {
	if err := testenv.LockClusterSettings(s.url); err != nil {
		return nil, err
	}
	ctx := context.Background()
	code, b, err := s.do(ctx, "GET", "/_cluster/settings?flat_settings=true", nil)
	if err != nil || code != 200 {
		return nil, fmt.Errorf("reading the cluster settings: status %d, %v", code, err)
	}
	var cur struct{ Persistent, Transient map[string]any }
	if err := json.Unmarshal(b, &cur); err != nil {
		return nil, err
	}
	if _, ok := cur.Transient[autoCreate]; ok {
		return nil, fmt.Errorf("a transient %s is set; the demo leaves it to whoever set it", autoCreate)
	}
	prev, want := cur.Persistent[autoCreate], "-df-w-*,+*"
	if prev == want {
		return func() {}, nil
	}
	set := func(v any) error {
		code, _, err := s.do(ctx, "PUT", "/_cluster/settings", map[string]any{"persistent": map[string]any{autoCreate: v}})
		if err == nil && code != 200 {
			err = fmt.Errorf("status %d", code)
		}
		return err
	}
	if err := set(want); err != nil {
		return nil, fmt.Errorf("setting %s: %w", autoCreate, err)
	}
	fmt.Printf("set the cluster's %s to %q (the sink's fencing requirement) for the demo\n", autoCreate, want)
	return func() { _ = set(prev) }, nil
}

func (s *search) deleteIndex(ctx context.Context, index string) error {
	code, _, err := s.do(ctx, "DELETE", "/"+index, nil)
	if err == nil && code != 200 && code != 404 {
		err = fmt.Errorf("status %d", code)
	}
	return err
}

// count refreshes the index and counts its documents; a missing index counts 0.
func (s *search) count(ctx context.Context, index string) (int64, error) {
	code, _, err := s.do(ctx, "POST", "/"+index+"/_refresh", nil)
	if err != nil {
		return 0, err
	}
	if code == 404 {
		return 0, nil
	}
	code, b, err := s.do(ctx, "GET", "/"+index+"/_count", nil)
	if err != nil || code != 200 {
		return 0, fmt.Errorf("_count: status %d, %v", code, err)
	}
	var ans struct{ Count int64 }
	err = json.Unmarshal(b, &ans)
	return ans.Count, err
}

// docs reads documents by id in real time: their _source, absent ones left out.
func (s *search) docs(ctx context.Context, index string, ids []int64) (map[int64]map[string]any, error) {
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = strconv.FormatInt(id, 10)
	}
	code, b, err := s.do(ctx, "POST", "/"+index+"/_mget?realtime=true", map[string]any{"ids": keys})
	if err != nil || code != 200 {
		return nil, fmt.Errorf("_mget: status %d, %v", code, err)
	}
	var ans struct {
		Docs []struct {
			ID     string         `json:"_id"`
			Found  bool           `json:"found"`
			Source map[string]any `json:"_source"`
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&ans); err != nil {
		return nil, err
	}
	out := map[int64]map[string]any{}
	for _, d := range ans.Docs {
		if d.Found {
			id, _ := strconv.ParseInt(d.ID, 10, 64)
			out[id] = d.Source
		}
	}
	return out, nil
}
