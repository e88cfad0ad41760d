package faultsuite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The write load: a few writers, each on a connection of its own straight to the source
// server, each committing a small transaction (one to three statements: inserts, updates of
// random columns, key changes, deletes, on both tables) every loadInterval. Every writer
// owns its keys (its own id range and tenants), so writers never wait for each other. The
// expected state is the source itself: the comparison reads it back, so a commit whose answer
// was lost in a fault costs nothing. Inserts are upserts for the same reason.

const (
	loadWriters  = 3
	loadInterval = 100 * time.Millisecond
	// liveCap is the number of rows per writer and table above which deletes win over
	// inserts: it bounds the tables at a few hundred rows.
	liveCap = 40
)

type load struct {
	db      sourceDB
	tables  []*tableDef
	writers []*writer
	stop    chan struct{}
	wg      sync.WaitGroup

	commits, failures atomic.Int64
}

// writer is one writer's view of its rows: hints for picking rows to change, right as long as
// every commit's answer arrived (and harmless when one did not).
type writer struct {
	n       int // 1-based
	r       *rand.Rand
	items   []int64 // ids of its rows in items
	events  []int64 // seq of its rows in events (tenant tenantFor(n))
	nextKey int64
}

func newLoad(db sourceDB, tables []*tableDef, seed uint64) *load {
	l := &load{db: db, tables: tables, stop: make(chan struct{})}
	for i := range loadWriters {
		l.writers = append(l.writers, &writer{n: i + 1, r: rand.New(rand.NewPCG(seed, uint64(i+1)))})
	}
	return l
}

// seed inserts n rows per writer and table before the pipeline starts: what its snapshot reads.
func (l *load) seed(ctx context.Context, n int) error {
	for _, w := range l.writers {
		var stmts []string
		next := *w
		for range n {
			stmts = append(stmts, next.insert(l.db, l.tables[0]), next.insert(l.db, l.tables[1]))
		}
		if err := l.db.exec(ctx, stmts...); err != nil {
			return fmt.Errorf("seeding the tables: %w", err)
		}
		*w = next
	}
	return nil
}

// start runs the writers until Stop.
func (l *load) start(ctx context.Context) {
	for _, w := range l.writers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.run(ctx, w)
		}()
	}
}

// Stop stops the writers and waits for them: every transaction has committed or failed.
func (l *load) Stop() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

func (l *load) run(ctx context.Context, w *writer) {
	var c txConn
	defer func() {
		if c != nil {
			c.close()
		}
	}()
	tick := time.NewTicker(loadInterval)
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if c == nil {
			dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			var err error
			c, err = l.db.dial(dctx)
			cancel()
			if err != nil {
				l.failures.Add(1)
				c = nil
				continue
			}
		}
		next := *w
		next.items, next.events = slices.Clone(w.items), slices.Clone(w.events)
		stmts := make([]string, 1+w.r.IntN(3))
		for i := range stmts {
			stmts[i] = next.change(l.db, l.tables)
		}
		tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := c.tx(tctx, stmts)
		cancel()
		if err != nil {
			// A fault: the connection is likely gone. Whether the commit happened is read
			// back from the source at the end; the hints stay as they were.
			l.failures.Add(1)
			c.close()
			c = nil
			w.nextKey = next.nextKey // keys are never reused: the commit may have happened
			continue
		}
		l.commits.Add(1)
		*w = next
	}
}

// change is one statement on a table drawn at random.
func (w *writer) change(db sourceDB, tables []*tableDef) string {
	t := tables[w.r.IntN(len(tables))]
	live := &w.items
	if t.nKey == 2 {
		live = &w.events
	}
	n := len(*live)
	switch op := w.r.IntN(10); {
	case n == 0, n < liveCap && op < 4, op < 1:
		return w.insert(db, t)
	case op < 7:
		return w.update(db, t, live)
	case op < 8:
		return w.changeKey(db, t, live)
	}
	return w.delete(db, t, live)
}

func (w *writer) newKey() int64 {
	w.nextKey++
	return int64(w.n)*100_000_000 + w.nextKey // within integer (seq) for a few writers
}

// keyValues are the key column values of the row key of t.
func (w *writer) keyValues(t *tableDef, key int64) []value {
	if t.nKey == 1 {
		return []value{{s: strconv.FormatInt(key, 10)}}
	}
	return []value{{s: tenantFor(w.n)}, {s: strconv.FormatInt(key, 10)}}
}

func (w *writer) where(db sourceDB, t *tableDef, key int64) string {
	kv := w.keyValues(t, key)
	conds := make([]string, len(kv))
	for i, c := range t.keyCols() {
		conds[i] = db.quote(c.name) + " = " + db.lit(c.kind, kv[i])
	}
	return strings.Join(conds, " AND ")
}

func (w *writer) insert(db sourceDB, t *tableDef) string {
	key := w.newKey()
	vals := w.keyValues(t, key)
	for _, c := range t.cols[t.nKey:] {
		vals = append(vals, genValue(w.r, c))
	}
	if t.nKey == 1 {
		w.items = append(w.items, key)
	} else {
		w.events = append(w.events, key)
	}
	return db.upsert(t, vals)
}

func (w *writer) update(db sourceDB, t *tableDef, live *[]int64) string {
	key := (*live)[w.r.IntN(len(*live))]
	cols := t.cols[t.nKey:]
	n := 1 + w.r.IntN(len(cols))
	var sets []string
	for _, i := range w.r.Perm(len(cols))[:n] {
		sets = append(sets, db.quote(cols[i].name)+" = "+db.lit(cols[i].kind, genValue(w.r, cols[i])))
	}
	return fmt.Sprintf("UPDATE %s SET %s WHERE %s", db.quote(t.name), strings.Join(sets, ", "), w.where(db, t, key))
}

// changeKey moves a row to a new key (the last key column): the sink deletes the old _id.
func (w *writer) changeKey(db sourceDB, t *tableDef, live *[]int64) string {
	i := w.r.IntN(len(*live))
	old, key := (*live)[i], w.newKey()
	(*live)[i] = key
	c := t.cols[t.nKey-1]
	return fmt.Sprintf("UPDATE %s SET %s = %s WHERE %s", db.quote(t.name), db.quote(c.name),
		db.lit(c.kind, value{s: strconv.FormatInt(key, 10)}), w.where(db, t, old))
}

func (w *writer) delete(db sourceDB, t *tableDef, live *[]int64) string {
	i := w.r.IntN(len(*live))
	key := (*live)[i]
	*live = slices.Delete(*live, i, i+1)
	return fmt.Sprintf("DELETE FROM %s WHERE %s", db.quote(t.name), w.where(db, t, key))
}
