package sink

import (
	"context"
	"fmt"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/esfence"
)

// The deployment requirement, checked before a pipeline starts (package mirror does, before it
// opens the source) and applied by whoever may (cdcmirror prepare-cluster). Every claim still
// makes the same proof; these only let a refusal that is certain come before anything is
// created.

// CheckCluster makes the proof every claim makes (esfence.Fence.CheckAutoCreate), sending no
// write: nil when the cluster refuses to auto-create df-w-* indices. A start certain to be
// refused is a permanent error (cdc.IsPermanent): the fencing_unenforced refusal, whose detail
// quotes the request that fixes it, as well as credentials or a certificate the cluster
// refuses. An unreachable or unavailable cluster is a *cdc.BackpressureError: try again.
func (s *Sink) CheckCluster(ctx context.Context) error {
	err := s.fence.CheckAutoCreate(ctx)
	if err == nil {
		return nil
	}
	if esfence.ClassOf(err) != "" {
		return cdc.Permanent(fmt.Errorf("elasticsearch sink %q: %w", s.cfg.ID, err))
	}
	return s.requestError(err, "checking the cluster")
}

// AutoCreate reads the cluster's identity and its effective action.auto_create_index, judged
// as every claim judges it (esfence.Fence.ReadAutoCreate), with the sink's credentials.
func (s *Sink) AutoCreate(ctx context.Context) (esfence.AutoCreate, error) {
	return s.fence.ReadAutoCreate(ctx)
}

// EnforceAutoCreate sends a's request with the sink's credentials and returns the setting as
// the cluster then shows it (esfence.Fence.EnforceAutoCreate); a user without the privilege
// to update cluster settings gets the cluster's 403 as an *esfence.ServerError.
func (s *Sink) EnforceAutoCreate(ctx context.Context, a esfence.AutoCreate) (esfence.AutoCreate, error) {
	return s.fence.EnforceAutoCreate(ctx, a)
}
