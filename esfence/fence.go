package esfence

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/statestore"
)

// Options configure a Fence. The zero value (or nil) gives the defaults.
type Options struct {
	// Timeout bounds every request sent to the cluster, on top of the caller's context.
	// Default 0: only the context bounds a request.
	Timeout time.Duration
	// Rand is the source of instances and fence nonces. Default crypto/rand.
	Rand io.Reader
	// SharedOwner, when set, owns the indices this Fence creates and claims instead of the
	// state store's identity: the marker's owner deployment is [SharedDeployment](SharedOwner),
	// and a claim joins the index's write alias instead of rotating it, so that every process
	// of one scale-out group (each with its own state store, all setting the same SharedOwner)
	// writes the same indices at once. See "Shared owners" in the package documentation.
	// Default "": the state store's deployment owns its indices alone. CheckSharedOwner says
	// which values are allowed.
	SharedOwner string
}

// Fence creates and claims destination indices for the pipelines of one deployment (one state
// store). It is safe for concurrent use; claims of one index should not race each other from
// the same process (the state store's compare-and-set turns such a race into a refusal).
type Fence struct {
	tp    esapi.Transport
	state statestore.Store
	opts  Options

	// afterPending, when set (by tests), runs after the pending fence is recorded and before
	// the cluster is asked to install it; an error stops the claim there, as a crash would.
	afterPending func(index string) error
	// afterRotate likewise runs after the cluster installed the fence and before the record
	// says so.
	afterRotate func(index string) error
}

