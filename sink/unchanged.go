package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/search"
)

// Unchanged values (doc.go, "Unchanged values"): an update whose After holds cdc.Unchanged{}
// (a TOASTed value PostgreSQL did not resend) gets the value from the row's previous state --
// an older change of the row in the same batch, else the document the index holds -- before
// it is encoded. The sink is the only writer of its indices, so the stored document is the
// row's state as of the last change applied.

// unchangedFill is what an index action whose row still holds cdc.Unchanged values needs.
type unchangedFill struct {
	// srcStart and srcEnd locate src in the batch's id arena while plan builds it.
	srcStart, srcEnd int
	// src is the _id whose previous state holds the values: the action's own, or the old _id
	// of an update that changed the key (whose document the update deletes).
	src string
	// since is the version of the change that first needed the stored document (the
	// action's own, or that of an older change in the batch it took its other values from):
	// a stored document at or above it is a newer state than the one to take values from.
	since int64
	// missing, when set, says why no stored document can supply the values (the action is
	// dead-lettered with it).
	missing string
	// own is set once row is the sink's copy: the batch's rows are never modified.
	own bool
}

// newUnchangedFill is the fill of base, an update whose row holds Unchanged values, planned
// after the actions in acts: when the update moved the key, the delete of the old _id was
// appended just before it, and that _id holds the previous state.
func newUnchangedFill(base *action, acts []action) *unchangedFill {
	f := &unchangedFill{srcStart: base.idStart, srcEnd: base.idEnd}
	if n := len(acts); n > 0 && acts[n-1].event == base.event && acts[n-1].del {
		f.srcStart, f.srcEnd = acts[n-1].idStart, acts[n-1].idEnd
	}
	return f
}

// Dead-letter reasons of rows whose unchanged values cannot be found. They name columns only.
const (
	unchangedPrefix = "unchanged_value_unavailable: column "
	unchangedHint   = "; set REPLICA IDENTITY FULL on the table to have the source send every value"
)

func unchangedReason(column, why string) string {
	return unchangedPrefix + strconv.Quote(column) + ": the source did not resend an unchanged TOAST value and " + why + unchangedHint
}

// fillFromBatch fills the Unchanged values of acts (plan's actions in batch order, before
// coalescing) from the newest older action of the same _id in the batch whose value is known,
// and notes for each action still lacking values which stored document supplies them. The
// rows of an action's own event are looked at only after the event: an update that moves the
// key deletes the old _id at its own version, and the state before it is what counts. It
// returns the number of values filled.
func fillFromBatch(acts []action, ids string) (filled int) {
	latest := make(map[actionKey]int)
	first := 0 // the first action of the current event
	note := func(end int) {
		for j := first; j < end; j++ {
			k := actionKey{acts[j].index, ids[acts[j].idStart:acts[j].idEnd]}
			if p, ok := latest[k]; !ok || acts[j].version >= acts[p].version {
				latest[k] = j
			}
		}
	}
	for i := range acts {
		a := &acts[i]
		if a.event != acts[first].event {
			note(i)
			first = i
		}
		f := a.fill
		if f == nil {
			continue
		}
		f.src, f.since = ids[f.srcStart:f.srcEnd], a.version
		p, ok := latest[actionKey{a.index, f.src}]
		if !ok || acts[p].version >= a.version {
			continue // no older change of the row here: the stored document it is
		}
		q := &acts[p]
		if q.del {
			f.missing = "its previous change in the batch deleted the row"
			continue
		}
		filled += takeKnown(a, q)
		switch {
		case !cdc.HasUnchanged(a.row):
			a.fill = nil
		case q.fill != nil:
			// What is still missing q lacked as well: it comes from where q's comes from.
			f.src, f.since, f.missing = q.fill.src, q.fill.since, q.fill.missing
		default:
			f.missing = "its previous change in the batch has no such column"
		}
	}
	return filled
}

// takeKnown copies into a's row every value a lacks that q's row knows, by column name when
// their schemas differ, and returns how many.
func takeKnown(a, q *action) int {
	n := 0
	for i, v := range a.row {
		if _, ok := v.(cdc.Unchanged); !ok {
			continue
		}
		j := i
		if q.schema != a.schema {
			j = columnIndex(q.schema, a.schema.Columns[i].Name)
		}
		if j < 0 || j >= len(q.row) {
			continue
		}
		w := q.row[j]
		if _, ok := w.(cdc.Unchanged); ok {
			continue
		}
		a.fill.ownRow(a)
		a.row[i] = w
		n++
	}
	return n
}

// ownRow makes a's row the sink's copy before its first change.
func (f *unchangedFill) ownRow(a *action) {
	if !f.own {
		a.row = slices.Clone(a.row)
		f.own = true
	}
}

func columnIndex(s *cdc.TableSchema, name string) int {
	for i := range s.Columns {
		if s.Columns[i].Name == name {
			return i
		}
	}
	return -1
}

// storedValue is a field's JSON as the index's stored document holds it: already normalized
// when it was written, so it is embedded as it is (appendValue).
type storedValue []byte

