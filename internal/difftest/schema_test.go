package difftest

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	crand "crypto/rand"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/mysqlcdc"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/sink"
	"github.com/tributary-dev/tributary/statestore"
)

// The schema cases: random RENAME, DROP, CREATE, moves out of and into the capture, TRUNCATE,
// ADD COLUMN and ALTER TYPE between random transactions, on a namespace captured whole (a
// PostgreSQL schema, a MariaDB database) and one outside the capture, with the rule for schema
// events (schemaModel) as the oracle. See doc.go, "Schema cases".

// envSchemaCases is the number of schema cases TestDifferential runs (default
// defaultSchemaCases).
const envSchemaCases = "TRIBUTARY_DIFF_SCHEMA_CASES"

// envSchemaOpen, set to 1, makes the schema cases draw the operations of the open findings too
// (openFindings); `make differential` sets it.
const envSchemaOpen = "TRIBUTARY_DIFF_SCHEMA_OPEN"

// openFindings are the sequences of schema operations whose outcome the cases found to differ
// from the rule, reported and not fixed yet. Without envSchemaOpen the generator avoids them,
// so that the bounded run of `make check` guards everything else; each entry goes once fixed.
//
//   - dropAfterWrite (cdc/pgcdc): the changes of a REPLICA IDENTITY FULL table dropped before
//     the stream decoded them. They are loud since c6f4d30 (a dead letter "malformed: pgcdc:
//     the table was dropped before its changes were read and its primary key is unknown",
//     pgcdc.ErrKeyUnknown, no _id), but the oracle cannot tie those dead letters to rows yet,
//     and seed 2004 (open) shows such a dead letter for a relation whose key the snapshot had
//     read. On MariaDB (cdc/mysqlcdc, seed 2533818254745, open) rows of a relation renamed in
//     from an uncaptured name and dropped before the stream decoded them were rebuilt from the
//     table map alone, which cannot tell JSON from LONGTEXT nor INET4 from BINARY(4), with no
//     dead letter; since they go out malformed (mysqlcdc.ErrAmbiguousType), which the oracle
//     allows (ambiguous_type). Avoided: a DROP waits until the stream has applied every
//     earlier change.
//
// Fixed and drawn again: movedBack (cdc/mysqlcdc 6c47a9a; cdc/pgcdc c6f4d30 for the way back
// under its own name, seed 403290697438), vacatedName (sink 72d4e47; on MariaDB the catalog
// load under RENAME c78974a and the descriptions of rows read from behind renames 7f807e2,
// seed 1128666499977).
var openFindings = map[string]bool{"dropAfterWrite": true}

// defaultSchemaCases is the bounded run of `make check`: 8, every source and engine pair twice
// (seeds seed..seed+7; a case takes seconds, one that fails waits up to its bounds, minutes).
// More with TRIBUTARY_DIFF_SCHEMA_CASES=n, or `make differential` (40, open findings included).
const defaultSchemaCases = 8

// schemaDialect is a dialect's DDL for the schema cases.
type schemaDialect interface {
	dialect
	createNS(ns string) []string
	// created returns what follows a table's creation: PostgreSQL names its primary key's
	// index uniquely (n), since an index name travels with a table moved to another schema.
	created(qt string, ns, table string, n int) []string
	dropNS(ns string) []string
	qualify(ns, table string) string
	// move renames a table, within its namespace or into another (one transaction).
	move(fromNS, from, toNS, to string) []string
	addColumn(qt string, c *column) string
	alterType(qt string, c *column, sql string) string
	truncate(qt string) string
	// widen returns the wider signed integer types an integer column type can be altered to.
	widen(sql string) []string
	intType(sql string) *colType
	patternSource(t *testing.T, ns, sfx string) (cdc.Source, error)
}

// Names a case's relations take: a small pool, so that renames and re-creations meet names
// that had tables before.
var schemaNames = []string{"ta", "tb", "tc", "td"}

