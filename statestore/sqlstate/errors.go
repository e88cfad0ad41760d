package sqlstate

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tributary-dev/tributary/statestore"
)

// classify turns a database error into the store's: nil stays nil; the statestore errors
// (conflicts, fences) and the context's pass; a lost or refused connection, a server shutting
// down or starting, a serialization failure or a deadlock become statestore.ErrUnavailable
// (retryable); anything else (privileges, a foreign table in the way) is permanent and keeps
// the server's message, which names no values (statements take their values as parameters).
func (s *Store) classify(ctx context.Context, what string, err error) error {
	if err == nil {
		return nil
	}
	for _, e := range []error{statestore.ErrConflict, statestore.ErrNotLeader, statestore.ErrLeaseHeld,
		statestore.ErrInvalid, statestore.ErrFormat, statestore.ErrUnavailable, statestore.ErrClosed} {
		if errors.Is(err, e) {
			return err
		}
	}
	if errors.Is(err, sql.ErrConnDone) && s.closed.Load() || strings.Contains(err.Error(), "sql: database is closed") {
		return statestore.ErrClosed
	}
	if ctx.Err() != nil {
		return fmt.Errorf("statestore: %s: %w", what, ctx.Err())
	}
	if retryable(err) {
		return fmt.Errorf("%w: %s: %w", statestore.ErrUnavailable, what, err)
	}
	return fmt.Errorf("statestore: %s: %w", what, err)
}

// retryable reports whether err is the server or the network failing rather than the request.
func retryable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"): // connection exception
			return true
		case pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03": // shutdown, crash, starting
			return true
		case pe.Code == "40001", pe.Code == "40P01": // serialization failure, deadlock
			return true
		case pe.Code == "53300": // too many connections
			return true
		}
		return false
	}
	var me *mysql.MyError
	if errors.As(err, &me) {
		switch me.Code {
		case 1040, // too many connections
			1053, // server shutdown in progress
			1205, // lock wait timeout
			1213, // deadlock
			1927, // connection killed
			2006, // server has gone away
			2013: // lost connection during query
			return true
		}
		return false
	}
	if errors.Is(err, mysql.ErrBadConn) {
		return true
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || pgconn.SafeToRetry(err) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		strings.Contains(err.Error(), "conn closed") || strings.Contains(err.Error(), "unexpected EOF")
}

// isDuplicateKey reports MySQL's duplicate key error (1062).
func isDuplicateKey(err error) bool {
	var me *mysql.MyError
	return errors.As(err, &me) && me.Code == 1062
}
