package faultproxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestTCPForwardsBothWays(t *testing.T) {
	ctx := testCtx(t)
	echo := startEcho(t)
	p := newTCP(t, echo.addr(), TCPOptions{BufferSize: 4096})

	data := make([]byte, 1<<20)
	rand.Read(data)
	c := dial(t, p.Addr())
	writeErr := make(chan error, 1)
	go func() {
		_, err := c.Write(data)
		if err == nil {
			err = c.CloseWrite() // the FIN must travel through to the echo server and back
		}
		writeErr <- err
	}()
	_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
	got, err := io.ReadAll(c) // ends only on the FIN relayed back from the target
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if err := <-writeErr; err != nil {
		t.Fatalf("write: %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("echo corrupted: got %d bytes, want %d identical ones", len(got), len(data))
	}
	if err := p.Wait(ctx, func(s TCPStats) bool { return s.Active == 0 }); err != nil {
		t.Fatalf("connection not torn down after both sides closed: %v", err)
	}
	s := p.Stats()
	want := TCPStats{Accepted: 1, BytesToTarget: int64(len(data)), BytesToClient: int64(len(data))}
	if s != want {
		t.Fatalf("stats = %+v, want %+v", s, want)
	}
}

func TestTCPTargetSpeaksFirstAndCloses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		io.WriteString(c, "greeting")
		c.Close()
	}()
	p := newTCP(t, ln.Addr().String(), TCPOptions{})
	c := dial(t, p.Addr())
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "greeting" {
		t.Fatalf("got %q, %v; want the greeting then EOF", got, err)
	}
}

func TestTCPLatency(t *testing.T) {
	const d = 100 * time.Millisecond
	echo := startEcho(t)
	p := newTCP(t, echo.addr(), TCPOptions{})
	c := dial(t, p.Addr())
	roundTrip(t, c, "warm-up") // the connection exists before the fault is set

	for _, tc := range []struct {
		dirs Direction
		min  time.Duration
	}{{ToClient, d}, {ToTarget, d}, {Both, 2 * d}} {
		p.SetLatency(Both, 0)
		p.SetLatency(tc.dirs, tc.min/time.Duration(popcount(tc.dirs)))
		start := time.Now()
		roundTrip(t, c, "ping-"+tc.dirs.String())
		if el := time.Since(start); el < tc.min {
			t.Errorf("latency %v: round trip took %v, want at least %v", tc.dirs, el, tc.min)
		}
	}

	// A new connection is delayed too, then healing restores plain forwarding.
	start := time.Now()
	roundTrip(t, dial(t, p.Addr()), "new-conn")
	if el := time.Since(start); el < 2*d {
		t.Errorf("new connection round trip took %v, want at least %v", el, 2*d)
	}
	// Chunks already waiting are released when the latency is lowered.
	p.SetLatency(ToClient, time.Hour)
	io.WriteString(c, "stuck")
	expectTimeout(t, c, 100*time.Millisecond) // meanwhile the echo reaches the proxy and waits
	if err := p.Heal(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len("stuck"))
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "stuck" {
		t.Fatalf("after Heal: %q, %v", got, err)
	}
	roundTrip(t, c, "healed")
}

func popcount(d Direction) int {
	n := 0
	for ; d != 0; d &= d - 1 {
		n++
	}
	return n
}

func TestTCPResetAll(t *testing.T) {
	ctx := testCtx(t)
	echo := startEcho(t)
	p := newTCP(t, echo.addr(), TCPOptions{})
	c1, c2 := dial(t, p.Addr()), dial(t, p.Addr())
	roundTrip(t, c1, "one")
	roundTrip(t, c2, "two")

	if n := p.ResetAll(); n != 2 {
		t.Fatalf("ResetAll = %d, want 2", n)
	}
	_ = c1.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c1.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after reset: %v, want connection reset by peer", err)
	}
	expectBroken(t, c2)
	if err := p.Wait(ctx, func(s TCPStats) bool { return s.Active == 0 }); err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); s.Resets != 2 {
		t.Fatalf("Resets = %d, want 2", s.Resets)
	}
	roundTrip(t, dial(t, p.Addr()), "after") // resets are one-shot
}