// schemaCase is one running schema case.
type schemaCase struct {
	t     *testing.T
	r     *rand.Rand
	d     schemaDialect
	ci    caseInfo
	ns    [2]string // nsCaptured, nsOutside
	sfx   string
	m     *schemaModel
	ops   []string // the schema operations, for the failure report
	ctx   context.Context
	index func(name string) string
	// open: draw the operations of openFindings too (envSchemaOpen).
	open bool
	// sync waits until the stream has applied every change made so far.
	sync func()
	hook *enteredHook
	// truncated: the captured names a TRUNCATE emptied.
	truncated map[string]bool
}

// avoids reports whether the case leaves out the operations of an open finding.
func (c *schemaCase) avoids(finding string) bool { return openFindings[finding] && !c.open }

func (c *schemaCase) exec(stmts ...string) {
	c.t.Helper()
	if os.Getenv("TRIBUTARY_DIFF_VERBOSE") != "" {
		for _, q := range stmts {
			c.t.Logf("statement: %s", short(q))
		}
	}
	if err := c.d.execTx(c.ctx, stmts...); err != nil {
		c.t.Fatalf("%s: %v (operations so far: %s)", c.ci, err, strings.Join(c.ops, "; "))
	}
}

func (c *schemaCase) op(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	c.ops = append(c.ops, s)
	c.t.Logf("%s: schema operation %d: %s", c.ci, len(c.ops), s)
}

// newTable draws a table for the case: genTable's, without the types that need objects of
// their own (enum types, domains), named name in ns.
func (c *schemaCase) newTable(ns int, name string) *table {
	tb := genTable(c.r, c.d, c.sfx)
	kept := tb.cols[:0]
	for _, col := range tb.cols {
		if len(col.t.setup) == 0 {
			kept = append(kept, col)
		}
	}
	tb.cols = kept
	tb.tbl, tb.qual = name, c.d.qualify(c.ns[ns], name)
	return tb
}

// freeName returns a name no relation of ns bears, "" when every one is taken.
func (c *schemaCase) freeName(ns int) string {
	var free []string
	for _, n := range schemaNames {
		if c.m.at(ns, n) == nil {
			free = append(free, n)
		}
	}
	if len(free) == 0 {
		return ""
	}
	return pick(c.r, free...)
}

// readBack reads a relation's rows as the oracle needs them.
func (c *schemaCase) readBack(rl *rel) [][]*string {
	c.t.Helper()
	rows, err := c.d.readBack(c.ctx, rl.tb.ref(c.d), rl.tb.cols)
	if err != nil {
		c.t.Fatalf("%s: reading %s back: %v", c.ci, rl.tb.ref(c.d), err)
	}
	return rows
}

// touch writes to a relation that came to bear a captured name, so that the source carries its
// new name (and identity) before anything else happens to it: a transaction with an insert.
func (c *schemaCase) touch(rl *rel) {
	stmts := append([]string{rl.tb.insert(c.r, c.d)}, rl.tb.transaction(c.r, c.d)...)
	c.exec(stmts...)
}

// place sets a relation's table's SQL name after a move.
func (c *schemaCase) place(rl *rel) {
	rl.tb.tbl, rl.tb.qual = rl.name, c.d.qualify(c.ns[rl.ns], rl.name)
}

