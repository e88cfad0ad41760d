package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// How a walsender ends at a fast or smart shutdown (PostgreSQL 15, walsender.c; the same
// through 17). Once the regular backends are gone (terminated by a fast shutdown, awaited by a
// smart one) the checkpointer tells every walsender to stop and waits -- before it writes the
// shutdown checkpoint, while the server refuses new connections -- until each has exited or
// reached its stopping state. A streaming logical walsender first sends what is left to decode,
// then, caught up, runs WalSndDone on every turn of its loop: it sends CommandComplete and
// exits as soon as the client's last status update reports its sent position as replicated
// -- the flush position, or the write position when the flush position is 0 (invalid) --
// and otherwise sends a keepalive asking for a reply each time the previous one was answered.
// A client that reports only acknowledged positions, which trail the sent one, holds the
// whole shutdown up until it disconnects.
//
// The only other keepalive asking for a reply (WalSndKeepaliveIfNecessary) comes after half of
// wal_sender_timeout without any message from the client, and the stream sends a status update
// every StatusInterval, well below that: a reply request arriving before the stream sent a
// status update of its own since it answered the previous one is the shutdown handshake. The
// stream answers it with write = the keepalive's WAL end and flush = apply = 0. The walsender
// then counts the write position as replicated and finishes, while the slot keeps what was
// acknowledged: only a valid flush position moves a slot (ProcessStandbyReplyMessage confirms
// nothing for a flush position of 0), and with an invalid flush position the stream is no
// synchronous standby either. Unacknowledged changes are replayed by the next stream. Should
// the walsender keep asking for the same position (a server that does not finish on that
// answer), the stream closes the connection, which ends the walsender too. Either way the
// stream fails with ErrServerShuttingDown.

// handshake tells the shutdown handshake from ordinary reply requests (run's goroutine only).
type handshake struct {
	answered bool          // the last status update sent answered a reply request
	final    pglogrepl.LSN // the WAL end the final answer since reported as written; 0: none
	repeats  int           // reply requests for final since its first final answer
}

// maxFinalRepeats is how many reply requests for the same WAL end the final answer may get
// before the stream closes the connection instead. Requests already on their way when the
// first final answer went out (one per status update the walsender had not read yet) repeat
// it too; a walsender still asking after a few more does not finish on it.
const maxFinalRepeats = 4

// pingAnswer is what a keepalive asking for a reply gets.
type pingAnswer uint8

const (
	// answerStatus: the acknowledged position, as every status update reports it.
	answerStatus pingAnswer = iota
	// answerFinal: write = the keepalive's WAL end, flush = apply = 0: the walsender finishes,
	// the slot stays where it is.
	answerFinal
	// answerClose: the walsender keeps asking after the final answer: close the connection.
	answerClose
)

// ping decides the answer to a reply request whose keepalive carried walEnd.
func (h *handshake) ping(walEnd pglogrepl.LSN) pingAnswer {
	switch {
	case !h.answered:
		h.answered = true
		return answerStatus
	case h.final != walEnd:
		h.final, h.repeats = walEnd, 0
		return answerFinal
	case h.repeats < maxFinalRepeats:
		h.repeats++
		return answerFinal
	default:
		return answerClose
	}
}

// statusSent records a status update the stream sent of its own accord.
func (h *handshake) statusSent() { *h = handshake{} }

// answerPing answers a keepalive that asked for a reply.
func (st *stream) answerPing(walEnd pglogrepl.LSN) error {
	now := time.Now()
	switch st.hs.ping(walEnd) {
	case answerStatus:
		pos := st.confirmable()
		return st.writeStatus(statusUpdate(pos, pos, now, false), now)
	case answerFinal:
		if !st.shutdownSeen {
			st.shutdownSeen = true
			st.opts().Logger.Info("pgcdc: the server is shutting down; letting its walsender finish without confirming more",
				"slot", st.opts().Slot, "confirmed", st.confirmable().String(), "sent", walEnd.String())
		}
		return st.writeStatus(statusUpdate(walEnd, 0, now, false), now)
	default:
		return fmt.Errorf("%w: its walsender kept asking for a reply after the final one", ErrServerShuttingDown)
	}
}

// endError is the stream's error for the end of the replication connection: after the
// shutdown handshake, whatever ended it is the shutdown.
func (st *stream) endError(err error) error {
	if st.shutdownSeen && !errors.Is(err, ErrServerShuttingDown) {
		return fmt.Errorf("%w (%w)", ErrServerShuttingDown, err)
	}
	return err
}

// A lost connection that nothing reports (a network partition, a proxy black-holing traffic)
// would leave the stream waiting forever on an idle server, which sends nothing unasked. So
// every periodic status update asks for a reply, and the reader fails the stream when nothing
// at all arrives for answerTimeout: the server's own wal_sender_timeout plus StatusInterval.
// Less would be wrong: while it replays a large transaction of other tables, a walsender
// reads its client's messages only every half wal_sender_timeout.
func (st *stream) defaultAnswerTimeout() time.Duration {
	return time.Minute + st.opts().StatusInterval
}

// readAnswerTimeout sets answerTimeout from the server's wal_sender_timeout (0, disabled:
// a minute), keeping the default when it cannot be read.
func (st *stream) readAnswerTimeout(ctx context.Context) {
	var ms string
	err := st.sess.QueryRow(ctx, `SELECT setting FROM pg_catalog.pg_settings WHERE name = 'wal_sender_timeout'`).Scan(&ms)
	if err != nil {
		st.opts().Logger.Debug("pgcdc: wal_sender_timeout unread; assuming a minute", "err", err)
		return
	}
	if n, err := strconv.ParseInt(ms, 10, 64); err == nil && n > 0 {
		st.answerTimeout = time.Duration(n)*time.Millisecond + st.opts().StatusInterval
	}
}

// snapshotProbeInterval is how often a snapshot checks whether a smart shutdown waits for it.
var snapshotProbeInterval = 5 * time.Second

// watchSmartShutdown returns the context the initial snapshot reads under. A smart shutdown
// waits for the snapshot's session, and nothing tells that session about it; but from the
// moment it starts, the server refuses new connections with 57P03 (cannot_connect_now). So
// while the snapshot runs, a probe connection every snapshotProbeInterval checks for that
// refusal, and the context ends with ErrServerShuttingDown as its cause when it comes. stop
// ends the probing.
func (st *stream) watchSmartShutdown(ctx context.Context) (_ context.Context, stop func()) {
	sctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(snapshotProbeInterval)
		defer tick.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-tick.C:
			}
			pctx, pcancel := context.WithTimeout(sctx, sessionTimeout)
			conn, err := pgx.ConnectConfig(pctx, st.src.sqlCfg)
			if err == nil {
				_ = conn.Close(pctx)
			}
			pcancel()
			if shuttingDown(err) {
				st.opts().Logger.Info("pgcdc: the server is shutting down; ending the snapshot", "slot", st.opts().Slot)
				cancel(fmt.Errorf("%w: it refuses new connections (%w)", ErrServerShuttingDown, err))
				return
			}
		}
	}()
	return sctx, func() {
		cancel(nil)
		<-done
	}
}
