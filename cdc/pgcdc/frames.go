package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// The replication connection is read on a goroutine of its own (readFrames) while the stream's
// goroutine decodes (receive), so that network reads overlap decoding on a machine with more
// than one core. pgconn reuses its read buffer for every message, so the reader copies the
// CopyData payloads into batches and hands them over in arrival order. A batch goes out as soon
// as pgconn's read buffer is empty, when its next read may wait for the server (a message only
// partly buffered is still arriving): a frame never waits on the reader for more traffic.
// Whole batches rather than single frames are handed over because that costs one channel
// operation and at most one wake-up per network read instead of one per row.
//
// The reader only reads. Keepalives it takes out of the stream: a reply request goes to the
// stream's goroutine at once, out of band (pings), because its answer depends on nothing
// decoded (shutdown.go) and must not wait behind frames a slow consumer holds up: a shutdown
// never waits for the consumer. What arrived before the connection ended is still delivered.
// Everything else stays on the stream's goroutine: decoding, status updates and keepalive
// answers (written straight to the net.Conn, which takes a write while another goroutine
// reads: stream.go, writeStatus), idle notes, acks.
//
// Each read that may wait for the server has a deadline, answerTimeout ahead (shutdown.go):
// the periodic status updates ask for a reply, so a healthy connection never stays silent
// that long. The wake-ups of Close and stopReader are deadlines in the past, set under
// deadlineM, which orders them against the reader arming its own.

const (
	// maxBatchBytes closes a batch early while the server keeps pgconn's buffer full.
	maxBatchBytes = 64 << 10
	// batchCap is a new batch's capacity: room for the frame that crosses maxBatchBytes,
	// unless it is a large one.
	batchCap = maxBatchBytes + 16<<10
	// batchesAhead is how many batches the reader may run ahead of the decoding. With the
	// batch being filled and the one being decoded that bounds the frames in memory to under
	// a MiB, beyond that only by large frames.
	batchesAhead = 8
	// maxPooledBatch: a batch a large frame grew beyond this is dropped, not reused.
	maxPooledBatch = 4 * batchCap
)

// frameBatch is a run of CopyData payloads in arrival order, and on the last batch the reason
// the stream ended.
type frameBatch struct {
	buf  []byte // the payloads back to back
	ends []int  // where each payload ends in buf
	end  error  // set on the last batch only
}

// frameReader is the reading goroutine's side of the hand-over.
type frameReader struct {
	batches chan *frameBatch   // full batches, in order
	free    chan *frameBatch   // decoded batches, for reuse
	pings   chan pglogrepl.LSN // the WAL end of the latest keepalive asking for a reply
	stop    chan struct{}      // closed when the decoding stops
	done    chan struct{}      // closed when the reader has returned
	stopped bool               // stop is closed; guarded by the stream's deadlineM
	timeout time.Duration      // the read deadline's distance; 0: none
}

// startReader starts the reading goroutine; stopReader must follow.
func (st *stream) startReader() *frameReader {
	r := &frameReader{
		batches: make(chan *frameBatch, batchesAhead),
		free:    make(chan *frameBatch, batchesAhead+2),
		pings:   make(chan pglogrepl.LSN, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		timeout: st.answerTimeout,
	}
	go st.readFrames(r)
	return r
}

// stopReader ends the reading goroutine, waking a read in progress, and waits for it: the
// connection is the stream goroutine's alone again afterwards.
func (st *stream) stopReader(r *frameReader) {
	st.deadlineM.Lock()
	r.stopped = true
	close(r.stop)
	_ = st.repl.Conn().SetReadDeadline(time.Unix(1, 0))
	st.deadlineM.Unlock()
	<-r.done
}

func (r *frameReader) take() *frameBatch {
	select {
	case b := <-r.free:
		return b
	default:
		return &frameBatch{buf: make([]byte, 0, batchCap)}
	}
}

func (r *frameReader) recycle(b *frameBatch) {
	if cap(b.buf) > maxPooledBatch {
		return
	}
	b.buf, b.ends = b.buf[:0], b.ends[:0]
	select {
	case r.free <- b:
	default:
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return pgconn.Timeout(err) || (errors.As(err, &ne) && ne.Timeout())
}

// ping hands over a reply request, replacing one not yet taken: the latest WAL end is the one
// to answer.
func (r *frameReader) ping(walEnd pglogrepl.LSN) {
	for {
		select {
		case r.pings <- walEnd:
			return
		default:
		}
		select {
		case <-r.pings:
		default:
		}
	}
}

// arm sets the read deadline for a read that may wait for the server. It returns false when
// the stream is closing or the decoding stopped: their wake-up must not be overridden.
func (st *stream) arm(r *frameReader) bool {
	st.deadlineM.Lock()
	defer st.deadlineM.Unlock()
	if st.isClosing || r.stopped {
		return false
	}
	var d time.Time
	if r.timeout > 0 {
		d = time.Now().Add(r.timeout)
	}
	_ = st.repl.Conn().SetReadDeadline(d)
	return true
}

// readFrames is the reading goroutine. It ends after handing over a batch with end set (a
// receive error, an error from the server, the end of the copy, no message for the answer
// timeout), or silently when the stream closes or the decoding stops.
func (st *stream) readFrames(r *frameReader) {
	defer close(r.done)
	b := r.take()
	send := func() bool {
		select {
		case r.batches <- b:
			b = nil
			return true
		case <-r.stop:
			return false
		}
	}
	end := func(err error) {
		b.end = err
		send()
	}
	// armed: the deadline was set since the reader last waited to hand a batch over (a wait
	// that may outlast the deadline), so a read of a message partly buffered needs none.
	armed := false
	for {
		if !armed || st.repl.Frontend().ReadBufferLen() == 0 {
			if !st.arm(r) {
				return
			}
			armed = true
		}
		msg, err := st.repl.ReceiveMessage(context.Background())
		if err != nil {
			if isTimeout(err) {
				st.deadlineM.Lock()
				wake := st.isClosing || r.stopped
				st.deadlineM.Unlock()
				if !wake {
					end(fmt.Errorf("pgcdc: no message from the server for %s (connection lost?)", r.timeout))
				}
				return
			}
			end(fmt.Errorf("pgcdc: receive: %w", err))
			return
		}
		switch msg := msg.(type) {
		case *pgproto3.CopyData:
			if len(msg.Data) > 0 && msg.Data[0] == pglogrepl.PrimaryKeepaliveMessageByteID {
				ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(msg.Data[1:])
				if err != nil {
					end(fmt.Errorf("pgcdc: keepalive: %w", err))
					return
				}
				if ka.ReplyRequested {
					r.ping(ka.ServerWALEnd)
					break
				}
				// Other keepalives go in band, in order with the changes, for Lag.
			}
			b.buf = append(b.buf, msg.Data...)
			b.ends = append(b.ends, len(b.buf))
		case *pgproto3.ErrorResponse:
			end(fmt.Errorf("pgcdc: replication: %w", pgconn.ErrorResponseToPgError(msg)))
			return
		case *pgproto3.CopyDone:
			end(errors.New("pgcdc: the server ended the replication stream"))
			return
		case *pgproto3.CommandComplete:
			// A walsender ends its copy without CopyDone only in WalSndDone, at a shutdown.
			end(fmt.Errorf("%w: its walsender finished the stream", ErrServerShuttingDown))
			return
		}
		if len(b.ends) > 0 && (st.repl.Frontend().ReadBufferLen() == 0 || len(b.buf) >= maxBatchBytes) {
			if !send() {
				return
			}
			b = r.take()
			armed = false
		}
	}
}
