package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/tributary-dev/tributary/cdc"
)

// TestClassify: authentication, a missing database, missing privileges, a slot or
// publication gone, WAL removed, an invalidated slot, a checkpoint the slot cannot serve and a
// malformed checkpoint are permanent; a lost connection, a server shutting down, starting up
// or terminating the walsender, a slot still held, too many connections, timeouts and
// cancellations are not. The cause stays reachable.
func TestClassify(t *testing.T) {
	pg := func(code, msg string) error {
		return fmt.Errorf("pgcdc: connect: %w", &pgconn.PgError{Severity: "FATAL", Code: code, Message: msg})
	}
	cases := []struct {
		name      string
		err       error
		permanent bool
	}{
		{"wrong password", pg("28P01", `password authentication failed for user "u"`), true},
		{"role missing", pg("28000", `role "u" does not exist`), true},
		{"no pg_hba.conf entry", pg("28000", `no pg_hba.conf entry for host`), true},
		{"database missing", pg("3D000", `database "d" does not exist`), true},
		{"no REPLICATION", pg("42501", "permission denied to start WAL sender"), true},
		{"slot dropped", pg("42704", `replication slot "s" does not exist`), true},
		{"WAL removed", pg("58P01", "requested WAL segment 000000010000000000000001 has already been removed"), true},
		{"slot missing for a checkpoint", fmt.Errorf("%w: s is gone", ErrSlotMissing), true},
		{"slot invalidated", fmt.Errorf("%w: s", ErrSlotInvalidated), true},
		{"publication missing", fmt.Errorf("%w: p", ErrPublicationMissing), true},
		{"checkpoint behind the slot", fmt.Errorf("%w: x", ErrCheckpointBehindSlot), true},
		{"malformed checkpoint", fmt.Errorf("%w: not JSON", ErrBadCheckpoint), true},
		{"already permanent", cdc.Permanent(errors.New("x")), true},

		{"connection lost", fmt.Errorf("pgcdc: receive: %w", io.ErrUnexpectedEOF), false},
		{"fast shutdown", pg("57P01", "terminating connection due to administrator command"), false},
		{"crash of another process", pg("57P02", "terminating connection because of crash of another server process"), false},
		{"shutting down", pg("57P03", "the database system is shutting down"), false},
		{"walsender stopping", pg("55000", "cannot execute new commands while WAL sender is in stopping mode"), false},
		{"slot still active", pg("55006", `replication slot "s" is active for PID 1`), false},
		{"too many connections", pg("53300", "sorry, too many clients already"), false},
		{"max_wal_senders", pg("53400", "number of requested standby connections exceeds max_wal_senders"), false},
		{"handshake", fmt.Errorf("%w: its walsender finished the stream", ErrServerShuttingDown), false},
		{"timeout", fmt.Errorf("pgcdc: %w", context.DeadlineExceeded), false},
		{"cancelled", context.Canceled, false},
		{"nil", nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := classify(c.err)
			if cdc.IsPermanent(got) != c.permanent {
				t.Fatalf("permanent %v, want %v: %v", cdc.IsPermanent(got), c.permanent, got)
			}
			if c.err != nil && !errors.Is(got, c.err) {
				t.Errorf("the cause is lost: %v", got)
			}
			if !c.permanent && got != c.err {
				t.Errorf("a retryable error changed: %v", got)
			}
		})
	}
}

// TestNewErrorsArePermanent: an invalid DSN or option is a configuration error.
func TestNewErrorsArePermanent(t *testing.T) {
	for _, c := range []struct {
		dsn  string
		opts Options
	}{
		{"postgres://u@h/db?sslmode=nonsense", Options{}},
		{"postgres://u@h/db", Options{Slot: "Bad-Name"}},
		{"postgres://u@h/db", Options{Snapshot: 99}},
		{"postgres://u@h/db", Options{Tables: []Table{{Schema: "s"}}}},
	} {
		if _, err := New(c.dsn, &c.opts); err == nil || !cdc.IsPermanent(err) {
			t.Errorf("New(%q, %+v): %v, want a permanent error", c.dsn, c.opts, err)
		}
	}
}

// TestConnectionFailure: what skips one idle note (the connection failed) and what turns idle
// notes off (the SQL failed).
func TestConnectionFailure(t *testing.T) {
	for _, c := range []struct {
		err  error
		conn bool
	}{
		{io.ErrUnexpectedEOF, true},
		{&pgconn.PgError{Code: "57P03"}, true},
		{&pgconn.PgError{Code: "57P01"}, true},
		{&pgconn.PgError{Code: "08006"}, true},
		{&pgconn.PgError{Code: "42501"}, false},
		{&pgconn.PgError{Code: "42883"}, false},
	} {
		if got := connectionFailure(c.err); got != c.conn {
			t.Errorf("connectionFailure(%v) = %v", c.err, got)
		}
	}
}
