package statestore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/tributary-dev/tributary/cdc"
)

// Options configure Open. The zero value (or nil) gives the documented defaults.
type Options struct {
	// LockTimeout bounds the wait for the file's exclusive lock, held by another open store
	// (in this or another process). Default 10s.
	LockTimeout time.Duration
	// Mode is the permission of a newly created file. Default 0600: the state names the
	// deployment and may be sensitive.
	Mode os.FileMode
	// Rand is where a new file's identity comes from. Default crypto/rand.
	Rand io.Reader
	// Now is the clock that stamps saved checkpoints (CheckpointSaved). Default time.Now.
	Now func() time.Time
}

// The file's layout (format 1):
//
//	meta/format              "1"
//	meta/identity            the deployment identity
//	pipelines/               its sequence is the store's revision counter
//	  <pipeline>/checkpoint  the checkpoint bytes
//	  <pipeline>/checkpoint_saved  when it was saved: 8-byte big-endian Unix nanoseconds
//	                         (added within format 1; older files lack it)
//	  <pipeline>/records/<namespace>/<key>  8-byte big-endian revision, then the value
var (
	bucketMeta      = []byte("meta")
	bucketPipelines = []byte("pipelines")
	bucketRecords   = []byte("records")
	keyFormat       = []byte("format")
	keyIdentity     = []byte("identity")
	keyCheckpoint   = []byte("checkpoint")
	keySaved        = []byte("checkpoint_saved")
	formatVersion   = []byte("1")
)

// DB is the file Store.
type DB struct {
	db       *bolt.DB
	identity string
	now      func() time.Time
}

var _ Store = (*DB)(nil)

// Open opens the state file at path, creating it (with a new identity) when it does not exist.
func Open(path string, opts *Options) (*DB, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.LockTimeout <= 0 {
		o.LockTimeout = 10 * time.Second
	}
	if o.Mode == 0 {
		o.Mode = 0o600
	}
	if o.Rand == nil {
		o.Rand = rand.Reader
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	bdb, err := bolt.Open(path, o.Mode, &bolt.Options{Timeout: o.LockTimeout})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: open %s: its lock is still held after %v", ErrLocked, path, o.LockTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("statestore: open %s: %w", path, err)
	}
	s := &DB{db: bdb, now: o.Now}
	err = bdb.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			// A fresh file has no buckets at all; anything else is not ours.
			if err := tx.ForEach(func([]byte, *bolt.Bucket) error { return ErrFormat }); err != nil {
				return fmt.Errorf("%w: %s has buckets but no state store metadata", ErrFormat, path)
			}
			id, err := newIdentity(o.Rand)
			if err != nil {
				return err
			}
			if meta, err = tx.CreateBucket(bucketMeta); err != nil {
				return err
			}
			if err := meta.Put(keyFormat, formatVersion); err != nil {
				return err
			}
			if err := meta.Put(keyIdentity, []byte(id)); err != nil {
				return err
			}
			if _, err := tx.CreateBucket(bucketPipelines); err != nil {
				return err
			}
		}
		if f := meta.Get(keyFormat); !bytes.Equal(f, formatVersion) {
			return fmt.Errorf("%w: %s has format %q, this version reads %q", ErrFormat, path, f, formatVersion)
		}
		id := meta.Get(keyIdentity)
		if len(id) == 0 || tx.Bucket(bucketPipelines) == nil {
			return fmt.Errorf("%w: %s lacks its identity or pipelines", ErrFormat, path)
		}
		s.identity = string(id)
		return nil
	})
	if err != nil {
		_ = bdb.Close()
		return nil, err
	}
	return s, nil
}

// Identity implements Store.
func (s *DB) Identity() string { return s.identity }

// Path returns the file's path.
func (s *DB) Path() string { return s.db.Path() }

// Close implements Store.
func (s *DB) Close() error { return s.db.Close() }

// Backup writes a consistent copy of the file to w while the store stays usable. Restoring it
// (opening the copy) gives a store with the same identity and the state of the moment Backup
// began.
func (s *DB) Backup(ctx context.Context, w io.Writer) error {
	return s.view(ctx, func(tx *bolt.Tx) error {
		_, err := tx.WriteTo(w)
		return err
	})
}

