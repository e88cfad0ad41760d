package pgcdc

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/tributary-dev/tributary/cdc"
)

// Failure classes (doc.go, Shutdown and failures). Errors of New, Open and a stream's Err are
// permanent (cdc.IsPermanent) when no reopening can cure them; everything else -- a lost
// connection, a server shutting down or restarting, a timeout, a slot still held -- is
// returned as it is, for the runner to reopen the stream from its stored checkpoint.
var (
	// ErrServerShuttingDown: the server is shutting down (fast or smart) and ended the stream,
	// or refused a connection the stream needed because it is. Retryable: the stream is
	// reopened once the server is back.
	ErrServerShuttingDown = errors.New("pgcdc: the server is shutting down")
	// ErrSlotInvalidated: the slot lost the WAL it held (max_slot_wal_keep_size, or its WAL
	// removed), so the changes after its position are gone. Permanent.
	ErrSlotInvalidated = errors.New("pgcdc: replication slot invalidated")
)

// permanentStates are the SQLSTATEs no reconnect cures, by class ("28") or in full.
var permanentStates = map[string]bool{
	"28":    true, // invalid authorization: wrong password, no pg_hba.conf entry, role missing or NOLOGIN
	"3D000": true, // invalid_catalog_name: the database does not exist
	"42501": true, // insufficient_privilege: REPLICATION, SELECT on a table, a function
	"42704": true, // undefined_object: the slot or the publication is gone (START_REPLICATION, pgoutput)
	"58P01": true, // undefined_file: "requested WAL segment ... has already been removed"
}

// permanentErrors are this package's own errors that no reconnect cures.
var permanentErrors = []error{
	ErrSlotMissing, ErrSlotInvalidated, ErrPublicationMissing, ErrCheckpointBehindSlot, ErrBadCheckpoint,
}

// classify marks err permanent when it is of a permanent class; context errors, errors
// already classified and everything else come back unchanged.
func classify(err error) error {
	if err == nil || cdc.IsPermanent(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if isPermanent(err) {
		return cdc.Permanent(err)
	}
	return err
}

func isPermanent(err error) bool {
	for _, p := range permanentErrors {
		if errors.Is(err, p) {
			return true
		}
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	return permanentStates[pgErr.Code] || (len(pgErr.Code) == 5 && permanentStates[pgErr.Code[:2]])
}

// serverState is what an error says about the server: the SQLSTATE class 57 codes a server
// sends when it is going away or not there yet.
func serverState(err error) (code string, ok bool) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "57P0") {
		return pgErr.Code, true
	}
	return "", false
}

// shuttingDown says whether err is a server's refusal because it is shutting down or not
// accepting connections (57P03 cannot_connect_now: "the database system is shutting down",
// also "... is starting up") -- a fact about the server, not about the request.
func shuttingDown(err error) bool {
	code, ok := serverState(err)
	return ok && code == "57P03"
}

// connectionFailure says whether err is a failure of the connection rather than of the SQL
// sent over it: no SQLSTATE at all (network, timeout, closed), a connection exception
// (class 08) or the server going away (57P01 admin_shutdown, 57P02 crash_shutdown, 57P03).
func connectionFailure(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return true
	}
	_, gone := serverState(err)
	return gone || strings.HasPrefix(pgErr.Code, "08")
}
