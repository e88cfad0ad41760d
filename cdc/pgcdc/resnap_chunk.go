package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// resnapPrefix is the logical decoding message prefix of re-snapshot watermarks.
const resnapPrefix = "tributary.resnapshot.watermark"

// errChunkBusy says a chunk's snapshot saw a transaction that stayed open longer than the
// wait allows (step 3 of resnap_window.go): the chunk must be read again later.
var errChunkBusy = errors.New("pgcdc: re-snapshot chunk: a transaction in progress at its snapshot stayed open")

// chunkSpec is what one chunk reads: the columns of a table (text output, as the snapshot and
// pgoutput give them) in key order after a key.
type chunkSpec struct {
	schema, table string
	cols          []string // every column, in the schema's order
	key           []int    // the primary key's columns, as indexes into cols
	keyOIDs       []uint32 // their types, for the keyset parameters
	after         []string // the last key done, text form; nil: from the start
	limit         int      // rows per chunk
	mark          string   // the watermarks' content (slot, re-snapshot and chunk), low/high appended
	wait          time.Duration
	where         string // an SQL condition the rows must meet; "" for every row
	// load, when set, fills cols, key and keyOIDs in the chunk's snapshot transaction, before
	// its rows are read: the columns are then exactly the table's as the snapshot sees it.
	load func(ctx context.Context, tx pgx.Tx) error
}

// chunkRead is a chunk as steps 1-4 read it.
type chunkRead struct {
	rows [][][]byte // the rows' text values, nil for NULL, in key order
	keys [][]string // each row's key, text form
	more bool       // the table goes on after the last row
	// w is W (resnap_window.go, step 2) as pgoutput's 32-bit xids, and committed says which
	// of them committed (step 3, asked once none was in progress).
	w         []uint32
	committed map[uint32]bool
	// done are the full xids of W's committed transactions, which a check snapshot (S2) must see.
	done []uint64
}

// readChunk runs steps 1-4 of the chunk protocol on conn (a plain SQL connection of its own):
// the low watermark, the snapshot and its rows, the wait for W, the high watermark. The window
// is the stream's business; this only reads. A wait longer than spec.wait is errChunkBusy.
func readChunk(ctx context.Context, conn *pgx.Conn, spec *chunkSpec) (*chunkRead, error) {
	if err := writeWatermark(ctx, conn, spec.mark+" low"); err != nil {
		return nil, err
	}
	cr, xmax, xip, err := readChunkRows(ctx, conn, spec)
	if err != nil {
		return nil, err
	}
	var next uint64
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.pg_current_xact_id()::text::bigint").Scan(&next); err != nil {
		return nil, fmt.Errorf("pgcdc: re-snapshot chunk: next transaction id: %w", err)
	}
	w := xip
	for x := xmax; x < next; x++ {
		w = append(w, x)
	}
	if cr.committed, err = waitEnded(ctx, conn, w, spec.wait); err != nil {
		return nil, err
	}
	for _, x := range w {
		cr.w = append(cr.w, uint32(x))
		if cr.committed[uint32(x)] {
			cr.done = append(cr.done, x)
		}
	}
	if err := writeWatermark(ctx, conn, spec.mark+" high"); err != nil {
		return nil, err
	}
	return cr, nil
}

// writeWatermark commits a transactional logical message of its own (resnap_window.go: a
// non-transactional one is not flushed on PostgreSQL 15).
func writeWatermark(ctx context.Context, conn *pgx.Conn, content string) error {
	if err := emitTransactional(ctx, conn, resnapPrefix, content); err != nil {
		return fmt.Errorf("pgcdc: re-snapshot watermark: %w", err)
	}
	return nil
}

