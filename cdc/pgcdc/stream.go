package pgcdc

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/tributary-dev/tributary/cdc"
)

// stream is one Open's run: an optional snapshot, then the replication stream. One goroutine
// (run) owns the connections; Ack, Progress and Close only touch atomics, the progress mutex
// and the closing channel.
type stream struct {
	src *Source
	// sql is the connection the snapshot reads in (nil once it is done); sess owns it and is
	// the stream's SQL connection for everything else, open only while in use (session.go).
	sql  *pgx.Conn
	sess *sqlSession
	repl *pgconn.PgConn
	plan *plan

	events  chan cdc.Event
	closing chan struct{} // closed by Close
	done    chan struct{} // closed when run has released everything

	closeOnce sync.Once
	deadlineM sync.Mutex // orders Close's wake-up against the reader clearing a read deadline
	isClosing bool       // guarded by deadlineM

	errMu sync.Mutex
	err   error

	// acked is the highest commit end LSN acknowledged through Ack; delivered the highest one
	// handed out in a checkpoint. The server is only ever told acked (and only when it is at
	// most delivered, which Ack enforces).
	acked     atomic.Uint64
	delivered atomic.Uint64
	// caughtUp is the WAL end of the latest keepalive that came with no transaction being
	// decoded and found every captured change delivered before it acknowledged -- then, or
	// later (passedEnd): the stream had taken in, and the sink stored, everything the server
	// had sent up to it (Lag; never reported to the server). Only grows.
	caughtUp atomic.Uint64
	// passedEnd is the latest such keepalive that came while a delivered checkpoint was not
	// yet acknowledged, with that checkpoint; Ack credits it once it reaches the checkpoint
	// (issue 31: a burst, other tables' writes while it is being stored, then silence).
	passedEnd atomic.Pointer[passedKeepalive]
	// passedMax is the latest position the stream passed outside a transaction: where it
	// started streaming, or a keepalive's WAL end. lastSent is the last checkpoint handed
	// out, snapshot ones included; once it is acknowledged, so is everything delivered, and
	// the pipeline has passed passedMax too (passedAcked: a pipeline whose snapshot found
	// nothing, or ended on a snapshot checkpoint, is not behind on an idle server).
	passedMax atomic.Uint64
	lastSent  atomic.Pointer[sentCheckpoint]
	// ackedStream is set once a stream checkpoint was acknowledged: after an initial snapshot,
	// idle checkpoints wait for it, since the snapshot's rows precede the stream's start.
	ackedStream atomic.Bool

	streaming  bool // START_REPLICATION succeeded (run's goroutine only)
	lastStatus time.Time
	// reader is the reading goroutine's side while receive runs; hs and shutdownSeen follow
	// the server's shutdown handshake; answerTimeout bounds the server's silence (shutdown.go).
	// Run's goroutine only.
	reader        *frameReader
	hs            handshake
	shutdownSeen  bool
	answerTimeout time.Duration
	relations     map[uint32]*relation
	// xmins holds the pg_class xmin read at the latest relation message of each captured
	// relation of a pattern's schema (identity.go, checkSchemaReturn).
	xmins map[uint32]uint32
	cat   *catalog
	tx    txState
	inTx  bool // between a Begin and its Commit
	// pending is the transaction's last event so far, held back for the commit's checkpoint
	// (hasPending says whether there is one).
	pending    cdc.Event
	hasPending bool
	// marksDirty: the relation marks (identity.go) changed since the last checkpoint handed
	// out; idle notes may not move the slot meanwhile (a restart must decode that again).
	marksDirty bool

	// base is the commit end of the last captured transaction delivered (the resume
	// checkpoint's at the start); idle is the idle-checkpoint state and idleOff turns it off
	// after a failure (doc.go, Idle checkpoints). Run's goroutine only.
	base    pglogrepl.LSN
	idle    idleState
	idleOff bool
	// verify is set while a stream resumed behind the slot's confirmed position has not yet
	// shown that an idle note put the slot there; verified receives the outcome once.
	verify   *verifyPlan
	verified chan error

	// rs carries out re-snapshots (resnap_run.go), nil until one is requested; highAt is the
	// chunk whose high watermark the transaction being decoded holds. Run's goroutine only.
	rs     *resnapper
	highAt *chunkWindow
	rsPub  atomic.Pointer[resnapper] // rs, for Progress

	progMu   sync.Mutex
	progress cdc.SnapshotProgress
	progT0   time.Time
	progRow0 int64        // rows delivered before this stream (a resumed snapshot)
	snapSent atomic.Int64 // snapshot rows this stream put into events
}

