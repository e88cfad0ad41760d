package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/esfence"
	"github.com/tributary-dev/tributary/internal/search"
)

// span is one action's bytes in a chunk's body.
type span struct {
	start, end int
	act        *action
}

// chunk is one _bulk request.
type chunk struct {
	body  []byte
	spans []span
	epoch uint64 // the sink's claimEpoch when the chunk was encoded
}

// encode renders the actions into _bulk bodies: one per batch unless the batch exceeds
// batch.max_docs or batch.max_bytes. A row the normalizer rejects is dead-lettered.
func (s *Sink) encode(acts []action, dead []cdc.DeadLetter) ([]*chunk, []cdc.DeadLetter, error) {
	return s.encodeAliases(acts, dead, func(index string) string { return s.claims[index].WriteAlias() })
}

// encodeWithAlias encodes with one alias for every action (benchmarks without a cluster).
func (s *Sink) encodeWithAlias(acts []action, dead []cdc.DeadLetter, alias string) ([]*chunk, []cdc.DeadLetter, error) {
	return s.encodeAliases(acts, dead, func(string) string { return alias })
}

func (s *Sink) encodeAliases(acts []action, dead []cdc.DeadLetter, aliasOf func(string) string) ([]*chunk, []cdc.DeadLetter, error) {
	var chunks []*chunk
	lastIndex, alias := "", ""
	perChunk := min(len(acts), max(s.cfg.Batch.MaxDocs, 1))
	cur := &chunk{body: s.spareBody[:0], spans: make([]span, 0, perChunk)}
	s.spareBody = nil
	if cap(cur.body) == 0 {
		cur.body = make([]byte, 0, 256*len(acts)+64)
	}
	nextCap := 0 // the body size of a chunk opened by the previous one's limit
	for i := range acts {
		a := &acts[i]
		if a.index != lastIndex || alias == "" {
			lastIndex, alias = a.index, aliasOf(a.index)
		}
		if cur.spans == nil {
			// Sized like the chunk before: growing it by appends would copy it several
			// times over. Made only now, so that a limit met by the last action costs
			// nothing.
			cur.body = make([]byte, 0, nextCap)
			cur.spans = make([]span, 0, min(len(acts)-i, perChunk))
		}
		start := len(cur.body)
		b := cur.body
		if a.del {
			b = append(b, `{"delete":{"_index":`...)
		} else {
			b = append(b, `{"index":{"_index":`...)
		}
		b = appendJSONText(b, alias)
		b = append(b, `,"_id":`...)
		b = appendJSONText(b, a.id)
		b = append(b, `,"version":`...)
		b = strconv.AppendInt(b, a.version, 10)
		b = append(b, `,"version_type":"external"}}`+"\n"...)
		if !a.del {
			if a.info.guards == nil {
				// Not derived from the index's mapping (encodeWithAlias, no cluster): the
				// configured options' generated fields decide, as GenerateMapping made them.
				a.info.guards = guardsFor(a.schema, nil, s.configuredMapping())
			}
			var err error
			b, err = appendDocument(b, a.schema, a.row, MappingOptions{}, a.info.guards)
			if err != nil {
				cur.body = b[:start]
				dead = append(dead, cdc.DeadLetter{Index: a.event, Reason: rowReason(err)})
				continue
			}
			b = append(b, '\n')
		}
		cur.body = b
		cur.spans = append(cur.spans, span{start, len(b), a})
		if len(cur.spans) >= s.cfg.Batch.MaxDocs || len(cur.body) >= s.cfg.Batch.MaxBytes {
			if len(cur.body) > s.cfg.Batch.MaxBytes && len(cur.spans) > 1 {
				// The last action pushed the body over the limit: it opens the next chunk.
				last := cur.spans[len(cur.spans)-1]
				next := &chunk{body: make([]byte, 0, min(len(cur.body)+len(cur.body)/8, s.cfg.Batch.MaxBytes+4096)),
					spans: make([]span, 0, min(len(acts)-i, perChunk))}
				next.body = append(next.body, cur.body[last.start:last.end]...)
				next.spans = append(next.spans, span{0, last.end - last.start, last.act})
				cur.body, cur.spans = cur.body[:last.start], cur.spans[:len(cur.spans)-1]
				chunks = append(chunks, cur)
				cur = next
				continue
			}
			chunks = append(chunks, cur)
			nextCap = min(len(cur.body)+len(cur.body)/8, s.cfg.Batch.MaxBytes+4096)
			cur = &chunk{}
		}
	}
	if len(cur.spans) > 0 {
		chunks = append(chunks, cur)
	}
	return chunks, dead, nil
}

