package statestore

import (
	"context"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ResetCheckpoint deletes the pipeline's checkpoint (and when it was saved) and nothing else:
// its records -- the ownership of its indices among them -- and the store's identity stay, so
// the next run starts as a pipeline without a checkpoint does (a snapshot, or the source's
// current position) and writes the same indices as the same owner. It is how a pipeline moves
// to another kind of source, whose checkpoints the old one's are not (mirror.Switch).
// Resetting a pipeline that has no checkpoint is not an error.
func (s *DB) ResetCheckpoint(ctx context.Context, pipeline string) error {
	if err := checkNames(pipeline); err != nil {
		return err
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		p, err := pipelineBucket(tx, pipeline, false)
		if p == nil || err != nil {
			return nil // no pipeline bucket: nothing stored
		}
		if err := p.Delete(keyCheckpoint); err != nil {
			return err
		}
		return p.Delete(keySaved)
	})
}

// ResetCheckpoint is DB.ResetCheckpoint.
func (m *Memory) ResetCheckpoint(ctx context.Context, pipeline string) error {
	return m.resetCheckpoint(ctx, pipeline, nil)
}

func (m *Memory) resetCheckpoint(ctx context.Context, pipeline string, f *memFence) error {
	if err := m.lockWrite(ctx, f, "reset checkpoint", pipeline); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if p := m.pipeline(pipeline, false); p != nil {
		p.checkpoint, p.saved = nil, time.Time{}
	}
	return nil
}
