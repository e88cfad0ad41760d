package hasuite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// The tables, the writers and the row-by-row comparison (doc.go, A case).

type kind uint8

const (
	kInt     kind = iota // the JSON number's text equals the SQL text
	kText                // a JSON string
	kDecimal             // the source's digits as a JSON string
	kBool                // JSON true/false
	kFloat               // a JSON number equal in value
	kTime                // "2006-01-02 15:04:05[.ffffff]", trailing fraction zeros trimmed
	kDate                // "2006-01-02"
)

type column struct {
	name, typ string
	kind      kind
}

type table struct {
	name  string
	index string
	cols  []column // the key columns first
	nKey  int
}

func tablesFor(sfx string) []*table {
	return []*table{
		{name: "ht1_" + sfx + "_items", nKey: 1, cols: []column{{"id", "bigint", kInt}, {"n", "integer", kInt},
			{"label", "text", kText}, {"amount", "numeric(12,2)", kDecimal}, {"flag", "boolean", kBool},
			{"ratio", "double precision", kFloat}, {"seen", "timestamp(6)", kTime}}},
		{name: "ht1_" + sfx + "_events", nKey: 2, cols: []column{{"tenant", "varchar(20)", kText}, {"seq", "integer", kInt},
			{"v", "bigint", kInt}, {"note", "text", kText}, {"day", "date", kDate}}},
	}
}

func (t *table) createSQL() []string {
	var defs, keys []string
	for i, c := range t.cols {
		defs = append(defs, c.name+" "+c.typ)
		if i < t.nKey {
			keys = append(keys, c.name)
		}
	}
	out := []string{fmt.Sprintf("CREATE TABLE %s (%s, PRIMARY KEY (%s))", t.name, strings.Join(defs, ", "), strings.Join(keys, ", "))}
	if t.nKey > 1 {
		out = append(out, "ALTER TABLE "+t.name+" REPLICA IDENTITY FULL")
	}
	return out
}

var labels = []string{"", "plain", "it's", `back\slash`, `"quoted"`, "tab\there", "line\nbreak", "Größe", "名前",
	"emoji 🚀", "pipe|bar", "<tag>", "  padded  "}

// literal draws a value of c's kind as an SQL literal (NULL one time in eight for non-key
// columns).
func literal(r *rand.Rand, c column, key bool) string {
	if !key && r.IntN(8) == 0 {
		return "NULL"
	}
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	switch c.kind {
	case kInt:
		if c.typ == "bigint" {
			return strconv.FormatInt(r.Int64()-r.Int64(), 10)
		}
		return strconv.FormatInt(int64(r.Int32())-int64(r.Int32())/2, 10)
	case kText:
		s := labels[r.IntN(len(labels))]
		if r.IntN(2) == 0 {
			s += " " + strconv.Itoa(r.IntN(1000))
		}
		return quote(s)
	case kDecimal:
		cents := r.Int64N(1e12)
		if r.IntN(3) == 0 {
			cents = -r.Int64N(1000)
		}
		sign := ""
		if cents < 0 {
			sign, cents = "-", -cents
		}
		return fmt.Sprintf("%s%d.%02d", sign, cents/100, cents%100)
	case kBool:
		return strconv.FormatBool(r.IntN(2) == 0)
	case kFloat:
		// Multiples of 1/8: exact in binary and short in decimal.
		return strconv.FormatFloat(float64(r.IntN(160001)-80000)/8, 'f', -1, 64)
	case kTime:
		ts := time.Unix(946684800+r.Int64N(30*365*86400), 0).UTC().Format("2006-01-02 15:04:05")
		switch r.IntN(3) {
		case 0:
			ts += fmt.Sprintf(".%06d", r.IntN(1e6))
		case 1:
			ts += fmt.Sprintf(".%03d000", r.IntN(1000))
		}
		return quote(ts)
	default:
		return quote(time.Unix(946684800+r.Int64N(30*365*86400), 0).UTC().Format("2006-01-02"))
	}
}

// --- the writers ---

const writers = 3

// load is the writers' load: each writer owns its keys (items ids from (w+1)*1e6, events of
// tenant t<w>), so that it knows which rows live.
type load struct {
	dsn    string
	tables []*table
	seed   uint64

	mu      sync.Mutex
	commits int
	fails   int
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	ws      []*writer
}

type writer struct {
	id   int
	r    *rand.Rand
	next int64   // the next new items id
	live []int64 // items ids believed to exist
}

func newLoad(dsn string, tables []*table, seed uint64) *load {
	l := &load{dsn: dsn, tables: tables, seed: seed}
	for i := range writers {
		l.ws = append(l.ws, &writer{id: i, r: rand.New(rand.NewPCG(seed, uint64(i))), next: int64(i+1) * 1_000_000})
	}
	return l
}

