package pgcdc

import (
	"github.com/jackc/pglogrepl"
)

// A re-snapshot (issue 18) reads a table again while the stream keeps running, one chunk of
// primary keys at a time. Each chunk is read between two watermarks -- transactional logical
// messages, each in a transaction of its own, which this slot's stream decodes at their commits
// -- and its rows enter the stream at the high watermark, as if they were changes made there.
// (Not non-transactional messages: PostgreSQL 15 does not flush their WAL, so on a quiet server
// the high watermark would never arrive; TestResnapshotAssumptions.) resnapWindow is the decision part of
// that: given what the stream decoded between the watermarks, which of the chunk's rows may be
// emitted, with which version, or whether the chunk must be read again. It holds no connection
// and does no I/O, so the argument below is checked by a model test (resnap_window_test.go)
// that plays random interleavings of transactions, snapshots and commit races.
//
// # The chunk protocol
//
//  1. Write the low watermark and commit it; L0 is its commit's LSN, as the stream decodes it.
//  2. In a REPEATABLE READ transaction take the snapshot S (its first statement,
//     pg_current_snapshot()) and read the chunk's rows (keyset order, after the last key
//     done). Then, outside it, take N = pg_current_xact_id(). The transactions S does not see
//     that had an xid before S are among W = pg_snapshot_xip(S) + [pg_snapshot_xmax(S), N):
//     xip alone misses the newest ones, since xmax is latestCompletedXid+1 (found on the test
//     server: T1 in progress, xmin = xmax = T1, xip empty).
//  3. Wait until no transaction of W is in progress (pg_xact_status), bounded: a transaction
//     open longer makes the chunk be read again later. xids of W taken after S are waited for
//     too, which costs a little time and nothing else.
//  4. Write the high watermark and commit it.
//
// While the stream decodes from the low watermark to the high one, every change of the
// chunk's table marks its key touched, and every commit of a transaction of W is noted.
// At the high watermark:
//
//   - every row whose key was touched is dropped (the stream carries a newer state of it);
//   - if a transaction of W committed (step 3's status) without its commit being decoded in
//     the window, it either changed no captured table (pgoutput skips such transactions), or
//     committed before L0 while still invisible to S (PostgreSQL writes a commit record before
//     it leaves the proc array): the chunk may have raced it. Then the chunk's rows are read
//     again in a snapshot S2 taken after the high watermark was decoded that sees every
//     committed transaction of W (taken again while one is still in its xip or at or past its
//     xmax: committed in pg_xact_status is not yet visible -- the model test found that), and
//     every row whose values differ (or that is gone) is dropped too. (Reading the chunk again from the start
//     instead would never end on a server where transactions of other tables keep committing:
//     their commits are never decoded -- the model test found that.)
//   - the rows left are emitted with version L0, after every change decoded so far.
//
// # Why that never loses a change nor resurrects a row
//
// Take a kept row r of key k, as S saw it. Its state is that of the last change c to k that S
// sees. c's transaction committed before S. Had it committed after L0, its commit would be in
// the window and k touched; so it committed before L0, and c's own LSN is below L0: the
// version L0 is above every change the index may hold for k, so r replaces a stale or missing
// document and equals the current one.
//
// Every change c' to k that S does not see has a version above L0, or k is dropped: c'
// belongs to (a) a transaction that had its xid before S, so one of W -- by step 3 it ended
// before the high watermark; committed in the window, k is touched; committed before L0, its
// commit was not decoded in the window, so S2 (which sees it) is compared, and k's row differs
// there unless a later change restored it, which is itself in the window (touched) or after
// L0 -- no second change of k can come between c' and S: c”s transaction holds k's row lock
// until it is visible, after S; aborted, there is no c' -- or (b) a transaction that took its
// xid after S, whose every record is after S, so after L0 (the low watermark committed before
// S began): c' > L0. In case (b) c' is
// either in the window (k touched, r dropped) or after L1, where it follows r in the stream
// and wins by version and by order. A row deleted after S is case (a) or (b) as well: its
// delete is in the window (dropped) or after r (applied after r, with a higher version), never
// before r, so no row comes back -- and nothing depends on the index keeping tombstones.
//
// Rows S does not see (inserted after S, or deleted before it) are not in the chunk: an insert
// after S reaches the index through the stream; a row deleted before S and still in the index
// stays there (a re-snapshot adds and refreshes, it does not remove -- removing documents of
// rows that no longer exist is the reindex's business: a new generation holds only what the
// chunks and the stream wrote).
type resnapWindow struct {
	low     pglogrepl.LSN   // the low watermark's commit LSN: the version of every emitted row
	open    bool            // the low watermark was decoded
	xip     map[uint32]bool // W: the xids S may not see (32-bit: pgoutput's BEGIN carries those)
	seen    map[uint32]bool // W's transactions whose commit was decoded in the window
	touched map[string]bool // keys of the chunk's table changed in the window
	keys    []string        // the chunk's rows' keys, in the order read
}

// newResnapWindow is the window of a chunk whose low watermark is being written (step 1): the
// stream may decode the watermark, and changes after it, before the chunk is read.
func newResnapWindow() *resnapWindow {
	return &resnapWindow{xip: map[uint32]bool{}, seen: map[uint32]bool{}, touched: map[string]bool{}}
}

// read records the chunk as step 2 read it: W and its rows' keys, in the order read.
func (w *resnapWindow) read(xip []uint32, keys []string) {
	for _, x := range xip {
		w.xip[x] = true
	}
	w.keys = keys
}

// lowWatermark records that the stream decoded the chunk's low watermark, whose transaction
// committed at commit: L0, the version of the rows the chunk emits.
func (w *resnapWindow) lowWatermark(commit pglogrepl.LSN) { w.open, w.low = true, commit }

// change records a decoded change of the chunk's table: key is the changed row's key, and for
// an update that moved the key the old key is a second call.
func (w *resnapWindow) change(key string) {
	if w.open {
		w.touched[key] = true
	}
}

// commit records a decoded commit of transaction xid. Every commit in the window is kept, not
// only W's: the stream may decode them before the chunk's reader has told W (read), which
// happens only after step 3 (TestResnapshotChunkOnServer found that).
func (w *resnapWindow) commit(xid uint32) {
	if w.open {
		w.seen[xid] = true
	}
}

// resnapOutcome is what the high watermark decides.
type resnapOutcome struct {
	// Verify says the chunk may have raced a commit: before anything is emitted, the rows kept
	// are read again in a snapshot taken now, and those whose values differ (or that are gone)
	// are dropped as well.
	Verify bool
	// Keep[i] says whether row i of the chunk may be emitted (its key was not touched).
	Keep []bool
	// Version is the version of the emitted rows.
	Version pglogrepl.LSN
}

// highWatermark decides the chunk at its high watermark. committed reports, for a transaction
// of W, whether it committed (step 3 asked the server once none was in progress).
func (w *resnapWindow) highWatermark(committed func(xid uint32) bool) resnapOutcome {
	out := resnapOutcome{Keep: make([]bool, len(w.keys)), Version: w.low}
	for x := range w.xip {
		if !w.seen[x] && committed(x) {
			out.Verify = true
			break
		}
	}
	for i, k := range w.keys {
		out.Keep[i] = !w.touched[k]
	}
	return out
}
