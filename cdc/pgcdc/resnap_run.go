package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/resnapjob"
)

// resnapper carries out a stream's re-snapshot jobs (resnap.go), one chunk at a time, on an SQL
// connection of its own, in a goroutine of its own. The stream's decode loop feeds the chunk's
// window (resnap_window.go) and, at the chunk's high watermark, waits for the chunk's rows and
// puts them into the stream there. The two meet under mu: the decode loop only touches win and
// state, the goroutine everything else.
type resnapper struct {
	st    *stream
	nonce string // tells this stream's watermarks from an earlier stream's, replayed

	mu    sync.Mutex
	state *resnapState // what checkpoints carry; nil or with jobs
	win   *chunkWindow // the chunk between its watermarks, nil between chunks
	// book keeps the jobs' progress and runs the goroutine's loop (internal/resnapjob).
	book *resnapjob.Book[tableRef]

	results chan *chunkResult // a chunk's rows, for the decode loop waiting at its high watermark
	cancel  context.CancelFunc
	done    chan struct{}

	// The goroutine's own.
	conn *pgx.Conn
	q    *txQuerier
	cat  *catalog
	seq  int
	ti   *tableInfo // the last chunk's schema, kept while the catalog gives the same columns
}

// chunkWindow is a chunk between its watermarks, as the decode loop sees it.
type chunkWindow struct {
	mark     string
	table    cdc.TableID
	w        *resnapWindow
	keyNames []string // the primary key columns of the stream's schema of the table
	// invalid says the chunk's rows cannot be decided by key (a schema change or a TRUNCATE of
	// the table in the window, a change whose key the stream could not read): it is read again.
	invalid  bool
	highSeen bool
	highEnd  pglogrepl.LSN
	high     chan struct{} // closed by the decode loop at the high watermark's commit
}

// chunkResult is what a chunk gives the decode loop at its high watermark: the rows to emit
// there (the goroutine already moved state past the chunk), or why none (err).
type chunkResult struct {
	mark   string
	events []cdc.Event
	err    error
}

// txQuerier routes the catalog's queries to the chunk's snapshot transaction.
type txQuerier struct{ tx pgx.Tx }

func (q *txQuerier) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return q.tx.Query(ctx, sql, args...)
}

func (q *txQuerier) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return q.tx.QueryRow(ctx, sql, args...)
}

// resnapCheckpoint is the re-snapshot state the stream's checkpoints carry now (nil: none).
func (st *stream) resnapCheckpoint() *resnapState {
	r := st.rs
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state.clone()
}

// resnapActive says whether a re-snapshot job is not done (idle checkpoints wait: the slot
// must not move past a request no stored checkpoint carries yet).
func (st *stream) resnapActive() bool {
	r := st.rs
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state != nil && len(r.state.Jobs) > 0
}

// startResnapper starts the goroutine (once), with the checkpoint's state when there is one.
func (st *stream) startResnapper(ctx context.Context, state *resnapState) *resnapper {
	if st.rs != nil {
		return st.rs
	}
	r := &resnapper{st: st, nonce: newNonce(), state: state.clone(),
		results: make(chan *chunkResult, 1), done: make(chan struct{}), q: &txQuerier{}}
	r.cat = r.st.src.catalog(r.q)
	r.book = resnapjob.New(resnapjob.Config[tableRef]{
		Mu: &r.mu,
		State: func(create bool) *resnapjob.State[tableRef] {
			if create && r.state == nil {
				r.state = &resnapState{}
			}
			return (*resnapjob.State[tableRef])(r.state)
		},
		Table:  func(t tableRef) cdc.TableID { return st.src.tableID(st.plan.database, Table(t)) },
		Now:    st.opts().Now,
		Log:    st.opts().Logger,
		Prefix: "pgcdc", Attrs: []any{"slot", st.opts().Slot}, ErrKey: "err",
	}, (*resnapjob.State[tableRef])(state))
	rctx, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	st.rs = r
	st.rsPub.Store(r)
	go r.run(rctx)
	return r
}