// relation is what a relation message told about a relation ID: the name it had (id), and
// whether that name is captured, with its schema.
type relation struct {
	id       cdc.TableID
	captured bool
	info     *tableInfo
	// keyUnknown: the table was dropped before the stream read its changes, and its primary
	// key is unknown (ErrKeyUnknown).
	keyUnknown bool
}

// txState is the transaction being decoded.
type txState struct {
	xid        string
	xid32      uint32
	commitLSN  pglogrepl.LSN
	commitTime time.Time
}

func newStream(src *Source, sql *pgx.Conn, repl *pgconn.PgConn, p *plan) *stream {
	sess := &sqlSession{cfg: src.sqlCfg, conn: sql, lastUse: time.Now(), held: p.snapshot != nil}
	st := &stream{
		src: src, sql: sql, sess: sess, repl: repl, plan: p,
		events:    make(chan cdc.Event, 64),
		closing:   make(chan struct{}),
		done:      make(chan struct{}),
		relations: map[uint32]*relation{},
		xmins:     map[uint32]uint32{},
		cat:       src.catalog(sess),
	}
	st.answerTimeout = st.defaultAnswerTimeout()
	st.acked.Store(uint64(p.start))
	st.delivered.Store(uint64(p.start))
	st.base = p.start
	if p.verify != nil {
		st.base = p.verify.resume
		st.verify = p.verify
	}
	st.verified = make(chan error, 1)
	st.touchIdle()
	return st
}

func (st *stream) opts() *Options { return &st.src.opts }

// Events implements cdc.Stream.
func (st *stream) Events() <-chan cdc.Event { return st.events }

// Err implements cdc.Stream.
func (st *stream) Err() error {
	st.errMu.Lock()
	defer st.errMu.Unlock()
	return st.err
}

// Ack implements cdc.Stream: the server learns acked positions at the next status update
// (at most StatusInterval later, at once when the loop is waiting to deliver).
func (st *stream) Ack(ctx context.Context, cp cdc.Checkpoint) error {
	select {
	case <-st.closing:
		return cdc.ErrSourceClosed
	default:
	}
	d, err := decodeCheckpoint(cp)
	if err != nil {
		return err
	}
	st.noteAcked(cp)
	if d.snap != nil {
		return nil // nothing to report to the server before streaming starts
	}
	if uint64(d.lsn) > st.delivered.Load() {
		return fmt.Errorf("pgcdc: ack of %s, beyond the last delivered checkpoint %s", d.lsn, pglogrepl.LSN(st.delivered.Load()))
	}
	st.ackedStream.Store(true)
	raiseTo(&st.acked, uint64(d.lsn))
	st.creditPassed()
	return nil
}

// sentCheckpoint is a checkpoint handed out, and whether Ack got it.
type sentCheckpoint struct {
	cp    cdc.Checkpoint
	acked atomic.Bool
}

// noteAcked marks the last checkpoint handed out acknowledged when cp is it.
func (st *stream) noteAcked(cp cdc.Checkpoint) {
	if s := st.lastSent.Load(); s != nil && bytes.Equal(s.cp, cp) {
		s.acked.Store(true)
	}
}

// passedAcked returns passedMax when every checkpoint handed out is acknowledged (ok false
// otherwise). passedMax is read first: a checkpoint handed out later, unacknowledged, then
// shows.
func (st *stream) passedAcked() (uint64, bool) {
	p := st.passedMax.Load()
	if s := st.lastSent.Load(); s != nil && !s.acked.Load() {
		return 0, false
	}
	return p, true
}

// passedKeepalive is a keepalive's WAL end that waits for the acknowledgement of the
// checkpoint delivered last before it.
type passedKeepalive struct{ end, needs uint64 }

// passed records a keepalive's WAL end met with no transaction being decoded: everything the
// server sent up to it is stored once every checkpoint delivered before it is acknowledged --
// now, or when Ack reaches it.
func (st *stream) passed(end uint64) {
	raiseTo(&st.passedMax, end)
	needs := st.delivered.Load()
	if st.acked.Load() >= needs {
		raiseTo(&st.caughtUp, end)
		return
	}
	st.passedEnd.Store(&passedKeepalive{end: end, needs: needs})
	st.creditPassed() // an Ack in between did not see it
}

// creditPassed moves caughtUp to the waiting keepalive's WAL end once its checkpoint is
// acknowledged.
func (st *stream) creditPassed() {
	p := st.passedEnd.Load()
	if p != nil && st.acked.Load() >= p.needs && st.passedEnd.CompareAndSwap(p, nil) {
		raiseTo(&st.caughtUp, p.end)
	}
}