// rowReason is the dead-letter reason of a row the normalizer rejected: the column and the
// rule, never the value.
func rowReason(err error) string {
	var re *RowError
	if errors.As(err, &re) {
		return "serialization failure: column " + strconv.Quote(re.Column) + ": " + re.Reason
	}
	return "serialization failure: " + err.Error()
}

// outcome is what one chunk came to.
type outcome struct {
	dead     []cdc.DeadLetter
	conflict error // a *esfence.ConflictError: fatal
	fatal    error
	bp       *cdc.BackpressureError
	epoch    uint64 // the chunk's claim epoch
	// authRefused is set by classify for an item refused 401 or 403; itemRefused then makes
	// fatal say what the cluster named.
	authRefused bool
}

// itemRefused turns an item refused 401 or 403 (outcome.authRefused) into a permanent fatal
// error that wraps the *search.AuthError of the first such item of the answer.
func (s *Sink) itemRefused(o *outcome, ans []byte) {
	if !o.authRefused || o.fatal != nil || o.conflict != nil {
		return
	}
	var full struct {
		Items []map[string]struct {
			Status int             `json:"status"`
			Error  json.RawMessage `json:"error"`
		} `json:"items"`
	}
	err := search.AnswerError(http.StatusForbidden, nil, nil) // when the answer cannot be read again
	if json.Unmarshal(ans, &full) == nil {
	items:
		for _, m := range full.Items {
			for _, it := range m {
				if ae := search.ItemError(it.Status, it.Error); ae != nil {
					err = ae
					break items
				}
			}
		}
	}
	o.fatal = cdc.Permanent(fmt.Errorf("elasticsearch sink %q: _bulk item: %w", s.cfg.ID, err))
}

// sendAll sends the chunks, up to concurrency at a time, and merges their outcomes: a
// refusal first (fatal), then any other fatal error, then backpressure (the whole batch is
// offered again, which versions make safe), else the dead letters.
func (s *Sink) sendAll(ctx context.Context, chunks []*chunk) ([]cdc.DeadLetter, error) {
	outs := make([]outcome, len(chunks))
	if len(chunks) == 1 {
		outs[0] = s.send(ctx, chunks[0])
	} else {
		sem := make(chan struct{}, s.cfg.Concurrency)
		var wg sync.WaitGroup
		for i, c := range chunks {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				outs[i] = s.send(ctx, c)
				<-sem
			}()
		}
		wg.Wait()
	}
	var dead []cdc.DeadLetter
	var bp *cdc.BackpressureError
	var fatal error
	for _, o := range outs {
		if o.conflict != nil {
			return nil, o.conflict
		}
		if o.fatal != nil && fatal == nil {
			fatal = o.fatal
		}
		if o.bp != nil && bp == nil {
			bp = o.bp
		}
		dead = append(dead, o.dead...)
	}
	if fatal != nil {
		return nil, fatal
	}
	if bp != nil {
		return nil, bp
	}
	return dead, nil
}

// bulkItem is one item of a _bulk answer. Values, not pointers, and no reason text: the
// reason is never used (it may quote field values) and each field read costs an allocation.
type bulkItem struct {
	Status int `json:"status"`
	Error  struct {
		Type     string `json:"type"`
		CausedBy struct {
			Type string `json:"type"`
		} `json:"caused_by"`
	} `json:"error"`
}

func (it *bulkItem) failed() bool { return it.Error.Type != "" }