func (l *load) items() *table  { return l.tables[0] }
func (l *load) events() *table { return l.tables[1] }

// seedRows inserts n rows per writer and table.
func (l *load) seedRows(ctx context.Context, n int) error {
	var stmts []string
	for _, w := range l.ws {
		for range n {
			w.live = append(w.live, w.next)
			stmts = append(stmts, w.insertItem(l.items()), w.upsertEvent(l.events()))
		}
	}
	return execSQL(ctx, l.dsn, stmts...)
}

func (l *load) start() {
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	for _, w := range l.ws {
		l.wg.Go(func() { l.run(ctx, w) })
	}
}

// stop ends the load and waits for the writers (an open transaction is rolled back).
func (l *load) stop() {
	if l.cancel != nil {
		l.cancel()
		l.wg.Wait()
		l.cancel = nil
	}
}

func (l *load) counts() (commits, fails int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.commits, l.fails
}

func (l *load) run(ctx context.Context, w *writer) {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			_ = conn.Close(context.Background())
		}
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if conn == nil {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			c, err := pgx.Connect(cctx, l.dsn)
			cancel()
			if err != nil {
				l.note(false)
				continue
			}
			conn = c
		}
		stmts, commit := w.change(l)
		err := txn(ctx, conn, stmts)
		if err == nil {
			commit()
		} else if ctx.Err() == nil {
			_ = conn.Close(context.Background())
			conn = nil
		}
		l.note(err == nil)
	}
}

func (l *load) note(ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ok {
		l.commits++
	} else {
		l.fails++
	}
}

func txn(ctx context.Context, c *pgx.Conn, stmts []string) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tx, err := c.Begin(cctx)
	if err != nil {
		return err
	}
	for _, s := range stmts {
		if _, err := tx.Exec(cctx, s); err != nil {
			_ = tx.Rollback(context.Background())
			return err
		}
	}
	return tx.Commit(cctx)
}

// change draws a transaction of one to three statements, and what to note once it commits.
func (w *writer) change(l *load) ([]string, func()) {
	var stmts []string
	live := append([]int64(nil), w.live...)
	added, gone := []int64{}, map[int64]bool{}
	pick := func() (int64, bool) {
		for range 4 {
			if len(live) == 0 {
				return 0, false
			}
			k := live[w.r.IntN(len(live))]
			if !gone[k] {
				return k, true
			}
		}
		return 0, false
	}
	items := l.items()
	for range 1 + w.r.IntN(3) {
		switch k := w.r.IntN(20); {
		case k < 6:
			stmts = append(stmts, w.insertItem(items))
			added = append(added, w.next-1)
		case k < 11:
			if id, ok := pick(); ok {
				stmts = append(stmts, w.updateItem(items, id))
			}
		case k < 13:
			if id, ok := pick(); ok {
				w.next++
				stmts = append(stmts, fmt.Sprintf("UPDATE %s SET id = %d WHERE id = %d", items.name, w.next-1, id))
				gone[id] = true
				added = append(added, w.next-1)
			}
		case k < 15:
			if id, ok := pick(); ok {
				stmts = append(stmts, fmt.Sprintf("DELETE FROM %s WHERE id = %d", items.name, id))
				gone[id] = true
			}
		case k < 19:
			stmts = append(stmts, w.upsertEvent(l.events()))
		default:
			stmts = append(stmts, fmt.Sprintf("DELETE FROM %s WHERE tenant = 't%d' AND seq = %d", l.events().name, w.id, w.r.IntN(40)))
		}
	}
	if len(stmts) == 0 {
		stmts = append(stmts, w.upsertEvent(l.events()))
	}
	return stmts, func() {
		kept := w.live[:0]
		for _, k := range w.live {
			if !gone[k] {
				kept = append(kept, k)
			}
		}
		w.live = append(kept, added...)
	}
}

func (w *writer) insertItem(t *table) string {
	vals := []string{strconv.FormatInt(w.next, 10)}
	w.next++
	for _, c := range t.cols[1:] {
		vals = append(vals, literal(w.r, c, false))
	}
	return fmt.Sprintf("INSERT INTO %s VALUES (%s)", t.name, strings.Join(vals, ", "))
}

func (w *writer) updateItem(t *table, id int64) string {
	var sets []string
	for _, c := range t.cols[1:] {
		if w.r.IntN(2) == 0 || len(sets) == 0 && c.name == "seen" {
			sets = append(sets, c.name+" = "+literal(w.r, c, false))
		}
	}
	return fmt.Sprintf("UPDATE %s SET %s WHERE id = %d", t.name, strings.Join(sets, ", "), id)
}

