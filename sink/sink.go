package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/elastic/elastic-transport-go/v8/elastictransport"
	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/esfence"
	"github.com/tributary-dev/tributary/internal/search"
	"github.com/tributary-dev/tributary/statestore"
)

// Options are a sink's optional settings besides its configuration; nil means every default.
type Options struct {
	// Transport, when set, replaces the client built from the configuration (tests put a
	// fault proxy or a counting transport here). It must not retry on its own.
	Transport esapi.Transport
	// Engine, when set, skips asking the cluster which engine it is.
	Engine *Engine
	// Mapping, when set, replaces the mapping options of the configuration (mapping:); its
	// Engine is filled in by the sink.
	Mapping *MappingOptions
	// ItemRetryBackoff is the first pause before per-item 429s are retried; it doubles per
	// attempt. Default 100ms.
	ItemRetryBackoff time.Duration
	// Observer, when set, receives one BulkStats per _bulk request and a Claimed call per
	// successful claim. Default none.
	Observer Observer
	// OnEntered, when set, is told of every table that a relation entered (doc.go, "Schema
	// events"): its index was emptied or created by a streamed change, and only a re-snapshot
	// of the table fills it. It is called from Write, after the batch was prepared and never
	// under the sink's mutex, so it may call the sink; it must return quickly (package mirror
	// requests the re-snapshot in the background). Default none: the report is dropped.
	OnEntered func(TableEntered)
}

// Sink writes cdc batches to Elasticsearch or OpenSearch as a current-state mirror. It
// implements cdc.ConcurrentSink: Writes may run concurrently (each batch is prepared under the
// sink's mutex and sent outside it).
type Sink struct {
	cfg      Config
	tmpl     template
	tp       esapi.Transport
	owned    *elastictransport.Client
	fence    *esfence.Fence
	pipeline string
	encoding string
	opts     Options

	mu     sync.Mutex
	tables map[*cdc.TableSchema]*tableInfo
	claims map[string]*esfence.Claim // by concrete index name
	// gens is, per table name (the template's expansion), the table's claimed generations
	// (generations.go); gensEpoch counts their changes.
	gens      map[string]*esfence.Generations
	gensEpoch uint64
	// bound is, per concrete index, the one table whose rows go into it this session: set by
	// CheckTables and by the first action of a table (checkBindings).
	bound map[string]cdc.TableID
	// fields holds, per concrete index, the top-level fields its mapping is known to have:
	// read once per session when a schema not yet checked arrives, then kept up to date.
	fields map[string]map[string]json.RawMessage
	// stale is set after a connection loss: the next Write claims every index again before
	// writing, as the specification asks after a reconnect.
	stale atomic.Bool
	// claimEpoch counts the reclaims of stale claims: a chunk encoded before one used write
	// aliases the reclaim rotated away, and its index_not_found answer is not a fencing.
	claimEpoch  atomic.Uint64
	engine      Engine
	engineKnown bool

	// Reused across Writes (taken and given back under the mutex): the first chunk's body, the actions,
	// the coalescing map and the _id arena, so a steady stream of batches allocates a few
	// objects per batch (BenchmarkSinkEncode).
	spareBody []byte
	spareActs []action
	spareSlot map[actionKey]int
	spareIDs  []byte
	// filledInBatch is the number of unchanged values plan took from older changes in the
	// batch, for the observer (unchanged.go).
	filledInBatch int

	// Schema events (schemaevents.go): the batch's runs of one table and relation, noted by
	// plan; the latest schema seen per table name; the tables this session created; the
	// relation identities of the sink's tables (loaded on first need); the ENTERED reports
	// not yet delivered; the actions voided since the last _bulk (counted as superseded).
	runs      []schemaRun
	schemas   map[string]*cdc.TableSchema
	fresh     map[string]bool
	relsKnown bool
	rels      map[string]esfence.RelationTable
	relsGone  map[string]esfence.RelationTable
	entered   []TableEntered
	reported  map[int64]bool // recorded ENTERED reports already reported this session
	lastMark  int64
	voided    atomic.Int64
}

type actionKey struct{ index, id string } // no concatenation: the strings already exist