func TestTCPAcceptFaults(t *testing.T) {
	echo := startEcho(t)
	p := newTCP(t, echo.addr(), TCPOptions{})
	existing := dial(t, p.Addr())
	roundTrip(t, existing, "before")

	t.Run("reset", func(t *testing.T) {
		if err := p.SetAcceptFault(AcceptReset); err != nil {
			t.Fatal(err)
		}
		expectResetOnConnect(t, p.Addr())
		roundTrip(t, existing, "still-up")
	})
	t.Run("close", func(t *testing.T) {
		if err := p.SetAcceptFault(AcceptClose); err != nil {
			t.Fatal(err)
		}
		c := dial(t, p.Addr())
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("read: %v, want EOF", err)
		}
	})
	t.Run("refuse", func(t *testing.T) {
		if err := p.SetAcceptFault(AcceptRefuse); err != nil {
			t.Fatal(err)
		}
		if c, err := net.Dial("tcp", p.Addr()); !errors.Is(err, syscall.ECONNREFUSED) {
			if c != nil {
				c.Close()
			}
			t.Fatalf("dial while refusing: %v, want connection refused", err)
		}
		roundTrip(t, existing, "refusing-new-only")
		if err := p.SetAcceptFault(AcceptRefuse); err != nil { // idempotent
			t.Fatal(err)
		}
	})
	if err := p.Heal(); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, dial(t, p.Addr()), "healed") // same address, listening again
	s := p.Stats()
	if s.Rejected != 2 || s.Accepted != 4 {
		t.Fatalf("stats = %+v, want 4 accepted of which 2 rejected", s)
	}
}

func TestTCPBlackhole(t *testing.T) {
	ctx := testCtx(t)
	const readTimeout = 150 * time.Millisecond
	echo := startEcho(t)
	p := newTCP(t, echo.addr(), TCPOptions{})
	c := dial(t, p.Addr())
	roundTrip(t, c, "before")

	t.Run("both", func(t *testing.T) {
		p.SetBlackhole(Both)
		io.WriteString(c, "lost")
		expectTimeout(t, c, readTimeout)
		if err := p.Wait(ctx, func(s TCPStats) bool { return s.DroppedToTarget == 4 }); err != nil {
			t.Fatal(err)
		}
		// A connection made during the black-hole is accepted but silent.
		fresh := dial(t, p.Addr())
		io.WriteString(fresh, "lost too")
		expectTimeout(t, fresh, readTimeout)

		p.SetBlackhole(None)
		roundTrip(t, c, "back") // "lost" never reached the target, so only this comes back
		roundTrip(t, fresh, "fresh-back")
	})

	t.Run("to-client", func(t *testing.T) {
		before := echo.received.Load()
		p.SetBlackhole(ToClient)
		io.WriteString(c, "applied")
		// The target gets the bytes; only the answer vanishes.
		for echo.received.Load() < before+7 {
			if ctx.Err() != nil {
				t.Fatal("target never received the request")
			}
			time.Sleep(time.Millisecond)
		}
		expectTimeout(t, c, readTimeout)
		if err := p.Wait(ctx, func(s TCPStats) bool { return s.DroppedToClient >= 7 }); err != nil {
			t.Fatal(err)
		}
		p.SetBlackhole(None)
		roundTrip(t, c, "next")
	})

	t.Run("holds-half-close", func(t *testing.T) {
		c := dial(t, p.Addr())
		roundTrip(t, c, "x")
		p.SetBlackhole(ToTarget)
		if err := c.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		// Were the FIN forwarded, the echo server would close and we would read EOF.
		expectTimeout(t, c, readTimeout)
		p.SetBlackhole(None)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("after clearing: %v, want the delayed EOF", err)
		}
	})
}

