package cdc

import "time"

// Status is everything a runner can say about itself at one moment: what metrics exporters
// and status commands read. Safe to obtain from any goroutine at any time (Runner.Status).
type Status struct {
	Pipeline string
	Health   Health
	// State is where the runner is in its life: "not running", "starting", "snapshotting",
	// "resnapshotting" (streaming while a re-snapshot reads), "streaming", "reconnecting",
	// "stopped".
	State    string
	Progress Progress
	// Lag is the last measurement of how far the stored checkpoint trails the source
	// (LagReporter sources only; Lag.MeasuredAt is zero otherwise).
	Lag Lag
	// Reconnects counts the times the stream was reopened after a failure; LastFailure is the
	// most recent failure (nil when none since the last successful batch; after a permanent
	// one, the failure that stopped the pipeline) and FailedAt when.
	Reconnects  int64
	LastFailure error
	FailedAt    time.Time
	// BackpressureSince is when the batch now being offered was first pushed back (zero: no
	// batch is being pushed back).
	BackpressureSince time.Time
	// UnansweredSince is when the oldest write the sink has not answered yet was handed to it
	// (zero: no write is at the sink); beyond RunnerOptions.UnansweredThreshold, Health says
	// sink_not_answering.
	UnansweredSince time.Time
	// Cluster is the health of the pipeline's indices in the search cluster (filled by package
	// mirror; zero from a bare Runner).
	Cluster ClusterHealth
	// Incomplete lists the tables whose index misses rows the pipeline cannot restore on its
	// own, each with the fix (filled by package mirror: a table a relation entered whose
	// re-snapshot could not be requested; nil from a bare Runner). Health then says
	// HealthTableIncomplete unless it has a worse reason.
	Incomplete []IncompleteTable
	// Leadership is the pipeline's part in an active/standby deployment (filled by package
	// mirror when its state is a shared store; zero otherwise).
	Leadership Leadership
}

// Leadership is where a pipeline of an active/standby deployment stands: which process holds
// its lease, and how often it changed hands here.
type Leadership struct {
	// Role is RoleActive, RoleStandby or RoleTakingOver; "" without a shared state store.
	Role string
	// Holder is the process holding the lease as last read ("" when none holds it): this
	// process when active, the active one when standby.
	Holder string
	// Epoch is the lease's epoch as last read (the fencing token; 0: never acquired).
	Epoch uint64
	// Since is when Role last changed.
	Since time.Time
	// Takeovers counts the times this process acquired the lease; LastTakeover is how long
	// its last takeover took from the acquisition until the pipeline was writing (every index
	// claimed, the source reopened from the shared checkpoint).
	Takeovers    int64
	LastTakeover time.Duration
	// StoreErr is the last failure to reach the state store (nil after a success).
	StoreErr error
}

// Leadership roles (Leadership.Role).
const (
	RoleActive     = "active"
	RoleStandby    = "standby"
	RoleTakingOver = "taking over"
)

// HealthStandby is the health class of a standby pipeline: healthy, not writing.
const HealthStandby = "standby"

// IncompleteTable is a table whose index misses rows (Status.Incomplete). Never row data.
type IncompleteTable struct {
	Table  TableID
	Index  string
	Reason string // what is missing and why, and the fix
	Since  time.Time
}

// HealthTableIncomplete is the health class of a pipeline with an incomplete table.
const HealthTableIncomplete = "table_incomplete"

// Lag is how far a pipeline trails its source.
type Lag struct {
	// Bytes is the change log between the stored checkpoint and the server's position at the
	// last measurement; Retained what the server keeps for the pipeline (-1: nothing).
	Bytes, Retained int64
	// Seconds is how long ago the server was at a position the pipeline has since passed: 0
	// when the last measurement found it caught up. It grows while measurements fail (the
	// source is unreachable) or while the pipeline does not progress.
	Seconds float64
	// MeasuredAt is when the source last answered a measurement (zero: never); Err is the
	// last measurement's failure, nil when it succeeded.
	MeasuredAt time.Time
	Err        error
}
