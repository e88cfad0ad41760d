package searchtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// The simulation; every function here runs with c.mu held.

func (ix *Index) mappingsJSON() map[string]json.RawMessage {
	m := map[string]json.RawMessage{}
	for k, v := range ix.Mappings {
		m[k] = v
	}
	p, _ := json.Marshal(ix.Props)
	m["properties"] = p
	return m
}

// resolve finds the index a name (an index or, unless aliasOnly, an alias) stands for.
func (c *Cluster) resolve(name string, aliasOnly bool) (string, *Index) {
	if ix := c.indices[name]; ix != nil && !aliasOnly {
		return name, ix
	}
	for n, ix := range c.indices {
		if ix.Aliases[name] {
			return n, ix
		}
	}
	return "", nil
}

// get answers GET /<names> (a comma-separated list): keyed by the index, or for an alias by
// every index it names. A missing name is index_not_found unless ignoreMissing.
func (c *Cluster) get(names string, ignoreMissing bool) *Reply {
	out := map[string]any{}
	for _, name := range strings.Split(names, ",") {
		found := false
		for n, ix := range c.indices {
			if n != name && !ix.Aliases[name] {
				continue
			}
			found = true
			aliases := map[string]any{}
			for a := range ix.Aliases {
				aliases[a] = map[string]any{}
			}
			out[n] = map[string]any{"aliases": aliases, "mappings": ix.mappingsJSON()}
		}
		if !found && !ignoreMissing {
			return errorReply(404, "index_not_found_exception")
		}
	}
	return jsonReply(200, out)
}

func (c *Cluster) create(name string, body string) *Reply {
	if c.indices[name] != nil {
		return errorReply(400, "resource_already_exists_exception")
	}
	var req struct {
		Mappings map[string]json.RawMessage `json:"mappings"`
		Aliases  map[string]json.RawMessage `json:"aliases"`
		Settings json.RawMessage            `json:"settings"`
	}
	if body != "" {
		if err := json.Unmarshal([]byte(body), &req); err != nil {
			return errorReply(400, "parse_exception")
		}
	}
	ix := &Index{Mappings: map[string]json.RawMessage{}, Props: map[string]json.RawMessage{}, Aliases: map[string]bool{},
		ReadOnly: map[string]bool{}, Docs: map[string]Doc{}, Settings: req.Settings}
	for k, v := range req.Mappings {
		if k == "properties" {
			_ = json.Unmarshal(v, &ix.Props)
			continue
		}
		ix.Mappings[k] = v
	}
	for a, v := range req.Aliases {
		if c.indices[a] != nil {
			return errorReply(400, "invalid_alias_name_exception")
		}
		ix.Aliases[a] = true
		var opts struct {
			IsWriteIndex *bool `json:"is_write_index"`
		}
		if json.Unmarshal(v, &opts) == nil && opts.IsWriteIndex != nil && !*opts.IsWriteIndex {
			ix.ReadOnly[a] = true
		}
	}
	c.indices[name] = ix
	return Status(200, `{"acknowledged":true}`)
}

func (c *Cluster) aliasActions(body string) *Reply {
	var req struct {
		Actions []map[string]struct {
			Index        string `json:"index"`
			Alias        string `json:"alias"`
			MustExist    bool   `json:"must_exist"`
			IsWriteIndex *bool  `json:"is_write_index"`
		} `json:"actions"`
	}
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		return errorReply(400, "parse_exception")
	}
	// remove_index actions run first, as both engines run them; then every other action is
	// checked before any is applied: the request is atomic.
	removed := map[string]bool{}
	for _, a := range req.Actions {
		if x, ok := a["remove_index"]; ok {
			if c.indices[x.Index] == nil {
				return errorReply(404, "index_not_found_exception")
			}
			removed[x.Index] = true
		}
	}
	for _, a := range req.Actions {
		for kind, x := range a {
			if kind == "remove_index" {
				continue
			}
			ix := c.indices[x.Index]
			if ix == nil || removed[x.Index] {
				return errorReply(404, "index_not_found_exception")
			}
			if kind == "remove" && x.MustExist && !ix.Aliases[x.Alias] {
				return errorReply(404, "aliases_not_found_exception")
			}
			if kind == "add" && c.indices[x.Alias] != nil && !removed[x.Alias] {
				return errorReply(400, "invalid_alias_name_exception")
			}
		}
	}
	for name := range removed {
		delete(c.indices, name)
	}
	for _, a := range req.Actions {
		for kind, x := range a {
			switch kind {
			case "remove_index":
			case "remove":
				delete(c.indices[x.Index].Aliases, x.Alias)
				delete(c.indices[x.Index].ReadOnly, x.Alias)
			default:
				ix := c.indices[x.Index]
				ix.Aliases[x.Alias] = true
				if ix.ReadOnly == nil {
					ix.ReadOnly = map[string]bool{}
				}
				ix.ReadOnly[x.Alias] = x.IsWriteIndex != nil && !*x.IsWriteIndex
			}
		}
	}
	return Status(200, `{"acknowledged":true,"errors":false}`)
}

