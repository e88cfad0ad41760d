package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

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
// The reader only reads. Everything else stays on the stream's goroutine: decoding, keepalive
// replies and status updates (written straight to the net.Conn, which takes a write while
// another goroutine reads: stream.go, sendStatus), idle notes, acks.

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
	batches chan *frameBatch // full batches, in order
	free    chan *frameBatch // decoded batches, for reuse
	stop    chan struct{}    // closed when the decoding stops
	done    chan struct{}    // closed when the reader has returned
	stopped bool             // stop is closed; guarded by the stream's deadlineM
}

// startReader starts the reading goroutine; stopReader must follow.
func (st *stream) startReader() *frameReader {
	r := &frameReader{
		batches: make(chan *frameBatch, batchesAhead),
		free:    make(chan *frameBatch, batchesAhead+2),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
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

// readFrames is the reading goroutine. It ends after handing over a batch with end set (a
// receive error, an error from the server, the end of the copy), or silently when the stream
// closes or the decoding stops.
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
	for {
		msg, err := st.repl.ReceiveMessage(context.Background())
		if err != nil {
			if isTimeout(err) {
				// The wake-up of Close or stopReader; any other deadline is a leftover, as
				// reads have none while the reader owns the connection: cleared, under the
				// lock that orders it against their wake-ups.
				st.deadlineM.Lock()
				wake := st.isClosing || r.stopped
				if !wake {
					_ = st.repl.Conn().SetReadDeadline(time.Time{})
				}
				st.deadlineM.Unlock()
				if wake {
					return
				}
				continue
			}
			b.end = fmt.Errorf("pgcdc: receive: %w", err)
			send()
			return
		}
		switch msg := msg.(type) {
		case *pgproto3.CopyData:
			b.buf = append(b.buf, msg.Data...)
			b.ends = append(b.ends, len(b.buf))
		case *pgproto3.ErrorResponse:
			b.end = fmt.Errorf("pgcdc: replication: %w", pgconn.ErrorResponseToPgError(msg))
			send()
			return
		case *pgproto3.CopyDone:
			b.end = errors.New("pgcdc: the server ended the replication stream")
			send()
			return
		}
		if len(b.ends) > 0 && (st.repl.Frontend().ReadBufferLen() == 0 || len(b.buf) >= maxBatchBytes) {
			if !send() {
				return
			}
			b = r.take()
		}
	}
}
