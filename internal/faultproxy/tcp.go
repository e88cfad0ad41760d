package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Direction names one or both halves of a proxied TCP connection. Values combine with |.
type Direction uint8

const (
	// None selects no direction; SetBlackhole(None) clears the black-hole.
	None Direction = 0
	// ToTarget is the client-to-target half (requests).
	ToTarget Direction = 1 << 0
	// ToClient is the target-to-client half (responses).
	ToClient Direction = 1 << 1
	// Both selects both halves.
	Both = ToTarget | ToClient
)

func (d Direction) String() string {
	switch d {
	case None:
		return "none"
	case ToTarget:
		return "to-target"
	case ToClient:
		return "to-client"
	case Both:
		return "both"
	}
	return fmt.Sprintf("Direction(%d)", uint8(d))
}

// AcceptFault says what the TCP proxy does with connections that arrive while it is set.
// Connections that were already accepted are not affected; see TCPProxy.ResetAll for those.
type AcceptFault int

const (
	// AcceptForward is the healthy state: accept and forward to the target.
	AcceptForward AcceptFault = iota
	// AcceptReset accepts and immediately aborts with a TCP RST, so the client's connect succeeds
	// and its first read fails with "connection reset by peer".
	AcceptReset
	// AcceptClose accepts and immediately closes with a FIN, so the client reads EOF.
	AcceptClose
	// AcceptRefuse closes the listening socket, so connects fail with "connection refused".
	// Returning to any other mode listens again on the same address.
	AcceptRefuse
)

func (f AcceptFault) String() string {
	switch f {
	case AcceptForward:
		return "forward"
	case AcceptReset:
		return "reset"
	case AcceptClose:
		return "close"
	case AcceptRefuse:
		return "refuse"
	}
	return fmt.Sprintf("AcceptFault(%d)", int(f))
}

// TCPOptions holds the optional settings of NewTCP. The zero value is ready to use.
type TCPOptions struct {
	// ListenAddr is the address to listen on. It must be a loopback address (127.0.0.0/8, ::1
	// or "localhost"). Default "127.0.0.1:0", a free port chosen by the kernel.
	ListenAddr string
	// DialTimeout bounds each connection attempt to the target. Default 5s.
	DialTimeout time.Duration
	// BufferSize is the largest chunk read from one side at a time; latency is applied per
	// chunk. Default 32 KiB.
	BufferSize int
	// QueueChunks is how many chunks per direction may wait in the latency queue before the
	// proxy stops reading from the sender (back-pressure). Default 64.
	QueueChunks int
}

func (o TCPOptions) withDefaults() TCPOptions {
	if o.ListenAddr == "" {
		o.ListenAddr = "127.0.0.1:0"
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.BufferSize <= 0 {
		o.BufferSize = 32 << 10
	}
	if o.QueueChunks <= 0 {
		o.QueueChunks = 64
	}
	return o
}

// TCPStats is a snapshot of the TCP proxy's counters. Byte counts include only bytes actually
// written to the receiving side; bytes swallowed by a black-hole are counted separately.
type TCPStats struct {
	Accepted        int64 // connections accepted by the listener, rejected ones included
	Rejected        int64 // accepted connections closed or reset at once by an AcceptFault
	DialErrors      int64 // accepted connections dropped because the target could not be reached
	Active          int64 // connections currently open (dialing or forwarding)
	Resets          int64 // connections aborted by ResetAll
	BytesToTarget   int64 // bytes forwarded from clients to the target
	BytesToClient   int64 // bytes forwarded from the target to clients
	DroppedToTarget int64 // client bytes swallowed by a black-hole
	DroppedToClient int64 // target bytes swallowed by a black-hole
}

// TCPProxy forwards TCP connections from a loopback listener to a target address and injects
// faults on demand. All methods are safe for concurrent use.
type TCPProxy struct {
	target string
	opts   TCPOptions
	addr   string // fixed at construction; re-listening after AcceptRefuse reuses it

	ctx    context.Context // canceled by Close; bounds dials and waits
	cancel context.CancelFunc
	wg     sync.WaitGroup // accept loops and connection handlers

	latency [2]atomic.Int64 // nanoseconds; [0] towards the target, [1] towards the client

	// resetsMu serialises SetResetEvery; stopResets ends its periodic resets (nil when none
	// run) and resetsDone is closed once they ended.
	resetsMu   sync.Mutex
	stopResets context.CancelFunc
	resetsDone chan struct{}
	blackhole  atomic.Uint32 // Direction bits
	hung       atomic.Bool   // SetHang: nothing is forwarded, everything is held

	mu      sync.Mutex
	ln      net.Listener // nil while refusing or after Close
	accept  AcceptFault
	links   map[*link]struct{}
	closed  bool
	changed chan struct{} // closed and replaced whenever a fault or the connection set changes

	accepted, rejected, dialErrors, active, resets atomic.Int64
	bytes, dropped                                 [2]atomic.Int64
}

// NewTCP starts a proxy that forwards every accepted connection to target ("host:port").
// The target is dialed per connection, so it need not be up yet.
func NewTCP(target string, opts TCPOptions) (*TCPProxy, error) {
	if _, _, err := net.SplitHostPort(target); err != nil {
		return nil, fmt.Errorf("faultproxy: bad target %q: %w", target, err)
	}
	opts = opts.withDefaults()
	if err := checkLoopback(opts.ListenAddr); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", opts.ListenAddr)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &TCPProxy{
		target:  target,
		opts:    opts,
		addr:    ln.Addr().String(),
		ctx:     ctx,
		cancel:  cancel,
		ln:      ln,
		links:   make(map[*link]struct{}),
		changed: make(chan struct{}),
	}
	p.wg.Add(1)
	go p.acceptLoop(ln)
	return p, nil
}

