package cdc

import (
	"strconv"
	"time"
)

// TableID identifies a source table everywhere: in events, schemas, index names and the
// ownership marker of the destination.
type TableID struct {
	Connector string // the source kind: "postgres" or "mysql"
	Source    string // the configured source's name
	Database  string
	Schema    string // PostgreSQL schema; MySQL has none and leaves it empty
	Table     string
}

func (t TableID) String() string {
	s := t.Connector + ":" + t.Source + "/" + t.Database + "."
	if t.Schema != "" {
		s += t.Schema + "."
	}
	return s + t.Table
}

// Op is what happened to a row.
type Op uint8

// Operations.
const (
	Insert Op = iota + 1
	Update
	Delete
	Read // a row of an initial snapshot
	// Truncate says every row of the table was removed at once (TRUNCATE TABLE, or a name
	// that stopped denoting its relation: see package sink, Schema events). It carries no
	// row: Before and After are nil. Its version is a floor: every change of the table
	// committed after it has a higher version, every one before it a lower one (the sink
	// empties the table's index and voids older changes replayed later). It is positioned,
	// versioned and checkpointed like a row change at its place in the source's history (one
	// event per table when a statement truncates several). Its Schema names the table and
	// carries its Relation; its Columns may be empty (mysqlcdc, when the reader is behind the
	// DDL and has no description of the relation): a sink then applies it like a Truncate
	// without a schema, keeping the relation identity.
	Truncate
)

var opNames = [...]string{"", "insert", "update", "delete", "read", "truncate"}

func (o Op) String() string {
	if o != 0 && int(o) < len(opNames) {
		return opNames[o]
	}
	return "Op(" + strconv.Itoa(int(o)) + ")"
}

// Event is one change of one row.
type Event struct {
	Op     Op
	Table  TableID
	Schema *TableSchema // the table's schema when the change was made; Before and After follow its Columns
	// Before is the row before an update or delete, when the source sends it (MySQL full row
	// images, PostgreSQL REPLICA IDENTITY FULL or the key columns of the default identity, with
	// the other columns nil); nil otherwise. An update that changes the primary key carries the
	// old key here: a current-state mirror must delete the old document.
	Before []Value
	// After is the row after an insert, update or snapshot read; nil for a delete. In an
	// update, a value the source did not resend because the change left it alone is
	// Unchanged{} (PostgreSQL TOASTed values under the default replica identity): the row's
	// current state holds it.
	After []Value
	// Position is where the change is in the source's history.
	Position Position
	// Checkpoint is set on the last event of a transaction (and of each snapshot chunk): resuming
	// from it neither repeats nor skips a whole transaction. Nil elsewhere: a transaction is
	// never resumed from its middle.
	Checkpoint Checkpoint
	// CommitTime is the source transaction's commit time (zero for snapshot reads).
	CommitTime time.Time
	// TxID identifies the source transaction (xid, GTID); empty for snapshot reads.
	TxID string
	// Malformed, when set, says the source could not decode this row; the runner routes the
	// event to the dead-letter queue with this reason instead of handing it to the sink. A
	// malformed event still carries its Position and, at a transaction end, its Checkpoint,
	// which the runner honours like any other; its Schema may be nil.
	Malformed error
}

// Position is a change's place in its source's history.
type Position interface {
	// Version is the change's Elasticsearch external version. For successive changes of the
	// same row it increases strictly -- across transactions, within one transaction, across
	// restarts and replays -- and snapshot reads get versions below every change streamed
	// after the snapshot. Each source documents its derivation and its limits.
	Version() int64
	// String renders the position for logs (an LSN, a binlog file and offset, a GTID).
	String() string
}

// Checkpoint is an opaque, source-specific resume point, never empty. Sources produce and
// consume it; the runner stores it durably once every event before it was acknowledged.
type Checkpoint []byte