// readChunkRows is step 2: the snapshot's xmax and xip, then the chunk's rows, in one
// REPEATABLE READ transaction.
func readChunkRows(ctx context.Context, conn *pgx.Conn, spec *chunkSpec) (_ *chunkRead, xmax uint64, xip []uint64, err error) {
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, 0, nil, fmt.Errorf("pgcdc: re-snapshot chunk: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// The first statement takes the snapshot.
	if xip, xmax, err = snapshotXids(ctx, tx); err != nil {
		return nil, 0, nil, err
	}
	if spec.load != nil {
		if err := spec.load(ctx, tx); err != nil {
			return nil, 0, nil, err
		}
	}
	sel, key := spec.selectSQL()
	var conds []string
	var args [][]byte
	var oids []uint32
	if spec.after != nil {
		conds = append(conds, key+" > "+spec.params(1))
		args, oids = keyArgs(spec.after), spec.keyOIDs
	}
	query := sel + spec.whereSQL(conds...) + " ORDER BY " + key + " LIMIT " + strconv.Itoa(spec.limit+1)
	cr, err := scanRows(ctx, tx, spec, query, args, oids, spec.limit)
	if err != nil {
		return nil, 0, nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, 0, nil, fmt.Errorf("pgcdc: re-snapshot chunk: %w", err)
	}
	return cr, xmax, xip, nil
}

// waitEnded is step 3: it polls pg_xact_status until no transaction of w is in progress, at
// most for wait (errChunkBusy after), and returns which of them committed.
func waitEnded(ctx context.Context, conn *pgx.Conn, w []uint64, wait time.Duration) (map[uint32]bool, error) {
	committed := make(map[uint32]bool, len(w))
	if len(w) == 0 {
		return committed, nil
	}
	ids := make([]string, len(w))
	for i, x := range w {
		ids[i] = strconv.FormatUint(x, 10)
	}
	deadline := time.Now().Add(wait)
	pause := 5 * time.Millisecond
	for {
		rows, err := conn.Query(ctx, `SELECT x, coalesce(pg_catalog.pg_xact_status(x::xid8), 'committed')
			FROM unnest($1::text[]) x`, ids)
		if err != nil {
			return nil, fmt.Errorf("pgcdc: re-snapshot chunk: transaction status: %w", err)
		}
		open := false
		for rows.Next() {
			var x, status string
			if err := rows.Scan(&x, &status); err != nil {
				rows.Close()
				return nil, fmt.Errorf("pgcdc: re-snapshot chunk: transaction status: %w", err)
			}
			id, _ := strconv.ParseUint(x, 10, 64)
			switch status {
			case "in progress":
				open = true
			case "committed":
				committed[uint32(id)] = true
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("pgcdc: re-snapshot chunk: transaction status: %w", err)
		}
		if !open {
			return committed, nil
		}
		if err := pollPause(ctx, deadline, &pause); err != nil {
			return nil, err
		}
	}
}

// pollPause waits *pause (doubling it, up to 200ms) before the next poll, or fails with
// errChunkBusy past deadline, or with ctx's error.
func pollPause(ctx context.Context, deadline time.Time, pause *time.Duration) error {
	if time.Now().After(deadline) {
		return errChunkBusy
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(*pause):
	}
	*pause = min(2**pause, 200*time.Millisecond)
	return nil
}

// verifyChunk reads the rows of keys (the chunk's, in key order) again in a snapshot S2 that
// sees every committed transaction of w (resnap_window.go: a transaction committed in
// pg_xact_status may not have left the proc array yet, so S2 is taken again while one is still
// in its xip or at or past its xmax, for at most spec.wait: errChunkBusy after). It returns
// each key's row as S2 sees it, absent for a row that is gone.
func verifyChunk(ctx context.Context, conn *pgx.Conn, spec *chunkSpec, keys [][]string, committed []uint64) (map[string][][]byte, error) {
	out := map[string][][]byte{}
	if len(keys) == 0 {
		return out, nil
	}
	deadline := time.Now().Add(spec.wait)
	pause := 5 * time.Millisecond
	for {
		rows, seesAll, err := readRange(ctx, conn, spec, keys[0], keys[len(keys)-1], committed)
		if err != nil {
			return nil, err
		}
		if seesAll {
			for i, k := range rows.keys {
				out[keyString(k)] = rows.rows[i]
			}
			return out, nil
		}
		if err := pollPause(ctx, deadline, &pause); err != nil {
			return nil, err
		}
	}
}

// readRange reads the rows from first to last key (inclusive) in a REPEATABLE READ snapshot,
// and reports whether that snapshot sees every transaction of committed.
func readRange(ctx context.Context, conn *pgx.Conn, spec *chunkSpec, first, last []string, committed []uint64) (*chunkRead, bool, error) {
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, false, fmt.Errorf("pgcdc: re-snapshot check: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	xip, xmax, err := snapshotXids(ctx, tx)
	if err != nil {
		return nil, false, err
	}
	inProgress := make(map[uint64]bool, len(xip))
	for _, x := range xip {
		inProgress[x] = true
	}
	for _, x := range committed {
		if inProgress[x] || x >= xmax {
			return nil, false, nil // not visible to this snapshot yet
		}
	}
	sel, key := spec.selectSQL()
	query := sel + spec.whereSQL(key+" >= "+spec.params(1), key+" <= "+spec.params(len(spec.key)+1)) + " ORDER BY " + key
	args := append(keyArgs(first), keyArgs(last)...)
	oids := append(append([]uint32(nil), spec.keyOIDs...), spec.keyOIDs...)
	cr, err := scanRows(ctx, tx, spec, query, args, oids, -1)
	if err != nil {
		return nil, false, err
	}
	return cr, true, tx.Commit(ctx)
}

// selectSQL returns the SELECT of every column FROM the table, and the key columns as a row
// constructor "(k1, k2)" (for comparisons and ORDER BY).
func (spec *chunkSpec) selectSQL() (sel, key string) {
	cols := make([]string, len(spec.cols))
	for i, c := range spec.cols {
		cols[i] = quoteIdent(c)
	}
	keyCols := make([]string, len(spec.key))
	for i, k := range spec.key {
		keyCols[i] = cols[k]
	}
	return "SELECT " + strings.Join(cols, ", ") + " FROM " + quoteIdent(spec.schema) + "." + quoteIdent(spec.table),
		"(" + strings.Join(keyCols, ", ") + ")"
}

// whereSQL is the WHERE clause of conds and the spec's condition ("" for none).
func (spec *chunkSpec) whereSQL(conds ...string) string {
	if spec.where != "" {
		conds = append(conds, "("+spec.where+")")
	}
	if len(conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(conds, " AND ")
}

// params returns the row constructor of one key's parameters, numbered from first.
func (spec *chunkSpec) params(first int) string {
	ps := make([]string, len(spec.key))
	for i := range ps {
		ps[i] = "$" + strconv.Itoa(first+i)
	}
	return "(" + strings.Join(ps, ", ") + ")"
}

// keyArgs is a key's text form as query arguments.
func keyArgs(key []string) [][]byte {
	args := make([][]byte, len(key))
	for i, k := range key {
		args[i] = []byte(k)
	}
	return args
}

// snapshotXids reads the transaction's snapshot: its xip and xmax (the first statement of a
// REPEATABLE READ transaction takes it).
func snapshotXids(ctx context.Context, tx pgx.Tx) (xip []uint64, xmax uint64, err error) {
	var xipText string
	if err := tx.QueryRow(ctx, `SELECT coalesce((SELECT string_agg(x::text, ',') FROM pg_catalog.pg_snapshot_xip(s) x), ''),
		pg_catalog.pg_snapshot_xmax(s)::text::bigint FROM pg_catalog.pg_current_snapshot() s`).Scan(&xipText, &xmax); err != nil {
		return nil, 0, fmt.Errorf("pgcdc: re-snapshot: snapshot: %w", err)
	}
	for _, f := range strings.Split(xipText, ",") {
		if f == "" {
			continue
		}
		x, perr := strconv.ParseUint(f, 10, 64)
		if perr != nil {
			return nil, 0, fmt.Errorf("pgcdc: re-snapshot: snapshot xid %q: %w", f, perr)
		}
		xip = append(xip, x)
	}
	return xip, xmax, nil
}

// scanRows runs query and keeps its rows' text values (copied) and keys; with limit >= 0, a row
// beyond limit only sets more (the look-ahead row).
func scanRows(ctx context.Context, tx pgx.Tx, spec *chunkSpec, query string, args [][]byte, oids []uint32, limit int) (*chunkRead, error) {
	cr := &chunkRead{}
	rr := tx.Conn().PgConn().ExecParams(ctx, query, args, oids, nil, nil)
	for rr.NextRow() {
		if limit >= 0 && len(cr.rows) == limit {
			cr.more = true
			continue
		}
		vals := rr.Values()
		row := make([][]byte, len(vals))
		for i, v := range vals {
			if v != nil {
				row[i] = append([]byte{}, v...)
			}
		}
		key := make([]string, len(spec.key))
		for i, k := range spec.key {
			key[i] = string(row[k])
		}
		cr.rows, cr.keys = append(cr.rows, row), append(cr.keys, key)
	}
	if _, err := rr.Close(); err != nil {
		return nil, fmt.Errorf("pgcdc: re-snapshot read of %s.%s: %w", spec.schema, spec.table, err)
	}
	return cr, nil
}

// keyString is a key's identity in the window: its columns' text, each length-prefixed.
func keyString(key []string) string {
	var b strings.Builder
	for _, k := range key {
		b.WriteString(strconv.Itoa(len(k)))
		b.WriteByte(':')
		b.WriteString(k)
	}
	return b.String()
}