// step runs one random step: a transaction (mostly) or a schema operation.
func (c *schemaCase) step() {
	r := c.r
	in, out := c.m.live(nsCaptured), c.m.live(nsOutside)
	anyRel := func() *rel {
		all := append(append([]*rel(nil), in...), out...)
		if len(all) == 0 {
			return nil
		}
		return pick(r, all...)
	}
	switch p := r.IntN(100); {
	case p < 45 && len(in) > 0:
		rl := pick(r, in...)
		c.exec(rl.tb.transaction(r, c.d)...)
	case p < 50 && len(out) > 0:
		// Changes outside the capture: a relation that comes back must bring them.
		rl := pick(r, out...)
		c.exec(rl.tb.transaction(r, c.d)...)
	case p < 60:
		ns := nsCaptured
		if chance(r, 0.3) {
			ns = nsOutside
		}
		name := c.freeName(ns)
		if name == "" {
			return
		}
		tb := c.newTable(ns, name)
		create, _ := c.d.createTable(r, tb.ref(c.d), tb.cols)
		c.op("CREATE %s", tb.ref(c.d))
		c.exec(append(create, c.d.created(tb.ref(c.d), c.ns[ns], name, len(c.m.rels))...)...)
		var rows []string
		for range r.IntN(6) {
			rows = append(rows, tb.insert(r, c.d))
		}
		if len(rows) > 0 {
			c.exec(rows...)
		}
		rl := c.m.create(ns, name, tb)
		if ns == nsCaptured {
			c.touch(rl)
		}
	case p < 66 && len(in)+len(out) > 0:
		rl := anyRel()
		c.op("DROP %s", rl.tb.ref(c.d))
		var rows [][]*string
		if rl.ns == nsCaptured {
			rows = c.readBack(rl)
			if c.avoids("dropAfterWrite") {
				c.sync()
			}
		}
		c.exec(c.d.dropTable(rl.tb.ref(c.d))...)
		c.m.drop(rl, rows)
	case p < 74 && len(in) > 0:
		c.moveTo(pick(r, in...), nsCaptured)
	case p < 80 && len(in) > 0:
		c.moveTo(pick(r, in...), nsOutside)
	case p < 86 && len(out) > 0:
		c.moveTo(pick(r, out...), nsCaptured)
	case p < 90 && len(in) > 0:
		rl := pick(r, in...)
		c.op("TRUNCATE %s", rl.tb.ref(c.d))
		if c.truncated == nil {
			c.truncated = map[string]bool{}
		}
		c.truncated[rl.name] = true
		c.exec(c.d.truncate(rl.tb.ref(c.d)))
		rl.tb.rows = nil
	case p < 95 && len(in)+len(out) > 0:
		rl := anyRel()
		tb := rl.tb
		var ct *colType
		for ct == nil || len(ct.setup) > 0 {
			extra := genTable(r, c.d, c.sfx) // a column type as genTable draws them
			ct = extra.cols[len(extra.cols)-1].t
		}
		tb.clock++
		col := &column{name: fmt.Sprintf("a%d_%s", tb.clock, typeWord(ct.sql)), t: ct, addedAt: tb.clock}
		c.op("ADD COLUMN %s %s to %s", col.name, ct.sql, tb.ref(c.d))
		c.exec(c.d.addColumn(tb.ref(c.d), col))
		tb.cols = append(tb.cols, col)
	case len(in)+len(out) > 0:
		rl := anyRel()
		var cands []*column
		for _, col := range rl.tb.cols {
			if !col.key && col.t.fam == famInt && len(c.d.widen(col.t.sql)) > 0 {
				cands = append(cands, col)
			}
		}
		if len(cands) == 0 {
			return
		}
		col := pick(r, cands...)
		to := pick(r, c.d.widen(col.t.sql)...)
		c.op("ALTER TYPE %s.%s %s -> %s", rl.tb.ref(c.d), col.name, col.t.sql, to)
		c.exec(c.d.alterType(rl.tb.ref(c.d), col, to))
		if col.fieldBits == 0 {
			col.fieldBits = c.d.intType(col.t.sql).bits
		}
		col.t = c.d.intType(to)
	}
}

