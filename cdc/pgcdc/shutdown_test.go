package pgcdc

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/tributary-dev/tributary/cdc"
)

// TestHandshakeAnswers: a reply request is answered with the acknowledged position; another
// one before the stream sent a status update of its own is the shutdown handshake and gets
// the final answer, also when repeated by requests already on their way; the same WAL end
// asked for again after that closes the connection. A status update of the stream's own
// starts over.
func TestHandshakeAnswers(t *testing.T) {
	var h handshake
	steps := []struct {
		ping   pglogrepl.LSN // 0: the stream sends a status update of its own
		answer pingAnswer
	}{
		{0x100, answerStatus}, // an ordinary reply request (half wal_sender_timeout of silence)
		{0, 0},
		{0x100, answerStatus}, // again after a periodic update: still ordinary
		{0x100, answerFinal},  // asked again at once: WalSndDone
		{0x180, answerFinal},  // more WAL was sent meanwhile: final again, for the new end
		{0x180, answerFinal},  // requests that crossed the final answer
		{0x180, answerFinal},
		{0x180, answerFinal},
		{0x180, answerFinal},
		{0x180, answerClose}, // still asking: the final answer does not end it
		{0, 0},
		{0x180, answerStatus},
	}
	for i, s := range steps {
		if s.ping == 0 {
			h.statusSent()
			continue
		}
		if got := h.ping(s.ping); got != s.answer {
			t.Fatalf("step %d: ping %s answered %d, want %d", i, s.ping, got, s.answer)
		}
	}
}

// TestStatusUpdateFields: the final answer reports the WAL end as written and nothing as
// flushed or applied (0, invalid), which confirms nothing to the slot; periodic updates ask
// for a reply.
func TestStatusUpdateFields(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	u := parseStatus(t, statusUpdate(0x500, 0, now, false)[5:])
	if u.write != 0x500 || u.flush != 0 || u.apply != 0 || u.reply {
		t.Errorf("final answer %+v", u)
	}
	u = parseStatus(t, statusUpdate(0x300, 0x300, now, true)[5:])
	if u.write != 0x300 || u.flush != 0x300 || u.apply != 0x300 || !u.reply {
		t.Errorf("periodic update %+v", u)
	}
}

