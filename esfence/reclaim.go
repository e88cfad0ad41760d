package esfence

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/internal/search"
	"github.com/tributary-dev/tributary/statestore"
)

// Claim rounds (doc.go, "Claim rounds"): after a reconnect a sink claims every index it holds
// again, each claim proving the marker and the record and rotating the fence. Claimed one by
// one that costs four requests per index, one after the other; on a network that drops
// connections every few seconds no such sequence completes. ReclaimTables does the same
// claims in one round: the three reads at once (cluster_uuid, action.auto_create_index, one
// GET of every index), every proof locally, then one _aliases request that rotates every
// index's fence -- atomic across indices, so a round either moved every fence or none.

// readAttempts bounds how often a claim round sends one of its reads (idempotent GETs) when
// the connection fails under it; readPause is the first pause, doubling.
const (
	readAttempts = 3
	readPause    = 50 * time.Millisecond
)

// maxNamesPerGet bounds the length of the index names one GET carries in its path (the
// engines refuse a request line beyond 4 KiB by default); more names take several GETs.
const maxNamesPerGet = 3000

// roundTarget is one index of a claim round: a generation (or legacy index) of one table.
type roundTarget struct {
	table int // index into the round's tables
	next  bool
	d     Destination
	rec   record
	rev   statestore.Revision
	st    indexState
	mark  *Marker
	from  string // the fence the rotation starts from (exclusive owner)
	to    string // the fence it installs
	claim *Claim
}

// roundTable is one table of a claim round.
type roundTable struct {
	g        *Generations
	rec      tableRecord
	rev      statestore.Revision
	legacy   bool // no table record: a legacy index claimed as it is
	fallback bool // not a plain case: claimed alone by ReclaimTable
}

