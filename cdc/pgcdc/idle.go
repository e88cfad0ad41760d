package pgcdc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
)

// idlePrefix is the prefix of the logical decoding messages the stream writes to move the
// slot across WAL that holds no captured change (doc.go, Idle checkpoints). Every slot of the
// database with messages enabled receives them; the slot name in the content tells whose
// they are.
const idlePrefix = "tributary.pgcdc.idle"

// idleNote is the content of an idle message, as JSON.
type idleNote struct {
	Slot  string `json:"slot"`
	Nonce string `json:"nonce"`
	// Probe marks the message a resumed stream writes to learn whether an idle note precedes
	// it (see verifyPlan).
	Probe bool `json:"probe,omitempty"`
	// Start is the WAL insert position read just before the message was written: at or before
	// the message's own record, so a stream started there receives the message again.
	Start string `json:"start,omitempty"`
	// Base is the commit end of the last captured transaction delivered before the message
	// was written; every checkpoint up to it was acknowledged.
	Base string `json:"base,omitempty"`
}

// idleState is the stream's idle-checkpoint bookkeeping (run's goroutine only).
type idleState struct {
	next   time.Time     // when a message is due if the stream is still idle
	out    *pendingNote  // the message written and not yet received back
	proven pglogrepl.LSN // the highest Start proven to hold no unacknowledged captured change
}

type pendingNote struct {
	nonce       string
	start, base pglogrepl.LSN
	written     time.Time
}

// verifyPlan is set when Open resumes from a checkpoint behind the slot's confirmed position.
// That is sound only if the slot was moved there by an idle note of this slot whose base is
// at or before the checkpoint: the note's Start is then the confirmed position, so the server
// sends the note again first, before any captured change and before the probe the stream
// writes at once. Anything else first means changes after the checkpoint were confirmed by
// someone else (a checkpoint store restored from a backup, a slot shared by two pipelines).
type verifyPlan struct {
	resume, confirmed pglogrepl.LSN
}

func newNonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// idleMinWAL is how much WAL must lie beyond the reported position before an idle message is
// worth writing. The server frees WAL by whole segments (16 MiB by default), so less gains
// nothing, and every message is WAL itself: without a threshold, the messages of idle
// pipelines on a quiet server would keep each other going (and keep a server that archives
// with archive_timeout switching segments).
const idleMinWAL = 64 << 10

// writeNote writes an idle message through the stream's SQL session and returns the WAL
// insert position read just before it. With skip set, it writes nothing (and returns 0) unless the
// position is at least idleMinWAL beyond skip.
func (st *stream) writeNote(ctx context.Context, n idleNote, skip pglogrepl.LSN) (pglogrepl.LSN, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var s string
	if err := st.sess.QueryRow(ctx, `SELECT pg_catalog.pg_current_wal_insert_lsn()::text`).Scan(&s); err != nil {
		return 0, fmt.Errorf("pgcdc: read the WAL insert position: %w", err)
	}
	start, err := pglogrepl.ParseLSN(s)
	if err != nil {
		return 0, fmt.Errorf("pgcdc: WAL insert position: %w", err)
	}
	if skip != 0 && start < skip+idleMinWAL {
		return 0, nil
	}
	n.Slot = st.opts().Slot
	if !n.Probe {
		n.Start = start.String()
	}
	content, err := json.Marshal(n)
	if err != nil {
		return 0, err
	}
	if _, err := st.sess.Exec(ctx, `SELECT pg_catalog.pg_logical_emit_message(false, $1, $2::text)`, idlePrefix, string(content)); err != nil {
		return 0, fmt.Errorf("pgcdc: write a logical decoding message: %w", err)
	}
	return start, nil
}

// idleEligible says whether the stream may write an idle message now: idle checkpoints on,
// streaming verified, between transactions, every delivered checkpoint acknowledged, and no
// message of its own still on the way.
func (st *stream) idleEligible(now time.Time) bool {
	if st.opts().IdleCheckpointInterval <= 0 || st.idleOff || !st.streaming || st.verify != nil || st.inTx || st.hasPending || st.marksDirty {
		return false
	}
	if out := st.idle.out; out != nil {
		// A message that never came back (it cannot be lost on a healthy stream, but a stuck
		// one must not stop idle checkpoints forever) is forgotten after a while.
		if now.Sub(out.written) < 10*st.opts().IdleCheckpointInterval {
			return false
		}
		st.idle.out = nil
	}
	if st.resnapActive() {
		return false // the slot must not move past a re-snapshot request no checkpoint carries
	}
	if st.plan.snapshot != nil && !st.ackedStream.Load() {
		return false // the snapshot's rows are not all stored yet
	}
	return st.acked.Load() >= uint64(st.base)
}

