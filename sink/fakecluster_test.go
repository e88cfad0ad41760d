package sink

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/statestore"
)

// fakeCluster is an in-process stand-in for one Elasticsearch node, speaking just the
// requests the sink and its fence send: cluster state and settings, index creation and
// lookup, alias rotation, mapping reads and updates, and _bulk with external versions and
// require_alias. Unit tests use it to check what the sink sends and counts without a server;
// the behaviour it imitates is pinned against the real engines by the *_server_test.go tests.
type fakeCluster struct {
	mu      sync.Mutex
	indices map[string]*fakeIndex
	// item, when set, overrides the status of bulk item i of the call-th _bulk request
	// (counted from 1); 0 keeps the computed one.
	item func(call, i int) int
	// whole, when set, answers the call-th _bulk request as a whole: an HTTP status, or -1 for
	// a lost connection; 0 lets it through.
	whole func(call int) int
	// mgetWhole, when set, answers the call-th _mget request as a whole, like whole.
	mgetWhole func(call int) int
	mgets     int      // _mget requests so far
	calls     int      // _bulk requests so far
	bodies    []int    // the body size of every _bulk request
	requests  []string // "METHOD path" of every request, in order
}

type fakeIndex struct {
	mappings map[string]json.RawMessage // _meta, properties, ...
	props    map[string]json.RawMessage // the fields
	aliases  map[string]bool
	docs     map[string]fakeDoc
	dynamic  []string // fields a document brought before the mapping had them
}

type fakeDoc struct {
	version int64
	deleted bool
	source  json.RawMessage
}

func newFakeCluster() *fakeCluster { return &fakeCluster{indices: map[string]*fakeIndex{}} }