// raiseTo moves v up to x (never down).
func raiseTo(v *atomic.Uint64, x uint64) {
	for {
		cur := v.Load()
		if x <= cur || v.CompareAndSwap(cur, x) {
			return
		}
	}
}

// Close implements cdc.Stream.
func (st *stream) Close() error {
	st.closeOnce.Do(func() {
		st.deadlineM.Lock()
		st.isClosing = true
		close(st.closing)
		// Wake a read blocked in the loop; the connection is closed by run right after.
		_ = st.repl.Conn().SetReadDeadline(time.Unix(1, 0))
		st.deadlineM.Unlock()
	})
	<-st.done
	return nil
}

var errClosing = errors.New("pgcdc: stream closing")

func (st *stream) fail(err error) {
	st.errMu.Lock()
	defer st.errMu.Unlock()
	if st.err == nil {
		st.err = err
	}
}

// run is the stream's goroutine.
func (st *stream) run() {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-st.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := st.runAll(ctx)
	if err != nil {
		st.resolveVerify(err)
	} else {
		st.resolveVerify(errClosing)
	}
	closing := false
	select {
	case <-st.closing:
		closing = true
	default:
	}
	if err != nil && !closing {
		// Logged at Debug only: the stream's consumer (the runner) logs its failure.
		st.opts().Logger.Debug("pgcdc: stream failed", "slot", st.opts().Slot, "err", err)
		st.fail(classify(err))
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
	if st.streaming && !st.repl.IsClosed() {
		// A last report, so the server keeps what the pipeline acknowledged until now.
		pos, now := st.confirmable(), time.Now()
		_ = st.repl.Conn().SetDeadline(now.Add(2 * time.Second))
		_, _ = st.repl.Conn().Write(statusUpdate(pos, pos, now, false))
	}
	st.stopResnapper()
	_ = st.repl.Close(cctx)
	st.sess.close()
	ccancel()
	cancel()
	st.src.open.CompareAndSwap(st, nil)
	close(st.events)
	close(st.done)
}

func (st *stream) runAll(ctx context.Context) error {
	if st.plan.snapshot != nil {
		sctx, stop := st.watchSmartShutdown(ctx)
		err := st.runSnapshot(sctx)
		stop()
		if err != nil {
			if cause := context.Cause(sctx); sctx.Err() != nil && errors.Is(cause, ErrServerShuttingDown) {
				return cause
			}
			return err
		}
		st.sql = nil
		st.sess.release()
	}
	st.readAnswerTimeout(ctx)
	if err := st.startReplication(ctx); err != nil {
		return fmt.Errorf("pgcdc: start replication on slot %s at %s: %w", st.opts().Slot, st.plan.start, st.startError(ctx, err))
	}
	st.streaming = true
	raiseTo(&st.passedMax, uint64(st.plan.start))
	st.opts().Logger.Info("pgcdc: streaming", "slot", st.opts().Slot, "from", st.plan.start.String())
	if st.verify != nil {
		if err := st.settleVerify(ctx); err != nil {
			return err
		}
		if err := st.startVerify(ctx); err != nil {
			return err
		}
	}
	if st.plan.resnap != nil {
		st.startResnapper(ctx, st.plan.resnap)
		st.opts().Logger.Info("pgcdc: resuming re-snapshot", "slot", st.opts().Slot, "jobs", len(st.plan.resnap.Jobs))
	}
	return st.receive(ctx)
}

// settleVerify reads the slot's confirmed position again once the stream holds the slot.
// Open read it before, while the walsender of a stream just closed may still have held the
// slot: Close sends its last status update without waiting for the server to apply it, and
// when that walsender applies it later (a later idle note proven, or an acknowledgement), the
// slot -- and where the server starts sending -- moved past what Open read. The note that
// proves the resume point is then the one at the new position. Nothing else moves the slot
// while this stream holds it and has reported nothing.
func (st *stream) settleVerify(ctx context.Context) error {
	v := st.verify
	var s *string
	err := st.sess.QueryRow(ctx, `SELECT confirmed_flush_lsn::text FROM pg_catalog.pg_replication_slots WHERE slot_name = $1`,
		st.opts().Slot).Scan(&s)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %s is gone", ErrSlotMissing, st.opts().Slot)
	}
	if err != nil {
		return fmt.Errorf("pgcdc: read slot %s: %w", st.opts().Slot, err)
	}
	if s == nil {
		return fmt.Errorf("%w: %s has no confirmed position", ErrSlotInvalidated, st.opts().Slot)
	}
	c, err := pglogrepl.ParseLSN(*s)
	if err != nil {
		return fmt.Errorf("pgcdc: slot %s confirmed position: %w", st.opts().Slot, err)
	}
	if c > v.confirmed {
		st.verify = &verifyPlan{resume: v.resume, confirmed: c}
	}
	return nil
}

