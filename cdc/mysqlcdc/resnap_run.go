package mysqlcdc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/resnapjob"
)

// resnapper carries out a stream's re-snapshot jobs (resnap.go), one chunk at a time, on a
// connection of its own, in a goroutine of its own. For each chunk it opens the window, reads
// the rows in a consistent snapshot, hands them to the window and writes the watermark; the
// reader (resnap_stream.go) records the window's keys and, at the watermark's commit, decides
// the rows, emits them and moves the state past the chunk. They meet under mu.
type resnapper struct {
	src   *Source
	nonce string // tells this stream's watermarks from an earlier stream's, replayed

	win atomic.Pointer[chunkWindow] // the open window, nil between chunks

	mu    sync.Mutex
	state *resnapState // what checkpoints carry; nil or with jobs
	// book keeps the jobs' progress and runs the goroutine's loop (internal/resnapjob).
	book *resnapjob.Book[TableName]

	cancel context.CancelFunc
	done   chan struct{}

	// The goroutine's own.
	conn *client.Conn
	cat  *catalog
	seq  int
	prev *table // the last chunk's table, kept while the catalog gives the same schema
}

// chunkWindow is one chunk from before its snapshot until its watermark.
type chunkWindow struct {
	mark  string
	table TableName

	// The reader's own: the newest version of each key of the table decoded in the window,
	// and why the rows cannot be decided by key (a DDL statement on the table, a TRUNCATE, a
	// change whose key the reader could not read): the chunk is then read again.
	touched map[string]int64
	invalid string

	// Set under mu by the resnapper before it writes the watermark.
	ready   bool
	version int64 // the snapshot's
	rows    []chunkRow
	more    bool     // the chunk was full: the table may hold more rows
	last    []string // the last row's key (resnapState.Key)

	// Set under mu by the reader at the watermark, then done is closed.
	outcome string // empty: decided; else why the chunk is read again
	done    chan struct{}
}

// chunkRow is a chunk's row and its key.
type chunkRow struct {
	key string // keyOf; empty when its key could not be read
	ev  cdc.Event
}

func newNonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// resnapAt is the re-snapshot state a checkpoint carries now (nil: none).
func (r *reader) resnapAt() *resnapState {
	if r.rs == nil {
		return nil
	}
	r.rs.mu.Lock()
	defer r.rs.mu.Unlock()
	return r.rs.state.clone()
}

// startResnapper starts the goroutine (once per stream), with the checkpoint's state when
// there is one. The reader's goroutine calls it; the resnapper ends with the stream.
func (r *reader) startResnapper(ctx context.Context, state *resnapState) *resnapper {
	if r.rs != nil {
		return r.rs
	}
	rs := &resnapper{src: r.src, nonce: newNonce(), state: state.clone(), done: make(chan struct{}), cat: &catalog{src: r.src}}
	rs.book = resnapjob.New(resnapjob.Config[TableName]{
		Mu: &rs.mu,
		State: func(create bool) *resnapjob.State[TableName] {
			if create && rs.state == nil {
				rs.state = &resnapState{}
			}
			return (*resnapjob.State[TableName])(rs.state)
		},
		Table:  r.src.tableID,
		Now:    r.src.opts.Now,
		Log:    r.src.log,
		Prefix: "mysqlcdc", Attrs: []any{"source", r.src.opts.SourceName}, ErrKey: "error",
	}, (*resnapjob.State[TableName])(state))
	rctx, cancel := context.WithCancel(ctx)
	rs.cancel = cancel
	r.rs = rs
	r.st.rs.Store(rs)
	go rs.run(rctx)
	return rs
}

// stop ends the goroutine and waits for it.
func (rs *resnapper) stop() {
	rs.cancel()
	<-rs.done
}

// addJob queues a decoded request (a replayed one already queued is not queued twice).
func (rs *resnapper) addJob(job *resnapJob) { rs.book.Add(job) }

// progress is the re-snapshot's SnapshotProgress: Jobs[0]'s while one runs, else the last one's.
func (rs *resnapper) progress() cdc.SnapshotProgress { return rs.book.Progress() }

// published says that the rows of the watermark that ended a job are in the stream's channel.
func (rs *resnapper) published() { rs.book.Published() }

