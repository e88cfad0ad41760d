package searchstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/internal/search"
	"github.com/tributary-dev/tributary/store/driver"
)

// Read implements driver.Store with one _mget for every address of the call, whatever their
// datasets. _mget is real-time: it sees every acknowledged write, refreshed or not.
func (s *Store) Read(ctx context.Context, addrs []driver.Address) ([]driver.ReadResult, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]driver.ReadResult, len(addrs))
	if len(addrs) == 0 {
		return out, nil
	}
	docs, err := s.mget(ctx, addrs)
	if err != nil {
		return nil, err
	}
	for i := range docs {
		out[i] = s.readResult(addrs[i], &docs[i])
	}
	return out, nil
}

// mgetDoc is one entry of an _mget answer. _source stays the bytes the server sent.
type mgetDoc struct {
	Found       bool            `json:"found"`
	SeqNo       *int64          `json:"_seq_no"`
	PrimaryTerm *int64          `json:"_primary_term"`
	Source      json.RawMessage `json:"_source"`
	Error       json.RawMessage `json:"error"`
}

// mget fetches addrs in one request and returns one entry per address, in order. The error,
// if any, applies to all of them.
func (s *Store) mget(ctx context.Context, addrs []driver.Address) ([]mgetDoc, *driver.Error) {
	body := make([]byte, 0, 16+len(addrs)*64)
	body = append(body, `{"docs":[`...)
	for i, a := range addrs {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, `{"_index":`...)
		body = appendJSONString(body, a.Dataset)
		body = append(body, `,"_id":`...)
		body = appendJSONString(body, documentID(a.Key))
		body = append(body, '}')
	}
	body = append(body, "]}"...)

	ans, derr := s.perform(ctx, func() esapi.Request { return esapi.MgetRequest{Body: bytes.NewReader(body)} }, readOnly, "_mget")
	if derr != nil {
		return nil, derr
	}
	defer ans.Release()
	if ans.Status != http.StatusOK {
		return nil, classifyStatus(&ans, readOnly, "_mget")
	}
	var res struct {
		Docs []mgetDoc `json:"docs"`
	}
	if err := json.Unmarshal(ans.Body, &res); err != nil {
		return nil, driver.NewError(driver.KindInternal, "searchstore: _mget: cannot decode the answer", err)
	}
	if len(res.Docs) != len(addrs) {
		return nil, driver.NewError(driver.KindInternal, fmt.Sprintf("searchstore: _mget answered %d documents for %d addresses", len(res.Docs), len(addrs)), nil)
	}
	return res.Docs, nil
}

func (s *Store) readResult(a driver.Address, d *mgetDoc) driver.ReadResult {
	if len(d.Error) > 0 {
		err := classifyGetError(d.Error)
		if err.Kind == driver.KindNotFound {
			s.datasets.forget(a.Dataset)
		}
		return driver.ReadResult{Err: err}
	}
	if !d.Found {
		return driver.ReadResult{}
	}
	switch {
	case d.SeqNo == nil || d.PrimaryTerm == nil:
		return driver.ReadResult{Err: driver.NewError(driver.KindInternal, "searchstore: _mget answer lacks _seq_no or _primary_term", nil)}
	case len(d.Source) == 0 || d.Source[0] != '{':
		return driver.ReadResult{Err: driver.NewError(driver.KindInternal, "searchstore: the dataset returns no _source object (is _source disabled or filtered?)", nil)}
	}
	return driver.ReadResult{
		Found:    true,
		Doc:      driver.Document{JSON: d.Source},
		Revision: revision{seqNo: *d.SeqNo, primaryTerm: *d.PrimaryTerm}.encode(),
	}
}

// classifyGetError classifies the error of one _mget entry, which carries a type but no
// status. Reads change nothing, so transient-looking failures are safe to report retryable.
// A security_exception is a privilege the role lacks for the entry's index (authentication
// is per request): KindPermissionDenied, for that entry only.
func classifyGetError(raw json.RawMessage) *driver.Error {
	be := backendError(0, raw)
	if be.Type == "security_exception" {
		if ae, ok := search.ItemError(http.StatusForbidden, raw).(*search.AuthError); ok && ae.Block == "" {
			be.denial = ae
			return driver.NewError(driver.KindPermissionDenied, "searchstore: get refused; nothing was read", be)
		}
	}
	switch {
	case be.has("index_not_found_exception"):
		return driver.NewError(driver.KindNotFound, "searchstore: the dataset does not exist", be)
	case be.has("illegal_argument_exception") || be.has("action_request_validation_exception"):
		// e.g. an alias over several indices: a get needs exactly one.
		return driver.NewError(driver.KindInvalid, "searchstore: get refused", be)
	}
	for _, t := range append([]string{be.Type}, be.CausedBy...) {
		for _, transient := range []string{"rejected_execution", "circuit_breaking", "unavailable_shards", "no_shard_available", "node_not_connected", "node_closed", "connect_transport"} {
			if strings.Contains(t, transient) {
				return driver.NewError(driver.KindUnavailable, "searchstore: get failed", be)
			}
		}
	}
	return driver.NewError(driver.KindInternal, "searchstore: get failed", be)
}
