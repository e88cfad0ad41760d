package cdc

import "errors"

// ErrForeignCheckpoint matches every *ForeignCheckpointError: errors.Is(err,
// cdc.ErrForeignCheckpoint) is true when a source refused a stored checkpoint that another kind
// of source wrote. pgcdc.ErrForeignCheckpoint, mysqlcdc.ErrForeignCheckpoint and
// debezium.ErrForeignCheckpoint are this same value.
var ErrForeignCheckpoint = errors.New("cdc: the stored checkpoint is another source's")

// ForeignCheckpointError is a source's permanent refusal (the source marks it with Permanent)
// of a stored checkpoint that another kind of source wrote: the pipeline last ran with another
// source type -- a native source and Debezium switched by a configuration change alone, or a
// PostgreSQL source's state given to a MySQL source or the reverse. It names whose checkpoint it
// is and the fix, the switch procedure (cdcmirror switch; mirror.Switch); it never quotes the
// checkpoint. pgcdc, mysqlcdc and debezium name it as their own ForeignCheckpointError (a type
// alias).
type ForeignCheckpointError struct {
	// Reader names the source that refuses it: "pgcdc", "mysqlcdc" or "debezium".
	Reader string
	// Writer names the source that wrote it: "pgcdc", "mysqlcdc", "debezium", or "" when
	// unknown.
	Writer string
	// Err, if not nil, is what the refusing source also calls it (errors.Is and errors.As
	// reach it; it is not part of the message): pgcdc's ErrBadCheckpoint.
	Err error
}

func (e *ForeignCheckpointError) Error() string {
	what := "another source's checkpoint"
	switch e.Writer {
	case "debezium":
		what = "a Debezium checkpoint (the pipeline last ran with source type debezium: its position is the Kafka consumer group's)"
	case "pgcdc":
		what = "a PostgreSQL source's checkpoint (a WAL position)"
	case "mysqlcdc":
		what = "a MySQL/MariaDB source's checkpoint (a binlog position)"
	}
	own, fix := "", "which resets the checkpoint and keeps the indices"
	switch e.Reader {
	case "pgcdc":
		own = "not a position in this server's WAL"
	case "mysqlcdc":
		own = "not a binlog position"
	case "debezium":
		own = "not a Debezium one"
		fix = "which resets the checkpoint, keeps the indices and drops the native slot and publication"
	default:
		own = "not one of this source's"
	}
	reader := e.Reader
	if reader == "" {
		reader = "cdc"
	}
	return reader + ": the stored checkpoint is " + what + ", " + own + "; " +
		"move a pipeline between the native source and Debezium with the switch procedure (cdcmirror switch; mirror.Switch), " + fix
}

// Is makes the error ErrForeignCheckpoint.
func (e *ForeignCheckpointError) Is(target error) bool { return target == ErrForeignCheckpoint }

// Unwrap returns Err.
func (e *ForeignCheckpointError) Unwrap() error { return e.Err }