// TestShutdownHandshake: a walsender at a fast or smart shutdown (WalSndDone) finishes on the
// stream's answers within a few reply requests, and the slot is never told more than was
// acknowledged: with a delivered change unacknowledged, acknowledged, with a consumer that
// takes nothing (the handshake must not wait behind the event it holds), and against a server
// that would not finish on an invalid flush position (the stream then closes the connection).
// The stream fails with ErrServerShuttingDown, a retryable failure.
func TestShutdownHandshake(t *testing.T) {
	const start, commitEnd, sent = pglogrepl.LSN(0x100), pglogrepl.LSN(0x310), pglogrepl.LSN(0x400)
	cases := []struct {
		name     string
		ack      bool // acknowledge the delivered change before the shutdown
		take     bool // the consumer takes the event
		stubborn bool // the server finishes only when flush reaches its sent position
	}{
		{name: "unacknowledged", take: true},
		{name: "acknowledged", take: true, ack: true},
		{name: "consumer stuck"},
		{name: "server insists on flush", take: true, stubborn: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			table := Table{Schema: "public", Name: "t"}
			src, err := New("postgres://nobody@127.0.0.1:1/db", &Options{Name: "sd", Tables: []Table{table}, StatusInterval: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			cachedTestTable(src, table, 1)
			w := startStopper(t, &stopper{sent: sent, stubborn: c.stubborn, frames: [][]byte{
				xlogData(0x100, msgBegin(0x300, 77)),
				xlogData(0x100, msgRelation(1, "public", "t")),
				xlogData(0x200, msgInsert(1, tuple(fullRow...))),
				xlogData(0x300, msgCommit(0x300, uint64(commitEnd))),
			}})
			conn := w.connect(ctx, t)
			st := newStream(src, nil, conn, &plan{database: "db", tables: []Table{table}, start: start})
			st.streaming = true
			if !c.take {
				st.events = make(chan cdc.Event) // nobody receives: emit waits
			}
			ended := make(chan error, 1)
			go func() { ended <- st.receive(ctx) }()
			acked := start
			if c.take {
				ev := <-st.events
				if c.ack {
					if err := st.Ack(ctx, ev.Checkpoint); err != nil {
						t.Fatal(err)
					}
					acked = commitEnd
				}
			} else {
				<-w.framesSent
			}
			close(w.shutdown)
			if !c.take {
				// The walsender finishes while the event waits; then it is still delivered.
				<-w.finished
				<-st.events
			}
			var end error
			select {
			case end = <-ended:
			case <-ctx.Done():
				t.Fatal("the stream did not end after the shutdown handshake began")
			}
			_ = conn.Close(context.Background())
			<-w.finished
			if !errors.Is(end, ErrServerShuttingDown) || cdc.IsPermanent(classify(end)) {
				t.Fatalf("stream ended with %v, want a retryable ErrServerShuttingDown", end)
			}
			ups := w.statusUpdates()
			final := false
			for _, u := range ups {
				if u.flush > acked {
					t.Fatalf("the slot was told %s as flushed; only %s was acknowledged", u.flush, acked)
				}
				final = final || (u.write == sent && u.flush == 0)
			}
			if !final {
				t.Errorf("no final answer (write %s, flush 0) among %+v", sent, ups)
			}
			if w.cleanExit != !c.stubborn {
				t.Errorf("walsender finished by itself: %v, want %v", w.cleanExit, !c.stubborn)
			}
		})
	}
}

// TestSilentServerFailsTheStream: a connection that goes silent without a word (a network
// partition) fails the stream once nothing arrived for the answer timeout, although every
// status update asked for a reply; the failure is retryable.
func TestSilentServerFailsTheStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	src, err := New("postgres://nobody@127.0.0.1:1/db", &Options{Name: "silent", StatusInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	w := startStopper(t, &stopper{silent: true})
	conn := w.connect(ctx, t)
	defer conn.Close(context.Background())
	st := newStream(src, nil, conn, &plan{database: "db", start: 0x100})
	st.answerTimeout = 300 * time.Millisecond
	select {
	case err := <-func() chan error { c := make(chan error, 1); go func() { c <- st.receive(ctx) }(); return c }():
		if err == nil || !strings.Contains(err.Error(), "no message from the server") || cdc.IsPermanent(classify(err)) {
			t.Fatalf("stream ended with %v", err)
		}
	case <-ctx.Done():
		t.Fatal("a silent connection did not fail the stream")
	}
	if n := len(w.statusUpdates()); n == 0 || !w.statusUpdates()[0].reply {
		t.Errorf("status updates %+v: want some, asking for a reply", w.statusUpdates())
	}
}

// stopper plays a walsender: startup, START_REPLICATION, the frames; then, once shutdown is
// closed, WalSndDone as PostgreSQL runs it: a keepalive asking for a reply whose WAL end is
// the sent position, sent again whenever the previous one was answered, until a status update
// reports the sent position as replicated -- the flush position, or the write position when
// the flush position is 0 (only the flush position when stubborn) -- then CommandComplete and
// exit. It answers status updates asking for a reply with a keepalive, unless silent.
type stopper struct {
	frames   [][]byte
	sent     pglogrepl.LSN
	stubborn bool
	silent   bool

	ln         net.Listener
	framesSent chan struct{} // closed once the frames are written
	shutdown   chan struct{} // closed by the test: begin the shutdown
	finished   chan struct{} // closed when the session ended
	cleanExit  bool          // it finished by itself (CommandComplete); read after finished

	mu      sync.Mutex
	updates []status
}

type status struct {
	write, flush, apply pglogrepl.LSN
	reply               bool
}

func parseStatus(t testing.TB, b []byte) status {
	t.Helper()
	u, ok := decodeStatus(b)
	if !ok {
		t.Fatalf("not a status update: %x", b)
	}
	return u
}

func decodeStatus(b []byte) (status, bool) {
	if len(b) != 34 || b[0] != pglogrepl.StandbyStatusUpdateByteID {
		return status{}, false
	}
	be := binary.BigEndian
	return status{pglogrepl.LSN(be.Uint64(b[1:])), pglogrepl.LSN(be.Uint64(b[9:])), pglogrepl.LSN(be.Uint64(b[17:])), b[33] != 0}, true
}

func startStopper(t *testing.T, w *stopper) *stopper {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w.ln = ln
	w.framesSent, w.shutdown, w.finished = make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(w.finished)
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		w.session(conn)
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-w.finished
	})
	return w
}