// moveTo renames rl to a free name of ns (a rename within the captured namespace, a move out
// of it or into it).
func (c *schemaCase) moveTo(rl *rel, ns int) {
	name := c.freeName(ns)
	if name == "" || ns == rl.ns && name == rl.name {
		return
	}
	from := rl.tb.ref(c.d)
	var rows [][]*string
	if rl.ns == nsCaptured {
		rows = c.readBack(rl)
	}
	c.op("RENAME %s TO %s", from, c.d.qualify(c.ns[ns], name))
	c.exec(c.d.move(c.ns[rl.ns], rl.name, c.ns[ns], name)...)
	c.m.move(rl, ns, name, rows)
	c.place(rl)
	if ns == nsCaptured {
		c.touch(rl)
	}
}

// runSchemaCase runs one seeded schema case.
func runSchemaCase(t *testing.T, seed uint64, tl *tally) {
	r := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
	d0, node, ci := caseSetup(t, r, seed)
	d := d0.(schemaDialect)
	sfx := fmt.Sprintf("%x", r.Uint64()&(1<<40-1))
	c := &schemaCase{t: t, r: r, d: d, ci: ci, sfx: sfx, m: newSchemaModel(),
		ns: [2]string{"g32d_" + sfx, "g32x_" + sfx}}
	c.open = os.Getenv(envSchemaOpen) == "1"
	c.ci.note = "schema case"
	if c.open {
		c.ci.note = "schema case, open findings included"
	}
	prefix := "g32d-" + sfx
	node.DeleteAtCleanup(t, prefix+"*")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c.ctx = ctx
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, ns := range c.ns {
			if err := d.exec(ctx, d.dropNS(ns)...); err != nil {
				t.Errorf("dropping %s: %v", ns, err)
			}
		}
	})
	for _, ns := range c.ns {
		c.exec(d.createNS(ns)...)
	}

	// The tables there are when the pipeline starts, and their rows.
	nSnap := 0
	for range 1 + r.IntN(3) {
		ns := nsCaptured
		if chance(r, 0.25) {
			ns = nsOutside
		}
		name := c.freeName(ns)
		tb := c.newTable(ns, name)
		create, _ := d.createTable(r, tb.ref(d), tb.cols)
		c.op("CREATE %s", tb.ref(d))
		c.exec(append(create, d.created(tb.ref(d), c.ns[ns], name, len(c.m.rels))...)...)
		n := r.IntN(8)
		for range n {
			c.exec(tb.insert(r, d))
		}
		if ns == nsCaptured {
			nSnap += n
		}
		c.m.create(ns, name, tb)
	}

	// The sentinel: a captured table no operation touches, whose marker row is the last
	// change of the case (a name outside the pool).
	sentinel := c.newTable(nsCaptured, "tz")
	create, _ := d.createTable(r, sentinel.ref(d), sentinel.cols)
	c.exec(create...)

	src, err := d.patternSource(t, c.ns[nsCaptured], sfx)
	if err != nil {
		t.Fatalf("%s: source: %v", ci, err)
	}
	st := statestore.NewMemory()
	cfg := sink.Config{ID: "g32diff", URL: node.URL, Index: prefix + "-{table}", Auth: sink.Auth{Type: sink.AuthNone},
		Shards: 1, Replicas: estest.Ptr(0),
		Mapping: sink.MappingConfig{Decimal: ci.opts.decimal, Uint64: ci.opts.uint64, JSON: ci.opts.json}}
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	hook := &enteredHook{t: t, ctx: runCtx, src: src}
	c.hook = hook
	k, err := sink.New(cfg, "g32diff-"+sfx, st, &sink.Options{ItemRetryBackoff: time.Millisecond, OnEntered: hook.onEntered})
	if err != nil {
		t.Fatalf("%s: sink: %v", ci, err)
	}
	defer k.Close()
	c.index = func(name string) string {
		ix, err := sink.IndexName(cfg.Index, cdc.TableID{Table: name})
		if err != nil {
			t.Fatal(err)
		}
		return ix
	}
	dlq := &memDLQ{}
	hist := newHistorySink(k)
	runner, err := cdc.NewRunner("g32diff-"+sfx, src, hist, st, dlq, &cdc.RunnerOptions{BatchMaxEvents: pick(r, 1, 7, 50, 1000), BatchMaxWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var runErr error
	go func() {
		defer close(done)
		if err := runner.Run(runCtx); err != nil && !errors.Is(err, context.Canceled) {
			runErr = err
		}
	}()
	stop := func() {
		stopRun()
		<-done
		hook.wg.Wait()
	}
	defer stop()

	waitFor(t, ci, done, &runErr, "the snapshot", func() bool { return runner.Progress().Events >= int64(nSnap) })
	c.sync = func() {
		lit, id := sentinel.marker(d)
		c.exec(lit)
		waitFor(t, ci, done, &runErr, "a sentinel marker row", func() bool {
			docs, err := node.Mget(t, c.index(sentinel.tbl), []string{id})
			return err == nil && len(docs) == 1 && docs[0].Found
		})
	}
	// The steps start once the pipeline's snapshot is taken: with no captured rows at the
	// start (nSnap 0) the wait above passes at once, and a table created and moved out before
	// the snapshot's consistent point was never seen by the pipeline, as the rule has it, but
	// the model would expect its index frozen with its rows (seed 11907078250).
	c.sync()
	for range 8 + r.IntN(12) {
		c.step()
	}
	// The last changes: a marker row in every captured table. Once each one's document is
	// there, nothing is pending and no re-snapshot runs, everything before was applied.
	markers := map[string]string{}
	for _, rl := range c.m.live(nsCaptured) {
		lit, id := rl.tb.marker(d)
		c.exec(lit)
		markers[rl.name] = id
	}
	lit, id := sentinel.marker(d)
	c.exec(lit)
	markers[sentinel.tbl] = id
	waitFor(t, ci, done, &runErr, "the marker rows", func() bool {
		for name, id := range markers {
			docs, err := node.Mget(t, c.index(name), []string{id})
			if err != nil || len(docs) != 1 || !docs[0].Found {
				return false
			}
		}
		p := runner.Progress()
		return p.Pending == 0 && !p.Resnapshot.Active
	})
	// Re-snapshots requested late may still be under way: compare until the indices agree with
	// the rule or a generous bound passes, then once more with the pipeline stopped.
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		if len(c.compare(node, dlq.records(), hist)) == 0 {
			break
		}
		select {
		case <-done:
			deadline = time.Now()
		case <-time.After(time.Second):
		}
	}
	stop()
	if runErr != nil {
		t.Errorf("%s: the pipeline stopped: %v", ci, runErr)
	}
	fails := c.compare(node, dlq.records(), hist)
	var states []string
	for _, name := range c.m.names() {
		ix := c.m.idx[name]
		n := 0
		switch ix.state {
		case idxLive:
			n = len(ix.bound.tb.rows)
		case idxFrozen:
			n = len(ix.frozen.rows)
		}
		states = append(states, fmt.Sprintf("%s %s (%d rows)", name, ix.state, n))
	}
	t.Logf("%s: compared %s, %d dead letters, %d schema operations", ci, strings.Join(states, ", "), len(dlq.records()), len(c.ops))
	rows := c.readBack(&rel{tb: sentinel})
	ci.table = sentinel.tbl
	fails = append(fails, compareDocs(t, d, ci, sentinel, rows, searchDocs(t, node, c.index(sentinel.tbl)), deadLettersOf(dlq.records(), c.ns[nsCaptured], sentinel.tbl), hist)...)
	entered, errs := hook.report()
	for _, e := range errs {
		// A request for a table that has left its name since (renamed, dropped) is refused:
		// whether a row is missing for it is the comparison's to say.
		t.Logf("%s: ENTERED: %s", ci, e)
	}
	if len(fails) > 0 {
		t.Logf("%s: schema operations: %s; ENTERED reports: %s", ci, strings.Join(c.ops, "; "), strings.Join(entered, ", "))
		for _, s := range hist.schemaTrace() {
			t.Logf("%s: source's description: %s", ci, s)
		}
	}
	tl.add(t, c.ci, fails)
}

