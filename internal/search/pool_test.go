package search

import (
	"net/url"
	"testing"
	"time"

	"github.com/elastic/elastic-transport-go/v8/elastictransport"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func testPool(n int) (*nodePool, *fakeClock, []*elastictransport.Connection) {
	clock := &fakeClock{t: time.Unix(1_000_000, 0)}
	conns := make([]*elastictransport.Connection, n)
	for i := range conns {
		conns[i] = &elastictransport.Connection{URL: &url.URL{Scheme: "http", Host: string(rune('a'+i)) + ":9200"}}
	}
	return newNodePool(conns, clock.now), clock, conns
}

func next(t *testing.T, p *nodePool) *elastictransport.Connection {
	t.Helper()
	c, err := p.Next()
	if err != nil || c == nil {
		t.Fatalf("Next: %v %v", c, err)
	}
	return c
}

// Live nodes take turns; a failed node is skipped until its backoff ends, then tried again,
// and a success makes it live with its backoff reset.
func TestNodePoolSkipsAFailedNodeUntilItsBackoffEnds(t *testing.T) {
	p, clock, conns := testPool(3)
	seen := map[*elastictransport.Connection]int{}
	for range 6 {
		seen[next(t, p)]++
	}
	for _, c := range conns {
		if seen[c] != 2 {
			t.Fatalf("round robin: %v", seen)
		}
	}
	_ = p.OnFailure(conns[0])
	for range 10 {
		if next(t, p) == conns[0] {
			t.Fatal("a failed node was chosen while others are live")
		}
	}
	clock.t = clock.t.Add(deadFirst)
	found := false
	for range 3 {
		found = found || next(t, p) == conns[0]
	}
	if !found {
		t.Fatal("the failed node was not tried again after its backoff")
	}
	_ = p.OnFailure(conns[0]) // the probe fails: twice as long
	clock.t = clock.t.Add(deadFirst)
	for range 10 {
		if next(t, p) == conns[0] {
			t.Fatal("the backoff did not grow")
		}
	}
	clock.t = clock.t.Add(deadFirst)
	_ = p.OnSuccess(conns[0])
	_ = p.OnFailure(conns[0]) // a failure after a success starts the backoff anew
	clock.t = clock.t.Add(deadFirst)
	found = false
	for range 3 {
		found = found || next(t, p) == conns[0]
	}
	if !found {
		t.Fatal("a success did not reset the backoff")
	}
	for range 20 { // the backoff is bounded
		_ = p.OnFailure(conns[1])
	}
	clock.t = clock.t.Add(deadMax)
	found = false
	for range 3 {
		found = found || next(t, p) == conns[1]
	}
	if !found {
		t.Fatal("the backoff exceeded its bound")
	}
}

// When every node failed lately, a request still gets a node: the one whose failure is the
// oldest, so the attempts of a request that fails over visit every node once.
func TestNodePoolWithEveryNodeFailedTriesEachOnce(t *testing.T) {
	p, clock, conns := testPool(3)
	for _, c := range conns {
		clock.t = clock.t.Add(time.Millisecond)
		_ = p.OnFailure(c)
	}
	visited := map[*elastictransport.Connection]bool{}
	for range 3 {
		clock.t = clock.t.Add(time.Millisecond)
		c := next(t, p)
		if visited[c] {
			t.Fatalf("node %s tried twice before every node was", c.URL.Host)
		}
		visited[c] = true
		_ = p.OnFailure(c)
	}
	// One comes back: it is live, the others stay skipped.
	c := next(t, p)
	_ = p.OnSuccess(c)
	for range 5 {
		if next(t, p) != c {
			t.Fatal("a skipped node was chosen while one is live")
		}
	}
	if len(p.URLs()) != 3 {
		t.Fatal("URLs lists every node")
	}
}