// Addr returns the "host:port" clients should connect to. It does not change for the proxy's
// lifetime, even across AcceptRefuse.
func (p *TCPProxy) Addr() string { return p.addr }

// Target returns the address connections are forwarded to.
func (p *TCPProxy) Target() string { return p.target }

// SetLatency delays every chunk travelling in the given direction(s) until d has passed since
// the proxy read it; d <= 0 removes the delay. Directions not named keep their setting. It
// applies to open connections and to chunks already waiting, so lowering it (or Heal) releases
// them at once. Chunks are pipelined: this adds latency without capping throughput.
func (p *TCPProxy) SetLatency(dirs Direction, d time.Duration) {
	d = max(d, 0)
	for i, dir := range [...]Direction{ToTarget, ToClient} {
		if dirs&dir != 0 {
			p.latency[i].Store(int64(d))
		}
	}
	p.notify()
}

// SetBlackhole makes the given direction(s) swallow every byte -- and a half-close -- instead
// of forwarding it, on open and new connections alike; connections stay open. Exactly the
// directions named are black-holed afterwards, so SetBlackhole(None) clears it. Swallowed
// bytes are gone for good: a client that reuses a connection after the fault is cleared sees a
// protocol stream with a hole in it, as after real packet loss that outlasted retransmission.
// New connections are still accepted and dialed to the target while a black-hole is set.
func (p *TCPProxy) SetBlackhole(dirs Direction) {
	p.blackhole.Store(uint32(dirs & Both))
	p.notify()
}

// SetHang(true) makes the proxy behave like a server process that was stopped (SIGSTOP):
// connections, open and new, stay open and are accepted, but nothing is forwarded in either
// direction -- no byte, no half-close -- until SetHang(false), which delivers everything held,
// in order, as a continued process reads what its sockets buffered. Unlike a black-hole
// nothing is lost. While hung the proxy reads at most TCPOptions.QueueChunks chunks per
// connection and direction ahead; then TCP flow control holds the sender. Heal clears it.
func (p *TCPProxy) SetHang(on bool) {
	p.hung.Store(on)
	p.notify()
}

// SetAcceptFault chooses what happens to connections that arrive from now on. The error is
// non-nil only when leaving AcceptRefuse fails to listen on Addr again (the port was taken in
// the meantime) or the proxy is closed.
func (p *TCPProxy) SetAcceptFault(f AcceptFault) error {
	if f < AcceptForward || f > AcceptRefuse {
		return fmt.Errorf("faultproxy: unknown AcceptFault %d", int(f))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return net.ErrClosed
	}
	defer p.notifyLocked()
	switch {
	case f == AcceptRefuse && p.ln != nil:
		// The accept loop exits on its own once Accept fails; connections still in the backlog
		// are reset by the kernel, as they would be on a real server going away.
		p.ln.Close()
		p.ln = nil
	case f != AcceptRefuse && p.ln == nil:
		ln, err := net.Listen("tcp", p.addr)
		if err != nil {
			return fmt.Errorf("faultproxy: listen again on %s: %w", p.addr, err)
		}
		p.ln = ln
		p.wg.Add(1)
		go p.acceptLoop(ln)
	}
	p.accept = f
	return nil
}

// ResetAll aborts every open connection with a TCP RST on both the client and the target side,
// and returns how many it aborted. New connections are not affected.
func (p *TCPProxy) ResetAll() int {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	n := 0
	for _, l := range links {
		if l.abort(true) {
			n++
		}
	}
	p.resets.Add(int64(n))
	return n
}

