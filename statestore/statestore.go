package statestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/tributary-dev/tributary/cdc"
)

// Store is the durable state of one deployment. See the package documentation.
type Store interface {
	cdc.CheckpointStore

	// Identity returns the deployment identity, fixed when the store was first created.
	Identity() string

	// Get returns a record. A missing record is Record{Key: key} with revision 0 and no error.
	Get(ctx context.Context, pipeline, namespace, key string) (Record, error)
	// Put stores value as the record's new state if the record's current revision is expect
	// (0: the record must not exist), and returns the new revision. Otherwise it fails with
	// ErrConflict and changes nothing.
	Put(ctx context.Context, pipeline, namespace, key string, value []byte, expect Revision) (Revision, error)
	// Delete removes the record if its current revision is expect (which must not be 0);
	// otherwise it fails with ErrConflict.
	Delete(ctx context.Context, pipeline, namespace, key string, expect Revision) error
	// List returns a namespace's records ordered by key.
	List(ctx context.Context, pipeline, namespace string) ([]Record, error)

	// CheckpointSaved returns when the pipeline's checkpoint was last saved: zero when it has
	// none, or when it was saved by a version that did not record the time.
	CheckpointSaved(ctx context.Context, pipeline string) (time.Time, error)

	// DeletePipeline removes the pipeline's checkpoint and every record of the pipeline in one
	// atomic operation. Deleting a pipeline that has no state is not an error.
	DeletePipeline(ctx context.Context, pipeline string) error

	// Close releases the store; later calls fail with ErrClosed.
	Close() error
}

// Revision identifies one stored state of a record; 0 means the record does not exist.
type Revision uint64

// Record is one record's current state.
type Record struct {
	Key      string
	Value    []byte
	Revision Revision
}

// Errors. Test with errors.Is; the wrapping error names the pipeline, namespace and key.
var (
	// ErrConflict: a compare-and-set found another revision than expected.
	ErrConflict = errors.New("statestore: revision conflict")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("statestore: closed")
	// ErrInvalid: an empty or oversized name, or an empty checkpoint.
	ErrInvalid = errors.New("statestore: invalid argument")
	// ErrFormat: the file is not a state store or has a format this version does not know.
	ErrFormat = errors.New("statestore: unsupported file format")
	// ErrLocked: Open waited Options.LockTimeout for the file's lock, which another open store
	// holds (a running pipeline, in this or another process).
	ErrLocked = errors.New("statestore: the state file is in use")
)

// MaxNameBytes bounds pipeline names, namespaces and keys.
const MaxNameBytes = 1024

func checkNames(names ...string) error {
	for _, n := range names {
		if n == "" || len(n) > MaxNameBytes {
			return fmt.Errorf("%w: names must have 1 to %d bytes", ErrInvalid, MaxNameBytes)
		}
	}
	return nil
}

func conflict(pipeline, namespace, key string, want, have Revision) error {
	return fmt.Errorf("%w: pipeline %q, %s/%s: expected revision %d, found %d", ErrConflict, pipeline, namespace, key, want, have)
}

// newIdentity draws a version 4 UUID from r.
func newIdentity(r io.Reader) (string, error) {
	var b [16]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return "", fmt.Errorf("statestore: drawing the deployment identity: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}