// fakeSink is a sink writing to a fake cluster.
func fakeSink(t *testing.T, f *fakeCluster, cfg Config, o Options) *Sink {
	t.Helper()
	if cfg.ID == "" {
		cfg.ID = "fake"
	}
	if cfg.URL == "" {
		cfg.URL = "http://fake.invalid:9200"
	}
	if cfg.Index == "" {
		cfg.Index = "cdc-{table}"
	}
	if cfg.Auth.Type == "" {
		cfg.Auth.Type = AuthNone
	}
	if o.State == nil {
		o.State = statestore.NewMemory()
	}
	if o.Pipeline == "" {
		o.Pipeline = "p"
	}
	o.Transport = f
	if o.Engine == nil {
		e := Elasticsearch
		o.Engine = &e
	}
	if o.ItemRetryBackoff == 0 {
		o.ItemRetryBackoff = time.Millisecond
	}
	k, err := New(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func (f *fakeCluster) Perform(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	path := strings.Trim(r.URL.Path, "/")
	if path == "_bulk" {
		f.calls++
		f.bodies = append(f.bodies, len(body))
		if f.whole != nil {
			switch st := f.whole(f.calls); {
			case st < 0:
				return nil, errors.New("fake: connection reset")
			case st > 0:
				return fakeAnswer(st, `{"error":{"type":"injected"},"status":`+strconv.Itoa(st)+`}`)
			}
		}
	}
	f.requests = append(f.requests, r.Method+" /"+path)
	parts := strings.Split(path, "/")
	switch {
	case strings.HasPrefix(path, "_cluster/state"):
		return fakeAnswer(200, `{"metadata":{"cluster_uuid":"fake-cluster-uuid"}}`)
	case path == "_cluster/settings":
		return fakeAnswer(200, `{"persistent":{"action":{"auto_create_index":"-df-w-*,+*"}}}`)
	case path == "_bulk":
		return f.bulk(body)
	case path == "_aliases":
		return f.aliasActions(body)
	case len(parts) == 2 && parts[1] == "_mget":
		f.mgets++
		if f.mgetWhole != nil {
			switch st := f.mgetWhole(f.mgets); {
			case st < 0:
				return nil, errors.New("fake: connection reset")
			case st > 0:
				return fakeAnswer(st, `{"error":{"type":"injected"},"status":`+strconv.Itoa(st)+`}`)
			}
		}
		return f.mget(parts[0], body)
	case len(parts) == 2 && parts[1] == "_mapping":
		return f.mapping(r.Method, parts[0], body)
	case len(parts) == 1 && r.Method == http.MethodPut:
		return f.create(parts[0], body)
	case len(parts) == 1 && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		ix := f.indices[parts[0]]
		if ix == nil {
			return fakeAnswer(404, `{"error":{"type":"index_not_found_exception"},"status":404}`)
		}
		aliases := map[string]any{}
		for a := range ix.aliases {
			aliases[a] = map[string]any{}
		}
		return fakeJSON(200, map[string]any{parts[0]: map[string]any{"aliases": aliases, "mappings": ix.mappingsJSON()}})
	}
	return fakeAnswer(400, `{"error":{"type":"fake_unsupported_request"},"status":400}`)
}

func (ix *fakeIndex) mappingsJSON() map[string]json.RawMessage {
	m := map[string]json.RawMessage{}
	for k, v := range ix.mappings {
		m[k] = v
	}
	p, _ := json.Marshal(ix.props)
	m["properties"] = p
	return m
}

// resolve finds the index a name (an index or an alias) stands for.
func (f *fakeCluster) resolve(name string, aliasOnly bool) (string, *fakeIndex) {
	if ix := f.indices[name]; ix != nil && !aliasOnly {
		return name, ix
	}
	for n, ix := range f.indices {
		if ix.aliases[name] {
			return n, ix
		}
	}
	return "", nil
}

func (f *fakeCluster) create(name string, body []byte) (*http.Response, error) {
	if f.indices[name] != nil {
		return fakeAnswer(400, `{"error":{"type":"resource_already_exists_exception"},"status":400}`)
	}
	var req struct {
		Mappings map[string]json.RawMessage `json:"mappings"`
		Aliases  map[string]json.RawMessage `json:"aliases"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return fakeAnswer(400, `{"error":{"type":"parse_exception"},"status":400}`)
	}
	ix := &fakeIndex{mappings: map[string]json.RawMessage{}, props: map[string]json.RawMessage{}, aliases: map[string]bool{}, docs: map[string]fakeDoc{}}
	for k, v := range req.Mappings {
		if k == "properties" {
			_ = json.Unmarshal(v, &ix.props)
			continue
		}
		ix.mappings[k] = v
	}
	for a := range req.Aliases {
		ix.aliases[a] = true
	}
	f.indices[name] = ix
	return fakeAnswer(200, `{"acknowledged":true}`)
}

func (f *fakeCluster) aliasActions(body []byte) (*http.Response, error) {
	var req struct {
		Actions []map[string]struct {
			Index     string `json:"index"`
			Alias     string `json:"alias"`
			MustExist bool   `json:"must_exist"`
		} `json:"actions"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return fakeAnswer(400, `{"error":{"type":"parse_exception"},"status":400}`)
	}
	for _, a := range req.Actions { // checked before any is applied: the request is atomic
		for kind, x := range a {
			ix := f.indices[x.Index]
			if ix == nil {
				return fakeAnswer(404, `{"error":{"type":"index_not_found_exception"},"status":404}`)
			}
			if kind == "remove" && x.MustExist && !ix.aliases[x.Alias] {
				return fakeAnswer(404, `{"error":{"type":"aliases_not_found_exception"},"status":404}`)
			}
		}
	}
	for _, a := range req.Actions {
		for kind, x := range a {
			f.indices[x.Index].aliases[x.Alias] = kind == "add"
			if kind == "remove" {
				delete(f.indices[x.Index].aliases, x.Alias)
			}
		}
	}
	return fakeAnswer(200, `{"acknowledged":true,"errors":false}`)
}

func (f *fakeCluster) mapping(method, name string, body []byte) (*http.Response, error) {
	concrete, ix := f.resolve(name, false)
	if ix == nil {
		return fakeAnswer(404, `{"error":{"type":"index_not_found_exception"},"status":404}`)
	}
	if method == http.MethodGet {
		return fakeJSON(200, map[string]any{concrete: map[string]any{"mappings": ix.mappingsJSON()}})
	}
	var req struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Meta       json.RawMessage            `json:"_meta"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return fakeAnswer(400, `{"error":{"type":"parse_exception"},"status":400}`)
	}
	for k, v := range req.Properties {
		if old, ok := ix.props[k]; ok && !bytes.Equal(old, v) {
			return fakeAnswer(400, `{"error":{"type":"illegal_argument_exception"},"status":400}`)
		}
	}
	for k, v := range req.Properties {
		ix.props[k] = v
	}
	if req.Meta != nil {
		ix.mappings["_meta"] = req.Meta // as the engines do: a _meta in the request replaces it
	}
	return fakeAnswer(200, `{"acknowledged":true}`)
}

// bulk applies a _bulk body with external versions through aliases only (require_alias).
func (f *fakeCluster) bulk(body []byte) (*http.Response, error) {
	var items []string
	errs := false
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 64<<20)
	for i := 0; sc.Scan(); i++ {
		var act map[string]struct {
			Index   string `json:"_index"`
			ID      string `json:"_id"`
			Version int64  `json:"version"`
		}
		if err := json.Unmarshal(sc.Bytes(), &act); err != nil || len(act) != 1 {
			return fakeAnswer(400, `{"error":{"type":"illegal_argument_exception"},"status":400}`)
		}
		var kind string
		for k := range act {
			kind = k
		}
		a := act[kind]
		var src json.RawMessage
		if kind == "index" {
			if !sc.Scan() {
				return fakeAnswer(400, `{"error":{"type":"illegal_argument_exception"},"status":400}`)
			}
			src = append(json.RawMessage(nil), sc.Bytes()...)
		}
		var status int
		var errType string
		if f.item != nil {
			status = f.item(f.calls, i)
		}
		if status == 0 {
			status, errType = f.apply(kind, a.Index, a.ID, a.Version, src)
		} else {
			errType = "injected_exception"
		}
		item := `{"` + kind + `":{"_index":"x","_id":` + strconv.Quote(a.ID) + `,"status":` + strconv.Itoa(status)
		if errType != "" {
			errs = true
			item += `,"error":{"type":"` + errType + `","reason":"fake"}`
		}
		items = append(items, item+"}}")
	}
	return fakeAnswer(200, `{"errors":`+strconv.FormatBool(errs)+`,"took":1,"items":[`+strings.Join(items, ",")+`]}`)
}

func (f *fakeCluster) apply(kind, alias, id string, version int64, src json.RawMessage) (int, string) {
	_, ix := f.resolve(alias, true)
	if ix == nil {
		return 404, "index_not_found_exception"
	}
	if d, ok := ix.docs[id]; ok && d.version >= version {
		return 409, "version_conflict_engine_exception"
	}
	if kind == "delete" {
		d, ok := ix.docs[id]
		ix.docs[id] = fakeDoc{version: version, deleted: true}
		if !ok || d.deleted {
			return 404, ""
		}
		return 200, ""
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(src, &fields) != nil {
		return 400, "document_parsing_exception"
	}
	for name := range fields {
		if _, ok := ix.props[name]; !ok {
			ix.dynamic = append(ix.dynamic, name)
			ix.props[name] = json.RawMessage(`{"type":"dynamic"}`)
		}
	}
	ix.docs[id] = fakeDoc{version: version, source: src}
	return 201, ""
}

// mget answers a real-time _mget of documents by _id, as the engines do: one entry per
// requested document, a per-document index_not_found_exception when the name resolves to no
// index (an alias rotated away), _source unless the entry asks for none.
func (f *fakeCluster) mget(name string, body []byte) (*http.Response, error) {
	var req struct {
		Docs []struct {
			ID     string          `json:"_id"`
			Source json.RawMessage `json:"_source"`
		} `json:"docs"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return fakeAnswer(400, `{"error":{"type":"parse_exception"},"status":400}`)
	}
	_, ix := f.resolve(name, false)
	var docs []string
	for _, d := range req.Docs {
		id := strconv.Quote(d.ID)
		switch doc, ok := ix.docLookup(d.ID); {
		case ix == nil:
			docs = append(docs, `{"_index":`+strconv.Quote(name)+`,"_id":`+id+`,"error":{"type":"index_not_found_exception","reason":"no such index"}}`)
		case !ok:
			docs = append(docs, `{"_index":"x","_id":`+id+`,"found":false}`)
		default:
			e := `{"_index":"x","_id":` + id + `,"_version":` + strconv.FormatInt(doc.version, 10) + `,"found":true`
			if string(d.Source) != "false" {
				e += `,"_source":` + string(doc.source)
			}
			docs = append(docs, e+"}")
		}
	}
	return fakeAnswer(200, `{"docs":[`+strings.Join(docs, ",")+`]}`)
}

// docLookup finds a live document; false for a missing index, id or a deleted document.
func (ix *fakeIndex) docLookup(id string) (fakeDoc, bool) {
	if ix == nil {
		return fakeDoc{}, false
	}
	d, ok := ix.docs[id]
	return d, ok && !d.deleted
}

func fakeAnswer(status int, body string) (*http.Response, error) {
	return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(body))}, nil
}

func fakeJSON(status int, v any) (*http.Response, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return fakeAnswer(status, string(b))
}

// index returns the fake's index by name (nil when absent).
func (f *fakeCluster) index(name string) *fakeIndex {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.indices[name]
}

// fakeEvents is n inserts of the orders table from version from on.
func fakeEvents(sch *cdc.TableSchema, from, n int64) []cdc.Event {
	var out []cdc.Event
	for i := from; i < from+n; i++ {
		out = append(out, ev(cdc.Insert, sch, i, nil, row(i, "n"+strconv.FormatInt(i, 10), i)))
	}
	return out
}
