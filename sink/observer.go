package sink

import "time"

// Observer receives a sink's measurements as they happen, for metrics (the example pipelines
// export them to Prometheus). Methods may be called from several goroutines at once (one
// batch's requests run concurrently) and must return quickly; they never receive row data.
type Observer interface {
	// BulkDone is called once per _bulk request, after it answered or failed.
	BulkDone(BulkStats)
	// Claimed is called after the sink claimed an index through the fence: on first use, and
	// again after a connection loss.
	Claimed(index string)
}

// BulkStats describes one _bulk request.
type BulkStats struct {
	Actions int // actions in the request
	Bytes   int // request body size
	// Status is the HTTP status of the answer; 0 when none came (timeout, connection loss).
	Status int
	// Per-item outcomes of the answer: written, superseded by a newer version (409),
	// dead-lettered, and pushed back (per-item 429, retried or handed back to the runner).
	Applied, Superseded, DeadLettered, Retried int
	Duration                                   time.Duration // from sending the request to reading the whole answer
}

type noObserver struct{}

func (noObserver) BulkDone(BulkStats) {}
func (noObserver) Claimed(string)     {}
