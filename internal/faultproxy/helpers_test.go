package faultproxy

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// testCtx bounds every blocking step of a test so a bug hangs nothing for long.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// echoServer is a TCP target that sends every byte back and half-closes when the client does.
type echoServer struct {
	ln       net.Listener
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	received atomic.Int64
}

func startEcho(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &echoServer{ln: ln, conns: make(map[net.Conn]struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns[c] = struct{}{}
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer func() {
					s.mu.Lock()
					delete(s.conns, c)
					s.mu.Unlock()
					c.Close()
				}()
				buf := make([]byte, 16<<10)
				for {
					n, err := c.Read(buf)
					s.received.Add(int64(n))
					if n > 0 {
						if _, werr := c.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						if errors.Is(err, io.EOF) {
							_ = c.(*net.TCPConn).CloseWrite()
						}
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(s.close)
	return s
}

func (s *echoServer) addr() string { return s.ln.Addr().String() }

func (s *echoServer) close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func newTCP(t *testing.T, target string, opts TCPOptions) *TCPProxy {
	t.Helper()
	p, err := NewTCP(target, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func dial(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

// roundTrip sends msg over c and expects the echo back within a generous deadline.
func roundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if err := echoOnce(c, msg, 10*time.Second); err != nil {
		t.Fatalf("round trip %q: %v", msg, err)
	}
}

func echoOnce(c net.Conn, msg string, timeout time.Duration) error {
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, msg); err != nil {
		return err
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if string(got) != msg {
		return errors.New("echo mismatch: got " + string(got))
	}
	return nil
}

// expectTimeout asserts that nothing arrives on c within d: the read must end in a timeout.
func expectTimeout(t *testing.T, c net.Conn, d time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	defer c.SetReadDeadline(time.Time{})
	n, err := c.Read(make([]byte, 64))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read got %d bytes, err %v; want a timeout", n, err)
	}
}

// expectResetOnConnect asserts that a connection to addr is reset, either while connecting (the
// RST can beat the dialing goroutine) or on the first read.
func expectResetOnConnect(t *testing.T, addr string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err == nil {
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = c.Read(make([]byte, 1))
	}
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("got %v, want connection reset by peer", err)
	}
}

// expectBroken asserts that the peer reset or closed c: a read ends in ECONNRESET or EOF.
func expectBroken(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := c.Read(make([]byte, 64))
	if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) {
		t.Fatalf("read err = %v; want connection reset or EOF", err)
	}
}

// proxyGoroutines lists the stacks of live goroutines that run code of a proxy type.
func proxyGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "faultproxy.(*TCPProxy)") || strings.Contains(g, "faultproxy.(*HTTPProxy)") {
			out = append(out, g)
		}
	}
	return out
}

// waitNoProxyGoroutines checks, after Close, that the proxy's goroutines are gone. Close waits
// until each has done its last step, but one that has may still be on its way out of the
// runtime's list for a moment, so this polls rather than looking once. The bound is generous
// (a loaded machine may not run the exiting goroutines for a while); a passing run returns as
// soon as they are gone.
func waitNoProxyGoroutines(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	waitNoGoroutines(ctx, t, "faultproxy.(*TCPProxy)", "faultproxy.(*HTTPProxy)")
}

// waitNoGoroutines polls until no goroutine stack contains any of the markers (goroutines that
// are finishing need a moment to disappear from the runtime's list), failing with the stacks
// once ctx is done.
func waitNoGoroutines(ctx context.Context, t *testing.T, markers ...string) {
	t.Helper()
	for {
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		var left []string
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			for _, m := range markers {
				if strings.Contains(g, m) {
					left = append(left, g)
					break
				}
			}
		}
		if len(left) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("goroutines still running:\n%s", strings.Join(left, "\n\n"))
		case <-time.After(10 * time.Millisecond):
		}
	}
}
