package esfence

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/statestore"
)

// Fencing out (doc.go, "Fencing out"): a standby that takes a pipeline over claims every index
// the pipeline's ownership records name before its runner writes anything -- also the indices
// of tables it will not write for a long time, which no claim of its own would rotate soon. An
// old active paused across the takeover then finds every write alias it holds gone at the
// cluster.

// fenceOutPasses bounds the rounds one FenceOut makes when its _aliases request is refused
// because a fence moved or an index went between its reads and the request.
const fenceOutPasses = 3

// FenceOutReport is what FenceOut found and did, each list sorted.
type FenceOutReport struct {
	// Rotated are the indices whose write alias was rotated: a write through any alias they
	// carried before fails at the cluster.
	Rotated []string
	// Missing are the indices the records name that are not indices of the cluster (deleted,
	// or the name is an alias by now): skipped -- no write alias of theirs remains.
	Missing []string
	// Unaliased are indices that carry no write alias (a retired generation, a generation or
	// legacy index a switch fenced off): nothing can write to them, nothing is rotated.
	Unaliased []string
}

// FenceOut claims, for a takeover, every index the pipeline's ownership records name: each is
// proven as a claim proves it -- the marker names this deployment (or shared owner), the
// pipeline, the index, the cluster and the record's instance; the index carries exactly one
// df-w-* alias, of that instance, whose fence is the record's current or pending one -- and its
// write alias is rotated as a claim round rotates it: every pending fence recorded, ONE
// _aliases request rotating every fence (atomic across indices), every current fence recorded.
// Like a round it first reads the cluster's identity and proves the auto-create rule
// (fencing_unenforced otherwise, nothing rotated).
//
// An index the records name that is missing from the cluster is skipped and reported
// (Missing); one that carries no write alias at all (a retired generation) has nothing to
// fence and is reported (Unaliased). An index that fails its proof is a *ConflictError of the
// usual class, and is left as it is; the others are still rotated, and the error joins every
// such refusal (with the report of what was done). Any other error (transport, server, state
// store) returns at once, with what was done so far: a FenceOut cut short leaves records whose
// pending fence allows whichever fence the index carries, so the next FenceOut or claim
// carries on.
//
// State-store writes go through the Fence's store: on a fenced view (statestore.Leaser's
// Fenced) of a lease another process has taken over, the first pending fence fails with
// statestore.ErrNotLeader (errors.Is finds it) before anything is sent to rotate, and FenceOut
// returns it at once. Under a shared owner FenceOut fails with ErrSharedOwner, sending
// nothing: members never fence each other.
//
// The sink's claims held before a FenceOut are fenced by it: they must be claimed again.
func (f *Fence) FenceOut(ctx context.Context, pipeline string) (FenceOutReport, error) {
	if f.shared() {
		return FenceOutReport{}, fmt.Errorf("%w: fencing out pipeline %q", ErrSharedOwner, pipeline)
	}
	if pipeline == "" {
		return FenceOutReport{}, errors.New("esfence: FenceOut needs a pipeline")
	}
	// seen holds, per index, every fence a record of it named during this call: a round
	// whose _aliases request lost the race against a rotation a paused old active had
	// recorded as pending (and this call's own pending write then replaced in the record)
	// carries on from that fence in its next pass.
	seen := map[string][]string{}
	var rep FenceOutReport
	for pass := 1; ; pass++ {
		var again bool
		var err error
		rep, again, err = f.fenceOutRound(ctx, pipeline, seen)
		if !again || pass == fenceOutPasses {
			return rep, err
		}
	}
}

// fenceOutTarget is one index of a FenceOut round.
type fenceOutTarget struct {
	d    Destination // pipeline and index; the rest is the marker's
	rec  record
	rev  statestore.Revision
	from string
	to   string
}