// send sends one chunk and retries its per-item 429s (and per-item 5xx) a bounded number of
// times, with only those items, before giving up with backpressure.
func (s *Sink) send(ctx context.Context, c *chunk) outcome {
	o := outcome{epoch: c.epoch}
	body, spans := c.body, c.spans
	backoff := s.opts.ItemRetryBackoff
	for attempt := 0; ; attempt++ {
		start := time.Now()
		ans, err := s.bulk(ctx, body)
		st := BulkStats{Actions: len(spans), Bytes: len(body), Duration: time.Since(start)}
		voided := int(s.voided.Swap(0)) // changes the schema events voided (schemaevents.go)
		if err != nil {
			st.Superseded += voided
			s.observer().BulkDone(st)
			// Connection loss or timeout: nothing durable can be said (transportError also
			// makes the next Write claim again first, as after any reconnect).
			err = s.transportError(ctx, "_bulk", err)
			if errors.As(err, &o.bp) {
				return o
			}
			o.fatal = err
			return o
		}
		st.Status = ans.Status
		retry, done := s.judge(ctx, &o, ans.Status, ans.Header, ans.Body, spans, &st)
		ans.Release()
		st.Superseded += voided
		s.observer().BulkDone(st)
		if done {
			return o
		}
		if attempt >= s.cfg.ItemRetries {
			o.bp = &cdc.BackpressureError{Err: fmt.Errorf("elasticsearch sink %q: %d actions still rejected as overloaded after %d retries", s.cfg.ID, len(retry), attempt)}
			return o
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			o.fatal = ctx.Err()
			return o
		case <-t.C:
		}
		backoff *= 2
		// The next request holds only the retried actions; items already dead-lettered
		// stay in o.dead.
		nb := make([]byte, 0, len(body))
		ns := make([]span, 0, len(retry))
		for _, sp := range retry {
			st := len(nb)
			nb = append(nb, body[sp.start:sp.end]...)
			ns = append(ns, span{st, len(nb), sp.act})
		}
		body, spans = nb, ns
	}
}

// judge classifies one answer into o and counts the items' outcomes into st. It returns the
// spans to retry, or done when the chunk is finished (success, dead letters, a refusal,
// backpressure or a fatal error).
func (s *Sink) judge(ctx context.Context, o *outcome, status int, hdr http.Header, ans []byte, spans []span, st *BulkStats) (retry []span, done bool) {
	if status == http.StatusRequestEntityTooLarge && len(spans) == 1 {
		st.DeadLettered++
		o.dead = append(o.dead, cdc.DeadLetter{Index: spans[0].act.event,
			Reason: "the document exceeds the cluster's http.max_content_length"})
		return nil, true
	}
	if status != http.StatusOK {
		if err := s.statusError("_bulk", status, hdr, ans); !errors.As(err, &o.bp) {
			o.fatal = err
		}
		return nil, true
	}
	errs, ok := answerHasErrors(ans)
	if !ok {
		o.bp = &cdc.BackpressureError{Err: fmt.Errorf("elasticsearch sink %q: unreadable _bulk answer", s.cfg.ID)}
		return nil, true
	}
	if !errs {
		st.Applied = len(spans)
		return nil, true
	}
	if superseded, ok := allSuperseded(ans, len(spans)); ok {
		st.Applied, st.Superseded = len(spans)-superseded, superseded
		return nil, true
	}
	if n, ok := s.judgeScanned(ctx, o, ans, spans, st, &retry); ok {
		if n < 0 {
			s.itemRefused(o, ans)
			return nil, true // a refusal
		}
		return retry, len(retry) == 0
	}
	// The scanner could not read the answer (it classified nothing): encoding/json decides.
	// Items as a struct of the four action names rather than a map: no map per item.
	var full struct {
		Items []struct {
			Index  bulkItem `json:"index"`
			Create bulkItem `json:"create"`
			Update bulkItem `json:"update"`
			Delete bulkItem `json:"delete"`
		} `json:"items"`
	}
	if err := json.Unmarshal(ans, &full); err != nil || len(full.Items) != len(spans) {
		o.bp = &cdc.BackpressureError{Err: fmt.Errorf("elasticsearch sink %q: _bulk answer does not match the request", s.cfg.ID)}
		return nil, true
	}
	for k := range full.Items {
		m := &full.Items[k]
		it := &m.Index
		switch {
		case m.Delete.Status != 0:
			it = &m.Delete
		case m.Create.Status != 0:
			it = &m.Create
		case m.Update.Status != 0:
			it = &m.Update
		}
		v := itemView{status: it.Status}
		if it.failed() {
			v.errType, v.causedBy = []byte(it.Error.Type), []byte(it.Error.CausedBy.Type)
		}
		if !s.classify(ctx, o, v, spans[k], st, &retry) {
			s.itemRefused(o, ans)
			return nil, true
		}
	}
	return retry, len(retry) == 0
}

