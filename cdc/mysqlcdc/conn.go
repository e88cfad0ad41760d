package mysqlcdc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
)

// sockets dials TCP connections and can close all of them at once. go-mysql's reads watch no
// context, its handshake has no deadline, and BinlogSyncer.Close sends KILL over a new
// connection: on a hung server (SIGSTOPped, or a black-holed network) any of them would
// block. Closing the sockets ends every blocked read at once, and refusing new dials makes
// Close skip its KILL.
type sockets struct {
	timeout time.Duration // bounds each dial

	mu      sync.Mutex // guards conns and refused
	conns   []net.Conn
	refused bool
}

var errSocketsClosed = errors.New("mysqlcdc: the connection was closed")

func (s *sockets) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if s.isRefused() {
		return nil, errSocketsClosed
	}
	d := net.Dialer{Timeout: s.timeout}
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refused {
		_ = c.Close()
		return nil, errSocketsClosed
	}
	s.conns = append(s.conns, c)
	return c, nil
}

func (s *sockets) isRefused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// refuse makes every later dial fail at once.
func (s *sockets) refuse() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refused = true
}

// closeAll refuses later dials and closes every socket dialed so far.
func (s *sockets) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refused = true
	for _, c := range s.conns {
		_ = c.Close()
	}
	s.conns = nil
}

// connect opens a query connection. Connecting and logging in are bounded by ConnectTimeout
// and by ctx; every later read and write by QueryTimeout (ctx does not reach them: callers
// that run statements under a ctx use closeOnDone).
func (s *Source) connect(ctx context.Context) (*client.Conn, error) {
	socks := &sockets{timeout: s.opts.ConnectTimeout}
	var timedOut bool
	var mu sync.Mutex
	timer := time.AfterFunc(s.opts.ConnectTimeout, func() {
		mu.Lock()
		timedOut = true
		mu.Unlock()
		socks.closeAll()
	})
	stop := context.AfterFunc(ctx, socks.closeAll)
	conn, err := client.ConnectWithDialer(ctx, "", s.addr, s.user, s.password, "", socks.dial, func(c *client.Conn) error {
		// Read when the packet connection is made, before the handshake: the fields set
		// later have no effect.
		c.ReadTimeout, c.WriteTimeout = s.opts.QueryTimeout, s.opts.QueryTimeout
		return nil
	})
	timer.Stop()
	stop()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		mu.Lock()
		late := timedOut
		mu.Unlock()
		if late {
			return nil, fmt.Errorf("mysqlcdc: connect to %s: no answer within %v", s.addr, s.opts.ConnectTimeout)
		}
		return nil, &connectError{addr: s.addr, err: err}
	}
	return conn, nil
}

// connectError is a failed connection attempt; go-mysql's errors carry stack traces, only
// their messages are kept (errors.As still finds the server's *mysql.MyError).
type connectError struct {
	addr string
	err  error
}

func (e *connectError) Unwrap() error { return e.err }
func (e *connectError) Error() string {
	return "mysqlcdc: connect to " + e.addr + ": " + withoutStack(e.err)
}

// closeOnDone closes conn's socket when ctx ends, which ends a blocked read: go-mysql's
// statements do not watch a context. The returned func stops watching.
func closeOnDone(ctx context.Context, conn *client.Conn) (stop func() bool) {
	socket := conn.Conn.Conn
	return context.AfterFunc(ctx, func() { _ = socket.Close() })
}

// quit ends a connection politely (COM_QUIT), so the server does not count an aborted client.
func quit(conn *client.Conn) {
	if err := conn.Quit(); err != nil {
		_ = conn.Close()
	}
}
