package cdc

import "time"

// Observer receives a runner's measurements as they happen, for metrics (the example
// pipelines export them to Prometheus). Its methods are called on the runner's goroutine and
// must return quickly; they never receive row data.
type Observer interface {
	// BatchDone is called after a batch succeeded: the sink answered, its dead letters were
	// written and its checkpoint, if it carried one, was saved.
	BatchDone(BatchStats)
	// Backpressure is called each time the sink pushed a batch back, before the wait.
	Backpressure(attempt int, wait time.Duration)
}

// BatchStats describes one successful batch.
type BatchStats struct {
	Events      int // every event of the batch, malformed ones included
	DeadLetters int // events written to the dead-letter queue
	Attempts    int // times the batch was offered to the sink (1 without backpressure)
	// Duration is from the first offer to the sink to the end of the batch (backoff waits,
	// dead letters and the checkpoint included).
	Duration     time.Duration
	Checkpointed bool // a checkpoint was saved
	// Lag is from the newest commit time in the batch to its end: how far the destination
	// trails the source. Zero when no event carried a commit time (snapshot reads).
	Lag time.Duration
}

type noObserver struct{}

func (noObserver) BatchDone(BatchStats)            {}
func (noObserver) Backpressure(int, time.Duration) {}