func (s *DB) view(ctx context.Context, fn func(*bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return closedErr(s.db.View(fn))
}

func (s *DB) update(ctx context.Context, fn func(*bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return closedErr(s.db.Update(fn))
}

func closedErr(err error) error {
	if errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}

// pipelineBucket returns the pipeline's bucket, nil when it has none and create is false.
func pipelineBucket(tx *bolt.Tx, pipeline string, create bool) (*bolt.Bucket, error) {
	ps := tx.Bucket(bucketPipelines)
	if !create {
		return ps.Bucket([]byte(pipeline)), nil
	}
	return ps.CreateBucketIfNotExists([]byte(pipeline))
}

// namespaceBucket returns the namespace's bucket, nil when it has none and create is false.
func namespaceBucket(tx *bolt.Tx, pipeline, namespace string, create bool) (*bolt.Bucket, error) {
	p, err := pipelineBucket(tx, pipeline, create)
	if p == nil || err != nil {
		return nil, err
	}
	if !create {
		if r := p.Bucket(bucketRecords); r != nil {
			return r.Bucket([]byte(namespace)), nil
		}
		return nil, nil
	}
	r, err := p.CreateBucketIfNotExists(bucketRecords)
	if err != nil {
		return nil, err
	}
	return r.CreateBucketIfNotExists([]byte(namespace))
}

// LoadCheckpoint implements cdc.CheckpointStore.
func (s *DB) LoadCheckpoint(ctx context.Context, pipeline string) (cdc.Checkpoint, error) {
	if err := checkNames(pipeline); err != nil {
		return nil, err
	}
	var cp cdc.Checkpoint
	err := s.view(ctx, func(tx *bolt.Tx) error {
		p, _ := pipelineBucket(tx, pipeline, false)
		if p != nil {
			cp = clone(p.Get(keyCheckpoint)) // bbolt's slices die with the transaction
		}
		return nil
	})
	return cp, err
}

// SaveCheckpoint implements cdc.CheckpointStore.
func (s *DB) SaveCheckpoint(ctx context.Context, pipeline string, cp cdc.Checkpoint) error {
	if len(cp) == 0 {
		return fmt.Errorf("%w: empty checkpoint for pipeline %q", ErrInvalid, pipeline)
	}
	if err := checkNames(pipeline); err != nil {
		return err
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		p, err := pipelineBucket(tx, pipeline, true)
		if err != nil {
			return err
		}
		if err := p.Put(keyCheckpoint, cp); err != nil {
			return err
		}
		return p.Put(keySaved, binary.BigEndian.AppendUint64(nil, uint64(s.now().UnixNano())))
	})
}

// CheckpointSaved implements Store.
func (s *DB) CheckpointSaved(ctx context.Context, pipeline string) (time.Time, error) {
	if err := checkNames(pipeline); err != nil {
		return time.Time{}, err
	}
	var at time.Time
	err := s.view(ctx, func(tx *bolt.Tx) error {
		p, _ := pipelineBucket(tx, pipeline, false)
		if p == nil || p.Get(keyCheckpoint) == nil {
			return nil
		}
		if v := p.Get(keySaved); len(v) == 8 {
			at = time.Unix(0, int64(binary.BigEndian.Uint64(v)))
		}
		return nil
	})
	return at, err
}

func decodeRecord(key string, v []byte) (Record, error) {
	if len(v) < 8 {
		return Record{}, fmt.Errorf("%w: record %q is truncated", ErrFormat, key)
	}
	return Record{Key: key, Revision: Revision(binary.BigEndian.Uint64(v)), Value: clone(v[8:])}, nil
}

func currentRevision(b *bolt.Bucket, key string) Revision {
	if b == nil {
		return 0
	}
	if v := b.Get([]byte(key)); len(v) >= 8 {
		return Revision(binary.BigEndian.Uint64(v))
	}
	return 0
}

// Get implements Store.
func (s *DB) Get(ctx context.Context, pipeline, namespace, key string) (Record, error) {
	if err := checkNames(pipeline, namespace, key); err != nil {
		return Record{}, err
	}
	r := Record{Key: key}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		b, _ := namespaceBucket(tx, pipeline, namespace, false)
		if b == nil {
			return nil
		}
		v := b.Get([]byte(key))
		if v == nil {
			return nil
		}
		var err error
		r, err = decodeRecord(key, v)
		return err
	})
	return r, err
}

// Put implements Store.
func (s *DB) Put(ctx context.Context, pipeline, namespace, key string, value []byte, expect Revision) (Revision, error) {
	if err := checkNames(pipeline, namespace, key); err != nil {
		return 0, err
	}
	var rev Revision
	err := s.update(ctx, func(tx *bolt.Tx) error {
		b, _ := namespaceBucket(tx, pipeline, namespace, false)
		if have := currentRevision(b, key); have != expect {
			return conflict(pipeline, namespace, key, expect, have)
		}
		b, err := namespaceBucket(tx, pipeline, namespace, true)
		if err != nil {
			return err
		}
		seq, err := tx.Bucket(bucketPipelines).NextSequence()
		if err != nil {
			return err
		}
		rev = Revision(seq)
		v := make([]byte, 8+len(value))
		binary.BigEndian.PutUint64(v, seq)
		copy(v[8:], value)
		return b.Put([]byte(key), v)
	})
	if err != nil {
		return 0, err
	}
	return rev, nil
}

// Delete implements Store.
func (s *DB) Delete(ctx context.Context, pipeline, namespace, key string, expect Revision) error {
	if expect == 0 {
		return fmt.Errorf("%w: delete needs the record's revision", ErrInvalid)
	}
	if err := checkNames(pipeline, namespace, key); err != nil {
		return err
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		b, _ := namespaceBucket(tx, pipeline, namespace, false)
		if have := currentRevision(b, key); have != expect {
			return conflict(pipeline, namespace, key, expect, have)
		}
		return b.Delete([]byte(key))
	})
}

// List implements Store.
func (s *DB) List(ctx context.Context, pipeline, namespace string) ([]Record, error) {
	if err := checkNames(pipeline, namespace); err != nil {
		return nil, err
	}
	var out []Record
	err := s.view(ctx, func(tx *bolt.Tx) error {
		b, _ := namespaceBucket(tx, pipeline, namespace, false)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			r, err := decodeRecord(string(k), v)
			out = append(out, r)
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeletePipeline implements Store.
func (s *DB) DeletePipeline(ctx context.Context, pipeline string) error {
	if err := checkNames(pipeline); err != nil {
		return err
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		err := tx.Bucket(bucketPipelines).DeleteBucket([]byte(pipeline))
		if errors.Is(err, bolterrors.ErrBucketNotFound) {
			return nil
		}
		return err
	})
}
