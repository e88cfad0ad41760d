package search

import (
	"errors"
	"net/url"
	"sync"
	"time"

	"github.com/elastic/elastic-transport-go/v8/elastictransport"
)

// Dead-node backoff: a node whose request failed is skipped for deadFirst, then for twice
// as long after each further failure in a row, at most deadMax. It is tried again before
// that only when no node is left to try.
const (
	deadFirst = 5 * time.Second
	deadMax   = time.Minute
)

// nodePool picks the node of each attempt: round robin over the nodes not skipped, else
// (every node failed lately) the node whose last failure is the oldest, so that the
// attempts of one request go to different nodes and a request never finds no node.
//
// It replaces elastictransport's pool, which resurrects the dead node with the fewest
// failures (a request's failover can go back to the node that just failed while another
// was never tried), keeps the failure count of a node resurrected by its timer forever
// (its later outages last up to 32 min), and runs a goroutine per failure.
type nodePool struct {
	now func() time.Time

	mu     sync.Mutex // guards nodes' state and cursor
	nodes  []node
	cursor int
}

type node struct {
	conn     *elastictransport.Connection
	failures int       // in a row; 0 is live
	failedAt time.Time // the last failure
	retryAt  time.Time // skipped until then
}

func newNodePool(conns []*elastictransport.Connection, now func() time.Time) *nodePool {
	p := &nodePool{now: now, nodes: make([]node, len(conns))}
	for i, c := range conns {
		p.nodes[i].conn = c
	}
	return p
}

// ConcurrentSafe tells elastictransport that the pool has its own lock.
func (p *nodePool) ConcurrentSafe() {}

func (p *nodePool) Next() (*elastictransport.Connection, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.nodes)
	if n == 0 {
		return nil, errors.New("no node")
	}
	now := p.now()
	for i := range n {
		k := (p.cursor + i) % n
		if nd := &p.nodes[k]; nd.failures == 0 || !now.Before(nd.retryAt) {
			p.cursor = (k + 1) % n
			return nd.conn, nil
		}
	}
	oldest := 0
	for k := 1; k < n; k++ {
		if p.nodes[k].failedAt.Before(p.nodes[oldest].failedAt) {
			oldest = k
		}
	}
	return p.nodes[oldest].conn, nil
}

func (p *nodePool) OnSuccess(c *elastictransport.Connection) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if nd := p.find(c); nd != nil {
		nd.failures = 0
	}
	return nil
}

func (p *nodePool) OnFailure(c *elastictransport.Connection) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	nd := p.find(c)
	if nd == nil {
		return nil
	}
	now := p.now()
	wait := deadMax
	if nd.failures < 8 && deadFirst<<nd.failures < deadMax {
		wait = deadFirst << nd.failures
	}
	nd.failures++
	nd.failedAt, nd.retryAt = now, now.Add(wait)
	return nil
}

func (p *nodePool) find(c *elastictransport.Connection) *node {
	for k := range p.nodes {
		if p.nodes[k].conn == c {
			return &p.nodes[k]
		}
	}
	return nil
}

// URLs lists every node, skipped or not.
func (p *nodePool) URLs() []*url.URL {
	p.mu.Lock()
	defer p.mu.Unlock()
	us := make([]*url.URL, len(p.nodes))
	for k := range p.nodes {
		us[k] = p.nodes[k].conn.URL
	}
	return us
}