func TestTCPTargetDown(t *testing.T) {
	ctx := testCtx(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()

	p := newTCP(t, dead, TCPOptions{})
	expectResetOnConnect(t, p.Addr())
	if err := p.Wait(ctx, func(s TCPStats) bool { return s.DialErrors == 1 && s.Active == 0 }); err != nil {
		t.Fatalf("%v; stats %+v", err, p.Stats())
	}
}

func TestTCPCloseStopsEverything(t *testing.T) {
	ctx := testCtx(t)
	echo := startEcho(t)
	p, err := NewTCP(echo.addr(), TCPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Leave goroutines in every blocking state: idle, waiting out latency, black-holed.
	idle := dial(t, p.Addr())
	roundTrip(t, idle, "idle")
	p.SetLatency(ToClient, time.Hour)
	slow := dial(t, p.Addr())
	io.WriteString(slow, "slow")
	if err := p.Wait(ctx, func(s TCPStats) bool { return s.BytesToTarget >= int64(len("idle")+len("slow")) }); err != nil {
		t.Fatal(err)
	}
	p.SetBlackhole(ToTarget)
	hole := dial(t, p.Addr())
	io.WriteString(hole, "hole")
	if err := p.Wait(ctx, func(s TCPStats) bool { return s.Active == 3 }); err != nil {
		t.Fatal(err)
	}

	if len(proxyGoroutines()) == 0 {
		t.Fatal("proxyGoroutines finds nothing while the proxy runs; the leak check below is blind")
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	waitNoProxyGoroutines(t)
	for _, c := range []net.Conn{idle, slow, hole} {
		expectBroken(t, c)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if c, err := net.Dial("tcp", p.Addr()); err == nil {
		c.Close()
		t.Fatal("dial after Close succeeded")
	}
	if err := p.SetAcceptFault(AcceptForward); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("SetAcceptFault after Close: %v", err)
	}
	if err := p.Wait(ctx, func(TCPStats) bool { return false }); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Wait after Close: %v", err)
	}
}

func TestTCPCloseWhileRefusing(t *testing.T) {
	p, err := NewTCP(startEcho(t).addr(), TCPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.SetAcceptFault(AcceptRefuse); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	waitNoProxyGoroutines(t)
}

// TestTCPConcurrentFaults flips every fault while clients keep talking, for the race detector
// and for deadlocks; afterwards the proxy must forward normally again.
func TestTCPConcurrentFaults(t *testing.T) {
	ctx := testCtx(t)
	echo := startEcho(t)
	p := newTCP(t, echo.addr(), TCPOptions{})

	stop := make(chan struct{})
	var clients sync.WaitGroup
	for i := range 4 {
		clients.Add(1)
		go func() {
			defer clients.Done()
			var c net.Conn
			for j := 0; ; j++ {
				select {
				case <-stop:
					if c != nil {
						c.Close()
					}
					return
				default:
				}
				if c == nil {
					var err error
					if c, err = net.DialTimeout("tcp", p.Addr(), time.Second); err != nil {
						continue // refused while AcceptRefuse is on
					}
				}
				if echoOnce(c, fmt.Sprintf("c%d-%d", i, j), 50*time.Millisecond) != nil {
					c.Close() // broken or black-holed: start afresh, as a real client would
					c = nil
				}
			}
		}()
	}

	for i := range 200 {
		switch i % 7 {
		case 0:
			p.SetLatency(Direction(i%3+1), time.Duration(i%5)*time.Millisecond)
		case 1:
			p.SetBlackhole(Direction(i % 4))
		case 2:
			p.ResetAll()
		case 3:
			_ = p.SetAcceptFault(AcceptFault(i % 4))
		case 4:
			_ = p.Stats()
		case 5:
			if err := p.Heal(); err != nil {
				t.Error(err)
			}
		case 6:
			time.Sleep(2 * time.Millisecond) // let some traffic through
		}
	}
	if err := p.Heal(); err != nil {
		t.Fatal(err)
	}
	close(stop)
	clients.Wait()
	roundTrip(t, dial(t, p.Addr()), "healthy")
	if err := p.Wait(ctx, func(s TCPStats) bool { return s.Active == 1 }); err != nil {
		t.Fatalf("%v; stats %+v", err, p.Stats())
	}
}

func TestTCPOptionsAndErrors(t *testing.T) {
	if _, err := NewTCP("127.0.0.1:1", TCPOptions{ListenAddr: "0.0.0.0:0"}); err == nil {
		t.Error("a non-loopback listen address was accepted")
	}
	if _, err := NewTCP("no-port", TCPOptions{}); err == nil {
		t.Error("a target without port was accepted")
	}
	p := newTCP(t, "127.0.0.1:1", TCPOptions{ListenAddr: "localhost:0"})
	if err := p.SetAcceptFault(AcceptFault(42)); err == nil {
		t.Error("an unknown AcceptFault was accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Wait(ctx, func(TCPStats) bool { return false }); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait with a canceled context: %v", err)
	}
}