// startReplication runs START_REPLICATION, retrying while the slot is still held: the
// walsender of a stream just closed exits asynchronously, so a quick reconnect finds the slot
// active for a moment. A slot held longer than Options.SlotBusyTimeout belongs to another
// reader, and that is an error.
func (st *stream) startReplication(ctx context.Context) error {
	pub := quoteIdent(st.opts().Publication) // publication_names is a list of identifiers
	deadline := time.Now().Add(st.opts().SlotBusyTimeout)
	wait := 20 * time.Millisecond
	for {
		err := pglogrepl.StartReplication(ctx, st.repl, st.opts().Slot, st.plan.start, pglogrepl.StartReplicationOptions{
			Mode: pglogrepl.LogicalReplication,
			// messages: the idle notes come through the stream (protocol version 1 suffices).
			PluginArgs: []string{"proto_version '1'", "publication_names " + quoteLiteral(pub), "messages 'true'"},
		})
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55006" || time.Now().After(deadline) {
			// A slot held beyond the deadline stays a retryable failure: the walsender of a
			// connection lost without a word holds it until wal_sender_timeout.
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// startError names what a failed START_REPLICATION means when the slot's state tells more:
// 55000 (object_not_in_prerequisite_state) is what an invalidated slot gives, among others.
func (st *stream) startError(ctx context.Context, err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "55000" {
		return err
	}
	var lost *bool
	qerr := st.sess.QueryRow(ctx, `SELECT restart_lsn IS NULL OR wal_status = 'lost' FROM pg_catalog.pg_replication_slots WHERE slot_name = $1`,
		st.opts().Slot).Scan(&lost)
	switch {
	case errors.Is(qerr, pgx.ErrNoRows):
		return fmt.Errorf("%w: %s is gone (%w)", ErrSlotMissing, st.opts().Slot, err)
	case qerr == nil && lost != nil && *lost:
		return fmt.Errorf("%w: %s (%w)", ErrSlotInvalidated, st.opts().Slot, err)
	case shuttingDown(qerr):
		// "cannot execute new commands while WAL sender is in stopping mode" is 55000 too.
		return fmt.Errorf("%w (%w)", ErrServerShuttingDown, err)
	}
	return err
}

// receive decodes the replication stream until closed or failed, the reading done by a
// goroutine of its own (frames.go). Between batches of frames it sends the status update when
// due, answers the server's reply requests, writes an idle note and closes the idle SQL
// connection when due; with no frame to decode it waits until one of those is due at most.
func (st *stream) receive(ctx context.Context) error {
	r := st.startReader()
	st.reader = r
	defer func() {
		st.stopReader(r)
		st.reader = nil
	}()
	interval := st.opts().StatusInterval
	// One timer for the whole stream, set only when the wait's deadline changes: a busy
	// stream decodes many batches under one deadline.
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var armed time.Time // what the timer is set to; zero: stopped or fired
	for {
		now := time.Now()
		if now.Sub(st.lastStatus) >= interval {
			if err := st.sendStatus(); err != nil {
				return err
			}
		}
		st.maybeWriteIdle(ctx, now)
		st.sess.closeIdle(now)
		var b *frameBatch
		select {
		case <-st.closing:
			return errClosing
		case b = <-r.batches:
		case w := <-r.pings:
			if err := st.answerPing(w); err != nil {
				return err
			}
			continue
		default:
			deadline := st.lastStatus.Add(interval)
			if d := st.idleDeadline(now); !d.IsZero() && d.Before(deadline) {
				deadline = d
			}
			if d := st.sess.idleDeadline(); !d.IsZero() && d.Before(deadline) {
				deadline = d
			}
			if !deadline.Equal(armed) {
				timer.Reset(time.Until(deadline))
				armed = deadline
			}
			select {
			case <-st.closing:
				return errClosing
			case b = <-r.batches:
			case w := <-r.pings:
				if err := st.answerPing(w); err != nil {
					return err
				}
				continue
			case <-timer.C:
				armed = time.Time{}
				continue
			}
		}
		start := 0
		for _, end := range b.ends {
			if err := st.handleCopyData(ctx, b.buf[start:end]); err != nil {
				return err
			}
			start = end
		}
		if b.end != nil {
			return st.endError(b.end)
		}
		r.recycle(b)
	}
}

// confirmable is the position status updates report: the acknowledged one, or a later one an
// idle note proved to hold no unacknowledged captured change (doc.go, Idle checkpoints). Never
// what was merely received, so the server keeps every change the pipeline has not made
// durable.
func (st *stream) confirmable() pglogrepl.LSN {
	return max(pglogrepl.LSN(st.acked.Load()), st.idle.proven)
}

// sendStatus reports the confirmable position as written, flushed and applied, asking for a
// reply, which keeps the connection's silence bounded (shutdown.go).
func (st *stream) sendStatus() error {
	pos := st.confirmable()
	now := time.Now()
	if err := st.writeStatus(statusUpdate(pos, pos, now, true), now); err != nil {
		return err
	}
	st.hs.statusSent()
	return nil
}

// writeStatus writes a status update. Straight to the connection, not through pgconn
// (pglogrepl.SendStandbyStatusUpdate goes through its Frontend): the reading goroutine may be
// inside pgconn meanwhile, and on a broken connection pgconn then writes its Terminate through
// the same Frontend from a goroutine of its own. A net.Conn takes concurrent writes; the
// Frontend does not. The write deadline keeps a connection whose peer stopped reading from
// blocking the stream.
func (st *stream) writeStatus(msg []byte, now time.Time) error {
	c := st.repl.Conn()
	_ = c.SetWriteDeadline(now.Add(st.answerTimeout))
	if _, err := c.Write(msg); err != nil {
		return fmt.Errorf("pgcdc: send status: %w", err)
	}
	st.lastStatus = now
	return nil
}

// pgEpochMicros is 2000-01-01 00:00:00 UTC, PostgreSQL's epoch, in Unix microseconds.
const pgEpochMicros = 946684800 * 1000000

// statusUpdate encodes a Standby Status Update in its CopyData message: write, flush (also
// as applied), the client's clock and whether a reply is requested.
func statusUpdate(write, flush pglogrepl.LSN, now time.Time, reply bool) []byte {
	const body = 1 + 3*8 + 8 + 1
	b := make([]byte, 0, 1+4+body)
	b = append(b, 'd')
	b = binary.BigEndian.AppendUint32(b, 4+body)
	b = append(b, pglogrepl.StandbyStatusUpdateByteID)
	b = binary.BigEndian.AppendUint64(b, uint64(write))
	b = binary.BigEndian.AppendUint64(b, uint64(flush))
	b = binary.BigEndian.AppendUint64(b, uint64(flush))
	b = binary.BigEndian.AppendUint64(b, uint64(now.UnixMicro()-pgEpochMicros))
	if reply {
		return append(b, 1)
	}
	return append(b, 0)
}

// streamCheckpoint encodes a resume point after a commit and records it as delivered, which
// bounds what Ack accepts.
func (st *stream) streamCheckpoint(end pglogrepl.LSN) cdc.Checkpoint {
	st.base = end
	for {
		cur := st.delivered.Load()
		if uint64(end) <= cur || st.delivered.CompareAndSwap(cur, uint64(end)) {
			break
		}
	}
	return encodeCheckpoint(end, nil, st.resnapCheckpoint(), st.marksCheckpoint())
}

func (st *stream) snapshotCheckpoint(state *snapshotState) cdc.Checkpoint {
	return encodeCheckpoint(st.plan.start, state, st.plan.resnap, st.marksCheckpoint())
}

// emit delivers ev. While the consumer is slow it keeps reporting status to the server, which
// would otherwise end the connection after wal_sender_timeout, and answers its reply requests
// (a shutdown must not wait for the consumer).
func (st *stream) emit(ctx context.Context, ev cdc.Event) error {
	if ev.Checkpoint != nil {
		st.lastSent.Store(&sentCheckpoint{cp: ev.Checkpoint})
	}
	select {
	case st.events <- ev:
		return nil
	default:
	}
	var tick *time.Ticker
	if st.streaming {
		tick = time.NewTicker(st.opts().StatusInterval)
		defer tick.Stop()
	}
	var tc <-chan time.Time
	if tick != nil {
		tc = tick.C
	}
	var pings <-chan pglogrepl.LSN
	if st.reader != nil {
		pings = st.reader.pings
	}
	for {
		select {
		case st.events <- ev:
			return nil
		case <-st.closing:
			return errClosing
		case <-ctx.Done():
			return ctx.Err()
		case <-tc:
			if err := st.sendStatus(); err != nil {
				return err
			}
		case w := <-pings:
			if err := st.answerPing(w); err != nil {
				return err
			}
		}
	}
}
