package pgcdc

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/jackc/pglogrepl"
)

// The model test of resnapWindow's argument (resnap_window.go): a database with row locks,
// MVCC snapshots, commit records written before a transaction leaves the proc array (and its
// locks are released), and a stream that delivers whole transactions, the watermarks' among
// them, at their commits; an index of versioned documents
// without tombstones, repaired by a re-snapshot running the chunk protocol while random
// transactions update, delete and insert the rows being read. After every chunk and the
// stream's end, the index must equal the database row by row. Mutants of the protocol (no race
// check, no wait for W, the high watermark as version, an S2 blind to W's commits) must be caught on some seeds: the model
// can tell a wrong protocol from a right one.

type modelChange struct {
	key int
	del bool
	val int
	lsn pglogrepl.LSN
}

type modelTx struct {
	xid       uint32 // 0 until the first change
	changes   []modelChange
	committed bool
	ended     bool // committed or aborted (the commit record is written at commit)
	visible   bool // left the proc array: snapshots see it, its locks are released
}

type histEntry struct {
	tx     *modelTx
	del    bool
	val    int
	lsn    pglogrepl.LSN
	commit pglogrepl.LSN
}

type modelDoc struct {
	val int
	ver pglogrepl.LSN
}

const (
	itemTx = iota
	itemLow
	itemHigh
)

type streamItem struct {
	kind int
	tx   *modelTx
}

// mutant names a deliberate flaw in the protocol.
type mutant int

const (
	sound       mutant = iota
	noRaceCheck        // the high watermark ignores W's commits missing from the window (no S2 check)
	noXipWait          // the high watermark is written without waiting for W to end
	highVersion        // rows are emitted with the high watermark's LSN as version
	s2Committed        // S2 is any snapshot after W ended, not one that sees W's commits
)

type model struct {
	r       *rand.Rand
	mut     mutant
	nKeys   int
	lsn     pglogrepl.LSN
	nextXid uint32
	open    []*modelTx // not ended
	hidden  []*modelTx // committed, not yet visible
	locked  map[int]*modelTx
	hist    map[int][]histEntry // committed changes per key, in commit order
	byXid   map[uint32]*modelTx
	queue   []streamItem
	index   map[int]modelDoc

	// the re-snapshot
	chunkSize int
	next      int // the first key of the next chunk
	phase     int // 0 idle, 1 low written, 2 read (waiting for xip), 3 high written
	low, high pglogrepl.LSN
	win       *resnapWindow
	rows      map[string]modelDoc // the chunk's rows by key, with their value
	from, to  int
	xipTx     []*modelTx
	committed map[uint32]bool // step 3's answers
	done      bool
	again     int // chunks checked against S2
}

func newModel(seed uint64, mut mutant) *model {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	m := &model{r: r, mut: mut, nKeys: 4 + r.IntN(20), lsn: 100, nextXid: 500, locked: map[int]*modelTx{},
		hist: map[int][]histEntry{}, byXid: map[uint32]*modelTx{}, index: map[int]modelDoc{}}
	m.chunkSize = 1 + r.IntN(m.nKeys)
	// Initial rows, committed and applied; then the index is damaged: documents missing or
	// stale (older version, other value).
	for k := 0; k < m.nKeys; k++ {
		if r.IntN(4) == 0 {
			continue
		}
		tx := m.begin()
		m.write(tx, k, false, r.IntN(1000))
		m.commit(tx, true)
	}
	m.drain()
	for k, d := range m.index {
		switch r.IntN(3) {
		case 0:
			delete(m.index, k)
		case 1:
			m.index[k] = modelDoc{val: -1, ver: d.ver - 1}
		}
	}
	return m
}

func (m *model) nextLSN() pglogrepl.LSN { m.lsn += 8; return m.lsn }

func (m *model) begin() *modelTx {
	tx := &modelTx{}
	m.open = append(m.open, tx)
	return tx
}

// current is the row's committed state (what a transaction holding its lock sees), with tx's
// own changes over it.
func (m *model) current(tx *modelTx, k int) (exists bool) {
	h := m.hist[k]
	exists = len(h) > 0 && !h[len(h)-1].del
	for _, c := range tx.changes {
		if c.key == k {
			exists = !c.del
		}
	}
	return exists
}

func (m *model) write(tx *modelTx, k int, del bool, val int) bool {
	if o := m.locked[k]; o != nil && o != tx {
		return false // locked by another transaction: it would wait
	}
	if del && !m.current(tx, k) {
		return false
	}
	if tx.xid == 0 {
		tx.xid = m.nextXid
		m.nextXid++
		m.byXid[tx.xid] = tx
	}
	m.locked[k] = tx
	tx.changes = append(tx.changes, modelChange{key: k, del: del, val: val, lsn: m.nextLSN()})
	return true
}

// writeOther is a change of a table the publication does not capture: the transaction gets
// an xid (so snapshots may count it in W), and pgoutput decodes nothing of it.
func (m *model) writeOther(tx *modelTx) {
	if tx.xid == 0 {
		tx.xid = m.nextXid
		m.nextXid++
		m.byXid[tx.xid] = tx
	}
	m.nextLSN()
}