// compare checks every captured name's index against the rule: the table bearing the name now
// row by row, the rows its relation had when it left, or nothing.
func (c *schemaCase) compare(node *estest.Node, dead []cdc.DeadLetterRecord, hist *historySink) []failure {
	var fails []failure
	for _, name := range c.m.names() {
		ix := c.m.idx[name]
		docs := searchDocs(c.t, node, c.index(name))
		ci := c.ci
		ci.table = name + " (" + ix.state.String() + ")"
		ci.emptied = c.truncated[name] || c.hook.wasEntered(name)
		for _, r := range ix.bore {
			ci.bore = append(ci.bore, r.tb)
		}
		var fs []failure
		switch ix.state {
		case idxLive:
			rl := ix.bound
			fs = compareDocs(c.t, c.d, ci, rl.tb, c.readBack(rl), docs, deadLettersOf(dead, c.ns[nsCaptured], name), hist)
		case idxFrozen:
			fs = compareDocs(c.t, c.d, ci, ix.frozen.tb, ix.frozen.rows, docs, deadLettersOf(dead, c.ns[nsCaptured], name), hist)
			if c.hook.wasRefused(name) {
				// The relation entered the name and left it (DROP, moved out) before its
				// re-snapshot ran: the request was refused, loudly (mirror lists the table
				// Incomplete, health table_incomplete), and the rows it would have brought are
				// missing -- the rule's "a loud refusal" -- and so are the dead letters it would
				// have given the rows a documented rule refuses (seed 18263019606, open mode:
				// rows with a top-level JSON scalar under flattened, dead-lettered under the
				// name the relation had before). Every document there must still be right.
				fs = slices.DeleteFunc(fs, func(f failure) bool { return f.kind == "missing_document" || f.kind == "missing_dead_letter" })
			} else if ix.enteredAt > 0 {
				// The relation came to the name by a rename or move and left it again: its
				// rows written before it came reach the index only through the ENTERED
				// re-snapshot, and a request accepted just before the relation left finds the
				// table gone when the job reads it (pgcdc: Warn "re-snapshot skips a table that
				// no longer exists"; seed 24575896760, check mode). Those rows may be missing,
				// as with a refused request; the rows written since must be there.
				fs = slices.DeleteFunc(fs, func(f failure) bool {
					return (f.kind == "missing_document" || f.kind == "missing_dead_letter") && ix.frozen.tb.written[f.id] <= ix.enteredAt
				})
			}
		case idxEmpty:
			for id := range docs {
				fs = append(fs, failure{kind: "not_vacated", id: id, detail: "a document in the index of a name whose relation moved to another captured name"})
			}
		}
		for i := range fs {
			fs[i].id = name + ":" + fs[i].id
		}
		fails = append(fails, fs...)
	}
	return fails
}

