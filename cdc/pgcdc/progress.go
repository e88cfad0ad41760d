package pgcdc

import "github.com/tributary-dev/tributary/cdc"

// Progress implements cdc.Stream. RowsDone counts snapshot rows the reader has taken from
// Events: those put into the channel less those still buffered in it (momentarily one off
// while a row is being handed over).
//
// While the initial snapshot is not being read, a re-snapshot's progress is reported instead,
// once one was requested (Resnapshot set): RowsDone counts the rows its chunks read.
func (st *stream) Progress() cdc.SnapshotProgress {
	st.progMu.Lock()
	p := st.progress
	st.progMu.Unlock()
	if !p.Active {
		if r := st.rsLoad(); r != nil {
			if rp := r.progress(); rp.Resnapshot != "" {
				return rp
			}
		}
		return p
	}
	taken := max(st.snapSent.Load()-int64(len(st.events)), 0)
	p.RowsDone = st.progRow0 + taken
	if el := st.opts().Now().Sub(st.progT0).Seconds(); el > 0 {
		p.RowsPerSecond = float64(taken) / el
	}
	return p
}

func (st *stream) progressStart(tables, done int, rows, estimate int64) {
	st.progMu.Lock()
	defer st.progMu.Unlock()
	st.progT0, st.progRow0 = st.opts().Now(), rows
	st.progress = cdc.SnapshotProgress{Active: true, TablesTotal: tables, TablesDone: done, RowsDone: rows, RowsEstimated: estimate}
}

// progressTable records the table being read and how many are done.
func (st *stream) progressTable(id cdc.TableID, done int) {
	st.progMu.Lock()
	st.progress.Table, st.progress.TablesDone = id, done
	st.progMu.Unlock()
}

// progressEnd marks the snapshot read: every row is in the channel. Its figures stay, with
// Active false.
func (st *stream) progressEnd() {
	st.progMu.Lock()
	p := &st.progress
	p.Active, p.Table, p.TablesDone = false, cdc.TableID{}, p.TablesTotal
	p.RowsDone = st.progRow0 + st.snapSent.Load()
	if el := st.opts().Now().Sub(st.progT0).Seconds(); el > 0 {
		p.RowsPerSecond = float64(st.snapSent.Load()) / el
	}
	st.progMu.Unlock()
}
