package mirror

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
)

// TestHealthCache: get never waits for the cluster; the first get starts a read, the next
// ones return its answer; a read starts again only after every, one at a time; a failed read
// keeps the last answer beside its error; close ends a read in flight and none starts after.
func TestHealthCache(t *testing.T) {
	var reads atomic.Int32
	release := make(chan struct{}, 10)
	answer := cdc.ClusterHealth{Status: "yellow", Indices: map[string]string{"a": "yellow"}, ReadAt: time.Now()}
	var fail atomic.Bool
	c := newHealthCache(func(ctx context.Context) (cdc.ClusterHealth, error) {
		reads.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
			return cdc.ClusterHealth{}, ctx.Err()
		}
		if fail.Load() {
			return cdc.ClusterHealth{}, errors.New("no master")
		}
		return answer, nil
	})
	c.every = time.Hour
	now := time.Now()
	if h := c.get(now); h.Status != "" {
		t.Fatalf("first get: %+v", h)
	}
	c.get(now) // a read is in flight: no second one
	release <- struct{}{}
	healthWaitFor(t, func() bool { return c.get(now).Status == "yellow" })
	if n := reads.Load(); n != 1 {
		t.Fatalf("%d reads, want 1", n)
	}
	c.get(now.Add(time.Minute)) // younger than every
	if n := reads.Load(); n != 1 {
		t.Fatalf("%d reads within every, want 1", n)
	}
	fail.Store(true)
	later := now.Add(2 * time.Hour)
	c.get(later)
	release <- struct{}{}
	healthWaitFor(t, func() bool { return c.get(later).Err != nil })
	if h := c.get(later); h.Status != "yellow" || !strings.Contains(h.Err.Error(), "no master") {
		t.Errorf("after a failed read: %+v", h)
	}
	c.get(later.Add(2 * time.Hour)) // a read in flight, never released
	c.close()
	n := reads.Load()
	c.get(later.Add(10 * time.Hour))
	if reads.Load() != n {
		t.Error("a read started after close")
	}
}

func healthWaitFor(t *testing.T, ok func() bool) {
	t.Helper()
	end := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(end) {
			t.Fatal("condition not met within 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWithClusterHealth: red makes a healthy pipeline unhealthy (cluster_red naming the red
// indices); yellow and green are only shown; red does not hide a worse report, nor counts when
// the last read failed.
func TestWithClusterHealth(t *testing.T) {
	ok := cdc.Status{Health: cdc.Health{Healthy: true, Class: cdc.HealthOK}}
	red := cdc.ClusterHealth{Status: "red", Indices: map[string]string{"b": "red", "a": "green", "c": "red"}, ReadAt: time.Now()}
	st := withClusterHealth(ok, red)
	if st.Health.Healthy || st.Health.Class != cdc.HealthClusterRed || !strings.Contains(st.Health.Reason, "index b, c red") || st.Cluster.Status != "red" {
		t.Errorf("red: %+v", st.Health)
	}
	yellow := cdc.ClusterHealth{Status: "yellow", Indices: map[string]string{"a": "yellow"}, ReadAt: time.Now()}
	if st := withClusterHealth(ok, yellow); !st.Health.Healthy || st.Cluster.Status != "yellow" {
		t.Errorf("yellow: %+v", st)
	}
	down := cdc.Status{Health: cdc.Health{Class: cdc.HealthUnavailable, Reason: "sink unavailable"}}
	if st := withClusterHealth(down, red); st.Health.Class != cdc.HealthUnavailable {
		t.Errorf("red over a worse report: %+v", st.Health)
	}
	stale := red
	stale.Err = errors.New("timeout")
	if st := withClusterHealth(ok, stale); !st.Health.Healthy {
		t.Errorf("red from a failed read: %+v", st.Health)
	}
}
