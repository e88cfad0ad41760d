package sink

import "context"

// DropIndices deletes the indices this sink's pipeline created, with their write aliases,
// and returns their names (esfence.Fence.DropIndices: an index another owner holds by now is
// left in place and reported). The ownership records stay until the pipeline's state is
// deleted (statestore.Store.DeletePipeline); only then can the pipeline start over. Call it
// while no pipeline writes through this sink.
func (s *Sink) DropIndices(ctx context.Context) ([]string, error) {
	return s.fence.DropIndices(ctx, s.pipeline)
}