// maybeWriteIdle writes an idle message when one is due. A connection that fails (the server
// shutting down refuses new ones) only skips this message; any other failure (no EXECUTE on
// the functions) turns idle checkpoints off for this stream: the WAL is then retained as
// without them.
func (st *stream) maybeWriteIdle(ctx context.Context, now time.Time) {
	if !st.idleEligible(now) || now.Before(st.idle.next) {
		return
	}
	n := idleNote{Nonce: newNonce(), Base: st.base.String()}
	start, err := st.writeNote(ctx, n, st.confirmable())
	if err != nil {
		switch {
		case ctx.Err() != nil:
		case connectionFailure(err):
			st.opts().Logger.Debug("pgcdc: idle note skipped", "slot", st.opts().Slot, "err", err)
			st.touchIdle()
			return
		default:
			st.opts().Logger.Warn("pgcdc: idle checkpoints off for this stream", "slot", st.opts().Slot, "err", err)
		}
		st.idleOff = true
		return
	}
	if start == 0 { // too little WAL to be worth a message: look again an interval later
		st.touchIdle()
		return
	}
	st.idle.out = &pendingNote{nonce: n.Nonce, start: start, base: st.base, written: now}
}

// idleDeadline is when the receive loop must wake up to write an idle message (zero: never).
func (st *stream) idleDeadline(now time.Time) time.Time {
	if !st.idleEligible(now) {
		return time.Time{}
	}
	return st.idle.next
}

// touchIdle restarts the idle period: a transaction with captured changes went by.
func (st *stream) touchIdle() {
	if d := st.opts().IdleCheckpointInterval; d > 0 {
		st.idle.next = time.Now().Add(d)
	}
}

// handleLogicalMessage handles logical decoding messages: this slot's idle notes; every other
// message is ignored.
func (st *stream) handleLogicalMessage(ctx context.Context, m *pglogrepl.LogicalDecodingMessage) error {
	if m.Transactional {
		switch m.Prefix {
		case resnapPrefix:
			st.resnapMark(string(m.Content))
		case ResnapshotPrefix:
			st.resnapRequest(ctx, m.Content)
		}
		return nil
	}
	if m.Prefix != idlePrefix {
		return nil
	}
	var n idleNote
	if err := json.Unmarshal(m.Content, &n); err != nil || n.Slot != st.opts().Slot {
		return nil // not ours (or not a note): another writer's business
	}
	if v := st.verify; v != nil {
		return st.verifyNote(v, n)
	}
	out := st.idle.out
	if out == nil || n.Nonce != out.nonce {
		return nil // an earlier stream's note, delivered again
	}
	st.idle.out = nil
	st.touchIdle()
	// Every captured transaction committed before the message was delivered before it. If
	// none was delivered since the message was written and all were acknowledged, nothing
	// the sink has not stored lies before Start.
	// Nor may it move past relation marks no checkpoint carries yet (identity.go).
	if st.inTx || st.marksDirty || st.base != out.base || st.acked.Load() < uint64(out.base) || out.start <= st.idle.proven {
		return nil
	}
	st.idle.proven = out.start
	st.opts().Logger.Debug("pgcdc: idle checkpoint", "slot", st.opts().Slot, "lsn", out.start.String())
	if uint64(out.start) > st.acked.Load() {
		return st.sendStatus()
	}
	return nil
}

// verifyNote decides a resumed stream's verification by the first note of this slot.
func (st *stream) verifyNote(v *verifyPlan, n idleNote) error {
	if !n.Probe && n.Start == v.confirmed.String() {
		base, err := pglogrepl.ParseLSN(n.Base)
		if err == nil && base <= v.resume {
			st.resolveVerify(nil)
			return nil
		}
	}
	return st.behindSlot("the slot was confirmed past it by another reader")
}

// verifyCaptured fails a stream still verifying its resume point when a captured change
// comes first: the slot was confirmed past it.
func (st *stream) verifyCaptured() error {
	if st.verify == nil {
		return nil
	}
	return st.behindSlot("a captured change precedes the slot's idle note")
}

func (st *stream) behindSlot(why string) error {
	v := st.verify
	return fmt.Errorf("%w: checkpoint %s, slot %s confirmed %s: %s", ErrCheckpointBehindSlot, v.resume, st.opts().Slot, v.confirmed, why)
}

// resolveVerify ends verification with err (nil: verified) and wakes Open.
func (st *stream) resolveVerify(err error) {
	if st.verify == nil {
		return
	}
	st.verify = nil
	st.verified <- err
}

// startVerify writes the probe that bounds a resumed stream's verification. Failing to write
// it decides nothing about the checkpoint: the error is the failure's own (permanent when the
// role may not write the probe: failure.go).
func (st *stream) startVerify(ctx context.Context) error {
	v := st.verify
	if _, err := st.writeNote(ctx, idleNote{Nonce: newNonce(), Probe: true}, 0); err != nil {
		return fmt.Errorf("pgcdc: checkpoint %s is behind slot %s's confirmed position %s, and the probe that checks it: %w", v.resume, st.opts().Slot, v.confirmed, err)
	}
	return nil
}
