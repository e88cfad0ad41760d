package faultproxy

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

// TestTCPResetEvery: every connection is reset each period, new ones work in between, and
// clearing the mode (or Heal) stops the resets.
func TestTCPResetEvery(t *testing.T) {
	ctx := testCtx(t)
	echo := startEcho(t)
	p := newTCP(t, echo.addr(), TCPOptions{})
	const period = 300 * time.Millisecond
	p.SetResetEvery(period)
	for round := range 3 {
		// A new connection works between two resets (one made just before a reset may not:
		// tried again).
		var c *net.TCPConn
		for attempt := 0; ; attempt++ {
			c = dial(t, p.Addr())
			err := echoOnce(c, "between resets", 10*time.Second)
			if err == nil {
				break
			}
			if attempt == 20 {
				t.Fatalf("round %d: no connection worked between two resets: %v", round, err)
			}
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("round %d: read until the next reset: %v, want connection reset by peer", round, err)
		}
	}
	if err := p.Wait(ctx, func(s TCPStats) bool { return s.Resets >= 3 }); err != nil {
		t.Fatal(err)
	}

	p.SetResetEvery(0)
	c := dial(t, p.Addr())
	roundTrip(t, c, "one")
	time.Sleep(3 * period) // proves an absence: a reset would have come by now
	roundTrip(t, c, "still open")

	p.SetResetEvery(period)
	if err := p.Heal(); err != nil {
		t.Fatal(err)
	}
	c = dial(t, p.Addr())
	roundTrip(t, c, "one")
	time.Sleep(3 * period)
	roundTrip(t, c, "healed")
	p.SetResetEvery(period) // left running: Close stops it (TestTCPResetEveryClose)
}

// TestTCPResetEveryClose: Close ends the periodic resets with the rest of the proxy.
func TestTCPResetEveryClose(t *testing.T) {
	echo := startEcho(t)
	p, err := NewTCP(echo.addr(), TCPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.SetResetEvery(10 * time.Millisecond)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	waitNoProxyGoroutines(t)
	p.SetResetEvery(10 * time.Millisecond) // after Close: nothing starts
	waitNoProxyGoroutines(t)
}