// run is the goroutine: chunk after chunk while there are jobs, riding through failures
// (resnapjob.Book.Run).
func (rs *resnapper) run(ctx context.Context) {
	defer close(rs.done)
	defer func() {
		rs.cat.close()
		if rs.conn != nil {
			_ = rs.conn.Close()
		}
	}()
	rs.book.Run(ctx, resnapjob.Loop{Step: rs.step, Permanent: permanentResnapError,
		Failed: func(err error, failures int) (string, time.Duration) {
			if !errors.Is(err, errChunkAgain) && rs.conn != nil {
				_ = rs.conn.Close()
				rs.conn = nil
			}
			wait := resnapjob.Backoff(failures)
			if errors.Is(err, errChunkAgain) { // nothing failed: read it again soon
				wait = min(time.Duration(failures)*100*time.Millisecond, 5*time.Second)
			}
			return withoutStack(err), wait
		}})
}

// errChunkAgain says the reader could not decide a chunk's rows: it is read again.
var errChunkAgain = errors.New("mysqlcdc: re-snapshot chunk to be read again")

// permanentResnapError says whether a chunk's failure is the request's fault (a condition the
// server refuses, a privilege missing): retrying cannot help.
func permanentResnapError(err error) (string, bool) {
	if errors.Is(err, cdc.ErrResnapshotRefused) {
		return withoutStack(err), true
	}
	var me *mysql.MyError
	if errors.As(err, &me) {
		switch me.Code {
		case mysql.ER_PARSE_ERROR, mysql.ER_BAD_FIELD_ERROR, mysql.ER_TABLEACCESS_DENIED_ERROR,
			mysql.ER_COLUMNACCESS_DENIED_ERROR, mysql.ER_SP_DOES_NOT_EXIST, mysql.ER_OPERAND_COLUMNS,
			mysql.ER_INVALID_GROUP_FUNC_USE, mysql.ER_WRONG_ARGUMENTS, mysql.ER_SPECIFIC_ACCESS_DENIED_ERROR:
			return fmt.Sprintf("server error %d: %s", me.Code, me.Message), true
		}
	}
	return "", false
}

// step reads one chunk of Jobs[0] (resolving its tables first when it names none, skipping a
// table dropped meanwhile), or returns resnapjob.ErrIdle.
func (rs *resnapper) step(ctx context.Context) error {
	job, after, ok := rs.book.Current()
	if !ok {
		return resnapjob.ErrIdle
	}

	if rs.conn == nil {
		conn, err := rs.src.connect(ctx)
		if err != nil {
			return fmt.Errorf("mysqlcdc: re-snapshot connect: %w", err)
		}
		rs.conn = conn
	}
	if job.All && len(job.Tables) == 0 {
		return rs.resolveAll(ctx)
	}
	if len(job.Tables) == 0 { // a job that names no table (an all-tables job that found none)
		rs.mu.Lock()
		rs.book.FinishLocked("")
		rs.mu.Unlock()
		return nil
	}
	if rs.book.EstimateNeeded() {
		rs.estimateJob(ctx, job)
	}
	return rs.chunk(ctx, job, job.Tables[0], after)
}

// resolveAll replaces an all-tables job's empty list by the captured tables with a rangeable
// primary key that exist now.
func (rs *resnapper) resolveAll(ctx context.Context) error {
	stop := closeOnDone(ctx, rs.conn)
	tables, err := rs.src.resolveTables(ctx, rs.conn, false)
	stop()
	if err != nil {
		return err
	}
	var keyed []TableName
	for _, t := range tables {
		ti, err := rs.cat.load(ctx, rs.src.tableID(t))
		if errors.Is(err, errNoTable) {
			continue
		}
		if err != nil {
			return err
		}
		if err := checkKeyed(ti, t); err != nil {
			rs.src.log.Warn("mysqlcdc: a re-snapshot of every table leaves one out", "source", rs.src.opts.SourceName,
				"table", t.String(), "error", err)
			continue
		}
		keyed = append(keyed, t)
	}
	rs.mu.Lock()
	rs.book.ResolvedLocked(keyed)
	rs.mu.Unlock()
	return nil
}