// UnchangedStats describes how one Write filled unchanged values.
type UnchangedStats struct {
	// Rows is the number of rows to write (after coalescing) that still lacked values once
	// the batch's own older changes had supplied theirs: looked up in the index, or
	// dead-lettered at once.
	Rows int
	// FromBatch and FromIndex count the values taken from an older change in the batch and
	// from the stored documents.
	FromBatch, FromIndex int
	// Superseded counts rows not written because the index already holds a newer state of the
	// row; DeadLettered rows whose values no stored document held.
	Superseded, DeadLettered int
	// Requests is the number of _mget requests (one per index that had rows to look up) and
	// Duration their total time.
	Requests int
	Duration time.Duration
}

// UnchangedObserver is an optional interface of an Observer: when the Observer implements it,
// the sink reports what each Write that met unchanged values did about them.
type UnchangedObserver interface {
	UnchangedFilled(UnchangedStats)
}

// fillUnchanged runs after claimAll: it fills from the index what plan could not fill from the
// batch, and tells an UnchangedObserver what was done.
func (s *Sink) fillUnchanged(ctx context.Context, acts []action, dead []cdc.DeadLetter) ([]action, []cdc.DeadLetter, error) {
	st := UnchangedStats{FromBatch: s.filledInBatch}
	s.filledInBatch = 0
	pending := false
	for i := range acts {
		if acts[i].fill != nil {
			pending = true
			break
		}
	}
	if !pending && st.FromBatch == 0 {
		return acts, dead, nil
	}
	var err error
	if pending {
		acts, dead, err = s.fillFromIndex(ctx, acts, dead, &st)
	}
	if o, ok := s.opts.Observer.(UnchangedObserver); ok {
		o.UnchangedFilled(st)
	}
	return acts, dead, err
}

// fillFromIndex fills the values the batch could not supply from the documents the index holds,
// with one _mget per index through its write alias (the claims are known by now). Actions that
// are written no more (superseded, dead-lettered) are removed from acts.
func (s *Sink) fillFromIndex(ctx context.Context, acts []action, dead []cdc.DeadLetter, st *UnchangedStats) ([]action, []cdc.DeadLetter, error) {
	var order []string
	byIndex := map[string][]int{}
	drop := make([]bool, len(acts))
	for i := range acts {
		a := &acts[i]
		if a.fill == nil {
			continue
		}
		st.Rows++
		if a.fill.missing != "" {
			st.DeadLettered++
			dead = append(dead, cdc.DeadLetter{Index: a.event, Reason: unchangedReason(firstUnchanged(a), a.fill.missing)})
			drop[i] = true
			continue
		}
		if byIndex[a.index] == nil {
			order = append(order, a.index)
		}
		byIndex[a.index] = append(byIndex[a.index], i)
	}
	for _, index := range order {
		var err error
		if dead, err = s.mgetStored(ctx, index, acts, byIndex[index], drop, dead, st); err != nil {
			return nil, nil, err
		}
	}
	n := 0
	for i := range acts {
		if !drop[i] {
			acts[n] = acts[i]
			n++
		}
	}
	clear(acts[n:])
	return acts[:n], dead, nil
}

func firstUnchanged(a *action) string {
	for i, v := range a.row {
		if _, ok := v.(cdc.Unchanged); ok {
			return a.schema.Columns[i].Name
		}
	}
	return ""
}

// mgetDoc is one entry of an _mget answer.
type mgetDoc struct {
	Found   bool            `json:"found"`
	Version int64           `json:"_version"`
	Source  json.RawMessage `json:"_source"`
	Error   *mgetError      `json:"error"`
}

// mgetError is a document's error in an _mget answer: its type, and the whole object for
// what a security_exception names (search.ItemError).
type mgetError struct {
	Type string
	raw  json.RawMessage
}

func (e *mgetError) UnmarshalJSON(b []byte) error {
	var t struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return err
	}
	e.Type, e.raw = t.Type, bytes.Clone(b)
	return nil
}