func (m *model) remove(tx *modelTx) {
	for i, o := range m.open {
		if o == tx {
			m.open = append(m.open[:i], m.open[i+1:]...)
			return
		}
	}
}

func (m *model) release(tx *modelTx) {
	tx.visible = true
	for k, o := range m.locked {
		if o == tx {
			delete(m.locked, k)
		}
	}
}

// commit writes the commit record (the stream will deliver the transaction there) and, when
// visibleNow, leaves the proc array at once; otherwise later (the race the protocol checks).
func (m *model) commit(tx *modelTx, visibleNow bool) {
	m.remove(tx)
	tx.ended, tx.committed = true, true
	if len(tx.changes) == 0 {
		m.release(tx)
		return
	}
	c := m.nextLSN()
	for _, ch := range tx.changes {
		m.hist[ch.key] = append(m.hist[ch.key], histEntry{tx: tx, del: ch.del, val: ch.val, lsn: ch.lsn, commit: c})
	}
	m.queue = append(m.queue, streamItem{kind: itemTx, tx: tx})
	if visibleNow {
		m.release(tx)
	} else {
		m.hidden = append(m.hidden, tx)
	}
}

func (m *model) abort(tx *modelTx) {
	m.remove(tx)
	tx.ended = true
	m.release(tx)
}

// apply is the index's versioned write: newer versions win; a delete removes the document
// and leaves no tombstone.
func (m *model) apply(k int, del bool, val int, ver pglogrepl.LSN) {
	d, ok := m.index[k]
	if ok && d.ver >= ver {
		return
	}
	if del {
		delete(m.index, k)
		return
	}
	m.index[k] = modelDoc{val: val, ver: ver}
}

// consume delivers the stream's next item to the index and the chunk's window.
func (m *model) consume() {
	it := m.queue[0]
	m.queue = m.queue[1:]
	switch it.kind {
	case itemTx:
		for _, c := range it.tx.changes {
			m.apply(c.key, c.del, c.val, c.lsn)
			if m.win != nil {
				m.win.change(strconv.Itoa(c.key))
			}
		}
		if m.win != nil {
			m.win.commit(it.tx.xid)
		}
	case itemLow:
		m.win.lowWatermark(m.low)
	case itemHigh:
		out := m.win.highWatermark(func(x uint32) bool { return m.committed[x] })
		if out.Verify && m.mut != noRaceCheck {
			// S2: the rows as a snapshot that sees every committed transaction of W sees
			// them (the reader takes S2 again until none is in its xip or at or past its
			// xmax; here: waits until they left the proc array).
			m.again++
			for _, tx := range m.xipTx {
				if tx.committed && !tx.visible && m.mut != s2Committed {
					m.release(tx)
					for i, h := range m.hidden {
						if h == tx {
							m.hidden = append(m.hidden[:i], m.hidden[i+1:]...)
							break
						}
					}
				}
			}
			for i, k := range m.win.keys {
				kk, _ := strconv.Atoi(k)
				if st := m.visibleState(kk); st == nil || st.del || st.val != m.rows[k].val {
					out.Keep[i] = false
				}
			}
		}
		ver := out.Version
		if m.mut == highVersion {
			ver = m.high
		}
		for i, k := range m.win.keys {
			if out.Keep[i] {
				kk, _ := strconv.Atoi(k)
				m.apply(kk, false, m.rows[k].val, ver)
			}
		}
		m.next = m.to
		if m.next >= m.nKeys {
			m.done = true
		}
		m.win, m.phase = nil, 0
	}
}

func (m *model) drain() {
	for len(m.queue) > 0 {
		m.consume()
	}
}

// readChunk takes the snapshot and reads the chunk's rows as it sees them.
func (m *model) readChunk() {
	var xip []uint32
	m.xipTx = nil
	for _, tx := range m.byXid {
		if !tx.visible {
			xip = append(xip, tx.xid)
			m.xipTx = append(m.xipTx, tx)
		}
	}
	m.from, m.to = m.next, min(m.next+m.chunkSize, m.nKeys)
	m.rows = map[string]modelDoc{}
	var keys []string
	for k := m.from; k < m.to; k++ {
		if st := m.visibleState(k); st != nil && !st.del {
			ks := strconv.Itoa(k)
			keys = append(keys, ks)
			m.rows[ks] = modelDoc{val: st.val}
		}
	}
	m.win.read(xip, keys)
}

// visibleState is the last change of k a snapshot taken now sees (nil: none).
func (m *model) visibleState(k int) *histEntry {
	var st *histEntry
	for i := range m.hist[k] {
		if e := &m.hist[k][i]; e.tx.visible {
			st = e
		}
	}
	return st
}

// xipEnded reports whether every transaction of W has ended (step 3), and records their
// outcome.
func (m *model) xipEnded() bool {
	if m.mut != noXipWait {
		for _, tx := range m.xipTx {
			if !tx.ended {
				return false
			}
		}
	}
	m.committed = map[uint32]bool{}
	for _, tx := range m.xipTx {
		m.committed[tx.xid] = tx.committed
	}
	return true
}