// estimateJob sums the catalog's row estimates of the job's tables: the progress's estimate
// (the condition is not taken into account). A failure leaves it unknown (0), not asked again
// for this job.
func (rs *resnapper) estimateJob(ctx context.Context, job resnapJob) {
	stop := closeOnDone(ctx, rs.conn)
	defer stop()
	var n int64
	for _, t := range job.Tables {
		r, err := rs.conn.Execute("SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = " + hexText(t.Database) +
			" AND TABLE_NAME = " + hexText(t.Table))
		if err != nil {
			return
		}
		if r.RowNumber() > 0 {
			v, _ := r.GetInt(0, 0)
			n += v
		}
	}
	rs.book.SetEstimate(n)
}

// chunk reads one chunk of table name after key (nil: from the start) and waits until the
// reader decided it at the watermark.
func (rs *resnapper) chunk(ctx context.Context, job resnapJob, name TableName, after []string) error {
	rs.seq++
	w := &chunkWindow{mark: rs.src.opts.SourceName + " " + rs.nonce + " " + strconv.Itoa(rs.seq), table: name,
		touched: map[string]int64{}, done: make(chan struct{})}
	// Open before the snapshot: every change after the snapshot's position is then decoded
	// while the window is open.
	rs.win.Store(w)
	read, gone, err := rs.read(ctx, job, name, after)
	if gone || err != nil {
		rs.abandon(w)
		if gone {
			// Dropped since the request: nothing to read, the stream has its changes.
			rs.src.log.Warn("mysqlcdc: re-snapshot skips a table that no longer exists", "source", rs.src.opts.SourceName, "table", name.String())
			rs.mu.Lock()
			rs.book.NextTableLocked()
			rs.mu.Unlock()
		}
		return err
	}
	rs.mu.Lock()
	w.ready, w.version, w.rows, w.more, w.last = true, read.version, read.rows, read.more, read.last
	rs.mu.Unlock()
	if d := time.Duration(chunkDelay.Load()); d > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
	}
	if err := rs.writeWatermark(ctx, w); err != nil {
		rs.abandon(w)
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-w.done:
	}
	if w.outcome != "" {
		return fmt.Errorf("%w: %s", errChunkAgain, w.outcome)
	}
	rs.book.ClearErr()
	return nil
}

// abandon closes a window the reader has not decided: a watermark of it, should one arrive,
// is passed over.
func (rs *resnapper) abandon(w *chunkWindow) {
	rs.mu.Lock()
	rs.win.CompareAndSwap(w, nil)
	rs.mu.Unlock()
}

// writeWatermark writes the chunk's watermark row. A write whose outcome is unknown (the
// connection failed) is written again on a new connection: a second copy changes nothing
// (the reader decides a window once), and the reader may have decided already.
func (rs *resnapper) writeWatermark(ctx context.Context, w *chunkWindow) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if rs.conn == nil {
			if rs.conn, err = rs.src.connect(ctx); err != nil {
				continue
			}
		}
		stop := closeOnDone(ctx, rs.conn)
		err = rs.src.writeSignal(rs.conn, "wm-"+rs.src.opts.SourceName, signalWatermark, w.mark)
		stop()
		if err == nil {
			return nil
		}
		_ = rs.conn.Close()
		rs.conn = nil
		select {
		case <-w.done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt+1) * 200 * time.Millisecond):
		}
	}
	return fmt.Errorf("mysqlcdc: write a re-snapshot watermark: %w", err)
}

// chunkDelay, when set, is waited between a chunk's read and its watermark. Only tests set it,
// to widen the window in which streamed changes race the chunk's rows.
var chunkDelay atomic.Int64

// chunkRead is a chunk as read in its snapshot.
type chunkRead struct {
	version int64
	rows    []chunkRow
	more    bool
	last    []string
}