// tableInfo is what the sink derives once per table schema.
type tableInfo struct {
	index  string
	cols   []int // _id columns
	colErr error // per-row failure for every row of the table (no key)
	// mapped is set once the index's mapping holds a field for every column of the schema
	// and guards are derived from it (see extendMappings).
	mapped bool
	// guards says, per column, what a value must satisfy for the index's field (nil until
	// derived; encode then derives them from the generated mapping).
	guards []fieldGuard
	// targets are the generations the table's actions go to as of targetsEpoch; byIndex the
	// info of each generation other than index itself (its own mapping knowledge and guards).
	targets      []genTarget
	targetsEpoch uint64
	byIndex      map[string]*tableInfo
}

// New builds the sink of a pipeline. cfg is normalized and validated; nothing is sent to the
// cluster until the first Write. pipeline names the pipeline in the state store (ownership
// records are per pipeline); state is the deployment's state store, whose identity owns the
// indices the sink creates (cfg.SharedOwner, when set, owns them instead). opts may be nil (every default); New copies *opts.
func New(cfg Config, pipeline string, state statestore.Store, opts *Options) (*Sink, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if err := cfg.Normalize(); err != nil {
		return nil, err
	}
	if pipeline == "" || state == nil {
		return nil, errors.New("elasticsearch sink: New needs a pipeline name and a state store")
	}
	if o.ItemRetryBackoff <= 0 {
		o.ItemRetryBackoff = 100 * time.Millisecond
	}
	t, err := parseTemplate(cfg.Index)
	if err != nil {
		return nil, fmt.Errorf("elasticsearch sink %q: index: %w", cfg.ID, err)
	}
	s := &Sink{
		cfg: cfg, tmpl: t, pipeline: pipeline, opts: o,
		tables:   map[*cdc.TableSchema]*tableInfo{},
		claims:   map[string]*esfence.Claim{},
		gens:     map[string]*esfence.Generations{},
		bound:    map[string]cdc.TableID{},
		fields:   map[string]map[string]json.RawMessage{},
		schemas:  map[string]*cdc.TableSchema{},
		fresh:    map[string]bool{},
		reported: map[int64]bool{},
		encoding: encodingName(cfg),
	}
	if o.Engine != nil {
		s.engine, s.engineKnown = *o.Engine, true
	}
	s.tp = o.Transport
	if s.tp == nil {
		c, err := newTransport(cfg)
		if err != nil {
			return nil, err
		}
		s.tp, s.owned = c, c
	}
	s.tp = newStallGuard(s.tp) // requests stalled in a lost connection are given up (stall.go)
	if s.fence, err = esfence.New(s.tp, state, &esfence.Options{Timeout: time.Duration(cfg.RequestTimeout), SharedOwner: cfg.SharedOwner}); err != nil {
		return nil, err
	}
	return s, nil
}

// encodingName is the encoding the fence records in each index's marker: everything that
// decides a document's _id. A sink whose ids would differ is refused an existing index
// (encoding_mismatch) instead of writing a second copy of every row next to the first.
func encodingName(c Config) string {
	b, _ := json.Marshal(struct {
		V   int      `json:"v"`
		IDs []string `json:"id_fields,omitempty"`
		Sep string   `json:"sep"`
	}{1, c.IDFields, c.IDSeparator})
	return "tributary-doc:" + string(b)
}

// newTransport builds the client (internal/search): no retries but the failover of a request
// that never reached a node (a lost _bulk answer is the runner's to replay), no product check
// (OpenSearch), no gzip, the configured nodes, credentials, TLS and timeouts.
func newTransport(c Config) (*elastictransport.Client, error) {
	o := search.Options{URLs: c.Nodes(), ConnectTimeout: time.Duration(c.ConnectTimeout),
		MaxIdleConnsPerHost: c.Concurrency + 2, ServerName: c.TLS.ServerName}
	switch c.Auth.Type {
	case AuthBasic:
		o.Username, o.Password = c.Auth.Username, string(c.Auth.Password)
	case AuthAPIKey:
		o.APIKey = string(c.Auth.APIKey)
	}
	var err error
	if o.CACert, err = pemOption(c.ID, c.TLS.CA, "ca_file", c.TLS.CAFile); err != nil {
		return nil, err
	}
	if o.ClientCert, err = pemOption(c.ID, c.TLS.Cert, "cert_file", c.TLS.CertFile); err != nil {
		return nil, err
	}
	if o.ClientKey, err = pemOption(c.ID, string(c.TLS.Key), "key_file", c.TLS.KeyFile); err != nil {
		return nil, err
	}
	tp, err := search.NewClient(o)
	if err != nil {
		// search's errors name the option (the CA, the client certificate or key), never a
		// URL or a PEM.
		return nil, fmt.Errorf("elasticsearch sink %q: building the client failed (check urls and tls): %s", c.ID, strings.TrimPrefix(err.Error(), "search: "))
	}
	return tp, nil
}

