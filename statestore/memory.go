package statestore

import (
	"context"
	"crypto/rand"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/tributary-dev/tributary/cdc"
)

// Memory is the in-memory Store for tests: same semantics as the file store, nothing durable.
// It is also a Leaser with the semantics of the SQL stores (memory_lease.go), so a test can
// use it as the shared store of an active and a standby.
type Memory struct {
	mu        sync.Mutex
	identity  string
	now       func() time.Time
	rev       Revision
	pipelines map[string]*memPipeline
	leases    map[string]*memLease
	closed    bool
}

// MemoryOptions configure NewMemoryWithOptions. The zero value (or nil) gives the documented
// defaults.
type MemoryOptions struct {
	// Now is the store's clock: it stamps saved checkpoints (CheckpointSaved) and decides when
	// leases expire, as the server's clock does for the SQL stores, so a test can expire a
	// lease by moving it forward instead of sleeping. Default time.Now.
	Now func() time.Time
}

type memPipeline struct {
	checkpoint cdc.Checkpoint
	saved      time.Time
	records    map[string]map[string]Record
}

var (
	_ Store  = (*Memory)(nil)
	_ Leaser = (*Memory)(nil)
)

// NewMemory returns an empty store with a fresh random identity and the default MemoryOptions.
func NewMemory() *Memory { return NewMemoryWithOptions(nil) }