// deadLettersOf returns the dead letters of the table name of the captured namespace ns.
func deadLettersOf(dead []cdc.DeadLetterRecord, ns, name string) []cdc.DeadLetterRecord {
	var out []cdc.DeadLetterRecord
	for _, rec := range dead {
		tid := rec.Event.Table
		if tid.Table == name && (tid.Schema == ns || tid.Database == ns) {
			out = append(out, rec)
		}
	}
	return out
}

// searchDocs is searchAll for an index that may not exist (no documents then).
func searchDocs(t *testing.T, node *estest.Node, index string) map[string]json.RawMessage {
	t.Helper()
	if res := node.Do(t, esapi.IndicesRefreshRequest{Index: []string{index}}); res.Status == http.StatusNotFound {
		return map[string]json.RawMessage{}
	}
	return searchAll(t, node, index)
}

// PostgreSQL's schema DDL.

func (p postgres) createNS(ns string) []string { return []string{"CREATE SCHEMA " + p.quote(ns)} }
func (p postgres) created(qt, ns, table string, n int) []string {
	return []string{"ALTER INDEX " + p.qualify(ns, table+"_pkey") + " RENAME TO " + p.quote(fmt.Sprintf("g32pk_%d", n))}
}
func (p postgres) dropNS(ns string) []string {
	return []string{"DROP SCHEMA IF EXISTS " + p.quote(ns) + " CASCADE"}
}
func (p postgres) qualify(ns, table string) string { return p.quote(ns) + "." + p.quote(table) }