// pemOption is a PEM given inline or as a file (the file read here, its error naming the
// key, never the file's content).
func pemOption(id, inline, fileKey, file string) ([]byte, error) {
	switch {
	case inline != "":
		return []byte(inline), nil
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("elasticsearch sink %q: tls: reading %s: %w", id, fileKey, err)
		}
		return b, nil
	}
	return nil, nil
}

// observer is Options.Observer or one that ignores everything.
func (s *Sink) observer() Observer {
	if s.opts.Observer == nil {
		return noObserver{}
	}
	return s.opts.Observer
}

// Close releases the HTTP client the sink built from cfg (its idle connections; no request
// may follow) and returns that close's error. A sink given a transport by Options leaves it
// to its owner. Close is idempotent: a second call returns nil.
func (s *Sink) Close() error {
	if s.owned == nil {
		return nil
	}
	err := s.owned.Close(context.Background())
	if errors.Is(err, elastictransport.ErrAlreadyClosed) {
		return nil
	}
	return err
}

// Config returns the normalized configuration.
func (s *Sink) Config() Config { return s.cfg }

// table returns what the sink derives from a schema, once per schema value. A table CheckTables
// did not see at start (one created later in a captured schema) is held to the same rules here:
// one without a key, one whose index name is invalid, or with a column that cannot be a field,
// has every row dead-lettered (colErr), whatever the keyless policy -- the whole pipeline must
// not stop, nor retry forever, for a table that appeared after start.
func (s *Sink) table(sch *cdc.TableSchema, id cdc.TableID) (*tableInfo, error) {
	if ti, ok := s.tables[sch]; ok {
		return ti, nil
	}
	name := s.tmpl.expand(id)
	ti := &tableInfo{index: name}
	if err := validIndexName(name); err != nil {
		ti.colErr = errors.New(indexNameReason(id, err))
		s.tables[sch] = ti
		return ti, nil
	}
	ti.cols, ti.colErr = idColumns(sch, s.cfg.IDFields)
	if ti.colErr != nil && s.cfg.Keyless != KeylessDeadLetter {
		// keyless: refuse refuses such a table at start (CheckTables); one met only now must
		// not stop the pipeline for every other table: its rows are dead-lettered, loudly.
		p := s.keyProblem(id, ti.colErr)
		ti.colErr = errors.New(keylessReason + p.Problem + "; " + p.Fix + " (keyless: refuse refuses the table at the next start)")
	}
	if reason := fieldReason(sch); ti.colErr == nil && reason != "" {
		// Every row would be refused by the document encoder anyway, but a generated mapping
		// for the index could not even be made (auto_create_index).
		ti.colErr = errors.New(reason)
	}
	s.tables[sch] = ti
	return ti, nil
}

// Dead-letter reason prefixes of tables whose rows can never be written as configured, met
// after start (CheckTables refuses them at start).
const (
	keylessReason      = "keyless_table: "
	invalidIndexReason = "invalid_index_name: "
	invalidFieldReason = "invalid_field_name: "
)

// indexNameReason is the dead-letter reason of table id's rows when its index name is invalid
// (err of validIndexName).
func indexNameReason(id cdc.TableID, err error) string {
	return invalidIndexReason + err.Error() + "; " + indexProblem(id, err).Fix
}

// fieldReason is the dead-letter reason of a table whose first column cannot be a document
// field, "" when every column can.
func fieldReason(sch *cdc.TableSchema) string {
	probs := fieldProblems(sch)
	if len(probs) == 0 {
		return ""
	}
	return invalidFieldReason + probs[0].Problem + "; " + probs[0].Fix
}

// action is one bulk action after coalescing.
type action struct {
	event   int // index of the event in the batch (for dead letters)
	del     bool
	index   string
	id      string
	version int64
	row     []cdc.Value
	schema  *cdc.TableSchema
	info    *tableInfo
	table   cdc.TableID
	// idStart and idEnd locate id in the batch's id arena while plan builds it.
	idStart, idEnd int
	// fill is set while row holds cdc.Unchanged values (unchanged.go).
	fill *unchangedFill
}