// step advances the re-snapshot by one protocol step when it can.
func (m *model) step() {
	switch m.phase {
	case 0:
		if m.done {
			return
		}
		m.low = m.nextLSN()
		m.queue = append(m.queue, streamItem{kind: itemLow})
		m.phase = 1
		m.win = newResnapWindow()
	case 1:
		m.readChunk()
		m.phase = 2
	case 2:
		if m.xipEnded() {
			m.high = m.nextLSN()
			m.queue = append(m.queue, streamItem{kind: itemHigh})
			m.phase = 3
		}
	}
}

// act is one random step of the database, the stream or the re-snapshot.
func (m *model) act() {
	r := m.r
	switch p := r.IntN(100); {
	case p < 15:
		m.begin()
	case p < 40 && len(m.open) > 0:
		tx := m.open[r.IntN(len(m.open))]
		m.write(tx, r.IntN(m.nKeys), r.IntN(4) == 0, r.IntN(1000))
	case p < 45 && len(m.open) > 0:
		m.writeOther(m.open[r.IntN(len(m.open))])
	case p < 58 && len(m.open) > 0:
		m.commit(m.open[r.IntN(len(m.open))], r.IntN(3) != 0)
	case p < 62 && len(m.open) > 0:
		m.abort(m.open[r.IntN(len(m.open))])
	case p < 70 && len(m.hidden) > 0:
		i := r.IntN(len(m.hidden))
		m.release(m.hidden[i])
		m.hidden = append(m.hidden[:i], m.hidden[i+1:]...)
	case p < 88 && len(m.queue) > 0:
		m.consume()
	case p >= 88:
		m.step()
	}
}

// run plays the model until the re-snapshot is done and everything settled, and returns the
// first key whose document differs from its row ("" when none).
func (m *model) run() string {
	for steps := 0; !m.done; steps++ {
		if steps > 20000 {
			// Step 3 waits for W: end everything open so the re-snapshot can finish.
			for len(m.open) > 0 {
				m.commit(m.open[0], true)
			}
		}
		m.act()
	}
	for len(m.open) > 0 {
		m.commit(m.open[0], true)
	}
	for _, tx := range m.hidden {
		m.release(tx)
	}
	m.drain()
	for k := 0; k < m.nKeys; k++ {
		h := m.hist[k]
		exists := len(h) > 0 && !h[len(h)-1].del
		d, ok := m.index[k]
		switch {
		case exists != ok:
			return fmt.Sprintf("key %d: row exists %v, document exists %v", k, exists, ok)
		case exists && d.val != h[len(h)-1].val:
			return fmt.Sprintf("key %d: row value %d, document value %d (version %v)", k, h[len(h)-1].val, d.val, d.ver)
		}
	}
	return ""
}

func TestResnapWindowModel(t *testing.T) {
	const seeds = 3000
	again := 0
	for seed := range uint64(seeds) {
		m := newModel(seed, sound)
		if diff := m.run(); diff != "" {
			t.Fatalf("seed %d: the index differs from the table after the re-snapshot: %s", seed, diff)
		}
		again += m.again
	}
	if again == 0 {
		t.Fatal("no chunk needed the S2 check in any seed: the model does not exercise it")
	}
	t.Logf("%d seeds, %d chunks checked against S2", seeds, again)
}

// TestResnapWindowModelCatchesMutants: each flawed protocol diverges on some seed, so the
// model's pass above is evidence about the protocol, not a property of the model.
func TestResnapWindowModelCatchesMutants(t *testing.T) {
	for _, c := range []struct {
		name string
		mut  mutant
	}{{"no race check", noRaceCheck}, {"no wait for xip", noXipWait}, {"high watermark version", highVersion},
		{"S2 not seeing W's commits", s2Committed}} {
		caught := -1
		for seed := range uint64(3000) {
			if newModel(seed, c.mut).run() != "" {
				caught = int(seed)
				break
			}
		}
		if caught < 0 {
			t.Errorf("%s: no seed diverges", c.name)
		} else {
			t.Logf("%s: diverges at seed %d", c.name, caught)
		}
	}
}

func TestResnapWindowDecisions(t *testing.T) {
	w := newResnapWindow()
	w.change("a") // before the low watermark: not the window's
	w.commit(7)
	w.lowWatermark(800)
	w.read([]uint32{7, 9}, []string{"a", "b", "c"})
	w.change("b")
	w.commit(9)
	out := w.highWatermark(func(x uint32) bool { return x == 9 })
	if out.Verify || out.Version != 800 || !out.Keep[0] || out.Keep[1] || !out.Keep[2] {
		t.Fatalf("outcome %+v, want rows a and c kept at version 800", out)
	}
	// 7 committed, but its commit was decoded before the low watermark: maybe a race.
	if out := w.highWatermark(func(x uint32) bool { return true }); !out.Verify || out.Keep[1] {
		t.Fatalf("a committed W transaction missing from the window: %+v, want Verify, b dropped", out)
	}
}