// New returns a Fence that talks to the cluster through tp and keeps ownership records in
// state. tp is any esapi.Transport, typically the client internal/search builds (an
// *elastictransport.Client: no product check, so it talks to OpenSearch too, and no retries,
// so that a claim's alias rotation is sent once and its outcome is judged by the next claim).
func New(tp esapi.Transport, state statestore.Store, opts *Options) (*Fence, error) {
	if tp == nil || state == nil {
		return nil, errors.New("esfence: nil transport or state store")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Timeout < 0 {
		return nil, errors.New("esfence: negative Timeout")
	}
	if o.Rand == nil {
		o.Rand = rand.Reader
	}
	if o.SharedOwner != "" {
		if err := CheckSharedOwner(o.SharedOwner); err != nil {
			return nil, err
		}
	}
	return &Fence{tp: tp, state: state, opts: o}, nil
}

// shared reports whether the Fence claims under a shared owner.
func (f *Fence) shared() bool { return f.opts.SharedOwner != "" }

// owner is the deployment the markers of this Fence's indices name: the state store's
// identity, or the shared owner's distinct value.
func (f *Fence) owner() string {
	if f.shared() {
		return SharedDeployment(f.opts.SharedOwner)
	}
	return f.state.Identity()
}

// Destination is one index the sink writes one source table to.
type Destination struct {
	Pipeline string      // the pipeline (one source feeding this sink) in the state store
	Sink     string      // the sink's configured id
	Table    cdc.TableID // the source table the index mirrors
	Index    string      // the concrete index name
	// Encoding names how the sink turns rows into documents (ids, value normalisation); an
	// index written with one encoding is refused to a sink using another.
	Encoding string
	// Mapping is the "mappings" object the index is created with (properties, dynamic, ...).
	// Its _meta may hold other keys, which are kept; the deltaforge key is esfence's.
	Mapping json.RawMessage
	// Settings is the optional "settings" object the index is created with.
	Settings json.RawMessage
	// ReadAlias, when set, is a read-only alias (is_write_index false) the index is created
	// with: the first generation of a table (EnsureTable) carries its table's name so.
	ReadAlias string
}

func (d Destination) validate() error {
	switch {
	case d.Pipeline == "", d.Sink == "", d.Encoding == "":
		return errors.New("esfence: destination needs a pipeline, a sink and an encoding")
	case d.Table.Connector == "", d.Table.Database == "", d.Table.Table == "":
		return errors.New("esfence: destination needs a source table with connector, database and table")
	case d.Index == "", strings.ContainsAny(d.Index, "*?,\"<>|\\/ #:"), d.Index != strings.ToLower(d.Index),
		strings.HasPrefix(d.Index, "-"), strings.HasPrefix(d.Index, "_"), strings.HasPrefix(d.Index, "+"),
		strings.HasPrefix(d.Index, internalPrefix), len(d.Index) > statestore.MaxNameBytes:
		return fmt.Errorf("esfence: %q is not a usable index name", d.Index)
	}
	return nil
}

// Claim is the right to write to one index until another claim rotates its fence.
type Claim struct {
	dest        Destination
	instance    string
	fence       string
	clusterUUID string
}

// Index is the concrete index the claim is for.
func (c *Claim) Index() string { return c.dest.Index }

// Destination returns the destination the claim was made for.
func (c *Claim) Destination() Destination { return c.dest }

// Instance is the random instance the index was created with.
func (c *Claim) Instance() string { return c.instance }

// Fence is the fence this claim installed.
func (c *Claim) Fence() string { return c.fence }

// ClusterUUID is the cluster the index lives in.
func (c *Claim) ClusterUUID() string { return c.clusterUUID }

// WriteAlias is the only name the sink may write to: every bulk action (index and delete)
// targets it, with require_alias=true. Once another claim rotates the fence, the cluster
// rejects writes through it.
func (c *Claim) WriteAlias() string { return writeAlias(c.instance, c.fence) }

// Ensure claims d's index, creating it first when it does not exist and this pipeline never
// had it. Call it before a session first writes to the index. A refusal is a *ConflictError;
// other errors (transport, server, state store) may be retried.
//
// Under a shared owner (Options.SharedOwner) the claim joins an existing index instead of
// rotating its fence: the marker is checked as always (the owner being the shared owner), the
// index's one write alias is taken as it is and recorded; an index without a record is joined
// (another member created it), and a creation lost to another member joins the winner's index.
func (f *Fence) Ensure(ctx context.Context, d Destination) (*Claim, error) {
	if err := d.validate(); err != nil {
		return nil, err
	}
	if len(d.Mapping) > 0 {
		if _, err := mappingWithMarker(d.Mapping, Marker{}); err != nil {
			return nil, err
		}
	}
	return f.claim(ctx, d, true)
}

// Reclaim claims c's index again, after a reconnect or a client recreation; it never creates
// the index. The returned claim replaces c: c's write alias no longer works (under a shared
// owner the claim joins: the write alias stays the same).
func (f *Fence) Reclaim(ctx context.Context, c *Claim) (*Claim, error) {
	if c == nil {
		return nil, errors.New("esfence: nil claim")
	}
	return f.claim(ctx, c.dest, false)
}

// ForgetPipeline deletes the pipeline's state: its checkpoint and every ownership record, in
// one operation of the state store. It is the only way an ownership record goes away, so that
// forgetting an index always resets the sink's checkpoint too. The indices are left as they
// are; claiming one again is refused (unrecorded_destination) -- an index is never adopted
// (under a shared owner it is joined again, as any member without a record joins it).
func (f *Fence) ForgetPipeline(ctx context.Context, pipeline string) error {
	if err := f.state.DeletePipeline(ctx, pipeline); err != nil {
		return fmt.Errorf("esfence: deleting pipeline %q: %w", pipeline, err)
	}
	return nil
}

func (f *Fence) refuse(d Destination, class Class, detail string) *ConflictError {
	return &ConflictError{Class: class, Index: d.Index, Table: d.Table, Detail: detail}
}

// claim is Ensure and Reclaim: see "Claims" in the package documentation for the steps.
func (f *Fence) claim(ctx context.Context, d Destination, mayCreate bool) (*Claim, error) {
	// 1. The cluster, and the proof that it refuses to auto-create df-w-* indices.
	uuid, err := f.clusterUUID(ctx)
	if err != nil {
		return nil, err
	}
	if err := f.proveAutoCreate(ctx, d); err != nil {
		return nil, err
	}

	// At most two passes: the second after losing an index creation race.
	for pass := 0; ; pass++ {
		// 2. What the state store and the index say.
		rec, rev, err := f.loadRecord(ctx, d)
		if err != nil {
			return nil, err
		}
		st, err := f.getIndex(ctx, d.Index)
		if err != nil {
			return nil, err
		}

		if !st.exists {
			// 3. A missing index is created only when this pipeline never confirmed having
			// it: once it had it, it was deleted, and a deleted index stays deleted.
			if (rev != 0 && rec.Current != "") || !mayCreate {
				return nil, f.refuse(d, DestinationMissing, "the index does not exist; it is never recreated (delete the pipeline to start over)")
			}
			c, retry, err := f.create(ctx, d, uuid, rec, rev)
			if retry && pass == 0 {
				continue
			}
			return c, err
		}
		return f.claimExisting(ctx, d, uuid, st, rec, rev)
	}
}

func (f *Fence) loadRecord(ctx context.Context, d Destination) (record, statestore.Revision, error) {
	r, err := f.state.Get(ctx, d.Pipeline, Namespace, d.Index)
	if err != nil {
		return record{}, 0, fmt.Errorf("esfence: reading the ownership record: %w", err)
	}
	if r.Revision == 0 {
		return record{}, 0, nil
	}
	rec, err := decodeRecord(r.Value)
	if err != nil {
		return record{}, 0, fmt.Errorf("%w (pipeline %q, index %q)", err, d.Pipeline, d.Index)
	}
	return rec, r.Revision, nil
}

func (f *Fence) putRecord(ctx context.Context, d Destination, rec record, rev statestore.Revision) (statestore.Revision, error) {
	n, err := f.state.Put(ctx, d.Pipeline, Namespace, d.Index, rec.encode(), rev)
	if errors.Is(err, statestore.ErrConflict) {
		// Someone using the same state store changed the record since it was read: that
		// claim is newer than this one.
		return 0, f.refuse(d, Fenced, "the ownership record changed during the claim")
	}
	if err != nil {
		return 0, fmt.Errorf("esfence: writing the ownership record: %w", err)
	}
	return n, nil
}

func (f *Fence) random(n int) (string, error) {
	b := make([]byte, n)
	if _, err := io.ReadFull(f.opts.Rand, b); err != nil {
		return "", fmt.Errorf("esfence: drawing random bytes: %w", err)
	}
	return hex.EncodeToString(b), nil
}

func (f *Fence) newFence(generation uint64) (string, error) {
	nonce, err := f.random(8)
	if err != nil {
		return "", err
	}
	return strconv.FormatUint(generation, 10) + "-" + nonce, nil
}

// create makes the index: the record first (instance and pending fence), then the index with
// marker and write alias in one request, then the record again (current fence). retry is set
// when someone else created the index meanwhile and the caller should look again.
func (f *Fence) create(ctx context.Context, d Destination, uuid string, rec record, rev statestore.Revision) (c *Claim, retry bool, err error) {
	if rev == 0 {
		// A fresh destination. (A record without a current fence is a creation that did
		// not finish; it is resumed with the same instance and fence.)
		inst, err := f.random(16)
		if err != nil {
			return nil, false, err
		}
		fence, err := f.newFence(1)
		if err != nil {
			return nil, false, err
		}
		rec = record{Instance: inst, Pending: fence}
		if rev, err = f.putRecord(ctx, d, rec, 0); err != nil {
			return nil, false, err
		}
	}
	if f.afterPending != nil {
		if err := f.afterPending(d.Index); err != nil {
			return nil, false, err
		}
	}
	marker := Marker{
		Format:   MarkerFormat,
		Owner:    MarkerOwner{Deployment: f.owner(), Pipeline: d.Pipeline, Sink: d.Sink},
		Source:   sourceOf(d.Table),
		Index:    MarkerIndex{ClusterUUID: uuid, Name: d.Index},
		Encoding: d.Encoding,
		Instance: rec.Instance,
	}
	mappings, err := mappingWithMarker(d.Mapping, marker)
	if err != nil {
		return nil, false, err
	}
	aliases := map[string]any{writeAlias(rec.Instance, rec.Pending): map[string]any{}}
	if d.ReadAlias != "" {
		aliases[d.ReadAlias] = map[string]any{"is_write_index": false}
	}
	body := map[string]any{"mappings": mappings, "aliases": aliases}
	if len(d.Settings) > 0 {
		body["settings"] = d.Settings
	}
	const what = "creating the index"
	a, err := f.do(ctx, what, esapi.IndicesCreateRequest{Index: d.Index, Body: jsonBody(body)})
	if err != nil {
		return nil, false, err
	}
	if !a.ok() {
		se := a.serverError(what)
		if se.Type == "resource_already_exists_exception" {
			return nil, true, se
		}
		return nil, false, se
	}
	if f.afterRotate != nil {
		if err := f.afterRotate(d.Index); err != nil {
			return nil, false, err
		}
	}
	fence := rec.Pending
	if _, err := f.putRecord(ctx, d, record{Instance: rec.Instance, Current: fence}, rev); err != nil {
		return nil, false, err
	}
	return &Claim{dest: d, instance: rec.Instance, fence: fence, clusterUUID: uuid}, false, nil
}

// mappingWithMarker returns the mappings object with the marker at _meta.deltaforge, keeping
// everything else. A mapping that brings its own deltaforge key is refused: the key is ours.
func mappingWithMarker(mapping json.RawMessage, m Marker) (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(mapping)) > 0 {
		if err := json.Unmarshal(mapping, &out); err != nil || out == nil {
			return nil, errors.New("esfence: the mapping is not a JSON object")
		}
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := out["_meta"]; ok {
		if err := json.Unmarshal(raw, &meta); err != nil || meta == nil {
			return nil, errors.New("esfence: the mapping's _meta is not a JSON object")
		}
		if _, taken := meta[MarkerKey]; taken {
			return nil, errors.New("esfence: the mapping's _meta already has a " + MarkerKey + " key")
		}
	}
	mb, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	meta[MarkerKey] = mb
	metaJSON, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	out["_meta"] = metaJSON
	return out, nil
}

// claimExisting proves that the index is ours and rotates its fence.
func (f *Fence) claimExisting(ctx context.Context, d Destination, uuid string, st indexState, rec record, rev statestore.Revision) (*Claim, error) {
	m, err := f.checkMarker(d, uuid, st)
	if err != nil {
		return nil, err
	}
	if f.shared() {
		return f.join(ctx, d, uuid, st, m, rec, rev)
	}
	from, err := f.checkRecord(d, st, m, rec, rev)
	if err != nil {
		return nil, err
	}
	return f.rotate(ctx, d, uuid, rec, rev, from)
}

// checkMarker proves an existing index this owner's, pipeline's, sink's, table's, index's and
// encoding's by its marker (step 4 of a claim, before the record).
func (f *Fence) checkMarker(d Destination, uuid string, st indexState) (*Marker, error) {
	if !st.concrete {
		return nil, f.refuse(d, AliasNotSupported, "the name is an alias or a data stream, not an index")
	}
	m, class, detail := parseMarker(st.meta)
	if class != "" {
		return nil, f.refuse(d, class, detail)
	}
	if m.Owner.Deployment != f.owner() || m.Owner.Pipeline != d.Pipeline || m.Owner.Sink != d.Sink {
		e := f.refuse(d, OwnedByOther, "the index belongs to another deployment, pipeline or sink"+ownerKindHint(m.Owner.Deployment, f.shared()))
		e.OwnerDigest = OwnerDigest(m.Owner.Deployment, m.Owner.Pipeline, m.Owner.Sink)
		return nil, e
	}
	if m.Source != sourceOf(d.Table) {
		return nil, f.refuse(d, BoundToAnotherRelation, "the index mirrors another source table")
	}
	if m.Index.Name != d.Index {
		return nil, f.refuse(d, DestinationIdentityMismatch, fmt.Sprintf("the marker names index %q: this is a copy (restored or reindexed under another name)", m.Index.Name))
	}
	if m.Index.ClusterUUID != uuid {
		return nil, f.refuse(d, DestinationIdentityMismatch, "the marker names another cluster: this is a copy (restored or reindexed into another cluster)")
	}
	if m.Encoding != d.Encoding {
		return nil, f.refuse(d, EncodingMismatch, fmt.Sprintf("the index was written with encoding %q, the sink uses %q", m.Encoding, d.Encoding))
	}
	return m, nil
}

// checkRecord proves, for an exclusive owner, that the state store's record names the
// marker's instance and that the index's write alias carries the record's current or pending
// fence, and returns that fence: the one a rotation starts from.
func (f *Fence) checkRecord(d Destination, st indexState, m *Marker, rec record, rev statestore.Revision) (string, error) {
	if rev == 0 {
		return "", f.refuse(d, UnrecordedDestination, "the state store has no record of this index (restored from a backup older than the index, or the pipeline was deleted); it is never adopted")
	}
	if m.Instance != rec.Instance {
		if rec.Current == "" {
			// Our creation never finished and another copy of this deployment created the
			// index first.
			return "", f.refuse(d, Fenced, "another copy of this deployment created the index first")
		}
		return "", f.refuse(d, DestinationIdentityMismatch, "the index is not the one the state store recorded (another instance)")
	}
	from, err := f.currentFence(d, st, m)
	if err != nil {
		return "", err
	}
	if from != rec.Current && from != rec.Pending {
		return "", f.refuse(d, Fenced, "another claim rotated the fence since this state store's last claim (a copy of the state store, or a restored older backup)")
	}
	return from, nil
}

// currentFence is the fence of the index's one write alias, which must be of the marker's
// instance (fence_malformed otherwise).
func (f *Fence) currentFence(d Destination, st indexState, m *Marker) (string, error) {
	var internal []string
	for _, a := range st.aliases {
		if strings.HasPrefix(a, internalPrefix) {
			internal = append(internal, a)
		}
	}
	sort.Strings(internal)
	if len(internal) != 1 {
		return "", f.refuse(d, FenceMalformed, fmt.Sprintf("the index has %d internal %s* aliases, want exactly 1", len(internal), internalPrefix))
	}
	inst, fence, ok := parseWriteAlias(internal[0])
	if !ok || inst != m.Instance {
		return "", f.refuse(d, FenceMalformed, fmt.Sprintf("the internal alias %q is not a write alias of this index", internal[0]))
	}
	return fence, nil
}

// rotate moves the write alias from fence `from` to a new fence: record the new fence as
// pending (with `from` as current), swap the aliases in one request that fails unless `from`
// is still there, then record the new fence as current.
func (f *Fence) rotate(ctx context.Context, d Destination, uuid string, rec record, rev statestore.Revision, from string) (*Claim, error) {
	next, rev, err := f.recordPending(ctx, d, rec, rev, from)
	if err != nil {
		return nil, err
	}
	if f.afterPending != nil {
		if err := f.afterPending(d.Index); err != nil {
			return nil, err
		}
	}
	const what = "rotating the write alias"
	a, err := f.do(ctx, what, esapi.IndicesUpdateAliasesRequest{Body: jsonBody(map[string]any{"actions": rotation(d.Index, rec.Instance, from, next)})})
	if err != nil {
		return nil, err // outcome unknown; the record allows either fence on the next claim
	}
	if err := f.rotationAnswer(d, what, a); err != nil {
		return nil, err
	}
	if f.afterRotate != nil {
		if err := f.afterRotate(d.Index); err != nil {
			return nil, err
		}
	}
	if _, err := f.putRecord(ctx, d, record{Instance: rec.Instance, Current: next}, rev); err != nil {
		return nil, err
	}
	return &Claim{dest: d, instance: rec.Instance, fence: next, clusterUUID: uuid}, nil
}

// recordPending draws the fence a rotation from `from` installs (its generation one above
// every fence the record and the index name) and records it as pending, `from` as current.
func (f *Fence) recordPending(ctx context.Context, d Destination, rec record, rev statestore.Revision, from string) (string, statestore.Revision, error) {
	gen := fenceGeneration(from)
	for _, g := range []string{rec.Current, rec.Pending} {
		if g != "" && fenceGeneration(g) > gen {
			gen = fenceGeneration(g)
		}
	}
	next, err := f.newFence(gen + 1)
	if err != nil {
		return "", 0, err
	}
	rev, err = f.putRecord(ctx, d, record{Instance: rec.Instance, Current: from, Pending: next}, rev)
	if err != nil {
		return "", 0, err
	}
	return next, rev, nil
}

// rotation is the two _aliases actions moving an index's write alias from fence `from` to
// `next`: the remove fails unless the old alias is still there.
func rotation(index, instance, from, next string) []any {
	return []any{
		map[string]any{"remove": map[string]any{"index": index, "alias": writeAlias(instance, from), "must_exist": true}},
		map[string]any{"add": map[string]any{"index": index, "alias": writeAlias(instance, next)}},
	}
}

// rotationAnswer judges an _aliases answer of rotations: a must_exist remove that found
// nothing is a fence another claim moved (fenced), a missing index destination_missing.
func (f *Fence) rotationAnswer(d Destination, what string, a answer) error {
	if !a.ok() {
		se := a.serverError(what)
		if a.status == http.StatusNotFound && se.Type == "aliases_not_found_exception" {
			return f.refuse(d, Fenced, "the fence was rotated by another claim during this one")
		}
		if a.status == http.StatusNotFound && se.Type == "index_not_found_exception" {
			return f.refuse(d, DestinationMissing, "the index was deleted during the claim")
		}
		return se
	}
	return aliasActionsFailed(a.body)
}

// aliasActionsFailed checks a 2xx _aliases answer for per-action failures: Elasticsearch 8
// answers 200 with errors:true when some actions failed and others did not. With must_exist on
// the remove that does not happen today, but a partial rotation must never pass as a claim.
func aliasActionsFailed(body []byte) error {
	var ans struct {
		Acknowledged bool `json:"acknowledged"`
		Errors       bool `json:"errors"`
	}
	if json.Unmarshal(body, &ans) != nil || !ans.Acknowledged || ans.Errors {
		return errors.New("esfence: rotating the write alias: the cluster did not acknowledge every action")
	}
	return nil
}
