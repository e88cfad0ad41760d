package pgcdc

import (
	"context"
	"encoding/binary"
	"slices"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/tributary-dev/tributary/cdc"
)

// The decode loop's side of a re-snapshot (resnap_run.go): it takes requests up, feeds the
// chunk's window with what it decodes, and at the chunk's high watermark puts the chunk's rows
// into the stream. Run's goroutine only.

// resnapRequest takes up a request message (resnap.go). A request this source cannot carry
// out is logged and dropped: it came through the WAL, there is no one to return an error to.
func (st *stream) resnapRequest(ctx context.Context, content []byte) {
	job, err := st.parseResnapRequest(content, st.tx.commitLSN.String())
	if err != nil {
		st.opts().Logger.Error("pgcdc: re-snapshot request dropped", "slot", st.opts().Slot, "err", err)
		return
	}
	if job != nil {
		st.addResnapJob(ctx, job)
	}
}

// resnapMark notes a watermark of the chunk in flight (an earlier stream's, replayed, or
// another slot's, is ignored).
func (st *stream) resnapMark(content string) {
	r := st.rs
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cw := r.win
	if cw == nil {
		return
	}
	switch content {
	case cw.mark + " low":
		cw.w.lowWatermark(st.tx.commitLSN)
	case cw.mark + " high":
		st.highAt = cw
	}
}

// resnapCommit notes a decoded commit in the window.
func (st *stream) resnapCommit() {
	r := st.rs
	if r == nil {
		return
	}
	r.mu.Lock()
	if cw := r.win; cw != nil {
		cw.w.commit(st.tx.xid32)
	}
	r.mu.Unlock()
}

// resnapInvalidate makes the chunk in flight be read again when it is of table id.
func (st *stream) resnapInvalidate(id cdc.TableID) {
	r := st.rs
	if r == nil {
		return
	}
	r.mu.Lock()
	if cw := r.win; cw != nil && cw.table == id && cw.w.open {
		cw.invalid = true
	}
	r.mu.Unlock()
}

// resnapChange notes a change of the chunk's table: its key, and the old key when the change
// has an old tuple (a delete, an update under REPLICA IDENTITY FULL or of the key). A key the
// frame does not carry in text form invalidates the chunk: nothing is decided on a guess.
func (st *stream) resnapChange(ti *tableInfo, f changeFrame) {
	r := st.rs
	r.mu.Lock()
	defer r.mu.Unlock()
	cw := r.win
	if cw == nil || cw.table != ti.schema.ID || !cw.w.open {
		return
	}
	names := keyColumnNames(ti)
	if cw.keyNames == nil {
		cw.keyNames = names
	} else if !slices.Equal(cw.keyNames, names) {
		cw.invalid = true
		return
	}
	newTuple := f.new
	if f.old != nil {
		key, rest, ok := tupleKey(ti, f.old)
		if !ok {
			cw.invalid = true
			return
		}
		cw.w.change(keyString(key))
		if f.hasNew {
			if len(rest) == 0 || rest[0] != 'N' {
				cw.invalid = true
				return
			}
			newTuple = rest[1:]
		}
	}
	if f.hasNew {
		key, _, ok := tupleKey(ti, newTuple)
		if !ok {
			cw.invalid = true
			return
		}
		cw.w.change(keyString(key))
	}
}

// tupleKey reads the primary key's values (text form) of the TupleData at the start of src,
// and what follows the tuple; ok is false when a key column is not there as text.
func tupleKey(ti *tableInfo, src []byte) (key []string, rest []byte, ok bool) {
	if len(src) < 2 {
		return nil, nil, false
	}
	pk := ti.schema.PrimaryKey
	if len(pk) == 0 {
		return nil, nil, false
	}
	ncols := int(binary.BigEndian.Uint16(src))
	if ncols != len(ti.schema.Columns) {
		return nil, nil, false
	}
	key = make([]string, len(pk))
	found := 0
	pos := 2
	for i := range ncols {
		kind, data, next, cok := tupleColumn(src, pos)
		if !cok {
			return nil, nil, false
		}
		if j := slices.Index(pk, i); j >= 0 {
			if kind != tupleText {
				return nil, nil, false
			}
			key[j] = string(data)
			found++
		}
		pos = next
	}
	return key, src[pos:], found == len(pk)
}

// resnapHigh is the chunk's high watermark, committed at end: the decode loop waits for the
// chunk's rows and emits them here, the last carrying a checkpoint after the watermark (with
// the re-snapshot state past the chunk).
func (st *stream) resnapHigh(ctx context.Context, cw *chunkWindow, end pglogrepl.LSN) error {
	r := st.rs
	r.mu.Lock()
	if r.win != cw {
		// The chunk's goroutine gave the chunk up after writing its watermark (its commit
		// answer was lost): nothing comes for it.
		r.mu.Unlock()
		return nil
	}
	cw.highSeen, cw.highEnd = true, end
	r.win = nil
	close(cw.high)
	r.mu.Unlock()
	res, err := st.awaitChunk(ctx, cw)
	if err != nil {
		return err
	}
	if res.err != nil {
		st.opts().Logger.Debug("pgcdc: re-snapshot chunk not emitted", "slot", st.opts().Slot, "err", res.err)
		return nil
	}
	for i, ev := range res.events {
		if i == len(res.events)-1 {
			ev.Checkpoint = st.streamCheckpoint(end)
			st.touchIdle()
		}
		if err := st.emit(ctx, ev); err != nil {
			return err
		}
	}
	r.published()
	return nil
}

// awaitChunk waits for the chunk's result, keeping the server's connection alive meanwhile as
// emit does: the chunk's rows come after a query or two of the re-snapshot's connection.
func (st *stream) awaitChunk(ctx context.Context, cw *chunkWindow) (*chunkResult, error) {
	tick := time.NewTicker(st.opts().StatusInterval)
	defer tick.Stop()
	var pings <-chan pglogrepl.LSN
	if st.reader != nil {
		pings = st.reader.pings
	}
	for {
		select {
		case res := <-st.rs.results:
			if res.mark == cw.mark {
				return res, nil
			}
		case <-st.closing:
			return nil, errClosing
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
			if err := st.sendStatus(); err != nil {
				return nil, err
			}
		case w := <-pings:
			if err := st.answerPing(w); err != nil {
				return nil, err
			}
		}
	}
}
