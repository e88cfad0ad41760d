package estest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/elastic/go-elasticsearch/v8/esapi"
)

// StatusError is an answer with a status the helper did not expect.
type StatusError struct {
	Op     string
	Status int
}

func (e *StatusError) Error() string { return e.Op + ": status " + strconv.Itoa(e.Status) }

// Doc is one document as GET <index>/_doc/<id> and _mget answer it.
type Doc struct {
	ID          string          `json:"_id"`
	Found       bool            `json:"found"`
	Version     int64           `json:"_version"`
	SeqNo       int64           `json:"_seq_no"`
	PrimaryTerm int64           `json:"_primary_term"`
	Source      json.RawMessage `json:"_source"`
	Error       json.RawMessage `json:"error"` // set on an _mget entry that could not be read
}

// Object decodes the _source as a JSON object, numbers as json.Number so none loses digits.
func (d Doc) Object() (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(d.Source))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("document %s: %w", d.ID, err)
	}
	return m, nil
}

// GetDoc reads one document in real time; Found is false when it does not exist. An answer
// other than 200 or 404 fails the test.
func (n *Node) GetDoc(t testing.TB, index, id string) Doc {
	t.Helper()
	r := n.Do(t, esapi.GetRequest{Index: index, DocumentID: id})
	if r.Status != http.StatusOK && r.Status != http.StatusNotFound {
		t.Fatalf("GET %s/_doc/%s: status %d: %s", index, id, r.Status, r.Body)
	}
	var d Doc
	r.Decode(t, &d)
	return d
}

// Mget reads documents by _id in real time (no refresh needed), in the order of ids. It suits
// polling: an answer other than 200 (the index not there yet) comes back as a *StatusError, and
// a document that could not be read (a shard still starting) as an error; only a missing answer
// fails the test.
func (n *Node) Mget(t testing.TB, index string, ids []string) ([]Doc, error) {
	t.Helper()
	r := n.Do(t, esapi.MgetRequest{Index: index, Body: JSONBody(t, map[string]any{"ids": ids}), Realtime: Ptr(true)})
	if r.Status != http.StatusOK {
		return nil, &StatusError{Op: "_mget " + index, Status: r.Status}
	}
	var ans struct {
		Docs []Doc `json:"docs"`
	}
	if err := json.Unmarshal(r.Body, &ans); err != nil {
		return nil, fmt.Errorf("_mget %s: %w", index, err)
	}
	for _, d := range ans.Docs {
		if len(d.Error) > 0 && string(d.Error) != "null" {
			return nil, fmt.Errorf("_mget %s: document %s: %s", index, d.ID, d.Error)
		}
	}
	return ans.Docs, nil
}

// Count counts the documents a search of index sees now, without forcing a refresh. It takes
// no testing.TB, so it may run on any goroutine.
func (n *Node) Count(ctx context.Context, index string) (int, error) {
	res, err := esapi.CountRequest{Index: []string{index}}.Do(ctx, n.Transport)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return 0, &StatusError{Op: "_count " + index, Status: res.StatusCode}
	}
	var ans struct {
		Count int `json:"count"`
	}
	if err := json.NewDecoder(res.Body).Decode(&ans); err != nil {
		return 0, err
	}
	return ans.Count, nil
}
