package faultsuite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The comparison: the index must equal the source row by row -- every row's document, with
// every column as the field sink/doc.go says it becomes, no other field, and no document
// without its row. The expected fields come from the source's own text of each value (read
// back with SQL), never from the sink's normalizer; the suite's column kinds are few, so the
// rules are few (see colKind).

// engine reads an index straight from its server, never through the pipeline's proxy.
type engine struct {
	name string // "elasticsearch" or "opensearch"
	url  string
	hc   *http.Client
}

func newEngine(name, url string) *engine {
	return &engine{name: name, url: strings.TrimRight(url, "/"), hc: &http.Client{Timeout: 30 * time.Second}}
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

// maxDocs bounds what one search reads (index.max_result_window); the suite's tables stay far
// below it.
const maxDocs = 10000

// docs returns every document of index by _id (its _source's members); a missing index is
// an empty one.
func (e *engine) docs(ctx context.Context, index string) (map[string]map[string]json.RawMessage, error) {
	if _, st, err := e.do(ctx, http.MethodPost, "/"+index+"/_refresh", nil); err != nil {
		return nil, err
	} else if st == http.StatusNotFound {
		return map[string]map[string]json.RawMessage{}, nil
	} else if st != http.StatusOK {
		return nil, fmt.Errorf("refresh %s: status %d", index, st)
	}
	b, st, err := e.do(ctx, http.MethodPost, "/"+index+"/_search",
		map[string]any{"size": maxDocs, "track_total_hits": true, "query": map[string]any{"match_all": map[string]any{}}})
	if err != nil {
		return nil, err
	}
	if st != http.StatusOK {
		return nil, fmt.Errorf("search %s: status %d", index, st)
	}
	var ans struct {
		Hits struct {
			Total struct{ Value int }
			Hits  []struct {
				ID     string          `json:"_id"`
				Source json.RawMessage `json:"_source"`
			}
		}
	}
	if err := json.Unmarshal(b, &ans); err != nil {
		return nil, fmt.Errorf("search %s: %w", index, err)
	}
	if ans.Hits.Total.Value != len(ans.Hits.Hits) {
		return nil, fmt.Errorf("search %s: %d hits of %d", index, len(ans.Hits.Hits), ans.Hits.Total.Value)
	}
	out := make(map[string]map[string]json.RawMessage, len(ans.Hits.Hits))
	for _, h := range ans.Hits.Hits {
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(h.Source, &doc); err != nil {
			return nil, fmt.Errorf("document %q: %w", h.ID, err)
		}
		out[h.ID] = doc
	}
	return out, nil
}

// diffTable lists every difference between the rows of t and the documents, sorted.
func diffTable(src string, t *tableDef, rows map[string][]*string, docs map[string]map[string]json.RawMessage) []string {
	var out []string
	for id, vals := range rows {
		doc, ok := docs[id]
		if !ok {
			out = append(out, fmt.Sprintf("%s: missing_document _id=%q", t.name, id))
			continue
		}
		for i, c := range t.cols {
			raw, ok := doc[c.name]
			if !ok {
				out = append(out, fmt.Sprintf("%s: missing_field _id=%q column=%s", t.name, id, c.name))
				continue
			}
			if d := fieldDiff(src, c.kind, vals[i], raw); d != "" {
				out = append(out, fmt.Sprintf("%s: field_value _id=%q column=%s: %s", t.name, id, c.name, d))
			}
		}
		if len(doc) > len(t.cols) {
			for f := range doc {
				if !hasColumn(t, f) {
					out = append(out, fmt.Sprintf("%s: extra_field _id=%q field=%q", t.name, id, f))
				}
			}
		}
	}
	for id := range docs {
		if _, ok := rows[id]; !ok {
			out = append(out, fmt.Sprintf("%s: extra_document _id=%q", t.name, id))
		}
	}
	sort.Strings(out)
	return out
}

func hasColumn(t *tableDef, name string) bool {
	for _, c := range t.cols {
		if c.name == name {
			return true
		}
	}
	return false
}

// fieldDiff compares one field with the source's text of its value ("" when equal).
func fieldDiff(src string, k colKind, sql *string, raw json.RawMessage) string {
	got := string(raw)
	if sql == nil {
		if got == "null" {
			return ""
		}
		return "want null, got " + got
	}
	want := *sql
	if got == "null" {
		return fmt.Sprintf("want %q, got null", want)
	}
	switch {
	case k == kInt, k == kBool && src == "mariadb":
		if got != want {
			return fmt.Sprintf("want number %s, got %s", want, got)
		}
	case k == kBool:
		b, err := strconv.ParseBool(want)
		if err != nil || got != strconv.FormatBool(b) {
			return fmt.Sprintf("want %s, got %s", want, got)
		}
	case k == kFloat:
		w, err1 := strconv.ParseFloat(want, 64)
		g, err2 := strconv.ParseFloat(got, 64)
		if err1 != nil || err2 != nil || w != g {
			return fmt.Sprintf("want number %s, got %s", want, got)
		}
	default:
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return fmt.Sprintf("want string %q, got %s", want, got)
		}
		if k == kDateTime {
			want = trimFrac(want)
		}
		if s != want {
			return fmt.Sprintf("want %q, got %q", want, s)
		}
	}
	return ""
}

// trimFrac drops trailing zeros of a fractional second, and the dot when nothing is left:
// sink.AppendDocument, "trailing fractional zeros trimmed" (MariaDB pads DATETIME(6) to six
// digits, PostgreSQL trims).
func trimFrac(s string) string {
	dot := strings.LastIndexByte(s, '.')
	if dot < 0 {
		return s
	}
	f := strings.TrimRight(s[dot+1:], "0")
	if f == "" {
		return s[:dot]
	}
	return s[:dot+1] + f
}