// mgetStored reads, in one real-time _mget through the index's write alias, the stored
// document of every action at pos, and the action's own _id too when that differs (an update
// that moved the key: its own document shows whether it was applied before). It asks for the
// whole _source and no filter_path: both engines re-serialize a filtered _source, which turns
// JSON numbers into doubles (digits of large numbers lost, 1e-5 -> 1.0E-5). The answer decides
// per action: the index already newer -> superseded (not written); no document or no such
// field -> dead letter; else the stored fields' JSON fill the row.
func (s *Sink) mgetStored(ctx context.Context, index string, acts []action, pos []int, drop []bool, dead []cdc.DeadLetter, st *UnchangedStats) ([]cdc.DeadLetter, error) {
	type slot struct {
		act    int
		target bool // the action's own _id (asked for its version only)
	}
	slots := make([]slot, 0, len(pos))
	body := append(make([]byte, 0, 64*len(pos)), `{"docs":[`...)
	for _, i := range pos {
		a := &acts[i]
		if len(slots) > 0 {
			body = append(body, ',')
		}
		if a.fill.src != a.id {
			// First, so that an action found superseded is not dead-lettered by its source.
			body = appendJSONText(append(body, `{"_id":`...), a.id)
			body = append(body, `,"_source":false},`...)
			slots = append(slots, slot{i, true})
		}
		body = appendJSONText(append(body, `{"_id":`...), a.fill.src)
		body = append(body, '}')
		slots = append(slots, slot{i, false})
	}
	body = append(body, "]}"...)

	docs, err := s.mget(ctx, &acts[pos[0]], body, len(slots), st)
	if err != nil {
		return nil, err
	}
	for k, d := range docs {
		if d.Error != nil && d.Error.Type == "index_not_found_exception" {
			return nil, s.lostDestination(ctx, &acts[slots[k].act])
		}
		if d.Error != nil && d.Error.Type == "security_exception" {
			return nil, cdc.Permanent(fmt.Errorf("elasticsearch sink %q: _mget of unchanged values: %w", s.cfg.ID, search.ItemError(http.StatusForbidden, d.Error.raw)))
		}
		if d.Error != nil {
			// A shard not started, say: try again with the batch.
			return nil, &cdc.BackpressureError{Err: fmt.Errorf("elasticsearch sink %q: _mget of unchanged values: a document could not be read (%s)", s.cfg.ID, d.Error.Type)}
		}
	}
	for k, sl := range slots {
		a, d := &acts[sl.act], &docs[k]
		if drop[sl.act] {
			continue
		}
		superseded := false
		switch {
		case sl.target:
			superseded = d.Found && d.Version >= a.version
		case d.Found:
			// Stored at or after the change that needed it: the index holds a newer state
			// than the one to take values from, so this batch was applied before and is
			// being replayed; the write would be a 409 or is overtaken in the replay.
			superseded = d.Version >= a.fill.since
		}
		if superseded {
			st.Superseded++
			drop[sl.act] = true
			continue
		}
		if sl.target {
			continue
		}
		if !d.Found {
			st.DeadLettered++
			drop[sl.act] = true
			dead = append(dead, cdc.DeadLetter{Index: a.event, Reason: unchangedReason(firstUnchanged(a),
				"the index holds no document to take it from")})
			continue
		}
		if reason := takeStored(a, d.Source, st); reason != "" {
			st.DeadLettered++
			drop[sl.act] = true
			dead = append(dead, cdc.DeadLetter{Index: a.event, Reason: reason})
		}
	}
	return dead, nil
}

// takeStored fills a's Unchanged values from the stored document's fields, or says why not.
func takeStored(a *action, source json.RawMessage, st *UnchangedStats) string {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(source, &fields); err != nil {
		return unchangedReason(firstUnchanged(a), "the index's document does not read as a JSON object")
	}
	for i, v := range a.row {
		if _, ok := v.(cdc.Unchanged); !ok {
			continue
		}
		name := a.schema.Columns[i].Name
		raw, ok := fields[name]
		if !ok {
			return unchangedReason(name, "the index's document lacks the field")
		}
		a.fill.ownRow(a)
		a.row[i] = storedValue(raw)
		st.FromIndex++
	}
	a.fill = nil
	return ""
}

// mget sends one _mget to the write alias of a's index, bounded by request_timeout, and returns
// its n entries. A transport failure, 5xx, 429 or 408 is backpressure (a connection loss
// also makes the next Write claim again); a 404 for the alias is the refusal _bulk meets
// (fenced or destination_missing); any other status is fatal.
func (s *Sink) mget(ctx context.Context, a *action, body []byte, n int, st *UnchangedStats) ([]mgetDoc, error) {
	const what = "_mget of unchanged values"
	alias := s.liveClaim(a.index).WriteAlias() // before toTargets: a.index is the table's name
	cctx, cancel := context.WithTimeout(ctx, time.Duration(s.cfg.RequestTimeout))
	defer cancel()
	realtime := true
	start := time.Now()
	defer func() { st.Requests++; st.Duration += time.Since(start) }()
	ans, err := search.Do(cctx, s.tp, esapi.MgetRequest{Index: alias, Body: bytes.NewReader(body), Realtime: &realtime})
	if err != nil {
		return nil, s.transportError(ctx, what, err)
	}
	defer ans.Release()
	switch status := ans.Status; {
	case status == http.StatusOK:
	case status == http.StatusNotFound && bytes.Contains(ans.Body, []byte(`"index_not_found_exception"`)):
		return nil, s.lostDestination(ctx, a)
	default:
		return nil, s.statusError(what, status, ans.Header, ans.Body)
	}
	var out struct {
		Docs []mgetDoc `json:"docs"`
	}
	if err := json.Unmarshal(ans.Body, &out); err != nil || len(out.Docs) != n {
		return nil, &cdc.BackpressureError{Err: fmt.Errorf("elasticsearch sink %q: %s: unreadable answer", s.cfg.ID, what)}
	}
	return out.Docs, nil
}