// Write implements cdc.Sink. Its errors carry their class for the runner's supervision
// (failure.go): permanent ones are marked with cdc.Permanent, retryable ones are
// *cdc.BackpressureError.
func (s *Sink) Write(ctx context.Context, batch []cdc.Event) ([]cdc.DeadLetter, error) {
	dead, err := s.write(ctx, batch)
	if err != nil {
		return nil, permanentRefusal(err)
	}
	return dead, nil
}

func (s *Sink) write(ctx context.Context, batch []cdc.Event) ([]cdc.DeadLetter, error) {
	chunks, acts, dead, err := s.prepare(ctx, batch)
	s.deliverEntered()
	if err != nil || len(chunks) == 0 {
		return dead, err
	}
	// Sent outside the mutex: batches of a runner with several in flight go out together
	// (external versions make their order harmless; the runner holds back the changes whose
	// order matters, see cdc.ConcurrentSink).
	more, err := s.sendAll(ctx, chunks)
	s.mu.Lock()
	s.recycle(acts, chunks)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return append(dead, more...), nil
}

// prepare does, under the mutex, everything of a Write but the sending: actions, claims,
// unchanged values, mapping extensions and the encoded chunks (none: nothing to send).
func (s *Sink) prepare(ctx context.Context, batch []cdc.Event) ([]*chunk, []action, []cdc.DeadLetter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, nil, nil, err
	}
	var dead []cdc.DeadLetter
	acts, dead, err := s.plan(batch, dead)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(acts) == 0 && len(s.runs) == 0 {
		return nil, nil, dead, nil
	}
	if err := s.claimAll(ctx, acts); err != nil {
		return nil, nil, nil, err
	}
	if acts, err = s.schemaEvents(ctx, acts); err != nil {
		return nil, nil, nil, err
	}
	if len(acts) == 0 {
		s.recycle(acts, nil)
		return nil, nil, dead, nil
	}
	if acts, dead, err = s.fillUnchanged(ctx, acts, dead); err != nil {
		return nil, nil, nil, err
	}
	if len(acts) == 0 {
		s.recycle(acts, nil)
		return nil, nil, dead, nil
	}
	acts = s.toTargets(acts)
	if err := s.extendMappings(ctx, acts); err != nil {
		return nil, nil, nil, err
	}
	chunks, dead, err := s.encode(acts, dead)
	if err != nil {
		return nil, nil, nil, err
	}
	epoch := s.claimEpoch.Load()
	for _, c := range chunks {
		c.epoch = epoch
	}
	return chunks, acts, dead, nil
}

// recycle keeps the first body and the actions for the next Write, minus every reference to
// the batch's rows: Write must not keep the batch. The caller holds the mutex; a spare
// already there (another Write's) is kept.
func (s *Sink) recycle(acts []action, chunks []*chunk) {
	if len(chunks) > 0 && cap(chunks[0].body) <= 2*DefaultMaxBytes && s.spareBody == nil {
		s.spareBody = chunks[0].body[:0]
	}
	clear(acts)
	if s.spareActs == nil {
		s.spareActs = acts[:0]
	}
}

// ConcurrentWrites implements cdc.ConcurrentSink: Write may run for several batches at once.
func (s *Sink) ConcurrentWrites() bool { return true }

// IdentityColumns implements cdc.ConcurrentSink: the columns of a table's _id (id_fields, else
// the primary key); nil for a table without one, whose rows are dead-lettered.
func (s *Sink) IdentityColumns(sch *cdc.TableSchema) []int {
	cols, err := idColumns(sch, s.cfg.IDFields)
	if err != nil {
		return nil
	}
	return cols
}