func (c *Cluster) mapping(method, name, body string) *Reply {
	concrete, ix := c.resolve(name, false)
	if ix == nil {
		return errorReply(404, "index_not_found_exception")
	}
	if method == http.MethodGet {
		return jsonReply(200, map[string]any{concrete: map[string]any{"mappings": ix.mappingsJSON()}})
	}
	var req struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Meta       json.RawMessage            `json:"_meta"`
	}
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		return errorReply(400, "parse_exception")
	}
	for k, v := range req.Properties {
		if old, ok := ix.Props[k]; ok && !bytes.Equal(old, v) {
			return errorReply(400, "illegal_argument_exception")
		}
	}
	for k, v := range req.Properties {
		ix.Props[k] = v
	}
	if req.Meta != nil {
		ix.Mappings["_meta"] = req.Meta // as the engines do: a _meta in the request replaces it
	}
	return Status(200, `{"acknowledged":true}`)
}

// bulk applies a _bulk body with external versions, through aliases only when the request
// says require_alias=true.
func (c *Cluster) bulk(r *Request, fail func(call, i int) int) *Reply {
	q, _ := url.ParseQuery(r.Query)
	aliasOnly := q.Get("require_alias") == "true"
	var items []string
	errs := false
	sc := bufio.NewScanner(strings.NewReader(r.Body))
	sc.Buffer(nil, 64<<20)
	for i := 0; sc.Scan(); i++ {
		var act map[string]struct {
			Index   string `json:"_index"`
			ID      string `json:"_id"`
			Version int64  `json:"version"`
		}
		if err := json.Unmarshal(sc.Bytes(), &act); err != nil || len(act) != 1 {
			return errorReply(400, "illegal_argument_exception")
		}
		var kind string
		for k := range act {
			kind = k
		}
		a := act[kind]
		var src json.RawMessage
		if kind != "delete" {
			if !sc.Scan() {
				return errorReply(400, "illegal_argument_exception")
			}
			src = append(json.RawMessage(nil), sc.Bytes()...)
		}
		var status int
		var errType string
		if fail != nil {
			status = fail(r.Call, i)
		}
		if status == 0 {
			status, errType = c.apply(kind, a.Index, a.ID, a.Version, src, aliasOnly)
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
	return Status(200, `{"errors":`+strconv.FormatBool(errs)+`,"took":1,"items":[`+strings.Join(items, ",")+`]}`)
}

func (c *Cluster) apply(kind, name, id string, version int64, src json.RawMessage, aliasOnly bool) (int, string) {
	_, ix := c.resolve(name, aliasOnly)
	if ix == nil {
		return 404, "index_not_found_exception"
	}
	if ix.ReadOnly[name] {
		return 400, "illegal_argument_exception" // no write index is defined for the alias
	}
	if d, ok := ix.Docs[id]; ok && d.Version >= version {
		return 409, "version_conflict_engine_exception"
	}
	if kind == "delete" {
		d, ok := ix.Docs[id]
		ix.Docs[id] = Doc{Version: version, Deleted: true}
		if !ok || d.Deleted {
			return 404, ""
		}
		return 200, ""
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(src, &fields) != nil {
		return 400, "document_parsing_exception"
	}
	for name := range fields {
		if _, ok := ix.Props[name]; !ok {
			ix.Dynamic = append(ix.Dynamic, name)
			ix.Props[name] = json.RawMessage(`{"type":"dynamic"}`)
		}
	}
	ix.Docs[id] = Doc{Version: version, Source: src}
	return 201, ""
}

// mget answers a real-time _mget of documents by _id, as the engines do: one entry per
// requested document, a per-document index_not_found_exception when the name resolves to no
// index (an alias rotated away), _source unless the entry asks for none. name is the index or
// alias of the path; without one each entry names its _index.
func (c *Cluster) mget(name string, body string) *Reply {
	var req struct {
		Docs []struct {
			Index  string          `json:"_index"`
			ID     string          `json:"_id"`
			Source json.RawMessage `json:"_source"`
		} `json:"docs"`
	}
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		return errorReply(400, "parse_exception")
	}
	var docs []string
	for _, d := range req.Docs {
		target := name
		if d.Index != "" {
			target = d.Index
		}
		_, ix := c.resolve(target, false)
		id := strconv.Quote(d.ID)
		switch doc, ok := ix.docLookup(d.ID); {
		case ix == nil:
			docs = append(docs, `{"_index":`+strconv.Quote(target)+`,"_id":`+id+`,"error":{"type":"index_not_found_exception","reason":"no such index","index":`+strconv.Quote(target)+`}}`)
		case !ok:
			docs = append(docs, `{"_index":"x","_id":`+id+`,"found":false}`)
		default:
			v := strconv.FormatInt(doc.Version, 10)
			e := `{"_index":"x","_id":` + id + `,"_version":` + v + `,"_seq_no":` + v + `,"_primary_term":1,"found":true`
			if string(d.Source) != "false" {
				e += `,"_source":` + string(doc.Source)
			}
			docs = append(docs, e+"}")
		}
	}
	return Status(200, `{"docs":[`+strings.Join(docs, ",")+`]}`)
}

// docLookup finds a live document; false for a missing index, id or a deleted document.
func (ix *Index) docLookup(id string) (Doc, bool) {
	if ix == nil {
		return Doc{}, false
	}
	d, ok := ix.Docs[id]
	return d, ok && !d.Deleted
}