// move renames through a name no case uses, so that neither namespace's names meet midway
// (one transaction: nothing in between is visible).
func (p postgres) move(fromNS, from, toNS, to string) []string {
	if fromNS == toNS {
		return []string{"ALTER TABLE " + p.qualify(fromNS, from) + " RENAME TO " + p.quote(to)}
	}
	return []string{
		"ALTER TABLE " + p.qualify(fromNS, from) + " RENAME TO g32_moving",
		"ALTER TABLE " + p.qualify(fromNS, "g32_moving") + " SET SCHEMA " + p.quote(toNS),
		"ALTER TABLE " + p.qualify(toNS, "g32_moving") + " RENAME TO " + p.quote(to),
	}
}
func (p postgres) addColumn(qt string, c *column) string {
	return "ALTER TABLE " + qt + " ADD COLUMN " + p.quote(c.name) + " " + c.t.sql
}
func (p postgres) alterType(qt string, c *column, sql string) string {
	return "ALTER TABLE " + qt + " ALTER COLUMN " + p.quote(c.name) + " TYPE " + sql
}
func (p postgres) truncate(qt string) string { return "TRUNCATE TABLE " + qt }
func (postgres) widen(sql string) []string {
	switch sql {
	case "smallint":
		return []string{"integer", "bigint"}
	case "integer":
		return []string{"bigint"}
	}
	return nil
}
func (postgres) intType(sql string) *colType {
	bits := map[string]int{"smallint": 16, "integer": 32, "bigint": 64}[sql]
	return signedIntType(sql, bits)
}
func (p postgres) patternSource(t *testing.T, ns, sfx string) (cdc.Source, error) {
	name := "g32d_" + sfx
	src, err := pgcdc.New(p.dsn, &pgcdc.Options{Name: "g32diff", Slot: name, Publication: name,
		Tables: []pgcdc.Table{{Schema: ns, Name: pgcdc.AllTables}}, StatusInterval: 200 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := src.Drop(ctx); err != nil {
			t.Errorf("drop slot and publication %s: %v", name, err)
		}
	})
	return src, nil
}

// MariaDB's schema DDL.

func (m mariadb) createNS(ns string) []string                { return []string{"CREATE DATABASE " + m.quote(ns)} }
func (mariadb) created(string, string, string, int) []string { return nil }
func (m mariadb) dropNS(ns string) []string {
	return []string{"DROP DATABASE IF EXISTS " + m.quote(ns)}
}
func (m mariadb) qualify(ns, table string) string { return m.quote(ns) + "." + m.quote(table) }
func (m mariadb) move(fromNS, from, toNS, to string) []string {
	return []string{"RENAME TABLE " + m.qualify(fromNS, from) + " TO " + m.qualify(toNS, to)}
}
func (m mariadb) addColumn(qt string, c *column) string {
	return "ALTER TABLE " + qt + " ADD COLUMN " + m.quote(c.name) + " " + c.t.sql
}
func (m mariadb) alterType(qt string, c *column, sql string) string {
	return "ALTER TABLE " + qt + " MODIFY COLUMN " + m.quote(c.name) + " " + sql
}
func (m mariadb) truncate(qt string) string { return "TRUNCATE TABLE " + qt }
func (mariadb) widen(sql string) []string {
	order := []string{"TINYINT", "SMALLINT", "MEDIUMINT", "INT", "BIGINT"}
	for i, s := range order {
		if s == sql {
			return order[i+1:]
		}
	}
	return nil
}
func (mariadb) intType(sql string) *colType {
	bits := map[string]int{"TINYINT": 8, "SMALLINT": 16, "MEDIUMINT": 24, "INT": 32, "BIGINT": 64}[sql]
	return signedIntType(sql, bits)
}
func (m mariadb) patternSource(t *testing.T, ns, _ string) (cdc.Source, error) {
	var b [4]byte
	_, _ = crand.Read(b[:])
	return mysqlcdc.New(m.addr, m.user, m.pass, []mysqlcdc.TableName{{Database: ns, Table: mysqlcdc.AllTables}},
		&mysqlcdc.Options{SourceName: "g32diff", ServerID: 1<<24 + binary.BigEndian.Uint32(b[:])%(1<<30)})
}

