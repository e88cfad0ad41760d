package esfence

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/elastic/go-elasticsearch/v8/esapi"
)

// DropIndices deletes the indices the pipeline's ownership records name, so that the pipeline
// can start over: each goes only after its marker proved it was created by this deployment,
// this pipeline and the record's instance (its write alias goes with it). The ownership
// records stay until ForgetPipeline, which is what a restart must also do: an index that is
// gone while its record remains is never recreated (destination_missing).
//
// It returns the names it deleted. An index already gone is skipped. One the records name but
// that is not this pipeline's -- an alias or a data stream by now, no marker, another owner or
// instance -- is left as it is and reported as a *ConflictError of that class; the others are
// still deleted, and the error joins every such refusal and failure.
func (f *Fence) DropIndices(ctx context.Context, pipeline string) ([]string, error) {
	recs, err := f.state.List(ctx, pipeline, Namespace)
	if err != nil {
		return nil, fmt.Errorf("esfence: listing the ownership records of pipeline %q: %w", pipeline, err)
	}
	tables, err := f.state.List(ctx, pipeline, TableNamespace)
	if err != nil {
		return nil, fmt.Errorf("esfence: listing the table records of pipeline %q: %w", pipeline, err)
	}
	migrated := map[string]bool{} // legacy indices replaced by their table's read alias
	for _, r := range tables {
		if rec, err := decodeTableRecord(r.Value); err == nil && rec.Live > 0 {
			migrated[r.Key] = true
		}
	}
	var dropped []string
	var errs []error
	for _, r := range recs {
		if migrated[r.Key] {
			continue
		}
		deleted, err := f.dropIndex(ctx, pipeline, r.Key, r.Value)
		if err != nil {
			errs = append(errs, err)
		}
		if deleted {
			dropped = append(dropped, r.Key)
		}
	}
	return dropped, errors.Join(errs...)
}

func (f *Fence) dropIndex(ctx context.Context, pipeline, index string, value []byte) (bool, error) {
	refuse := func(class Class, detail string) error {
		return &ConflictError{Class: class, Index: index, Detail: detail + "; the index was left in place"}
	}
	rec, err := decodeRecord(value)
	if err != nil {
		return false, fmt.Errorf("%w (pipeline %q, index %q)", err, pipeline, index)
	}
	st, err := f.getIndex(ctx, index)
	switch {
	case err != nil:
		return false, err
	case !st.exists:
		return false, nil
	case !st.concrete:
		return false, refuse(AliasNotSupported, "the name is an alias or a data stream now")
	}
	m, class, detail := parseMarker(st.meta)
	switch {
	case m == nil:
		return false, refuse(class, detail)
	case m.Owner.Deployment != f.owner() || m.Owner.Pipeline != pipeline:
		return false, &ConflictError{Class: OwnedByOther, Index: index, OwnerDigest: OwnerDigest(m.Owner.Deployment, m.Owner.Pipeline, m.Owner.Sink),
			Detail: "the marker names another deployment or pipeline" + ownerKindHint(m.Owner.Deployment, f.shared()) + "; the index was left in place"}
	case m.Instance != rec.Instance || m.Index.Name != index:
		return false, refuse(DestinationIdentityMismatch, "the index is another instance than the one this pipeline created")
	}
	const what = "deleting the index"
	a, err := f.do(ctx, what, esapi.IndicesDeleteRequest{Index: []string{index}})
	switch {
	case err != nil:
		return false, err
	case a.status == http.StatusNotFound:
		return false, nil
	case !a.ok():
		return false, a.serverError(what)
	}
	return true, nil
}