func (st *stream) rsLoad() *resnapper { return st.rsPub.Load() }

// stopResnapper ends the goroutine and waits for it (run's goroutine, at the stream's end).
func (st *stream) stopResnapper() {
	if r := st.rs; r != nil {
		r.cancel()
		<-r.done
	}
}

// addResnapJob queues a decoded request (a replayed one already queued is not queued twice).
func (st *stream) addResnapJob(ctx context.Context, job *resnapJob) {
	st.startResnapper(ctx, nil).book.Add(job)
}

// progress is the re-snapshot's SnapshotProgress: Jobs[0]'s while one runs, else the last one's.
func (r *resnapper) progress() cdc.SnapshotProgress { return r.book.Progress() }

// run is the goroutine: chunk after chunk while there are jobs, riding through failures
// (resnapjob.Book.Run).
func (r *resnapper) run(ctx context.Context) {
	defer close(r.done)
	defer func() {
		if r.conn != nil {
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = r.conn.Close(cctx)
			cancel()
		}
	}()
	r.book.Run(ctx, resnapjob.Loop{Step: r.step, Permanent: permanentResnapError,
		Failed: func(err error, failures int) (string, time.Duration) {
			if !errors.Is(err, errChunkBusy) && r.conn != nil {
				_ = r.conn.Close(context.WithoutCancel(ctx))
				r.conn = nil
			}
			return err.Error(), resnapjob.Backoff(failures)
		}})
}

// permanentResnapError says whether a chunk's failure is the request's fault (a condition the
// server refuses, a privilege missing): retrying cannot help.
func permanentResnapError(err error) (string, bool) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code[:2] {
		case "42", "22", "0A":
			return pgErr.Code + ": " + pgErr.Message, true
		}
	}
	if errors.Is(err, ErrResnapshotRequest) {
		return err.Error(), true
	}
	return "", false
}

// step reads one chunk of Jobs[0] (resolving its tables first when it names none, skipping a
// table dropped meanwhile), or returns resnapjob.ErrIdle.
func (r *resnapper) step(ctx context.Context) error {
	job, after, ok := r.book.Current()
	if !ok {
		return resnapjob.ErrIdle
	}

	if r.conn == nil {
		conn, err := pgx.ConnectConfig(ctx, r.st.src.sqlCfg)
		if err != nil {
			return fmt.Errorf("pgcdc: re-snapshot connect: %w", err)
		}
		r.conn = conn
	}
	if job.All && len(job.Tables) == 0 {
		return r.resolveAll(ctx)
	}
	if len(job.Tables) == 0 { // an all-tables job that found none
		r.mu.Lock()
		r.book.FinishLocked("")
		r.mu.Unlock()
		return nil
	}
	t := Table(job.Tables[0])
	id := r.st.src.tableID(r.st.plan.database, t)
	if r.book.EstimateNeeded() {
		r.estimateJob(ctx, job)
	}
	return r.chunk(ctx, job, t, id, after)
}

// resolveAll replaces an all-tables job's empty list by the captured tables published now.
func (r *resnapper) resolveAll(ctx context.Context) error {
	tables, err := r.st.src.keyedCaptured(ctx, r.conn, r.st.plan.database)
	if err != nil {
		return err
	}
	refs := make([]tableRef, len(tables))
	for i, t := range tables {
		refs[i] = tableRef(t)
	}
	r.mu.Lock()
	r.book.ResolvedLocked(refs)
	r.mu.Unlock()
	return nil
}