func (w *stopper) connect(ctx context.Context, t *testing.T) *pgconn.PgConn {
	t.Helper()
	conn, err := pgconn.Connect(ctx, "postgres://sd@"+w.ln.Addr().String()+"/db?sslmode=disable&replication=database")
	if err != nil {
		t.Fatal(err)
	}
	if err := pglogrepl.StartReplication(ctx, conn, "sd", 0, pglogrepl.StartReplicationOptions{Mode: pglogrepl.LogicalReplication}); err != nil {
		t.Fatal(err)
	}
	return conn
}

func (w *stopper) statusUpdates() []status {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]status(nil), w.updates...)
}

func keepalive(walEnd pglogrepl.LSN, reply bool) []byte {
	b := binary.BigEndian.AppendUint64([]byte{pglogrepl.PrimaryKeepaliveMessageByteID}, uint64(walEnd))
	b = binary.BigEndian.AppendUint64(b, 0)
	if reply {
		return append(b, 1)
	}
	return append(b, 0)
}

func (w *stopper) session(conn net.Conn) {
	be := pgproto3.NewBackend(conn, conn)
	if _, err := be.ReceiveStartupMessage(); err != nil {
		return
	}
	be.Send(&pgproto3.AuthenticationOk{})
	be.Send(&pgproto3.BackendKeyData{ProcessID: 1, SecretKey: []byte{0, 0, 0, 1}})
	be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	if be.Flush() != nil {
		return
	}
	if _, err := be.Receive(); err != nil { // START_REPLICATION
		return
	}
	be.Send(&pgproto3.CopyBothResponse{})
	for _, f := range w.frames {
		be.Send(&pgproto3.CopyData{Data: f})
	}
	if be.Flush() != nil {
		return
	}
	close(w.framesSent)
	// One goroutine receives; the messages it hands over and the shutdown are served here,
	// the only writer from now on.
	msgs := make(chan pgproto3.FrontendMessage)
	served := make(chan struct{}) // closed when the serving below returns: the receiver stops too
	defer close(served)
	go func() {
		defer close(msgs)
		for {
			msg, err := be.Receive()
			if err != nil {
				return
			}
			if cd, ok := msg.(*pgproto3.CopyData); ok {
				msg = &pgproto3.CopyData{Data: append([]byte(nil), cd.Data...)}
			}
			select {
			case msgs <- msg:
			case <-served:
				return
			}
		}
	}()
	stopping := false
	shutdown := w.shutdown
	for {
		select {
		case <-shutdown:
			stopping, shutdown = true, nil
			be.Send(&pgproto3.CopyData{Data: keepalive(w.sent, true)})
		case msg, ok := <-msgs:
			if !ok {
				return // the client went away
			}
			cd, isData := msg.(*pgproto3.CopyData)
			if !isData {
				continue
			}
			u, ok := decodeStatus(cd.Data)
			if !ok {
				continue
			}
			w.mu.Lock()
			w.updates = append(w.updates, u)
			w.mu.Unlock()
			if w.silent {
				continue
			}
			if u.reply {
				be.Send(&pgproto3.CopyData{Data: keepalive(w.sent, false)})
			}
			if stopping {
				replicated := u.flush
				if replicated == 0 && !w.stubborn {
					replicated = u.write
				}
				if replicated == w.sent {
					be.Send(&pgproto3.CommandComplete{CommandTag: []byte("COPY 0")})
					_ = be.Flush()
					w.cleanExit = true
					return
				}
				be.Send(&pgproto3.CopyData{Data: keepalive(w.sent, true)}) // the reply reset waiting_for_ping_response
			}
		}
		if be.Flush() != nil {
			return
		}
	}
}
