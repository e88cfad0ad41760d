package pgcdc

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A smart shutdown (pg_ctl -m smart) waits for every regular session to end before it stops
// the walsenders, so a stream holding a SQL connection for its whole life would hold the
// server up until the stream went away. The stream's SQL connection -- catalog loads for
// relation messages, idle notes, the probe of a resumed stream -- is therefore open only while
// in use: connected on demand, closed once unused for sessionLinger (doc.go, Shutdown and
// failures). The initial snapshot reads in the connection Open made, which the session takes
// over, held while the snapshot runs.
const (
	sessionLinger = time.Second
	// sessionTimeout bounds a connect and each query, so that a connection lost without a
	// word (a network partition) fails the stream instead of hanging it.
	sessionTimeout = 30 * time.Second
)

// sqlSession is the stream's on-demand SQL connection; it implements the catalog's querier.
// Run's goroutine only.
type sqlSession struct {
	cfg     *pgx.ConnConfig
	conn    *pgx.Conn
	lastUse time.Time
	held    bool // the snapshot reads in conn: never closed for being idle
}

// get returns the open connection, connecting when there is none.
func (s *sqlSession) get(ctx context.Context) (*pgx.Conn, error) {
	if s.conn != nil && s.conn.IsClosed() {
		s.conn = nil
	}
	if s.conn == nil {
		cctx, cancel := context.WithTimeout(ctx, sessionTimeout)
		defer cancel()
		c, err := pgx.ConnectConfig(cctx, s.cfg)
		if err != nil {
			return nil, fmt.Errorf("pgcdc: connect: %w", err)
		}
		s.conn = c
	}
	s.lastUse = time.Now()
	return s.conn, nil
}

// do runs op on the session's connection under a context bounded by sessionTimeout; the
// caller ends it with the cancel returned (nil after an error). It does not retry: a failure
// fails the stream, and the stream's consumer reopens it.
func (s *sqlSession) do(ctx context.Context, op func(qctx context.Context, c *pgx.Conn) error) (context.CancelFunc, error) {
	c, err := s.get(ctx)
	if err != nil {
		return nil, err
	}
	qctx, cancel := context.WithTimeout(ctx, sessionTimeout)
	if err := op(qctx, c); err != nil {
		cancel()
		return nil, err
	}
	return cancel, nil
}

// Query implements querier; the query is bounded by sessionTimeout until its rows are done.
func (s *sqlSession) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	var rows pgx.Rows
	cancel, err := s.do(ctx, func(qctx context.Context, c *pgx.Conn) error {
		var err error
		rows, err = c.Query(qctx, sql, args...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &boundedRows{Rows: rows, cancel: cancel}, nil
}

// QueryRow implements querier; the query runs when the row is scanned, bounded by
// sessionTimeout.
func (s *sqlSession) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return sessionRow{s: s, ctx: ctx, sql: sql, args: args}
}

// Exec runs a statement, bounded by sessionTimeout.
func (s *sqlSession) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	var tag pgconn.CommandTag
	cancel, err := s.do(ctx, func(qctx context.Context, c *pgx.Conn) error {
		var err error
		tag, err = c.Exec(qctx, sql, args...)
		return err
	})
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	cancel()
	return tag, nil
}

// release ends the snapshot's hold: from now on the connection closes when idle.
func (s *sqlSession) release() {
	s.held = false
	s.lastUse = time.Now()
}

// idleDeadline is when the open connection is due to be closed (zero: none is).
func (s *sqlSession) idleDeadline() time.Time {
	if s.conn == nil || s.held {
		return time.Time{}
	}
	return s.lastUse.Add(sessionLinger)
}

// closeIdle closes the connection once it has been unused for sessionLinger.
func (s *sqlSession) closeIdle(now time.Time) {
	if d := s.idleDeadline(); !d.IsZero() && !now.Before(d) {
		s.close()
	}
}

func (s *sqlSession) close() {
	if s.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.conn.Close(ctx)
	s.conn = nil
}

// boundedRows ends its query's bound when the rows are done.
type boundedRows struct {
	pgx.Rows
	cancel context.CancelFunc
}

// Next releases the bound once the rows are done (pgx closes them then), as the catalog reads
// rows to the end without closing them.
func (r *boundedRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.cancel()
	return false
}

func (r *boundedRows) Close() {
	r.Rows.Close()
	r.cancel()
}

// sessionRow runs its query when scanned, under do's bound.
type sessionRow struct {
	s    *sqlSession
	ctx  context.Context
	sql  string
	args []any
}

func (r sessionRow) Scan(dest ...any) error {
	cancel, err := r.s.do(r.ctx, func(qctx context.Context, c *pgx.Conn) error {
		return c.QueryRow(qctx, r.sql, r.args...).Scan(dest...)
	})
	if err != nil {
		return err
	}
	cancel()
	return nil
}