// read reads the chunk in a consistent snapshot on the resnapper's connection: the table's
// schema, then up to SnapshotChunk rows after key in key order. gone says the table no longer
// exists.
func (rs *resnapper) read(ctx context.Context, job resnapJob, name TableName, after []string) (_ *chunkRead, gone bool, _ error) {
	snap, err := startSnapshot(ctx, rs.src, rs.conn)
	if err != nil {
		return nil, false, err
	}
	conn := rs.conn
	stop := closeOnDone(ctx, conn)
	defer stop()
	defer func() {
		if _, err := conn.Execute("COMMIT"); err != nil && rs.conn == conn {
			_ = conn.Close()
			rs.conn = nil
		}
	}()
	id := rs.src.tableID(name)
	t, err := rs.cat.load(ctx, id)
	if errors.Is(err, errNoTable) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	if err := checkKeyed(t, name); err != nil {
		return nil, false, err
	}
	if rs.prev != nil && rs.prev.schema.ID == id && sameSchema(rs.prev.schema, t.schema) {
		t = rs.prev
	}
	rs.prev = t
	collations, err := keyCollations(conn, name, t)
	if err != nil {
		return nil, false, err
	}
	q, err := chunkQuery(name, t, collations, after, job.Where, rs.src.opts.SnapshotChunk)
	if err != nil {
		return nil, false, err
	}
	pos := Position{File: snap.at.File, Pos: snap.at.Pos, GTID: snap.at.GTID, Read: true, version: snap.version}
	out := &chunkRead{version: snap.version}
	n := len(t.codecs)
	var result mysql.Result
	err = conn.ExecuteSelectStreaming(q, &result, func(row []mysql.FieldValue) error {
		ev := cdc.Event{Op: cdc.Read, Table: id, Schema: t.schema, Position: pos}
		values := make([]cdc.Value, n)
		for k := 0; k < n; k++ {
			v, err := t.codecs[k].fromText(&row[k])
			if err != nil && ev.Malformed == nil {
				ev.Malformed = fmt.Errorf("column %q: %w", t.schema.Columns[k].Name, err)
			}
			values[k] = v
		}
		key, _ := keyOf(t.schema, values)
		if ev.Malformed == nil {
			ev.After = values
		}
		out.last = out.last[:0]
		for _, fv := range row[n:] {
			out.last = append(out.last, hex.EncodeToString(rawText(&fv)))
		}
		out.rows = append(out.rows, chunkRow{key: key, ev: ev})
		return nil
	}, nil)
	if err != nil {
		return nil, false, fmt.Errorf("mysqlcdc: re-snapshot chunk of %v: %w", id, err)
	}
	out.last = slices.Clone(out.last)
	out.more = len(out.rows) >= rs.src.opts.SnapshotChunk
	return out, false, nil
}

// sameSchema says whether two loads of a table gave the same schema.
func sameSchema(a, b *cdc.TableSchema) bool {
	return reflect.DeepEqual(a.Columns, b.Columns) && slices.Equal(a.PrimaryKey, b.PrimaryKey)
}

// rawText is a value's text as the server sent it.
func rawText(fv *mysql.FieldValue) []byte {
	switch fv.Type {
	case mysql.FieldValueTypeSigned:
		return strconv.AppendInt(nil, fv.AsInt64(), 10)
	case mysql.FieldValueTypeUnsigned:
		return strconv.AppendUint(nil, fv.AsUint64(), 10)
	case mysql.FieldValueTypeFloat:
		return strconv.AppendFloat(nil, fv.AsFloat64(), 'g', -1, 64)
	}
	return slices.Clone(fv.AsString())
}

// keyCollations are the collations of a table's string key columns (empty for the others).
func keyCollations(conn *client.Conn, name TableName, t *table) ([]string, error) {
	out := make([]string, len(t.schema.PrimaryKey))
	need := false
	for _, k := range t.schema.PrimaryKey {
		need = need || t.codecs[k].class == classString || t.codecs[k].class == classText
	}
	if !need {
		return out, nil
	}
	r, err := conn.Execute("SELECT COLUMN_NAME, COLLATION_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = " +
		hexText(name.Database) + " AND TABLE_NAME = " + hexText(name.Table))
	if err != nil {
		return nil, fmt.Errorf("mysqlcdc: key collations of %s: %w", name, err)
	}
	for i := 0; i < r.RowNumber(); i++ {
		col, _ := r.GetString(i, 0)
		coll, _ := r.GetString(i, 1)
		for j, k := range t.schema.PrimaryKey {
			if t.schema.Columns[k].Name == col {
				out[j] = coll
			}
		}
	}
	return out, nil
}