// fenceOutRound is one pass of FenceOut. again is set when its _aliases request was refused
// because a fence moved or an index went since its reads (err then holds the refusal).
func (f *Fence) fenceOutRound(ctx context.Context, pipeline string, seen map[string][]string) (rep FenceOutReport, again bool, err error) {
	recs, err := f.state.List(ctx, pipeline, Namespace)
	if err != nil {
		return rep, false, fmt.Errorf("esfence: listing the ownership records of pipeline %q: %w", pipeline, err)
	}
	tables, err := f.state.List(ctx, pipeline, TableNamespace)
	if err != nil {
		return rep, false, fmt.Errorf("esfence: listing the table records of pipeline %q: %w", pipeline, err)
	}
	migrated := map[string]bool{} // legacy indices replaced by their table's read alias
	for _, r := range tables {
		if rec, err := decodeTableRecord(r.Value); err == nil && rec.Live > 0 {
			migrated[r.Key] = true
		}
	}
	var targets []*fenceOutTarget
	var refusals []error
	for _, r := range recs {
		if migrated[r.Key] {
			continue
		}
		rec, err := decodeRecord(r.Value)
		if err != nil {
			refusals = append(refusals, fmt.Errorf("%w (pipeline %q, index %q)", err, pipeline, r.Key))
			continue
		}
		for _, fe := range []string{rec.Current, rec.Pending} {
			if fe != "" && !slices.Contains(seen[r.Key], fe) {
				seen[r.Key] = append(seen[r.Key], fe)
			}
		}
		targets = append(targets, &fenceOutTarget{d: Destination{Pipeline: pipeline, Index: r.Key}, rec: rec, rev: r.Revision})
	}
	if len(targets) == 0 {
		return rep, false, errors.Join(refusals...)
	}

	// The reads at once: the cluster's identity, the auto-create proof, every index.
	names := make([]string, len(targets))
	for i, tg := range targets {
		names[i] = tg.d.Index
	}
	uuid, found, err := f.roundReads(ctx, Destination{}, names)
	if err != nil {
		return rep, false, err
	}

	// Every proof, locally.
	var rotating []*fenceOutTarget
	for _, tg := range targets {
		st, ok := found[tg.d.Index]
		if !ok {
			rep.Missing = append(rep.Missing, tg.d.Index)
			continue
		}
		skip, err := f.proveFenceOut(tg, uuid, st, seen[tg.d.Index])
		switch {
		case err != nil:
			refusals = append(refusals, err)
		case skip:
			rep.Unaliased = append(rep.Unaliased, tg.d.Index)
		default:
			rotating = append(rotating, tg)
		}
	}
	if len(rotating) == 0 {
		return rep, false, errors.Join(refusals...)
	}

	// The rotation: every pending fence, one _aliases request, every current fence.
	var actions []any
	for _, tg := range rotating {
		if tg.to, tg.rev, err = f.recordPending(ctx, tg.d, tg.rec, tg.rev, tg.from); err != nil {
			return rep, false, err
		}
		if f.afterPending != nil {
			if err := f.afterPending(tg.d.Index); err != nil {
				return rep, false, err
			}
		}
		actions = append(actions, rotation(tg.d.Index, tg.rec.Instance, tg.from, tg.to)...)
	}
	const what = "rotating the write aliases"
	a, err := f.do(ctx, what, esapi.IndicesUpdateAliasesRequest{Body: jsonBody(map[string]any{"actions": actions})})
	if err != nil {
		return rep, false, err // outcome unknown; every record allows either fence
	}
	if !a.ok() {
		se := a.serverError(what)
		if a.status == http.StatusNotFound && (se.Type == "aliases_not_found_exception" || se.Type == "index_not_found_exception") {
			// A fence moved or an index went since the reads: nothing was rotated; the next
			// pass reads again and finds out which.
			return rep, true, errors.Join(append(refusals, &ConflictError{Class: Fenced,
				Detail: "a write alias was rotated or an index deleted while fencing out pipeline " + quote(pipeline)})...)
		}
		return rep, false, se
	}
	if err := aliasActionsFailed(a.body); err != nil {
		return rep, false, err
	}
	for _, tg := range rotating {
		if f.afterRotate != nil {
			if err := f.afterRotate(tg.d.Index); err != nil {
				return rep, false, err
			}
		}
		if _, err := f.putRecord(ctx, tg.d, record{Instance: tg.rec.Instance, Current: tg.to}, tg.rev); err != nil {
			return rep, false, err
		}
		rep.Rotated = append(rep.Rotated, tg.d.Index)
	}
	slices.Sort(rep.Rotated)
	slices.Sort(rep.Missing)
	slices.Sort(rep.Unaliased)
	return rep, false, errors.Join(refusals...)
}

// proveFenceOut proves one existing index of a FenceOut as a claim proves it, without the
// destination's sink, table and encoding (FenceOut has only the pipeline; the marker names
// them, and a refusal names its table): the marker names this owner, the pipeline, the index,
// the cluster and the record's instance; the index carries exactly one write alias of that
// instance, whose fence is one a record named (the record's current or pending, or one an
// earlier pass of this FenceOut read). It sets tg.from; skip is set for an index without any
// write alias.
func (f *Fence) proveFenceOut(tg *fenceOutTarget, uuid string, st indexState, allowed []string) (skip bool, err error) {
	d := tg.d
	m, class, detail := parseMarker(st.meta)
	if class != "" {
		return false, f.refuse(d, class, detail)
	}
	d.Table.Connector, d.Table.Source, d.Table.Database, d.Table.Schema, d.Table.Table =
		m.Source.Connector, m.Source.Source, m.Source.Database, m.Source.Schema, m.Source.Table
	switch {
	case m.Owner.Deployment != f.owner() || m.Owner.Pipeline != d.Pipeline:
		e := f.refuse(d, OwnedByOther, "the index belongs to another deployment or pipeline"+ownerKindHint(m.Owner.Deployment, f.shared()))
		e.OwnerDigest = OwnerDigest(m.Owner.Deployment, m.Owner.Pipeline, m.Owner.Sink)
		return false, e
	case m.Index.Name != d.Index:
		return false, f.refuse(d, DestinationIdentityMismatch, fmt.Sprintf("the marker names index %q: this is a copy (restored or reindexed under another name)", m.Index.Name))
	case m.Index.ClusterUUID != uuid:
		return false, f.refuse(d, DestinationIdentityMismatch, "the marker names another cluster: this is a copy (restored or reindexed into another cluster)")
	case m.Instance != tg.rec.Instance && tg.rec.Current == "":
		return false, f.refuse(d, Fenced, "another copy of this deployment created the index first")
	case m.Instance != tg.rec.Instance:
		return false, f.refuse(d, DestinationIdentityMismatch, "the index is not the one the state store recorded (another instance)")
	}
	if !slices.ContainsFunc(st.aliases, func(a string) bool { return strings.HasPrefix(a, internalPrefix) }) {
		return true, nil
	}
	from, err := f.currentFence(d, st, m)
	if err != nil {
		return false, err
	}
	if from != tg.rec.Current && from != tg.rec.Pending && !slices.Contains(allowed, from) {
		return false, f.refuse(d, Fenced, "another claim rotated the fence since this state store's last claim (a copy of the state store, or a restored older backup)")
	}
	tg.from = from
	return false, nil
}
