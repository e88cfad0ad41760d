package faultproxy

import (
	"io"
	"testing"
	"time"
)

// TestTCPHangHoldsAndDelivers: while hung, open and new connections stay open and nothing
// crosses the proxy, half-closes included; once the hang ends, everything held arrives, in
// order, and nothing was lost.
func TestTCPHangHoldsAndDelivers(t *testing.T) {
	echo := startEcho(t)
	p := newTCP(t, echo.addr(), TCPOptions{})
	open := dial(t, p.Addr())
	roundTrip(t, open, "before")

	p.SetHang(true)
	if _, err := io.WriteString(open, "held-1"); err != nil {
		t.Fatal(err)
	}
	fresh := dial(t, p.Addr()) // accepted while hung
	if _, err := io.WriteString(fresh, "held-2"); err != nil {
		t.Fatal(err)
	}
	if err := fresh.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	expectTimeout(t, open, 300*time.Millisecond)
	expectTimeout(t, fresh, 300*time.Millisecond) // not even the half-close came back

	p.SetHang(false)
	for _, c := range []struct {
		conn interface {
			io.Reader
			SetReadDeadline(time.Time) error
		}
		want string
	}{{open, "held-1"}, {fresh, "held-2"}} {
		_ = c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		got := make([]byte, len(c.want))
		if _, err := io.ReadFull(c.conn, got); err != nil || string(got) != c.want {
			t.Fatalf("after the hang: got %q, %v; want %q", got, err, c.want)
		}
	}
	if _, err := fresh.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the half-close held during the hang did not arrive after it: %v", err)
	}
	roundTrip(t, open, "after")
	if s := p.Stats(); s.DroppedToTarget != 0 || s.DroppedToClient != 0 {
		t.Fatalf("a hang dropped bytes: %+v", s)
	}

	p.SetHang(true)
	if err := p.Heal(); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, open, "healed")
}