// judgeScanned classifies the items with the scanner. ok is false when the answer is not
// readable by it or does not have one item per span; n is -1 after a refusal.
func (s *Sink) judgeScanned(ctx context.Context, o *outcome, ans []byte, spans []span, st *BulkStats, retry *[]span) (n int, ok bool) {
	sc, ok := newItemScanner(ans)
	if !ok {
		return 0, false
	}
	// A first pass checks the shape and the count before anything is classified, so that a
	// fallback never follows half-applied outcomes (and a refusal's lookup is not repeated).
	check := sc
	for n = 0; ; n++ {
		_, more, ok := check.next(n == 0)
		if !ok {
			return 0, false
		}
		if !more {
			break
		}
	}
	if n != len(spans) {
		return 0, false
	}
	for k := range spans {
		it, _, _ := sc.next(k == 0)
		if !s.classify(ctx, o, it, spans[k], st, retry) {
			return -1, true
		}
	}
	return n, true
}

// classify files one item's outcome; false after a refusal, which ends the chunk.
func (s *Sink) classify(ctx context.Context, o *outcome, it itemView, sp span, st *BulkStats, retry *[]span) bool {
	failed := it.errType != nil
	switch {
	case it.status >= 200 && it.status <= 299:
		st.Applied++
	case it.status == http.StatusNotFound && !failed:
		// A delete of a document that is not there ("result":"not_found"): the cluster still
		// records the delete's version, which is all that matters.
		st.Applied++
	case it.status == http.StatusConflict && (!failed || string(it.errType) == "version_conflict_engine_exception"):
		// version_conflict_engine_exception: a newer version is already there.
		st.Superseded++
	case it.status == http.StatusTooManyRequests || it.status >= 500:
		st.Retried++
		*retry = append(*retry, sp)
	case it.status == http.StatusUnauthorized || it.status == http.StatusForbidden:
		// A privilege missing on the index, or a block: every document would be refused
		// alike, so the pipeline stops (itemRefused says why) rather than dead-letter them.
		o.authRefused = true
		return false
	case it.status == http.StatusNotFound && string(it.errType) == "index_not_found_exception":
		if o.epoch != s.claimEpoch.Load() {
			// This sink reclaimed its indices after the chunk was encoded (a concurrent
			// Write after a connection loss): the alias was rotated by us, not fenced. The
			// batch is offered again, with the new aliases.
			if o.bp == nil {
				o.bp = &cdc.BackpressureError{Err: fmt.Errorf("elasticsearch sink %q: the write aliases were renewed while the batch was in flight", s.cfg.ID)}
			}
			return false
		}
		o.conflict = s.lostDestination(ctx, sp.act)
		return false
	default:
		st.DeadLettered++
		o.dead = append(o.dead, cdc.DeadLetter{Index: sp.act.event, Reason: itemReason(it)})
	}
	return true
}

// itemReason says why the cluster rejected a document, by error types only: the reason texts
// of mapping errors quote field values ("Preview of field's value").
func itemReason(it itemView) string {
	b := make([]byte, 0, 128)
	b = append(b, "rejected by the cluster: status "...)
	b = strconv.AppendInt(b, int64(it.status), 10)
	if it.errType != nil {
		b = append(append(b, ' '), it.errType...)
		if len(it.causedBy) > 0 {
			b = append(append(b, ", caused by "...), it.causedBy...)
		}
	}
	return string(b)
}

