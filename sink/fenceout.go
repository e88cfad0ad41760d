package sink

import (
	"context"

	"github.com/tributary-dev/tributary/esfence"
)

// FenceOut fences every index of the sink's pipeline against the process that wrote it before
// (a takeover by a standby: doc.go, "Fencing and index creation"): esfence.Fence.FenceOut
// rotates the write alias of every index the pipeline's ownership records name, in one
// _aliases request, so a paused old active's writes through the aliases it held fail at the
// cluster -- also for tables this sink will not write for a long time. Call it after building
// the sink on the state store view fenced by the new lease's epoch and before the first
// Write; the report says which indices were rotated, which recorded ones are missing from the
// cluster and which carry no write alias (retired generations).
//
// Its errors are classed as a claim's (Failures): a refusal (a *esfence.ConflictError; an
// index another owner holds, or a fence moved by a copy of the state store) is cdc.Permanent,
// with the report of the indices still rotated; statestore.ErrNotLeader (another process took
// the lease over since: this one must step down, never retry) is cdc.Permanent and found by
// errors.Is; esfence.ErrSharedOwner (a shared owner has nothing to fence out) is cdc.Permanent;
// transport, server and state-store failures are backpressure: call it again, it carries on
// from the fences the cut one recorded.
//
// Claims the sink held before are rotated away: the next Write claims every index again (one
// claim round), as after a reconnect. No Write may run meanwhile.
func (s *Sink) FenceOut(ctx context.Context) (esfence.FenceOutReport, error) {
	rep, err := s.fence.FenceOut(ctx, s.pipeline)
	s.mu.Lock()
	held := len(s.gens) > 0
	s.mu.Unlock()
	if held {
		s.stale.Store(true)
		s.claimEpoch.Add(1)
	}
	if err != nil {
		return rep, s.requestError(err, "fencing out the pipeline's indices")
	}
	return rep, nil
}