// SetResetEvery makes the proxy abort every open connection with a TCP RST (as ResetAll does)
// each time d passes, from d from now on, until SetResetEvery(0), Heal or Close: a flapping
// network. New connections are accepted and forwarded between two resets, so a client that
// reconnects gets up to d of working connection each time. A new call replaces the period
// (the next reset comes d after the call); d <= 0 stops the resets. Once it returns, no reset
// of the period it replaced is still to come.
func (p *TCPProxy) SetResetEvery(d time.Duration) {
	p.resetsMu.Lock()
	defer p.resetsMu.Unlock()
	if p.stopResets != nil {
		p.stopResets()
		<-p.resetsDone
		p.stopResets, p.resetsDone = nil, nil
	}
	defer p.notify()
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if d <= 0 || closed {
		return
	}
	ctx, cancel := context.WithCancel(p.ctx)
	done := make(chan struct{})
	p.stopResets, p.resetsDone = cancel, done
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(done)
		tick := time.NewTicker(d)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				p.ResetAll()
			}
		}
	}()
}

// Heal clears every fault: no latency, no black-hole, no periodic resets, AcceptForward. Open
// connections are kept.
func (p *TCPProxy) Heal() error {
	p.SetResetEvery(0)
	p.SetLatency(Both, 0)
	p.SetBlackhole(None)
	p.SetHang(false)
	return p.SetAcceptFault(AcceptForward)
}

// Stats returns a snapshot of the counters.
func (p *TCPProxy) Stats() TCPStats {
	return TCPStats{
		Accepted:        p.accepted.Load(),
		Rejected:        p.rejected.Load(),
		DialErrors:      p.dialErrors.Load(),
		Active:          p.active.Load(),
		Resets:          p.resets.Load(),
		BytesToTarget:   p.bytes[0].Load(),
		BytesToClient:   p.bytes[1].Load(),
		DroppedToTarget: p.dropped[0].Load(),
		DroppedToClient: p.dropped[1].Load(),
	}
}

// Wait blocks until cond returns true for the current Stats, ctx is done, or the proxy is
// closed, and returns nil, ctx.Err() or net.ErrClosed respectively. Use it instead of sleeping,
// e.g. to wait until a connection is established before resetting it.
func (p *TCPProxy) Wait(ctx context.Context, cond func(TCPStats) bool) error {
	// Byte counters change without notification (too frequent), so also poll.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		p.mu.Lock()
		changed := p.changed
		p.mu.Unlock()
		if cond(p.Stats()) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.ctx.Done():
			return net.ErrClosed
		case <-changed:
		case <-tick.C:
		}
	}
}

// Close stops listening, aborts every open connection and waits until all of the proxy's
// goroutines have returned. It is idempotent; later calls return nil.
func (p *TCPProxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	var err error
	if p.ln != nil {
		err = p.ln.Close()
		p.ln = nil
	}
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.notifyLocked()
	p.mu.Unlock()

	p.cancel()
	for _, l := range links {
		l.abort(false)
	}
	p.wg.Wait()
	return err
}

func (p *TCPProxy) notify() {
	p.mu.Lock()
	p.notifyLocked()
	p.mu.Unlock()
}

func (p *TCPProxy) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// changedChan returns the channel closed at the next state change.
func (p *TCPProxy) changedChan() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changed
}

func (p *TCPProxy) acceptLoop(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Transient failures such as EMFILE: back off briefly rather than spin.
			select {
			case <-p.ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		p.accepted.Add(1)

		p.mu.Lock()
		fault, closed := p.accept, p.closed
		var l *link
		if !closed && fault == AcceptForward {
			l = &link{client: c, done: make(chan struct{})}
			p.links[l] = struct{}{}
			p.active.Add(1)
			p.wg.Add(1)
			p.notifyLocked()
		}
		p.mu.Unlock()

		switch {
		case closed:
			c.Close()
			return
		case fault == AcceptReset:
			p.rejected.Add(1)
			abortConn(c, true)
		case fault == AcceptClose, fault == AcceptRefuse: // AcceptRefuse: accepted just before the listener closed
			p.rejected.Add(1)
			c.Close()
		default:
			go p.handle(l)
		}
	}
}

// link is one proxied connection: the accepted client side and the dialed target side.
type link struct {
	client net.Conn

	mu         sync.Mutex
	target     net.Conn // nil until dialed
	cancelDial context.CancelFunc
	aborted    bool

	done chan struct{} // closed by abort
}

// setDialCancel registers the function that stops the dial in progress when the link is
// aborted; it reports false if the link is already aborted.
func (l *link) setDialCancel(cancel context.CancelFunc) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cancelDial = cancel
	return !l.aborted
}

// setTarget records the dialed target connection (nil after a failed dial); it reports false,
// closing t, if the link was aborted while dialing.
func (l *link) setTarget(t net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.aborted {
		if t != nil {
			abortConn(t, true)
		}
		return false
	}
	l.target = t
	return true
}

