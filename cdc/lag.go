package cdc

import "context"

// LagReporter is an optional capability of a Source: how far a checkpoint trails the server's
// current position. A Runner whose source implements it measures lag every
// RunnerOptions.LagInterval -- also while the pipeline is idle, reconnecting or pushed back by
// the sink -- and reports it in Status and Health.
type LagReporter interface {
	// Lag measures how far cp trails the server's current position (cp nil: the pipeline has
	// no checkpoint yet; Applied is then 0 and Bytes what the server retains, if known). It
	// uses a short-lived connection of its own, bounded by ctx, and works whether a stream is
	// open or not. Its errors never carry credentials.
	Lag(ctx context.Context, cp Checkpoint) (SourceLag, error)
}

// SourceLag is one measurement of how far a checkpoint trails its server.
type SourceLag struct {
	// Head and Applied are the server's current position and the checkpoint's, on the
	// source's own monotonic axis (PostgreSQL: LSNs; MySQL/MariaDB: binlog file sequence
	// number << 32 | offset), so that a runner can tell when the pipeline passed a position
	// the server had at an earlier measurement: that is how lag in seconds is derived.
	Head, Applied uint64
	// Bytes is the size of the server's change log between the checkpoint and Head; 0 when
	// the pipeline is caught up.
	Bytes int64
	// Retained is how much change log the server keeps for this pipeline (PostgreSQL: WAL
	// from the slot's restart_lsn to the current position); -1 when the server keeps nothing
	// on the pipeline's behalf (MySQL/MariaDB keep binlogs by their own retention).
	Retained int64
}