// lostDestination turns an index_not_found answer for the write alias into the refusal: the
// alias was rotated away by another claim (fenced), or the index is gone
// (destination_missing). The claim is dropped either way.
func (s *Sink) lostDestination(ctx context.Context, a *action) error {
	class := esfence.Fenced
	detail := "the write alias is gone: another claim rotated the fence"
	cctx, cancel := context.WithTimeout(ctx, time.Duration(s.cfg.RequestTimeout))
	defer cancel()
	index := a.index
	if c := s.liveClaim(index); c != nil && s.claims[index] == nil {
		index = c.Index() // a table's name (an _mget before toTargets): its live generation
	}
	if ans, err := search.Do(cctx, s.tp, esapi.IndicesExistsRequest{Index: []string{index}}); err == nil {
		if ans.Status == http.StatusNotFound {
			class = esfence.DestinationMissing
			detail = "the index was deleted; it is never recreated (delete the pipeline to start over)"
		}
		ans.Release()
	}
	return &esfence.ConflictError{Class: class, Index: a.index, Table: a.table, Detail: detail}
}

// answerHasErrors reads the answer's top-level "errors" flag. Both engines put it before
// "items" (Elasticsearch first, OpenSearch after "took"), so it is looked for in the first
// bytes; the key cannot occur inside a string, and a match before "items" is top-level.
// Otherwise the whole answer is decoded.
func answerHasErrors(ans []byte) (errs, ok bool) {
	head := ans[:min(len(ans), 96)]
	key := []byte(`"errors":`)
	i := bytes.Index(head, key)
	if it := bytes.Index(head, []byte(`"items":`)); i > 0 && (it < 0 || i < it) {
		rest := ans[i+len(key):]
		switch {
		case bytes.HasPrefix(rest, []byte("false")):
			return false, true
		case bytes.HasPrefix(rest, []byte("true")):
			return true, true
		}
	}
	var h struct {
		Errors *bool `json:"errors"`
	}
	if err := json.Unmarshal(ans, &h); err != nil || h.Errors == nil {
		return false, false
	}
	return *h.Errors, true
}

// allSuperseded is the fast path for the common answer with errors: a replayed batch, where
// every item is applied or a 409 version conflict. It counts the "status": keys; the byte
// sequence "status": cannot occur inside a JSON string (quotes there are escaped), so each
// match is a key. Exactly one per item, each 2xx or 409, means nothing else to do: ok, with
// the number of 409s. Anything else -- another status, a nested status key, pretty-printed
// JSON -- is not ok and the answer is decoded in full.
func allSuperseded(ans []byte, items int) (superseded int, ok bool) {
	key := []byte(`"status":`)
	n := 0
	for rest := ans; ; {
		i := bytes.Index(rest, key)
		if i < 0 {
			break
		}
		rest = rest[i+len(key):]
		if len(rest) < 4 || (rest[3] >= '0' && rest[3] <= '9') {
			return 0, false
		}
		switch st := string(rest[:3]); {
		case st == "409":
			superseded++
		case st[0] == '2' && st[1] >= '0' && st[1] <= '9' && st[2] >= '0' && st[2] <= '9':
		default:
			return 0, false
		}
		n++
	}
	return superseded, n == items
}

var requireAlias = true

// bulkAnswerFields is all judge reads of an answer. Asking the cluster for only these cuts
// an item from about 200 bytes (index, id, version, seq_no, shards, ...) to about 25, which
// both sides would otherwise write and read for every document. The filter keeps the items'
// order, and "errors" still comes before "items". A failed item's reason is kept for a 401 or
// 403 item, whose refusal it names (itemRefused); judge reads no other reason (they quote
// document values), and only failed items carry one.
var bulkAnswerFields = []string{"errors", "items.*.status", "items.*.error.type", "items.*.error.reason", "items.*.error.caused_by.type"}

// bulk sends one _bulk request and reads the whole answer (pooled: the caller releases it).
func (s *Sink) bulk(ctx context.Context, body []byte) (search.Answer, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(s.cfg.RequestTimeout))
	defer cancel()
	return search.Do(ctx, s.tp, esapi.BulkRequest{Body: bytes.NewReader(body), RequireAlias: &requireAlias,
		Refresh: s.cfg.Refresh, FilterPath: bulkAnswerFields})
}

// appendJSONText appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, as
// encoding/json does.
func appendJSONText(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, `\ufffd`...)
		} else if r == '\u2028' || r == '\u2029' {
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}
