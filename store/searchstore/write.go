package searchstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/store/driver"
)

// Write implements driver.Store with at most one _bulk request per call:
//
//	put, unconditional          index
//	put, IfAbsent               create
//	put, IfRevision             index  with if_seq_no + if_primary_term
//	delete, unconditional       delete
//	delete, IfRevision          delete with if_seq_no + if_primary_term
//	delete, IfAbsent            no write: an _mget tells AlreadyExists from NotFound
//
// Before the _bulk, datasets not seen to exist within Options.DatasetTTL are checked, so that a
// write to a missing dataset fails with KindNotFound instead of creating an index.
func (s *Store) Write(ctx context.Context, writes []driver.Write, opts driver.WriteOptions) ([]driver.WriteResult, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]driver.WriteResult, len(writes))
	revs := make([]revision, len(writes))
	pending := make([]int, 0, len(writes))
	var absentDeletes []int
	for i := range writes {
		w := &writes[i]
		switch {
		case w.Kind != driver.Put && w.Kind != driver.Delete:
			out[i].Err = driver.NewError(driver.KindInvalid, "searchstore: unknown write kind", nil)
			continue
		case w.Cond.Kind == driver.IfRevision:
			r, err := decodeRevision(w.Cond.Revision)
			if err != nil {
				out[i].Err = err
				continue
			}
			revs[i] = r
		case w.Cond.Kind == driver.IfAbsent && w.Kind == driver.Delete:
			absentDeletes = append(absentDeletes, i)
			continue
		case w.Cond.Kind != driver.Unconditional && w.Cond.Kind != driver.IfAbsent:
			out[i].Err = driver.NewError(driver.KindInvalid, "searchstore: unknown condition", nil)
			continue
		}
		pending = append(pending, i)
	}
	if len(absentDeletes) > 0 {
		s.settleAbsentDeletes(ctx, writes, absentDeletes, out)
	}
	if !s.opts.SkipDatasetCheck {
		pending = s.checkDatasets(ctx, writes, pending, out)
	}
	if len(pending) > 0 {
		s.bulk(ctx, writes, revs, pending, out, opts.Visible)
	}
	return out, nil
}

// settleAbsentDeletes answers deletes conditioned on absence: such a delete can only find
// nothing to delete, so it is a read.
func (s *Store) settleAbsentDeletes(ctx context.Context, writes []driver.Write, idx []int, out []driver.WriteResult) {
	addrs := make([]driver.Address, len(idx))
	for j, i := range idx {
		addrs[j] = writes[i].Addr
	}
	docs, err := s.mget(ctx, addrs)
	for j, i := range idx {
		if err != nil {
			out[i].Err = err
			continue
		}
		switch r := s.readResult(addrs[j], &docs[j]); {
		case r.Err != nil:
			out[i].Err = r.Err
		case r.Found:
			out[i].Err = driver.NewError(driver.KindAlreadyExists, "searchstore: the record exists", nil)
		default:
			out[i].Outcome = driver.Absent
		}
	}
}

// checkDatasets asks the server about every dataset of pending that is not known to exist,
// fails the writes to datasets that do not, or whose check failed, and returns the rest.
// Nothing has been written when a check fails, so its failure kinds pass on unchanged.
func (s *Store) checkDatasets(ctx context.Context, writes []driver.Write, pending []int, out []driver.WriteResult) []int {
	now := s.opts.Now()
	var failed map[string]*driver.Error
	checked := make(map[string]bool)
	for _, i := range pending {
		name := writes[i].Addr.Dataset
		if checked[name] {
			continue
		}
		checked[name] = true
		if s.datasets.known(name, now) {
			continue
		}
		if err := s.datasetExists(ctx, name); err != nil {
			if failed == nil {
				failed = make(map[string]*driver.Error)
			}
			failed[name] = err
			continue
		}
		s.datasets.remember(name, now, s.opts.DatasetTTL)
	}
	if failed == nil {
		return pending
	}
	kept := pending[:0]
	for _, i := range pending {
		if err := failed[writes[i].Addr.Dataset]; err != nil {
			out[i].Err = err
			continue
		}
		kept = append(kept, i)
	}
	return kept
}

// datasetExists asks HEAD /<name>, which answers for an index or an alias alike.
func (s *Store) datasetExists(ctx context.Context, name string) *driver.Error {
	// esapi puts the name into the URL path unescaped.
	req := esapi.IndicesExistsRequest{Index: []string{pathEscape(name)}}
	ans, err := s.perform(ctx, func() esapi.Request { return req }, readOnly, "dataset check")
	if err != nil {
		return err
	}
	defer ans.Release()
	switch ans.Status {
	case http.StatusOK:
		return nil
	case http.StatusNotFound:
		return driver.NewError(driver.KindNotFound, "searchstore: dataset "+strconv.Quote(name)+" does not exist; nothing was written (this adapter never creates indices)", nil)
	case http.StatusUnauthorized, http.StatusForbidden:
		// A HEAD answer has no body, so no reason: ask the same question with a GET, whose
		// refusal names the action, the user and the privileges that would grant it.
		if why := s.denialReason(ctx, name, ans.Status); why != nil {
			return why
		}
	}
	return classifyStatus(&ans, readOnly, "dataset check")
}

// denialReason sends GET /<name> (the action HEAD /<name> is, indices:admin/get) after a HEAD
// was refused with status, and classifies its refusal; nil when the GET is not refused the
// same way, and the HEAD's answer stands.
func (s *Store) denialReason(ctx context.Context, name string, status int) *driver.Error {
	req := esapi.IndicesGetRequest{Index: []string{pathEscape(name)}, FilterPath: []string{"-*"}}
	ans, err := s.perform(ctx, func() esapi.Request { return req }, readOnly, "dataset check")
	if err != nil {
		return nil
	}
	defer ans.Release()
	if ans.Status != status {
		return nil
	}
	return classifyStatus(&ans, readOnly, "dataset check")
}