// chunkQuery is the SELECT of a chunk: every column as the snapshot reads it, then the key
// columns as they are (for the next chunk's bound), the rows after the bound in key order.
func chunkQuery(name TableName, t *table, collations, after []string, where string, limit int) (string, error) {
	var b strings.Builder
	b.WriteString("SELECT ")
	for k := range t.codecs {
		if k > 0 {
			b.WriteString(", ")
		}
		b.WriteString(t.codecs[k].selectExpr(t.schema.Columns[k].Name))
	}
	keys := make([]string, len(t.schema.PrimaryKey))
	for i, k := range t.schema.PrimaryKey {
		keys[i] = quoteIdent(t.schema.Columns[k].Name)
		b.WriteString(", " + keys[i])
	}
	b.WriteString(" FROM " + quoteIdent(name.Database) + "." + quoteIdent(name.Table))
	var conds []string
	if after != nil {
		if len(after) != len(keys) {
			return "", fmt.Errorf("mysqlcdc: %w: the checkpointed key of %s has %d columns, the table's key %d", cdc.ErrResnapshotRefused, name, len(after), len(keys))
		}
		lits := make([]string, len(keys))
		for i, k := range t.schema.PrimaryKey {
			raw, err := hex.DecodeString(after[i])
			if err != nil {
				return "", fmt.Errorf("mysqlcdc: the checkpointed key of %s is malformed", name)
			}
			if lits[i], err = keyLiteral(&t.codecs[k], raw, collations[i]); err != nil {
				return "", fmt.Errorf("mysqlcdc: %w: key column %q of %s: %w", cdc.ErrResnapshotRefused, t.schema.Columns[k].Name, name, err)
			}
		}
		// (k1, k2, ...) > (l1, l2, ...), spelled out so that every server plans it as ranges.
		var ors []string
		for i := range keys {
			var ands []string
			for j := 0; j < i; j++ {
				ands = append(ands, keys[j]+" = "+lits[j])
			}
			ands = append(ands, keys[i]+" > "+lits[i])
			ors = append(ors, "("+strings.Join(ands, " AND ")+")")
		}
		conds = append(conds, "("+strings.Join(ors, " OR ")+")")
	}
	if where != "" {
		conds = append(conds, "("+where+")")
	}
	if len(conds) > 0 {
		b.WriteString(" WHERE " + strings.Join(conds, " AND "))
	}
	b.WriteString(" ORDER BY " + strings.Join(keys, ", ") + " LIMIT " + strconv.Itoa(limit))
	return b.String(), nil
}

// keyLiteral renders a key column's value, in the text form the server sent it in, as a
// literal that compares and orders as the column's values do (a string under the column's
// collation).
func keyLiteral(c *colCodec, raw []byte, collation string) (string, error) {
	only := func(allowed string) error {
		for _, ch := range raw {
			if !strings.ContainsRune(allowed, rune(ch)) {
				return errors.New("a value of an unexpected form")
			}
		}
		return nil
	}
	switch c.class {
	case classInt, classUint, classDecimal:
		if len(raw) == 0 {
			return "", errors.New("an empty number")
		}
		if err := only("0123456789+-.eE"); err != nil {
			return "", err
		}
		return string(raw), nil
	case classTemporal, classTimestamp, classUUID:
		if err := only("0123456789abcdefABCDEF:.- "); err != nil {
			return "", err
		}
		return "'" + string(raw) + "'", nil
	case classBinary:
		return "X'" + hex.EncodeToString(raw) + "'", nil
	case classString, classText:
		if c.charset == "" || collation == "" || !sqlName(c.charset) || !sqlName(collation) {
			return "", errors.New("no character set or collation")
		}
		return "_" + c.charset + " X'" + hex.EncodeToString(raw) + "' COLLATE " + collation, nil
	}
	return "", errors.New("a type a re-snapshot cannot range over")
}

// sqlName says whether s is a plain character set or collation name.
func sqlName(s string) bool {
	for _, ch := range s {
		if !(ch == '_' || ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z') {
			return false
		}
	}
	return s != ""
}
