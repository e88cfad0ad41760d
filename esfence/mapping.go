package esfence

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/elastic/go-elasticsearch/v8/esapi"
)

// Fields returns the top-level field mappings of the claim's index (mappings.properties, by
// field name), read through the claim's write alias: a claim that was fenced, or whose index
// was deleted, gets the refusal instead of another index's mapping.
func (f *Fence) Fields(ctx context.Context, c *Claim) (map[string]json.RawMessage, error) {
	got, err := f.mappings(ctx, c)
	if err != nil {
		return nil, err
	}
	var props map[string]json.RawMessage
	if raw, ok := got["properties"]; ok {
		if err := json.Unmarshal(raw, &props); err != nil {
			return nil, errors.New("esfence: " + readingMapping + ": unexpected answer")
		}
	}
	if props == nil {
		return map[string]json.RawMessage{}, nil
	}
	return props, nil
}

// readingMapping names the request mappings makes, in its errors and its callers'.
const readingMapping = "reading the mapping"

// mappings reads the mappings object of the claim's index through the claim's write alias
// (nil when the answer has none): a claim that was fenced, or whose index was deleted, gets
// the refusal instead of another index's mapping.
func (f *Fence) mappings(ctx context.Context, c *Claim) (map[string]json.RawMessage, error) {
	const what = readingMapping
	a, err := f.do(ctx, what, esapi.IndicesGetMappingRequest{Index: []string{c.WriteAlias()}})
	if err != nil {
		return nil, err
	}
	if !a.ok() {
		return nil, f.throughAliasFailed(ctx, c, a, what)
	}
	// The answer is keyed by the concrete index the alias resolves to.
	var m map[string]struct {
		Mappings map[string]json.RawMessage `json:"mappings"`
	}
	if err := json.Unmarshal(a.body, &m); err != nil {
		return nil, errors.New("esfence: " + what + ": unexpected answer")
	}
	got, ok := m[c.dest.Index]
	if !ok || len(m) != 1 {
		return nil, f.refuse(c.dest, FenceMalformed, "the write alias does not resolve to exactly the claimed index")
	}
	return got.Mappings, nil
}

// AddFields adds top-level fields to the mapping of the claim's index, through the claim's
// write alias (a fenced claim cannot change the mapping). Only "properties" is sent, so the
// ownership marker in _meta is never touched. A field that already exists with another
// mapping is refused by the cluster as a whole request (a *ServerError, status 400): an
// existing field's type cannot change.
func (f *Fence) AddFields(ctx context.Context, c *Claim, properties map[string]json.RawMessage) error {
	if len(properties) == 0 {
		return nil
	}
	const what = "adding fields to the mapping"
	a, err := f.do(ctx, what, esapi.IndicesPutMappingRequest{
		Index: []string{c.WriteAlias()},
		Body:  jsonBody(map[string]any{"properties": properties}),
	})
	if err != nil {
		return err
	}
	if !a.ok() {
		return f.throughAliasFailed(ctx, c, a, what)
	}
	return nil
}

// throughAliasFailed turns a failed request through the write alias into an error: a missing
// alias is a refusal -- fenced when the index is still there (another claim rotated the fence),
// destination_missing when it is gone -- and anything else a *ServerError.
func (f *Fence) throughAliasFailed(ctx context.Context, c *Claim, a answer, what string) error {
	se := a.serverError(what)
	if a.status != http.StatusNotFound || se.Type != "index_not_found_exception" {
		return se
	}
	st, err := f.getIndex(ctx, c.dest.Index)
	if err != nil {
		return err
	}
	if !st.exists {
		return f.refuse(c.dest, DestinationMissing, "the index was deleted; it is never recreated (delete the pipeline to start over)")
	}
	return f.refuse(c.dest, Fenced, "the write alias is gone: another claim rotated the fence")
}

// Mapping returns the mappings object of the claim's index, read through its write alias as
// Fields reads it, for creating another generation like it (a Reset whose caller has no
// schema to generate one from): everything but the ownership marker, which the creation
// writes anew (other _meta keys are kept).
func (f *Fence) Mapping(ctx context.Context, c *Claim) (json.RawMessage, error) {
	out, err := f.mappings(ctx, c)
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = map[string]json.RawMessage{}
	}
	if raw, ok := out["_meta"]; ok {
		var meta map[string]json.RawMessage
		if err := json.Unmarshal(raw, &meta); err != nil {
			return nil, errors.New("esfence: " + readingMapping + ": the mapping's _meta is not an object")
		}
		delete(meta, MarkerKey)
		if len(meta) == 0 {
			delete(out, "_meta")
		} else if out["_meta"], err = json.Marshal(meta); err != nil {
			return nil, err
		}
	}
	return json.Marshal(out)
}

// TableKnown says whether this pipeline ever claimed d's table (d.Index its name): a table
// record or an ownership record of that name exists.
func (f *Fence) TableKnown(ctx context.Context, d Destination) (bool, error) {
	if _, rev, err := f.loadTable(ctx, d); err != nil || rev != 0 {
		return rev != 0, err
	}
	_, rev, err := f.loadRecord(ctx, d)
	return rev != 0, err
}