// abort closes both sides, with RST if rst is set, and unblocks everything waiting on the
// link. Only the first call has an effect; it reports whether this call was that one.
func (l *link) abort(rst bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.aborted {
		return false
	}
	l.aborted = true
	if l.cancelDial != nil {
		l.cancelDial()
	}
	abortConn(l.client, rst)
	if l.target != nil {
		abortConn(l.target, rst)
	}
	close(l.done)
	return true
}

func abortConn(c net.Conn, rst bool) {
	if tc, ok := c.(*net.TCPConn); ok && rst {
		// Linger 0 makes close discard unsent data and send RST instead of FIN.
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

func (p *TCPProxy) handle(l *link) {
	defer p.wg.Done()
	defer func() {
		l.abort(false) // both pumps are done; a plain close is all that is left
		p.mu.Lock()
		delete(p.links, l)
		p.active.Add(-1)
		p.notifyLocked()
		p.mu.Unlock()
	}()

	ctx, cancel := context.WithTimeout(p.ctx, p.opts.DialTimeout)
	defer cancel()
	if !l.setDialCancel(cancel) {
		return
	}
	var d net.Dialer
	t, err := d.DialContext(ctx, "tcp", p.target)
	if err != nil {
		if l.setTarget(nil) {
			p.dialErrors.Add(1)
			// The closest a proxy that already accepted can get to "connection refused".
			l.abort(true)
		}
		return
	}
	if !l.setTarget(t) {
		return
	}

	toTarget := make(chan struct{})
	go func() { defer close(toTarget); p.pump(l, 0, l.client, t) }()
	p.pump(l, 1, t, l.client)
	<-toTarget
}

type chunk struct {
	data []byte
	read time.Time // when the proxy read it; latency counts from here
}

// pump moves bytes from src to dst in one direction (i is 0 towards the target, 1 towards the
// client). A reader goroutine queues what it reads, so latency delays chunks without
// serialising them; the pump itself writes them out in order once they are due.
func (p *TCPProxy) pump(l *link, i int, src, dst net.Conn) {
	dir := ToTarget << i
	chunks := make(chan chunk, p.opts.QueueChunks)
	readErr := make(chan error, 1)
	go func() {
		defer close(chunks)
		buf := make([]byte, p.opts.BufferSize)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				select {
				case chunks <- chunk{data: append([]byte(nil), buf[:n]...), read: time.Now()}:
				case <-l.done:
					readErr <- net.ErrClosed
					return
				}
			}
			if err != nil {
				readErr <- err
				return
			}
		}
	}()

	for c := range chunks {
		if !p.waitDue(l, i, c.read) {
			continue // aborted: drain so the reader can finish
		}
		if Direction(p.blackhole.Load())&dir != 0 {
			p.dropped[i].Add(int64(len(c.data)))
			continue
		}
		if _, err := dst.Write(c.data); err != nil {
			l.abort(true)
			continue
		}
		p.bytes[i].Add(int64(len(c.data)))
	}

	if err := <-readErr; !errors.Is(err, io.EOF) {
		// A reset or error on one side is passed on as a reset of the other.
		l.abort(true)
		return
	}
	// Hold a half-close while this direction is black-holed (a lost FIN is not delivered
	// either) or the proxy hangs.
	for Direction(p.blackhole.Load())&dir != 0 || p.hung.Load() {
		select {
		case <-l.done:
			return
		case <-p.changedChan():
		}
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		if err := cw.CloseWrite(); err != nil {
			l.abort(true)
		}
	}
}

// waitDue waits until a chunk read at the given time has spent the current latency of
// direction i, re-reading the setting whenever faults change so that lowering it releases
// waiting chunks. It reports false if the link was aborted meanwhile.
func (p *TCPProxy) waitDue(l *link, i int, read time.Time) bool {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	due := func() time.Duration { return time.Until(read.Add(time.Duration(p.latency[i].Load()))) }
	for {
		if p.hung.Load() {
			// Held, not dropped, until the hang ends (SetHang).
			changed := p.changedChan()
			if !p.hung.Load() {
				continue
			}
			select {
			case <-changed:
				continue
			case <-l.done:
				return false
			}
		}
		if due() <= 0 {
			select {
			case <-l.done:
				return false
			default:
				return true
			}
		}
		changed := p.changedChan()
		// Read the setting again now that a change after this point cannot go unnoticed.
		wait := due()
		if wait <= 0 {
			continue
		}
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-timer.C:
		case <-changed:
		case <-l.done:
			return false
		}
	}
}

func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("faultproxy: bad listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("faultproxy: listen address %q is not a loopback address", addr)
}