func (w *writer) upsertEvent(t *table) string {
	vals := []string{fmt.Sprintf("'t%d'", w.id), strconv.Itoa(w.r.IntN(40))}
	var sets []string
	for _, c := range t.cols[2:] {
		vals = append(vals, literal(w.r, c, false))
		sets = append(sets, c.name+" = EXCLUDED."+c.name)
	}
	return fmt.Sprintf("INSERT INTO %s VALUES (%s) ON CONFLICT (tenant, seq) DO UPDATE SET %s", t.name, strings.Join(vals, ", "), strings.Join(sets, ", "))
}

// execSQL runs the statements in one transaction on a connection of its own.
func execSQL(ctx context.Context, dsn string, stmts ...string) error {
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	return txn(ctx, c, stmts)
}

// --- the comparison ---

// readRows reads every row of t as the text of each value, by _id.
func readRows(ctx context.Context, dsn string, t *table) (map[string][]*string, error) {
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer c.Close(context.WithoutCancel(ctx))
	exprs := make([]string, len(t.cols))
	for i, col := range t.cols {
		exprs[i] = col.name + "::text"
	}
	rows, err := c.Query(ctx, "SELECT "+strings.Join(exprs, ", ")+" FROM "+t.name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]*string{}
	for rows.Next() {
		vals := make([]*string, len(t.cols))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		keys := make([]string, t.nKey)
		for i := range keys {
			if vals[i] == nil {
				return nil, errors.New("a NULL key column")
			}
			keys[i] = *vals[i]
		}
		out[docID(keys)] = vals
	}
	return out, rows.Err()
}

// docID joins key texts as sink/doc.go says: each escaped (\ -> \\, | -> \|), joined by "|".
func docID(keys []string) string {
	esc := make([]string, len(keys))
	for i, k := range keys {
		esc[i] = strings.NewReplacer(`\`, `\\`, `|`, `\|`).Replace(k)
	}
	return strings.Join(esc, "|")
}

// diffTable lists every difference between t's rows and its documents, sorted.
func diffTable(t *table, rows map[string][]*string, docs map[string]doc) []string {
	var out []string
	for id, vals := range rows {
		d, ok := docs[id]
		if !ok {
			out = append(out, fmt.Sprintf("%s: missing_document _id=%q", t.name, id))
			continue
		}
		for i, c := range t.cols {
			raw, ok := d.source[c.name]
			if !ok {
				out = append(out, fmt.Sprintf("%s: missing_field _id=%q column=%s", t.name, id, c.name))
			} else if why := fieldDiff(c.kind, vals[i], raw); why != "" {
				out = append(out, fmt.Sprintf("%s: field_value _id=%q column=%s: %s", t.name, id, c.name, why))
			}
		}
		if len(d.source) != len(t.cols) {
			out = append(out, fmt.Sprintf("%s: extra_fields _id=%q (%d fields for %d columns)", t.name, id, len(d.source), len(t.cols)))
		}
	}
	for id := range docs {
		if _, ok := rows[id]; !ok {
			out = append(out, fmt.Sprintf("%s: extra_document _id=%q", t.name, id))
		}
	}
	sort.Strings(out)
	return out
}

// fieldDiff compares one field with the source's text of its value ("" when equal); the
// values are the test's own, never a user's.
func fieldDiff(k kind, sql *string, raw json.RawMessage) string {
	got := string(raw)
	if sql == nil || got == "null" {
		if sql == nil && got == "null" {
			return ""
		}
		return "null on one side only"
	}
	want := *sql
	switch k {
	case kInt:
		if got != want {
			return fmt.Sprintf("want number %s, got %s", want, got)
		}
	case kBool:
		b, err := strconv.ParseBool(want)
		if err != nil || got != strconv.FormatBool(b) {
			return fmt.Sprintf("want %s, got %s", want, got)
		}
	case kFloat:
		w, err1 := strconv.ParseFloat(want, 64)
		g, err2 := strconv.ParseFloat(got, 64)
		if err1 != nil || err2 != nil || w != g {
			return fmt.Sprintf("want number %s, got %s", want, got)
		}
	default:
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "want a string, got " + got
		}
		if k == kTime {
			want = trimFrac(want)
		}
		if s != want {
			return fmt.Sprintf("want %q, got %q", want, s)
		}
	}
	return ""
}

// trimFrac drops trailing zeros of a fractional second, and the dot when nothing is left.
func trimFrac(s string) string {
	dot := strings.LastIndexByte(s, '.')
	if dot < 0 {
		return s
	}
	f := strings.TrimRight(s[dot+1:], "0")
	if f == "" {
		return s[:dot]
	}
	return s[:dot+1] + f
}