// ReclaimTables claims every table of gs again (a reconnect, a client recreation), as
// ReclaimTable claims each, in one round: one read of the cluster's identity, one of the
// auto-create setting and one GET of every index (sent together), then every proof, then one
// _aliases request rotating every fence (under a shared owner none: every index is joined).
// A table that is not a plain case -- a switch in progress, an index or read alias that is not
// as recorded, reindex state under a shared owner -- and every table after the round's
// _aliases request was refused (another claim moved a fence, an index was deleted) is claimed
// by ReclaimTable, which finds out which table it concerns and refuses it as always.
// The returned values replace gs, in order. On an error nothing is returned: the tables'
// write aliases may have been rotated already, and the next claim carries on from the
// records, which name the fence being installed before the cluster is asked.
func (f *Fence) ReclaimTables(ctx context.Context, gs []*Generations) ([]*Generations, error) {
	for _, g := range gs {
		if g == nil {
			return nil, errors.New("esfence: nil generations")
		}
	}
	if len(gs) == 0 {
		return nil, nil
	}
	tables := make([]roundTable, len(gs))
	var targets []*roundTarget
	for i, g := range gs {
		t := &tables[i]
		t.g = g
		var err error
		if t.rec, t.rev, err = f.loadTable(ctx, g.dest); err != nil {
			return nil, err
		}
		switch {
		case t.rev == 0:
			// A legacy index (a table record is written with generation 1): claimed as it is.
			t.legacy = true
			targets = append(targets, &roundTarget{table: i, d: g.dest})
		case t.rec.Switching, f.shared() && (t.rec.Live > 1 || t.rec.Next != 0 || len(t.rec.Retired) > 0):
			t.fallback = true
		default:
			targets = append(targets, &roundTarget{table: i, d: gen(g.dest, t.rec.Live, t.rec.Live == 1)})
			if t.rec.Next != 0 {
				targets = append(targets, &roundTarget{table: i, next: true, d: gen(g.dest, t.rec.Next, false)})
			}
		}
	}
	for _, tg := range targets {
		var err error
		if tg.rec, tg.rev, err = f.loadRecord(ctx, tg.d); err != nil {
			return nil, err
		}
		if tg.rev == 0 && tables[tg.table].legacy {
			tables[tg.table].fallback = true // not claimed as a legacy index before: the table's own path decides
		}
	}

	// 1 and 2, for every index at once: the cluster, the proof that it refuses to auto-create
	// df-w-* indices, and the indices (with every read alias, to see what it resolves to).
	names := map[string]bool{}
	for _, tg := range targets {
		names[tg.d.Index] = true
		if t := tables[tg.table]; !t.legacy && t.rec.Live != 0 {
			names[t.g.dest.Index] = true
		}
	}
	uuid, found, err := f.roundReads(ctx, gs[0].dest, slices.Sorted(mapKeys(names)))
	if err != nil {
		return nil, err
	}

	// The read aliases, then each index as claimExisting proves it.
	for i := range tables {
		t := &tables[i]
		if t.fallback || t.legacy || t.rec.Live == 0 {
			continue
		}
		name := t.g.dest.Index
		_, concrete := found[name]
		if concrete || !slices.Equal(resolvesTo(found, name), []string{GenerationIndex(name, t.rec.Live)}) {
			t.fallback = true
		}
	}
	var rotating []*roundTarget
	for _, tg := range targets {
		if tables[tg.table].fallback {
			continue
		}
		st, ok := found[tg.d.Index]
		if !ok {
			tables[tg.table].fallback = true // missing, or an alias: the table's own path refuses it
			continue
		}
		tg.st = st
		if tg.mark, err = f.checkMarker(tg.d, uuid, st); err != nil {
			return nil, err
		}
		if f.shared() {
			continue
		}
		if tg.from, err = f.checkRecord(tg.d, st, tg.mark, tg.rec, tg.rev); err != nil {
			return nil, err
		}
		rotating = append(rotating, tg)
	}

	// 5, for every index at once: the pending fences recorded, one _aliases request, the
	// current fences recorded.
	refused := false
	if len(rotating) > 0 {
		var actions []any
		for _, tg := range rotating {
			if tables[tg.table].fallback {
				continue
			}
			if tg.to, tg.rev, err = f.recordPending(ctx, tg.d, tg.rec, tg.rev, tg.from); err != nil {
				return nil, err
			}
			if f.afterPending != nil {
				if err := f.afterPending(tg.d.Index); err != nil {
					return nil, err
				}
			}
			actions = append(actions, rotation(tg.d.Index, tg.rec.Instance, tg.from, tg.to)...)
		}
		const what = "rotating the write aliases"
		if len(actions) > 0 {
			a, err := f.do(ctx, what, esapi.IndicesUpdateAliasesRequest{Body: jsonBody(map[string]any{"actions": actions})})
			if err != nil {
				return nil, err // outcome unknown; every record allows either fence on the next claim
			}
			if err := f.rotationAnswer(rotating[0].d, what, a); err != nil {
				if ClassOf(err) == "" {
					return nil, err
				}
				// Some index's fence moved, or an index went: every table is claimed alone,
				// which finds out which (the records allow the fences still in place).
				refused = true
			}
		}
	}
	if refused {
		for i := range tables {
			tables[i].fallback = true
		}
	}
	for _, tg := range targets {
		if tables[tg.table].fallback || tg.st.meta == nil {
			continue
		}
		if f.shared() {
			if tg.claim, err = f.join(ctx, tg.d, uuid, tg.st, tg.mark, tg.rec, tg.rev); err != nil {
				return nil, err
			}
			continue
		}
		if f.afterRotate != nil {
			if err := f.afterRotate(tg.d.Index); err != nil {
				return nil, err
			}
		}
		if _, err := f.putRecord(ctx, tg.d, record{Instance: tg.rec.Instance, Current: tg.to}, tg.rev); err != nil {
			return nil, err
		}
		tg.claim = &Claim{dest: tg.d, instance: tg.rec.Instance, fence: tg.to, clusterUUID: uuid}
	}

	out := make([]*Generations, len(gs))
	for i := range tables {
		t := &tables[i]
		if t.fallback {
			continue
		}
		n := &Generations{dest: t.g.dest, rec: t.rec, rev: t.rev}
		if t.legacy {
			n = &Generations{dest: t.g.dest}
		}
		out[i] = n
	}
	for _, tg := range targets {
		if n := out[tg.table]; n != nil {
			if tg.next {
				n.next = tg.claim
			} else {
				n.live = tg.claim
			}
		}
	}
	for i := range tables {
		if !tables[i].fallback {
			continue
		}
		if out[i], err = f.ReclaimTable(ctx, gs[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// mapKeys ranges over a set's members.
func mapKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// roundReads sends a round's reads at once: the cluster_uuid, the auto-create setting (proven
// as every claim proves it, a refusal naming d) and the indices. Each read is sent again when
// the connection fails under it.
func (f *Fence) roundReads(ctx context.Context, d Destination, names []string) (string, map[string]indexState, error) {
	var batches [][]string
	var cur []string
	curLen := 0
	for _, n := range names {
		if curLen+len(n)+1 > maxNamesPerGet && len(cur) > 0 {
			batches, cur, curLen = append(batches, cur), nil, 0
		}
		cur, curLen = append(cur, n), curLen+len(n)+1
	}
	if len(cur) > 0 {
		batches = append(batches, cur)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		uuid  string
		errs  = make([]error, 2+len(batches))
		found = map[string]indexState{}
	)
	wg.Add(len(errs))
	go func() {
		defer wg.Done()
		errs[0] = retryRead(ctx, func() (err error) { uuid, err = f.clusterUUID(ctx); return err })
	}()
	go func() {
		defer wg.Done()
		errs[1] = retryRead(ctx, func() error { return f.proveAutoCreate(ctx, d) })
	}()
	for i, b := range batches {
		go func() {
			defer wg.Done()
			var got map[string]indexState
			errs[2+i] = retryRead(ctx, func() (err error) { got, err = f.getIndices(ctx, b); return err })
			mu.Lock()
			defer mu.Unlock()
			for k, v := range got {
				found[k] = v
			}
		}()
	}
	wg.Wait()
	for _, err := range errs { // in the order a single claim meets them
		if err != nil {
			return "", nil, err
		}
	}
	return uuid, found, nil
}

// retryRead runs an idempotent read until it succeeds, fails other than by losing its
// connection, or readAttempts are spent. A read that timed out is not sent again (the timeout
// already waited long), nor is one whose context ended.
func retryRead(ctx context.Context, read func() error) error {
	pause := readPause
	for attempt := 1; ; attempt++ {
		err := read()
		var se *ServerError
		if err == nil || attempt == readAttempts || ctx.Err() != nil || errors.As(err, &se) || ClassOf(err) != "" ||
			errors.Is(err, context.DeadlineExceeded) || !isTransport(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
		pause *= 2
	}
}

// isTransport reports whether err is a request that got no answer because its connection
// failed: the client's error wrapped by do (an unreadable answer is not wrapped, and a
// certificate refused is not a connection failing).
func isTransport(err error) bool {
	return errors.Unwrap(err) != nil && search.ErrorClass(err) == search.Unavailable
}

// getIndices reads several names at once (missing ones left out): per concrete index, its
// mapping _meta and aliases. A name that is an alias shows as the indices it resolves to.
func (f *Fence) getIndices(ctx context.Context, names []string) (map[string]indexState, error) {
	const what = "reading the indices"
	a, err := f.do(ctx, what, esapi.IndicesGetRequest{Index: names, IgnoreUnavailable: ptr(true)})
	if err != nil {
		return nil, err
	}
	if !a.ok() {
		return nil, a.serverError(what)
	}
	var m map[string]struct {
		Aliases  map[string]json.RawMessage `json:"aliases"`
		Mappings struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"mappings"`
	}
	if err := json.Unmarshal(a.body, &m); err != nil {
		return nil, errors.New("esfence: " + what + ": unexpected answer")
	}
	out := make(map[string]indexState, len(m))
	for name, got := range m {
		st := indexState{exists: true, concrete: true, meta: got.Mappings.Meta}
		if st.meta == nil {
			st.meta = map[string]json.RawMessage{}
		}
		for al := range got.Aliases {
			st.aliases = append(st.aliases, al)
		}
		out[name] = st
	}
	return out, nil
}

// resolvesTo lists (sorted) the indices of found that carry alias name.
func resolvesTo(found map[string]indexState, name string) []string {
	var out []string
	for idx, st := range found {
		if slices.Contains(st.aliases, name) {
			out = append(out, idx)
		}
	}
	slices.Sort(out)
	return out
}