// plan turns events into actions: _ids, the delete of an old _id when an update changed the
// key, and coalescing to the highest version per (index, _id). A row whose _id cannot be
// formed is dead-lettered here; when it is an update whose before image forms the old _id,
// that old _id is still deleted.
//
// It works in two passes so that a batch's _ids cost one allocation together rather than one
// each: the first renders every _id into one byte arena and notes its offsets; the arena then
// becomes one string, whose substrings are the actions' ids and the coalescing map's keys.
func (s *Sink) plan(batch []cdc.Event, dead []cdc.DeadLetter) ([]action, []cdc.DeadLetter, error) {
	acts := s.spareActs[:0]
	s.spareActs = nil
	arena := s.spareIDs[:0]
	fills := 0
	s.runs = s.runs[:0]
	for i := range batch {
		ev := &batch[i]
		if ev.Op == cdc.Truncate {
			if reason := s.noteTruncate(i, ev); reason != "" {
				dead = append(dead, cdc.DeadLetter{Index: i, Reason: reason})
			}
			continue
		}
		if ev.Schema == nil {
			dead = append(dead, cdc.DeadLetter{Index: i, Reason: "serialization failure: the event has no table schema"})
			continue
		}
		if ev.Position == nil {
			dead = append(dead, cdc.DeadLetter{Index: i, Reason: "serialization failure: the event has no position (no external version)"})
			continue
		}
		ti, err := s.table(ev.Schema, ev.Table)
		if err != nil {
			return nil, nil, err
		}
		if ti.colErr != nil {
			dead = append(dead, cdc.DeadLetter{Index: i, Reason: ti.colErr.Error()})
			continue
		}
		ver := ev.Position.Version()
		if ver < 0 {
			dead = append(dead, cdc.DeadLetter{Index: i, Reason: "serialization failure: negative external version"})
			continue
		}
		s.noteRun(i, ev, ti.index, ver)
		base := action{event: i, index: ti.index, version: ver, schema: ev.Schema, info: ti, table: ev.Table}
		var keyRow []cdc.Value
		switch ev.Op {
		case cdc.Delete:
			if ev.Before == nil {
				dead = append(dead, cdc.DeadLetter{Index: i, Reason: "serialization failure: a delete without the row's key"})
				continue
			}
			base.del, keyRow = true, ev.Before
		case cdc.Insert, cdc.Update, cdc.Read:
			if ev.After == nil {
				dead = append(dead, cdc.DeadLetter{Index: i, Reason: "serialization failure: a " + ev.Op.String() + " without the row"})
				continue
			}
			base.row, keyRow = ev.After, ev.After
		default:
			dead = append(dead, cdc.DeadLetter{Index: i, Reason: "serialization failure: unknown operation " + ev.Op.String()})
			continue
		}
		mark := len(arena)
		if arena, err = appendID(arena, ev.Schema, ti.cols, keyRow, s.cfg.IDSeparator); err != nil {
			arena = arena[:mark]
			dead = append(dead, cdc.DeadLetter{Index: i, Reason: err.Error()})
			if ev.Op == cdc.Update && ev.Before != nil {
				// The row moved to a key that forms no _id (an empty text key, say). Its old
				// document must still go: left in place, it would mirror a row that no
				// longer exists there. The old key forms an _id, so it differs from the new.
				var kerr error
				if arena, kerr = appendID(arena, ev.Schema, ti.cols, ev.Before, s.cfg.IDSeparator); kerr == nil {
					d := base
					d.del, d.row, d.idStart, d.idEnd = true, nil, mark, len(arena)
					acts = append(acts, d)
				} else {
					arena = arena[:mark]
				}
			}
			continue
		}
		base.idStart, base.idEnd = mark, len(arena)
		if ev.Op == cdc.Update && ev.Before != nil {
			// An update that changed the key: the old document goes, at the same version,
			// ahead of the new one. A Before whose key columns are missing (nil) says
			// nothing about the old key and is ignored.
			oldStart := len(arena)
			var kerr error
			if arena, kerr = appendID(arena, ev.Schema, ti.cols, ev.Before, s.cfg.IDSeparator); kerr == nil &&
				!bytes.Equal(arena[oldStart:], arena[base.idStart:base.idEnd]) {
				d := base
				d.del, d.row, d.idStart, d.idEnd = true, nil, oldStart, len(arena)
				acts = append(acts, d)
			} else {
				arena = arena[:oldStart]
			}
		}
		if ev.Op == cdc.Update && cdc.HasUnchanged(ev.After) {
			base.fill = newUnchangedFill(&base, acts)
			fills++
		}
		acts = append(acts, base)
	}
	s.spareIDs = arena[:0]
	if len(acts) == 0 {
		return acts, dead, nil
	}
	ids := string(arena) // the batch's one allocation for its _ids
	if fills > 0 {
		s.filledInBatch = fillFromBatch(acts, ids)
	}

	slot := s.spareSlot
	if slot == nil {
		slot = make(map[actionKey]int, len(acts))
		s.spareSlot = slot
	}
	clear(slot)
	defer clear(slot) // the keys hold _id strings only, but do not keep them either
	n := 0
	for i := range acts {
		a := acts[i]
		a.id = ids[a.idStart:a.idEnd]
		k := actionKey{a.index, a.id}
		if j, ok := slot[k]; ok {
			// The highest version wins; on a tie the later event (a source never gives one
			// row two changes the same version, so a tie is a duplicate).
			if a.version >= acts[j].version {
				acts[j] = a
			}
			continue
		}
		slot[k] = n
		acts[n] = a
		n++
	}
	clear(acts[n:])
	return acts[:n], dead, nil
}