// NewMemoryWithOptions returns an empty store with a fresh random identity, configured by opts
// (nil: the defaults), e.g. on a test's clock: NewMemoryWithOptions(&MemoryOptions{Now: clock.Now}).
func NewMemoryWithOptions(opts *MemoryOptions) *Memory {
	var o MemoryOptions
	if opts != nil {
		o = *opts
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	id, err := newIdentity(rand.Reader)
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return &Memory{identity: id, now: o.Now, pipelines: map[string]*memPipeline{}, leases: map[string]*memLease{}}
}

// Copy returns an independent store with the same identity, clock and contents (leases
// included): what copying a state file (a clone, or a backup to be restored later) does to a
// file store.
func (m *Memory) Copy() *Memory {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := &Memory{identity: m.identity, now: m.now, rev: m.rev, pipelines: map[string]*memPipeline{}, leases: map[string]*memLease{}}
	for name, l := range m.leases {
		cl := *l
		c.leases[name] = &cl
	}
	for name, p := range m.pipelines {
		cp := &memPipeline{checkpoint: clone(p.checkpoint), saved: p.saved, records: map[string]map[string]Record{}}
		for ns, recs := range p.records {
			cp.records[ns] = map[string]Record{}
			for k, r := range recs {
				r.Value = clone(r.Value)
				cp.records[ns][k] = r
			}
		}
		c.pipelines[name] = cp
	}
	return c
}

// Identity implements Store.
func (m *Memory) Identity() string { return m.identity }

func (m *Memory) lock(ctx context.Context, names ...string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkNames(names...); err != nil {
		return err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	return nil
}

// lockWrite is lock for a write, op naming it for errors: with a fence (a Fenced view's), it
// also checks under the same mutex that the fence's lease is at its epoch, so no takeover
// comes between the check and the write.
func (m *Memory) lockWrite(ctx context.Context, f *memFence, op string, names ...string) error {
	if err := m.lock(ctx, names...); err != nil {
		return err
	}
	if err := m.checkFence(f, op, names); err != nil {
		m.mu.Unlock()
		return err
	}
	return nil
}

func (m *Memory) pipeline(name string, create bool) *memPipeline {
	p := m.pipelines[name]
	if p == nil && create {
		p = &memPipeline{records: map[string]map[string]Record{}}
		m.pipelines[name] = p
	}
	return p
}

// LoadCheckpoint implements cdc.CheckpointStore.
func (m *Memory) LoadCheckpoint(ctx context.Context, pipeline string) (cdc.Checkpoint, error) {
	if err := m.lock(ctx, pipeline); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	if p := m.pipeline(pipeline, false); p != nil {
		return clone(p.checkpoint), nil
	}
	return nil, nil
}

// SaveCheckpoint implements cdc.CheckpointStore.
func (m *Memory) SaveCheckpoint(ctx context.Context, pipeline string, cp cdc.Checkpoint) error {
	return m.saveCheckpoint(ctx, pipeline, cp, nil)
}

func (m *Memory) saveCheckpoint(ctx context.Context, pipeline string, cp cdc.Checkpoint, f *memFence) error {
	if len(cp) == 0 {
		return fmt.Errorf("%w: empty checkpoint for pipeline %q", ErrInvalid, pipeline)
	}
	if err := m.lockWrite(ctx, f, "save checkpoint", pipeline); err != nil {
		return err
	}
	defer m.mu.Unlock()
	p := m.pipeline(pipeline, true)
	p.checkpoint, p.saved = clone(cp), m.now()
	return nil
}

// CheckpointSaved implements Store.
func (m *Memory) CheckpointSaved(ctx context.Context, pipeline string) (time.Time, error) {
	if err := m.lock(ctx, pipeline); err != nil {
		return time.Time{}, err
	}
	defer m.mu.Unlock()
	if p := m.pipeline(pipeline, false); p != nil && p.checkpoint != nil {
		return p.saved, nil
	}
	return time.Time{}, nil
}

// Get implements Store.
func (m *Memory) Get(ctx context.Context, pipeline, namespace, key string) (Record, error) {
	if err := m.lock(ctx, pipeline, namespace, key); err != nil {
		return Record{}, err
	}
	defer m.mu.Unlock()
	r := m.current(pipeline, namespace, key)
	r.Value = clone(r.Value)
	return r, nil
}

func (m *Memory) current(pipeline, namespace, key string) Record {
	if p := m.pipeline(pipeline, false); p != nil {
		if r, ok := p.records[namespace][key]; ok {
			return r
		}
	}
	return Record{Key: key}
}

// Put implements Store.
func (m *Memory) Put(ctx context.Context, pipeline, namespace, key string, value []byte, expect Revision) (Revision, error) {
	return m.put(ctx, pipeline, namespace, key, value, expect, nil)
}

func (m *Memory) put(ctx context.Context, pipeline, namespace, key string, value []byte, expect Revision, f *memFence) (Revision, error) {
	if err := m.lockWrite(ctx, f, "put", pipeline, namespace, key); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	if have := m.current(pipeline, namespace, key).Revision; have != expect {
		return 0, conflict(pipeline, namespace, key, expect, have)
	}
	p := m.pipeline(pipeline, true)
	if p.records[namespace] == nil {
		p.records[namespace] = map[string]Record{}
	}
	m.rev++
	p.records[namespace][key] = Record{Key: key, Value: clone(value), Revision: m.rev}
	return m.rev, nil
}

// Delete implements Store.
func (m *Memory) Delete(ctx context.Context, pipeline, namespace, key string, expect Revision) error {
	return m.delete(ctx, pipeline, namespace, key, expect, nil)
}

func (m *Memory) delete(ctx context.Context, pipeline, namespace, key string, expect Revision, f *memFence) error {
	if expect == 0 {
		return fmt.Errorf("%w: delete needs the record's revision", ErrInvalid)
	}
	if err := m.lockWrite(ctx, f, "delete", pipeline, namespace, key); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if have := m.current(pipeline, namespace, key).Revision; have != expect {
		return conflict(pipeline, namespace, key, expect, have)
	}
	recs := m.pipelines[pipeline].records
	delete(recs[namespace], key)
	if len(recs[namespace]) == 0 {
		delete(recs, namespace)
	}
	return nil
}

// List implements Store.
func (m *Memory) List(ctx context.Context, pipeline, namespace string) ([]Record, error) {
	if err := m.lock(ctx, pipeline, namespace); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var out []Record
	if p := m.pipeline(pipeline, false); p != nil {
		for _, r := range p.records[namespace] {
			r.Value = clone(r.Value)
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// DeletePipeline implements Store. Leases stay (leadership is not state), so epochs never
// repeat.
func (m *Memory) DeletePipeline(ctx context.Context, pipeline string) error {
	return m.deletePipeline(ctx, pipeline, nil)
}

func (m *Memory) deletePipeline(ctx context.Context, pipeline string, f *memFence) error {
	if err := m.lockWrite(ctx, f, "delete pipeline", pipeline); err != nil {
		return err
	}
	defer m.mu.Unlock()
	delete(m.pipelines, pipeline)
	return nil
}

// Close implements Store.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}