// estimateJob asks the planner how many rows the job's tables hold (under its condition): the
// progress's estimate. A failure leaves it unknown (0), not asked again for this job.
func (r *resnapper) estimateJob(ctx context.Context, job resnapJob) {
	var total float64
	for _, t := range job.Tables {
		q := "EXPLAIN (FORMAT JSON) SELECT 1 FROM " + quoteIdent(t.Schema) + "." + quoteIdent(t.Name)
		if job.Where != "" {
			q += " WHERE (" + job.Where + ")"
		}
		var plan []struct {
			Plan struct {
				Rows float64 `json:"Plan Rows"`
			} `json:"Plan"`
		}
		if err := r.conn.QueryRow(ctx, q).Scan(&plan); err != nil || len(plan) == 0 {
			return
		}
		total += plan[0].Plan.Rows
	}
	r.book.SetEstimate(int64(total))
}

// chunk reads one chunk of table t after key (nil: from the start) between its watermarks,
// hands its rows to the decode loop at the high watermark and moves the state past it.
func (r *resnapper) chunk(ctx context.Context, job resnapJob, t Table, id cdc.TableID, after []string) error {
	r.seq++
	spec := &chunkSpec{schema: t.Schema, table: t.Name, after: after, limit: r.st.opts().SnapshotChunk,
		mark: r.st.opts().Slot + " " + r.nonce + " " + strconv.Itoa(r.seq), wait: r.st.opts().ResnapshotWait, where: job.Where}
	var ti *tableInfo
	var gone bool
	spec.load = func(ctx context.Context, tx pgx.Tx) error {
		r.q.tx = tx
		defer func() { r.q.tx = nil }()
		var err error
		ti, err = r.loadSchema(ctx, id)
		if errors.Is(err, errNoTable) {
			gone = true
			return err
		}
		if err != nil {
			return err
		}
		if len(ti.schema.PrimaryKey) == 0 {
			return fmt.Errorf("pgcdc: %w: %s has no primary key", ErrResnapshotRequest, id)
		}
		spec.cols, spec.key, spec.keyOIDs = columnNames(ti.schema), ti.schema.PrimaryKey, nil
		for _, k := range ti.schema.PrimaryKey {
			spec.keyOIDs = append(spec.keyOIDs, ti.oids[k])
		}
		return nil
	}
	cw := &chunkWindow{mark: spec.mark, table: id, w: newResnapWindow(), high: make(chan struct{})}
	r.mu.Lock()
	r.win = cw
	r.mu.Unlock()

	cr, err := readChunk(ctx, r.conn, spec)
	if gone {
		// Dropped since the request: nothing to read, the stream has its changes.
		r.abandonWindow(cw, nil)
		r.st.opts().Logger.Warn("pgcdc: re-snapshot skips a table that no longer exists", "slot", r.st.opts().Slot, "table", id.String())
		r.mu.Lock()
		r.book.NextTableLocked()
		r.mu.Unlock()
		return nil
	}
	if err != nil {
		r.abandonWindow(cw, err)
		return err
	}
	keys := make([]string, len(cr.keys))
	for i, k := range cr.keys {
		keys[i] = keyString(k)
	}
	r.mu.Lock()
	cw.w.read(cr.w, keys)
	r.mu.Unlock()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-cw.high:
	}
	events, err := r.decide(ctx, spec, cw, cr, ti)
	if err != nil {
		r.deliver(&chunkResult{mark: cw.mark, err: err})
		return err
	}
	r.mu.Lock()
	if !cw.invalid {
		var last []string
		if cr.more {
			last = cr.keys[len(cr.keys)-1]
		}
		// A job that ended is reported so once the decode loop has emitted these rows.
		r.book.ChunkDoneLocked(len(cr.rows), cr.more, last)
	}
	r.mu.Unlock()
	r.deliver(&chunkResult{mark: cw.mark, events: events})
	return nil
}

// deliver hands a result to the decode loop, which waits for it at the chunk's high
// watermark. There is at most one result outstanding (a chunk's), so the channel's room
// suffices; one the decode loop never took (it stopped) is replaced.
func (r *resnapper) deliver(res *chunkResult) {
	for {
		select {
		case r.results <- res:
			return
		default:
		}
		select {
		case <-r.results:
		default:
		}
	}
}