// claimAll makes sure every index the actions target is claimed: created through the fence on
// first use, claimed again after a reconnect. An action of a table other than the one its
// index is bound to in this session fails the batch first (checkBindings).
func (s *Sink) claimAll(ctx context.Context, acts []action) error {
	if err := s.checkBindings(acts); err != nil {
		return err
	}
	// Swapped before the round: a connection lost while it runs (a Write of another batch
	// sending) makes the next Write claim again.
	if s.stale.Swap(false) {
		if err := s.reclaimAll(ctx); err != nil {
			s.stale.Store(true)
			return err
		}
	}
	last := ""
	for i := range acts {
		a := &acts[i]
		if a.index == last { // a batch mostly runs in one table at a time
			continue
		}
		last = a.index
		if err := s.claimTable(ctx, a); err != nil {
			return err
		}
	}
	// Tables of the batch's schema events without an action (a Truncate's, one whose
	// changes are all dead letters).
	for i := range s.runs {
		r := &s.runs[i]
		if _, ok := s.gens[r.name]; ok {
			continue
		}
		a := action{index: r.name, table: r.table, schema: r.schema}
		if r.schema == nil {
			// A schemaless Truncate of a table not seen since the start: claimed when it
			// exists; one this pipeline never wrote has nothing to empty.
			d, err := s.destination(ctx, &a)
			if err != nil {
				return err
			}
			known, err := s.fence.TableKnown(ctx, d)
			if err != nil {
				return s.requestError(err, "reading the table's records")
			}
			if !known {
				if r.bare == nil {
					continue
				}
				// A Truncate without columns announcing a relation (MariaDB, a reader behind
				// the DDL): the index is created, its fields mapped from the rows to come, so
				// that the relation is bound and its entry reported (a re-snapshot).
				a.schema = r.bare
			}
		}
		if err := s.checkBindings([]action{a}); err != nil {
			return err
		}
		if err := s.claimTable(ctx, &a); err != nil {
			return err
		}
	}
	return nil
}

// claimTable claims the table of a's index (its name) unless this session holds it.
func (s *Sink) claimTable(ctx context.Context, a *action) error {
	if _, ok := s.gens[a.index]; ok {
		return nil
	}
	d, err := s.destination(ctx, a)
	if err != nil {
		return err
	}
	g, err := s.fence.EnsureTable(ctx, d, !s.cfg.ReadAlias)
	if err != nil {
		return s.requestError(err, "claiming an index")
	}
	if g.Created() {
		s.fresh[a.index] = true
	}
	s.reportMarked(a.index, a.table, a.schema, g)
	s.setGens(a.index, g)
	for _, c := range g.Targets() {
		s.observer().Claimed(c.Index())
	}
	return nil
}

// reclaimAll claims every index of the session again after a connection loss, in one round
// of the fence (esfence ReclaimTables: three reads at once, one _aliases request rotating
// every fence), before anything else is written.
func (s *Sink) reclaimAll(ctx context.Context) error {
	names := slices.Sorted(maps.Keys(s.gens))
	gs := make([]*esfence.Generations, len(names))
	for i, name := range names {
		gs[i] = s.gens[name]
	}
	ns, err := s.fence.ReclaimTables(ctx, gs)
	if err != nil {
		return s.requestError(err, "claiming the indices again")
	}
	for i, name := range names {
		s.setGens(name, ns[i])
		for _, c := range ns[i].Targets() {
			// Whoever held the index meanwhile may have added fields: read them again.
			delete(s.fields, c.Index())
			s.observer().Claimed(c.Index())
		}
	}
	s.claimEpoch.Add(1)
	return nil
}