// enteredHook re-snapshots the tables the sink reports ENTERED, as package mirror does
// (mirror/schemaevents.go): each report becomes a background cdc.Resnapshotter request, tried
// again while it fails for a reason that may pass.
type enteredHook struct {
	t   *testing.T
	ctx context.Context
	src cdc.Source
	wg  sync.WaitGroup

	mu      sync.Mutex
	entered []string // "table (cause)" per report, in order
	errs    []string // requests that failed for good (logged)
	refused map[string]bool
}

func (h *enteredHook) onEntered(e sink.TableEntered) {
	h.mu.Lock()
	h.entered = append(h.entered, fmt.Sprintf("%s (%s)", e.Table.Table, e.Cause))
	h.mu.Unlock()
	h.wg.Go(func() {
		rs, ok := h.src.(cdc.Resnapshotter)
		if !ok {
			h.fail(e.Table.Table + ": the source cannot re-snapshot")
			return
		}
		tbl := e.Table.Database + "." + e.Table.Table
		if e.Table.Schema != "" {
			tbl = e.Table.Schema + "." + e.Table.Table
		}
		for attempt := 1; ; attempt++ {
			_, err := rs.Resnapshot(h.ctx, cdc.ResnapshotRequest{Tables: []string{tbl}})
			switch {
			case err == nil || h.ctx.Err() != nil:
				return
			case errors.Is(err, cdc.ErrResnapshotRefused) || attempt == 20:
				h.fail(e.Table.Table + ": re-snapshot request: " + err.Error())
				h.mu.Lock()
				if h.refused == nil {
					h.refused = map[string]bool{}
				}
				h.refused[e.Table.Table] = true
				h.mu.Unlock()
				return
			}
			select {
			case <-h.ctx.Done():
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	})
}

func (h *enteredHook) fail(s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.errs = append(h.errs, s)
}

// wasEntered reports whether name's index was reported ENTERED.
func (h *enteredHook) wasEntered(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.ContainsFunc(h.entered, func(e string) bool { return strings.HasPrefix(e, name+" (") })
}

// wasRefused reports whether a re-snapshot request for name was refused.
func (h *enteredHook) wasRefused(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.refused[name]
}

func (h *enteredHook) report() (entered, errs []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.entered), slices.Clone(h.errs)
}

// signedIntType is a signed integer column type of the given width: random values of its
// whole range and its extremes.
func signedIntType(sql string, bits int) *colType {
	lo, hi := int64(-1)<<(bits-1), int64(1)<<(bits-1)-1
	if bits == 64 {
		lo, hi = -1<<63, 1<<63-1
	}
	return &colType{sql: sql, fam: famInt, bits: bits, gen: func(r *rand.Rand) string {
		if chance(r, 0.3) {
			return pick(r, strconv.FormatInt(lo, 10), strconv.FormatInt(hi, 10), "0")
		}
		return strconv.FormatInt(lo+int64(r.Uint64N(uint64(hi-lo))), 10)
	}}
}
