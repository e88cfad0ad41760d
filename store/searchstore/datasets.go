package searchstore

import (
	"sync"
	"time"
)

// datasetCache remembers which datasets were seen to exist, for Options.DatasetTTL, so that the
// existence check before writes costs a request only the first time and after expiry. Missing
// datasets are never remembered: one may be created at any moment.
type datasetCache struct {
	mu    sync.Mutex
	until map[string]time.Time
}

// maxCachedDatasets bounds the cache; past it, expired entries are swept on insertion.
const maxCachedDatasets = 4096

func (c *datasetCache) known(name string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.until[name]
	if ok && !now.Before(t) {
		delete(c.until, name)
		return false
	}
	return ok
}

func (c *datasetCache) remember(name string, now time.Time, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.until == nil {
		c.until = make(map[string]time.Time)
	}
	if len(c.until) >= maxCachedDatasets {
		for n, t := range c.until {
			if !now.Before(t) {
				delete(c.until, n)
			}
		}
		if len(c.until) >= maxCachedDatasets {
			clear(c.until) // costs one existence check per dataset, nothing more
		}
	}
	c.until[name] = now.Add(ttl)
}

// forget drops a dataset the server reported missing, so the next write checks again.
func (c *datasetCache) forget(name string) {
	c.mu.Lock()
	delete(c.until, name)
	c.mu.Unlock()
}
