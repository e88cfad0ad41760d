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
type Memory struct {
	mu        sync.Mutex
	identity  string
	rev       Revision
	pipelines map[string]*memPipeline
	closed    bool
}

type memPipeline struct {
	checkpoint cdc.Checkpoint
	saved      time.Time
	records    map[string]map[string]Record
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty store with a fresh random identity.
func NewMemory() *Memory {
	id, err := newIdentity(rand.Reader)
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return &Memory{identity: id, pipelines: map[string]*memPipeline{}}
}

// Copy returns an independent store with the same identity and contents: what copying a
// state file (a clone, or a backup to be restored later) does to a file store.
func (m *Memory) Copy() *Memory {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := &Memory{identity: m.identity, rev: m.rev, pipelines: map[string]*memPipeline{}}
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
	if len(cp) == 0 {
		return fmt.Errorf("%w: empty checkpoint for pipeline %q", ErrInvalid, pipeline)
	}
	if err := m.lock(ctx, pipeline); err != nil {
		return err
	}
	defer m.mu.Unlock()
	p := m.pipeline(pipeline, true)
	p.checkpoint, p.saved = clone(cp), time.Now()
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
	if err := m.lock(ctx, pipeline, namespace, key); err != nil {
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
	if expect == 0 {
		return fmt.Errorf("%w: delete needs the record's revision", ErrInvalid)
	}
	if err := m.lock(ctx, pipeline, namespace, key); err != nil {
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

// DeletePipeline implements Store.
func (m *Memory) DeletePipeline(ctx context.Context, pipeline string) error {
	if err := m.lock(ctx, pipeline); err != nil {
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
