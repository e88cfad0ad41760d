package cdc

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// SnapshotMode says what a source does when it starts without a checkpoint.
type SnapshotMode uint8

// Snapshot modes.
const (
	// SnapshotInitial reads every captured table in one consistent snapshot, then streams the
	// changes made after it, with neither a gap nor an overlap it cannot version correctly.
	SnapshotInitial SnapshotMode = iota
	// SnapshotNever streams from the source's current position.
	SnapshotNever
)

// Source is a database whose changes the pipeline reads.
type Source interface {
	// Open starts reading after cp, or -- when cp is nil -- as the snapshot mode says. Events
	// arrive in the source's commit order.
	Open(ctx context.Context, cp Checkpoint) (Stream, error)
}

// Stream delivers one source's events until it is closed or fails.
type Stream interface {
	// Events delivers the events. It is closed when the stream ends; Err then says why.
	Events() <-chan Event
	// Err returns why Events was closed: nil after Close, the failure otherwise.
	Err() error
	// Ack reports that every event up to the one that carried cp has been applied and cp is
	// stored durably: the source may now let the server discard what lies before it (PostgreSQL:
	// the slot's flush position). A source never reports more than was acknowledged. Acks are
	// cumulative and advisory: a failed Ack loses nothing (the checkpoint is already durable),
	// so the runner only logs it. Ack and Progress are safe to call while Events is read.
	Ack(ctx context.Context, cp Checkpoint) error
	// Progress reports snapshot progress: Active while a snapshot is read, then its final
	// figures with Active false; zero when the stream took no snapshot.
	Progress() SnapshotProgress
	// Close stops the stream and releases its connections.
	Close() error
}

// SnapshotProgress is how far an initial snapshot has come.
//
// The same figures describe a re-snapshot (ResnapshotRequest) while the stream keeps running:
// Resnapshot then names it, the tables are the request's, RowsDone counts the rows read
// again (those the stream had changed meanwhile included: they are dropped, the stream
// carries them), and Error says why its chunks are being retried or why it was given up. A
// re-snapshot is reported ended (Active false) only once every row it emits is in the
// stream's Events, so that a runner whose pending events are all acknowledged after that has
// stored every one (a reindex switches on it).
type SnapshotProgress struct {
	Active        bool
	Table         TableID // the table being read now
	TablesDone    int
	TablesTotal   int
	RowsDone      int64 // rows delivered to the stream's reader (the runner knows what was acknowledged)
	RowsEstimated int64 // the catalog's estimate for all captured tables
	RowsPerSecond float64
	Resnapshot    string // the re-snapshot's id; empty for the initial snapshot
	Queued        int    // re-snapshot requests waiting behind this one
	Error         string // a re-snapshot's last trouble (retried) or why it was given up; never row data
}

// ResnapshotRequest asks a running source to read tables again while it keeps streaming
// (Resnapshotter). Sources document how they keep the re-read rows from overwriting newer
// changes.
type ResnapshotRequest struct {
	Tables []string // in the source's spelling (PostgreSQL schema.table, MySQL db.table); empty: every captured table
	Where  string   // an SQL condition on each table's rows (a key range, a filter); empty: every row
	ID     string   // names the request in logs and progress; empty: the source makes one up
}

// Resnapshotter is a Source that can re-snapshot tables while streaming. Resnapshot returns
// once the request is durable at the source; the running stream carries it out (progress in
// Stream.Progress) and resumes it after a restart.
type Resnapshotter interface {
	Resnapshot(ctx context.Context, req ResnapshotRequest) (id string, err error)
}

// ErrResnapshotRefused is what a Resnapshotter's error wraps when the request cannot be
// carried out as given (a table not captured or without a primary key, a condition the
// server refuses); other errors (a server out of reach) may succeed when tried again.
var ErrResnapshotRefused = errors.New("re-snapshot request refused")

// ErrSourceClosed is returned by streams used after Close.
var ErrSourceClosed = errors.New("cdc: source stream closed")

// Sink is where the runner writes batches (package sink writes to Elasticsearch).
type Sink interface {
	// Write applies a batch. It returns nil error and the per-row dead letters when every other
	// event was applied (or was superseded); a *BackpressureError when nothing durable can be
	// said and the same batch must be offered again; any other error ends the stream's session
	// with its checkpoint where it was: the runner reopens the source at that checkpoint, or
	// stops when the error is permanent (Permanent). Write must neither modify nor keep the batch:
	// after backpressure the runner offers the identical slice again.
	Write(ctx context.Context, batch []Event) ([]DeadLetter, error)
}

// DeadLetter is a row the sink could not apply and never will as it is.
type DeadLetter struct {
	Index  int    // the event's index in the batch
	Reason string // why, without row data or credentials
}

// BackpressureError asks the runner to offer the same batch again later.
type BackpressureError struct {
	Err        error
	RetryAfter time.Duration // zero: the runner's own backoff decides
	// Unavailable says the destination could not be reached or failed (a refused or lost
	// connection, a timeout, a 5xx answer) rather than asked to slow down (429): Health
	// reports an unavailable destination at once, a throttling one only beyond
	// RunnerOptions.BackpressureThreshold.
	Unavailable bool
}

func (e *BackpressureError) Error() string { return fmt.Sprintf("cdc: backpressure: %v", e.Err) }
func (e *BackpressureError) Unwrap() error { return e.Err }

// CheckpointStore keeps each pipeline's checkpoint durably (package statestore, which also
// resets a pipeline's checkpoints together with its ownership records).
type CheckpointStore interface {
	LoadCheckpoint(ctx context.Context, pipeline string) (Checkpoint, error)
	SaveCheckpoint(ctx context.Context, pipeline string, cp Checkpoint) error
}