// destination is the fence's view of an action's index: with auto_create_index the generated
// mapping and the delete retention; without, no mapping (an index the fence creates then
// maps dynamically) -- an index someone else created is refused either way (marker_missing).
func (s *Sink) destination(ctx context.Context, a *action) (esfence.Destination, error) {
	d := esfence.Destination{
		Pipeline: s.pipeline, Sink: s.cfg.ID, Table: a.table, Index: a.index, Encoding: s.encoding,
		Settings: s.indexSettings(),
	}
	if s.cfg.AutoCreate() && a.schema != nil { // nil: a table claimed as it exists (schemaless Truncate)
		o, err := s.mappingOptions(ctx)
		if err != nil {
			return d, err
		}
		m, err := GenerateMapping(a.schema, o)
		if err != nil {
			return d, cdc.Permanent(fmt.Errorf("elasticsearch sink %q: mapping for table %s: %w", s.cfg.ID, a.table, err))
		}
		d.Mapping = m
	}
	return d, nil
}

// mappingOptions are the options of every generated mapping, for the cluster's engine.
func (s *Sink) mappingOptions(ctx context.Context) (MappingOptions, error) {
	if err := s.detectEngine(ctx); err != nil {
		return MappingOptions{}, err
	}
	o := s.configuredMapping()
	o.Engine = s.engine
	return o, nil
}

// configuredMapping is the mapping options of the configuration (or Options.Mapping), engine
// left unset: the fields a decimal or a date maps to do not depend on it.
func (s *Sink) configuredMapping() MappingOptions {
	o, _ := s.cfg.Mapping.options() // validated by Normalize
	if s.opts.Mapping != nil {
		o = *s.opts.Mapping
	}
	return o
}

// indexSettings are the settings of every index the sink creates.
func (s *Sink) indexSettings() json.RawMessage {
	var b []byte
	b = append(b, `{"index":{"gc_deletes":"`...)
	b = appendDuration(b, time.Duration(s.cfg.DeleteRetention))
	b = append(b, '"')
	if s.cfg.Shards > 0 {
		b = append(b, `,"number_of_shards":`...)
		b = strconv.AppendInt(b, int64(s.cfg.Shards), 10)
	}
	if s.cfg.Replicas != nil {
		b = append(b, `,"number_of_replicas":`...)
		b = strconv.AppendInt(b, int64(*s.cfg.Replicas), 10)
	}
	return append(b, "}}"...)
}

// appendDuration writes a duration in the cluster's time-unit syntax.
func appendDuration(b []byte, d time.Duration) []byte {
	if d%time.Second == 0 {
		return append(strconv.AppendInt(b, int64(d/time.Second), 10), 's')
	}
	return append(strconv.AppendInt(b, int64(d/time.Millisecond), 10), "ms"...)
}

// detectEngine asks the cluster once which engine it is. GET / is not always served (the
// Elasticsearch integration-test distribution lacks it), so the local node's info is used:
// Elasticsearch 8 reports a build_flavor, OpenSearch 2 dropped that field. The monitor
// privilege the fence needs covers the request.
func (s *Sink) detectEngine(ctx context.Context) error {
	if s.engineKnown {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, time.Duration(s.cfg.RequestTimeout))
	defer cancel()
	const what = "reading the cluster's version"
	ans, err := search.Do(cctx, s.tp, esapi.NodesInfoRequest{NodeID: []string{"_local"},
		FilterPath: []string{"nodes.*.version", "nodes.*.build_flavor"}})
	if err != nil {
		return s.transportError(ctx, what, err)
	}
	defer ans.Release()
	if ans.Status != http.StatusOK {
		return s.statusError(what, ans.Status, ans.Header, ans.Body)
	}
	var info struct {
		Nodes map[string]struct {
			Version     string `json:"version"`
			BuildFlavor string `json:"build_flavor"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(ans.Body, &info); err != nil || len(info.Nodes) == 0 {
		return &cdc.BackpressureError{Err: fmt.Errorf("elasticsearch sink %q: %s: unreadable answer", s.cfg.ID, what)}
	}
	s.engine = OpenSearch
	for _, n := range info.Nodes {
		if n.BuildFlavor != "" {
			s.engine = Elasticsearch
		}
	}
	s.engineKnown = true
	return nil
}

var _ cdc.Sink = (*Sink)(nil)