// published says that the rows of the chunk that ended a job are in the stream's channel.
func (r *resnapper) published() { r.book.Published() }

// abandonWindow ends a chunk that failed before its rows were decided: the decode loop stops
// feeding it, or, when it already waits at the high watermark, learns that nothing comes.
func (r *resnapper) abandonWindow(cw *chunkWindow, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cw.highSeen {
		if err == nil {
			err = errors.New("pgcdc: re-snapshot chunk skipped")
		}
		r.deliver(&chunkResult{mark: cw.mark, err: err})
		return
	}
	if r.win == cw {
		r.win = nil
	}
}

// decide applies the high watermark's outcome (resnap_window.go) and builds the kept rows'
// events, with the low watermark's commit as their version.
func (r *resnapper) decide(ctx context.Context, spec *chunkSpec, cw *chunkWindow, cr *chunkRead, ti *tableInfo) ([]cdc.Event, error) {
	if cw.invalid || (cw.keyNames != nil && !slices.Equal(cw.keyNames, keyColumnNames(ti))) {
		cw.invalid = true
		return nil, nil
	}
	out := cw.w.highWatermark(func(x uint32) bool { return cr.committed[x] })
	if out.Verify {
		var keys [][]string
		for i, k := range cr.keys {
			if out.Keep[i] {
				keys = append(keys, k)
			}
		}
		now, err := verifyChunk(ctx, r.conn, spec, keys, cr.done)
		if err != nil {
			return nil, err
		}
		for i, k := range cr.keys {
			if out.Keep[i] && !sameRow(now[keyString(k)], cr.rows[i]) {
				out.Keep[i] = false
			}
		}
	}
	var events []cdc.Event
	for i, vals := range cr.rows {
		if !out.Keep[i] {
			continue
		}
		ev := r.st.rowEvent(cdc.Read, ti, Position{LSN: out.Version, Snapshot: true})
		row, err := decodeRow(ti, vals)
		if err != nil {
			ev.Malformed = err
		}
		ev.After = row
		events = append(events, ev)
	}
	return events, nil
}

// sameRow compares two rows' text values (nil: NULL; a nil row: absent).
func sameRow(a, b [][]byte) bool {
	if a == nil || len(a) != len(b) {
		return false
	}
	for i := range a {
		if (a[i] == nil) != (b[i] == nil) || string(a[i]) != string(b[i]) {
			return false
		}
	}
	return true
}

// keyColumnNames are the names of a schema's primary key columns.
func keyColumnNames(ti *tableInfo) []string {
	names := make([]string, len(ti.schema.PrimaryKey))
	for i, k := range ti.schema.PrimaryKey {
		names[i] = ti.schema.Columns[k].Name
	}
	return names
}

// loadSchema is the table's schema in the chunk's snapshot, restricted to the published
// columns; the previous chunk's (or the stream's) when the relation and its columns are the
// same, so events keep one schema value (a table dropped and created anew is another relation).
func (r *resnapper) loadSchema(ctx context.Context, id cdc.TableID) (*tableInfo, error) {
	ti, err := r.cat.loadTable(ctx, id)
	if err != nil {
		return nil, err
	}
	published, err := publishedColumns(ctx, r.q, r.st.opts().Publication, id)
	if err != nil {
		return nil, err
	}
	if ti, err = r.cat.restrictTo(ctx, ti, published); err != nil {
		return nil, err
	}
	for _, prev := range []*tableInfo{r.ti, r.st.src.cached(id)} {
		if prev != nil && prev.schema.ID == id && prev.schema.Relation == ti.schema.Relation &&
			prev.sameColumns(columnNames(ti.schema), ti.oids, ti.typmods) &&
			slices.Equal(prev.schema.PrimaryKey, ti.schema.PrimaryKey) {
			ti = prev
			break
		}
	}
	r.ti = ti
	return ti, nil
}