type bulkItem struct {
	Status      int             `json:"status"`
	Result      string          `json:"result"`
	SeqNo       *int64          `json:"_seq_no"`
	PrimaryTerm *int64          `json:"_primary_term"`
	Error       json.RawMessage `json:"error"`
}

// bulkEntry is one element of "items": an object whose only member is named after the action.
type bulkEntry struct {
	Index  *bulkItem `json:"index"`
	Create *bulkItem `json:"create"`
	Delete *bulkItem `json:"delete"`
}

func (e *bulkEntry) item() *bulkItem {
	switch {
	case e.Index != nil:
		return e.Index
	case e.Create != nil:
		return e.Create
	}
	return e.Delete
}

func action(w *driver.Write) string {
	switch {
	case w.Kind == driver.Delete:
		return "delete"
	case w.Cond.Kind == driver.IfAbsent:
		return "create"
	}
	return "index"
}

// appendBulk appends the NDJSON lines of one write.
func appendBulk(b []byte, w *driver.Write, rev revision) []byte {
	b = append(b, `{"`...)
	b = append(b, action(w)...)
	b = append(b, `":{"_index":`...)
	b = appendJSONString(b, w.Addr.Dataset)
	b = append(b, `,"_id":`...)
	b = appendJSONString(b, documentID(w.Addr.Key))
	if w.Cond.Kind == driver.IfRevision {
		b = append(b, `,"if_seq_no":`...)
		b = strconv.AppendInt(b, rev.seqNo, 10)
		b = append(b, `,"if_primary_term":`...)
		b = strconv.AppendInt(b, rev.primaryTerm, 10)
	}
	b = append(b, "}}\n"...)
	if w.Kind == driver.Put {
		b = appendSource(b, w.Doc.JSON)
		b = append(b, '\n')
	}
	return b
}

// bulk sends the pending writes as one _bulk request and fills in their results.
func (s *Store) bulk(ctx context.Context, writes []driver.Write, revs []revision, pending []int, out []driver.WriteResult, visible bool) {
	size := 0
	for _, i := range pending {
		size += 96 + len(writes[i].Addr.Dataset) + len(writes[i].Doc.JSON) + maxIDBytes/8
	}
	body := make([]byte, 0, size)
	for _, i := range pending {
		body = appendBulk(body, &writes[i], revs[i])
	}
	req := esapi.BulkRequest{Body: bytes.NewReader(body)}
	if visible {
		req.Refresh = "wait_for"
	}
	fail := func(err *driver.Error) {
		for _, i := range pending {
			out[i].Err = err
		}
	}
	ans, derr := s.perform(ctx, func() esapi.Request { return req }, mutating, "_bulk")
	if derr != nil {
		fail(derr)
		return
	}
	defer ans.Release()
	if ans.Status != http.StatusOK {
		fail(classifyStatus(&ans, mutating, "_bulk"))
		return
	}
	var res struct {
		Items []bulkEntry `json:"items"`
	}
	if err := json.Unmarshal(ans.Body, &res); err != nil {
		fail(driver.NewError(driver.KindOutcomeUnknown, "searchstore: _bulk: cannot decode the answer"+unknownSuffix, err))
		return
	}
	if len(res.Items) != len(pending) {
		fail(driver.NewError(driver.KindOutcomeUnknown, fmt.Sprintf("searchstore: _bulk answered %d items for %d writes", len(res.Items), len(pending))+unknownSuffix, nil))
		return
	}
	for j, i := range pending {
		out[i] = s.itemResult(&writes[i], res.Items[j].item())
	}
}

func (s *Store) itemResult(w *driver.Write, it *bulkItem) driver.WriteResult {
	act := action(w)
	if it == nil {
		return driver.WriteResult{Err: driver.NewError(driver.KindOutcomeUnknown, "searchstore: _bulk item without an action"+unknownSuffix, nil)}
	}
	deleteMissing := act == "delete" && it.Status == http.StatusNotFound && it.Result == "not_found" && len(it.Error) == 0
	if !deleteMissing && (len(it.Error) > 0 || it.Status < 200 || it.Status > 299) {
		err := classifyItem(act, it.Status, it.Error)
		if err.Kind == driver.KindNotFound {
			s.datasets.forget(w.Addr.Dataset)
		}
		return driver.WriteResult{Err: err}
	}
	var outcome driver.Outcome
	switch it.Result {
	case "created":
		outcome = driver.Created
	case "updated":
		outcome = driver.Updated
	case "deleted":
		return driver.WriteResult{Outcome: driver.Deleted}
	case "not_found":
		if act == "delete" {
			return driver.WriteResult{Outcome: driver.Absent}
		}
	}
	switch {
	case outcome == 0 || act == "delete":
		return driver.WriteResult{Err: driver.NewError(driver.KindOutcomeUnknown, fmt.Sprintf("searchstore: %s answered with result %q", act, it.Result)+unknownSuffix, nil)}
	case it.SeqNo == nil || it.PrimaryTerm == nil:
		// Applied, but without the revision a result must carry.
		return driver.WriteResult{Err: driver.NewError(driver.KindInternal, "searchstore: "+act+" was applied, but its answer lacks _seq_no or _primary_term", nil)}
	}
	return driver.WriteResult{Outcome: outcome, Revision: revision{seqNo: *it.SeqNo, primaryTerm: *it.PrimaryTerm}.encode()}
}
