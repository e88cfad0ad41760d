package mirror

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tributary-dev/tributary/cdc"
)

// The health of a pipeline's indices in the search cluster (cdc.Status.Cluster): read from
// the cluster only while someone reads the status, at most every clusterHealthEvery, each
// read bounded by clusterHealthBound and made in the background -- Status never waits for
// the cluster. Never per batch.
const (
	clusterHealthEvery = 5 * time.Second
	clusterHealthBound = 5 * time.Second
)

// healthCache keeps the last cluster health of one pipeline's indices.
type healthCache struct {
	read         func(ctx context.Context) (cdc.ClusterHealth, error)
	every, bound time.Duration

	ctx    context.Context // ended by close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	last    cdc.ClusterHealth
	started time.Time // when the last read began
	busy    bool
}

func newHealthCache(read func(ctx context.Context) (cdc.ClusterHealth, error)) *healthCache {
	ctx, cancel := context.WithCancel(context.Background())
	return &healthCache{read: read, every: clusterHealthEvery, bound: clusterHealthBound, ctx: ctx, cancel: cancel}
}

// get returns the last health read, and starts a read in the background when the last one
// began at least every ago and none is in flight.
func (c *healthCache) get(now time.Time) cdc.ClusterHealth {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.busy && c.ctx.Err() == nil && (c.started.IsZero() || now.Sub(c.started) >= c.every) {
		c.busy, c.started = true, now
		c.wg.Add(1)
		go c.refresh()
	}
	return c.last
}

func (c *healthCache) refresh() {
	defer c.wg.Done()
	ctx, cancel := context.WithTimeout(c.ctx, c.bound)
	defer cancel()
	h, err := c.read(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.busy = false
	switch {
	case err != nil:
		c.last.Err = err // the last answer stays, with its ReadAt
	case h.ReadAt.IsZero():
		c.last = cdc.ClusterHealth{} // no index held (yet, or any more)
	default:
		c.last = h
	}
}

// close ends a read in flight and waits for it; get starts none after it.
func (c *healthCache) close() {
	c.cancel()
	c.wg.Wait()
}

// withClusterHealth puts h into st and, when the last read answered that an index is red
// and nothing worse is reported already, makes st unhealthy (cdc.HealthClusterRed): a red
// index has a primary shard unassigned, so writes routed to it fail. Yellow (a replica
// unassigned) is only shown.
func withClusterHealth(st cdc.Status, h cdc.ClusterHealth) cdc.Status {
	st.Cluster = h
	if h.Status != "red" || h.Err != nil || !st.Health.Healthy {
		return st
	}
	var red []string
	for idx, s := range h.Indices {
		if s == "red" {
			red = append(red, idx)
		}
	}
	slices.Sort(red)
	st.Health = cdc.Health{Class: cdc.HealthClusterRed,
		Reason: fmt.Sprintf("cluster_red: index %s red (a primary shard unassigned: writes to it fail)", strings.Join(red, ", "))}
	return st
}
