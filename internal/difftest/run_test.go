package difftest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/sink"
	"github.com/tributary-dev/tributary/statestore"
)

// Environment variables of the differential test.
const (
	// envCases is the number of cases to run (default defaultCases).
	envCases = "TRIBUTARY_DIFF_CASES"
	// envSeed is the first case's seed (default: random); case i runs seed+i. A failure
	// prints its case's seed: TRIBUTARY_DIFF_SEED=<seed> TRIBUTARY_DIFF_CASES=1 repeats it.
	envSeed = "TRIBUTARY_DIFF_SEED"
)

// defaultCases is the bounded run of `make check`: seeds seed..seed+23 take every source and
// engine pair (the seed's low two bits choose them) six times.
const defaultCases = 24

// dialect is one source database as the test drives and reads it.
type dialect interface {
	name() string
	quote(string) string
	keyTypes() []keyType
	keyLiteral(k keyType, v string) string
	// createTable, dropTable and readBack take the table's quoted (perhaps qualified) name.
	createTable(r *rand.Rand, qt string, cols []*column) (stmts []string, note string)
	dropTable(qt string) []string
	exec(ctx context.Context, stmts ...string) error
	execTx(ctx context.Context, stmts ...string) error
	readBack(ctx context.Context, qt string, cols []*column) ([][]*string, error)
	newSource(t *testing.T, table, sfx string) (cdc.Source, error)
	keyText(c *column, raw string) string
	expect(c *column, raw *string, o mapOpts) (want, string, error)
}

// mapOpts is a case's mapping configuration (sink.MappingConfig's values).
type mapOpts struct{ decimal, uint64, json string }

func (o mapOpts) String() string {
	return "decimal:" + o.decimal + ",uint64:" + o.uint64 + ",json:" + o.json
}

// caseInfo names a case in every failure.
type caseInfo struct {
	seed   uint64
	source string
	engine string
	opts   mapOpts
	table  string
	note   string
	// emptied: the schema cases' name was emptied by a schema event during the case (a
	// TRUNCATE, or a relation that entered it: a new empty generation, then a re-snapshot).
	emptied bool
	// bore: the tables of every relation that has borne the schema case's name (nil: the
	// compared table alone). A dead letter may be of any of them, and a column ALTER TYPE
	// widened in one of them keeps its old field (alteredFor).
	bore []*table
}

func (c caseInfo) String() string {
	return fmt.Sprintf("seed=%d source=%s engine=%s mapping=%s table=%s (%s)", c.seed, c.source, c.engine, c.opts, c.table, c.note)
}

// failure is one difference the oracle found.
type failure struct {
	kind   string // missing_document, extra_document, field_value, undocumented_dead_letter, ...
	id     string
	column string
	typ    string
	detail string
}

// tally gathers every case's failures for the summary.
type tally struct {
	mu     sync.Mutex
	cases  int
	failed []uint64
	kinds  map[string]int // "source engine kind type: detail" -> count
}

func TestDifferential(t *testing.T) {
	n := defaultCases
	if v := os.Getenv(envCases); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 0 {
			t.Fatalf("%s=%q is not a number of cases", envCases, v)
		}
	}
	seed := rand.Uint64N(1<<40) << 2 // a multiple of four: the first cases take every pair
	if v := os.Getenv(envSeed); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("%s=%q is not a number", envSeed, v)
		}
	}
	ns := defaultSchemaCases
	if v := os.Getenv(envSchemaCases); v != "" {
		var err error
		if ns, err = strconv.Atoi(v); err != nil || ns < 0 {
			t.Fatalf("%s=%q is not a number of cases", envSchemaCases, v)
		}
	}
	tl := &tally{kinds: map[string]int{}}
	for i := range n {
		s := seed + uint64(i)
		t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) { runCase(t, s, tl) })
	}
	for i := range ns {
		s := seed + uint64(i)
		t.Run(fmt.Sprintf("schema_seed=%d", s), func(t *testing.T) { runSchemaCase(t, s, tl) })
	}
	n += ns
	tl.mu.Lock()
	defer tl.mu.Unlock()
	t.Logf("differential: %d cases run, seeds %d..%d: %d compared (the others skipped or stopped early), %d with differences: %v",
		n, seed, seed+uint64(n)-1, tl.cases, len(tl.failed), tl.failed)
	keys := make([]string, 0, len(tl.kinds))
	for k := range tl.kinds {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("differential: %4d x %s", tl.kinds[k], k)
	}
}

// runCase runs one seeded case: schema, snapshot rows, pipeline, streamed DML, comparison.
func runCase(t *testing.T, seed uint64, tl *tally) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	d, node, ci := caseSetup(t, r, seed)
	sfx := fmt.Sprintf("%x", r.Uint64()&(1<<40-1))
	ci.table = "h4diff_" + sfx
	prefix := "h4diff-" + sfx
	node.DeleteAtCleanup(t, prefix+"*")

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	tb := genTable(r, d, sfx)
	tb.tbl = ci.table
	var setup, teardown []string
	for _, c := range tb.cols {
		setup = append(setup, c.t.setup...)
		teardown = append(teardown, c.t.teardown...)
	}
	create, note := d.createTable(r, d.quote(ci.table), tb.cols)
	ci.note = note
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := d.exec(ctx, d.dropTable(d.quote(ci.table))...); err != nil {
			t.Errorf("drop table %s: %v", ci.table, err)
		}
		if err := d.exec(ctx, teardown...); err != nil {
			t.Errorf("teardown: %v", err)
		}
	})
	if err := d.exec(ctx, append(setup, create...)...); err != nil {
		t.Fatalf("%s: creating the table: %v", ci, err)
	}
	t.Logf("%s: %s", ci, tb.describe())

	// The snapshot's rows.
	nSnap := r.IntN(16)
	for range nSnap {
		if err := d.exec(ctx, tb.insert(r, d)); err != nil {
			t.Fatalf("%s: snapshot insert: %v", ci, err)
		}
	}

	src, err := d.newSource(t, ci.table, sfx)
	if err != nil {
		t.Fatalf("%s: source: %v", ci, err)
	}
	st := statestore.NewMemory()
	cfg := sink.Config{ID: "h4diff", URL: node.URL, Index: prefix + "-{table}", Auth: sink.Auth{Type: sink.AuthNone},
		Shards: 1, Replicas: estest.Ptr(0),
		Mapping: sink.MappingConfig{Decimal: ci.opts.decimal, Uint64: ci.opts.uint64, JSON: ci.opts.json}}
	k, err := sink.New(cfg, "h4diff-"+sfx, st, &sink.Options{ItemRetryBackoff: time.Millisecond})
	if err != nil {
		t.Fatalf("%s: sink: %v", ci, err)
	}
	defer k.Close()
	dlq := &memDLQ{}
	hist := newHistorySink(k)
	runner, err := cdc.NewRunner("h4diff-"+sfx, src, hist, st, dlq, &cdc.RunnerOptions{BatchMaxEvents: pick(r, 1, 7, 50, 1000), BatchMaxWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stopRun := context.WithCancel(ctx)
	done := make(chan struct{}) // closed when Run returned runErr
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
	}
	defer stop()
	index, err := sink.IndexName(cfg.Index, cdc.TableID{Table: ci.table})
	if err != nil {
		t.Fatal(err)
	}

	// The changes start once the snapshot is applied, so that which rows the snapshot reads
	// and which changes the stream carries do not depend on timing (the hand-off itself has
	// its own tests in the sources).
	waitFor(t, ci, done, &runErr, "the snapshot", func() bool { return runner.Progress().Events >= int64(nSnap) })
	nTx := 4 + r.IntN(12)
	for range nTx {
		stmts := tb.transaction(r, d)
		if os.Getenv("TRIBUTARY_DIFF_VERBOSE") != "" {
			for _, q := range stmts {
				t.Logf("statement: %s", short(q))
			}
		}
		if err := d.execTx(ctx, stmts...); err != nil {
			t.Fatalf("%s: transaction: %v", ci, err)
		}
	}
	// The last change: a marker row. Once its document is there and nothing is pending, the
	// runner has applied (or dead-lettered) everything before it.
	markerLit, markerID := tb.marker(d)
	if err := d.exec(ctx, markerLit); err != nil {
		t.Fatalf("%s: marker: %v", ci, err)
	}
	waitFor(t, ci, done, &runErr, "the marker row", func() bool {
		docs, err := node.Mget(t, index, []string{markerID})
		return err == nil && len(docs) == 1 && docs[0].Found && runner.Progress().Pending == 0
	})
	stop()
	if runErr != nil {
		t.Errorf("%s: the pipeline stopped: %v", ci, runErr)
	}

	fails := compareCase(ctx, t, d, node, ci, tb, index, dlq.records(), hist)
	tl.add(t, ci, fails)
}

// add counts a compared case and reports its failures.
func (tl *tally) add(t *testing.T, ci caseInfo, fails []failure) {
	t.Helper()
	tl.mu.Lock()
	tl.cases++
	if len(fails) > 0 && !slices.Contains(tl.failed, ci.seed) {
		tl.failed = append(tl.failed, ci.seed)
	}
	for _, f := range fails {
		key := fmt.Sprintf("%s %s %s %s: %s", ci.source, ci.engine, f.kind, f.typ, summaryDetail(f))
		tl.kinds[key]++
	}
	tl.mu.Unlock()
	const maxShown = 40
	for i, f := range fails {
		if i == maxShown {
			t.Errorf("%s: ... and %d more differences", ci, len(fails)-maxShown)
			break
		}
		t.Errorf("%s: %s id=%q column=%q type=%s: %s", ci, f.kind, f.id, f.column, f.typ, f.detail)
	}
}

// caseSetup picks a seed's source (its lowest bit) and engine (the next bit), connects to the
// engine and draws the mapping options.
func caseSetup(t *testing.T, r *rand.Rand, seed uint64) (dialect, *estest.Node, caseInfo) {
	var d dialect
	if seed&1 == 0 {
		d = postgres{dsn: testenv.Require(t, testenv.PostgresDSN)}
	} else {
		m, err := testenv.ParseMySQLDSN(testenv.Require(t, testenv.MySQLDSN))
		if err != nil {
			t.Fatalf("%s: %v", testenv.MySQLDSN, err)
		}
		d = mariadb{m.User, m.Password, m.Addr, m.DB}
	}
	eng := estest.Engines()[seed>>1&1]
	node := estest.Connect(t, eng.Name, testenv.Require(t, eng.Env))
	node.EnforceAutoCreateRule(t)

	ci := caseInfo{seed: seed, source: d.name(), engine: eng.Name}
	if eng.Name == estest.Elasticsearch {
		// The Elasticsearch test build has neither scaled_float nor unsigned_long.
		ci.opts = mapOpts{decimal: pick(r, "keyword", "double"), uint64: "keyword", json: pick(r, "stored", "flattened")}
	} else {
		ci.opts = mapOpts{decimal: pick(r, "scaled_float", "keyword", "double"), uint64: pick(r, "unsigned_long", "keyword"),
			json: pick(r, "stored", "flattened")}
	}
	return d, node, ci
}

// summaryDetail is a failure's detail without values, column and table names, for grouping.
func summaryDetail(f failure) string {
	switch f.kind {
	case "undocumented_dead_letter":
		d := regexpColumn.ReplaceAllString(f.detail, "column")
		d = regexpElement.ReplaceAllString(d, "array element")
		return regexpTableOf.ReplaceAllString(d, "")
	case "field_type", "field_value", "field_length":
		return "mapping " + strings.SplitN(f.detail, " ", 2)[0]
	}
	return ""
}

// waitFor polls until ok, failing the test when the runner stops or a generous bound passes.
func waitFor(t *testing.T, ci caseInfo, done <-chan struct{}, runErr *error, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	for !ok() {
		select {
		case <-done:
			t.Fatalf("%s: waiting for %s: the pipeline stopped: %v", ci, what, *runErr)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s did not arrive within 4 minutes", ci, what)
		}
	}
}

// memDLQ keeps dead letters in memory.
type memDLQ struct {
	mu   sync.Mutex
	recs []cdc.DeadLetterRecord
}

func (q *memDLQ) WriteDeadLetters(_ context.Context, r []cdc.DeadLetterRecord) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.recs = append(q.recs, r...)
	return nil
}

func (q *memDLQ) records() []cdc.DeadLetterRecord {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.recs)
}

// table is a generated table and the keys its rows have now.
type table struct {
	cols     []*column
	keyTypes []keyType // per key column, in key order
	keyCols  []*column
	rows     [][]string // the key values of the rows there are now
	// movedFrom: the _ids each _id's row had before key changes, in the order they happened
	// (a row's history, for the unchanged values an update needs: sortDeadLetters).
	movedFrom map[string][]string
	tbl       string
	nextInt   int64
	// qual is the table's quoted, qualified name when it lives outside the connection's
	// default schema (the schema cases, schema_test.go); ref returns it, else the quoted tbl.
	qual string
	// clock counts the row writes generated; written is the clock of each _id's last write
	// (an insert, update or key change). A column added later (column.addedAt) is a field the
	// documents written before it lack.
	clock   int
	written map[string]int
}

// ref is the table's name in SQL.
// column returns tb's column named name, or nil.
func (tb *table) column(name string) *column {
	for _, c := range tb.cols {
		if c.name == name {
			return c
		}
	}
	return nil
}

// hasColumnsOf says whether tb has every column sch names: an event with schema sch may be of
// tb (the generator drops no column, so a table's later columns include those of any change
// it had).
func (tb *table) hasColumnsOf(sch *cdc.TableSchema) bool {
	return !slices.ContainsFunc(sch.Columns, func(c cdc.Column) bool { return tb.column(c.Name) == nil })
}

func (tb *table) ref(d dialect) string {
	if tb.qual != "" {
		return tb.qual
	}
	return d.quote(tb.tbl)
}

// wrote records a write of the row at key k.
func (tb *table) wrote(k []string) {
	tb.clock++
	if tb.written == nil {
		tb.written = map[string]int{}
	}
	tb.written[docID(k, "|")] = tb.clock
}

// genTable draws a primary key (one or two columns, integer or text) and 3-12 columns of the
// dialect's types.
func genTable(r *rand.Rand, d dialect, sfx string) *table {
	tb := &table{}
	kts := d.keyTypes()
	nKey := 1
	if chance(r, 0.35) {
		nKey = 2
	}
	for i := range nKey {
		kt := kts[r.IntN(len(kts))]
		fam := famInt
		if kt.text {
			fam = famText
		}
		c := &column{name: pick(r, "id", "k", "Key") + strconv.Itoa(i+1), t: &colType{sql: kt.sql, fam: fam}, key: true}
		tb.keyTypes = append(tb.keyTypes, kt)
		tb.keyCols = append(tb.keyCols, c)
		tb.cols = append(tb.cols, c)
	}
	var cat []func(*rand.Rand, string) *colType
	if d.name() == "postgres" {
		cat = pgCatalogue()
	} else {
		cat = myCatalogue()
	}
	n := 3 + r.IntN(10)
	for i := range n {
		ct := cat[r.IntN(len(cat))](r, sfx+strconv.Itoa(i))
		name := fmt.Sprintf("c%d_%s", i, typeWord(ct.sql))
		if chance(r, 0.1) {
			name = pick(r, "Größe", "MixedCase", "_under", "名前", "sp ace") + strconv.Itoa(i)
		}
		tb.cols = append(tb.cols, &column{name: name, t: ct})
	}
	return tb
}

// typeWord is the first word of a type, for column names.
func typeWord(sql string) string {
	w := strings.ToLower(strings.FieldsFunc(sql, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') })[0])
	if strings.HasPrefix(sql, `"h4diff_`) {
		return "custom"
	}
	return w
}

func (tb *table) describe() string {
	parts := make([]string, len(tb.cols))
	for i, c := range tb.cols {
		parts[i] = c.name + " " + c.t.sql
		if c.key {
			parts[i] += " KEY"
		}
	}
	return strings.Join(parts, ", ")
}

// newKey draws key values no current row has.
func (tb *table) newKey(r *rand.Rand) []string {
	for {
		k := make([]string, len(tb.keyTypes))
		for i, kt := range tb.keyTypes {
			k[i] = randKey(r, kt)
		}
		if len(k) == 1 && k[0] == "" && !chance(r, 0.3) {
			continue // an empty single key (no _id) is rare
		}
		if !tb.hasKey(k) {
			return k
		}
	}
}

func (tb *table) hasKey(k []string) bool {
	for _, have := range tb.rows {
		if slices.Equal(have, k) {
			return true
		}
	}
	return false
}

var keyRunes = []rune(`abcxyzABC019|\-_., é☃`)

func randKey(r *rand.Rand, kt keyType) string {
	if !kt.text {
		switch {
		case kt.unsigned && chance(r, 0.2):
			return pick(r, "18446744073709551615", "0", "9223372036854775808")
		case kt.unsigned:
			return strconv.FormatUint(r.Uint64(), 10)
		case chance(r, 0.1):
			return pick(r, strconv.FormatInt(kt.lo, 10), strconv.FormatInt(kt.hi, 10))
		}
		return strconv.FormatInt(kt.lo+int64(r.Uint64N(uint64(kt.hi-kt.lo))), 10)
	}
	n := r.IntN(min(kt.maxLen, 16) + 1)
	if kt.maxLen == 0 {
		n = r.IntN(17)
	}
	var b strings.Builder
	for range n {
		b.WriteRune(keyRunes[r.IntN(len(keyRunes))])
	}
	s := b.String()
	if kt.noTrailingSpace {
		s = strings.TrimRight(s, " ")
	}
	return s
}

func (tb *table) where(d dialect, k []string) string {
	conds := make([]string, len(k))
	for i, c := range tb.keyCols {
		conds[i] = d.quote(c.name) + " = " + d.keyLiteral(tb.keyTypes[i], k[i])
	}
	return " WHERE " + strings.Join(conds, " AND ")
}

func valueLit(r *rand.Rand, c *column) string {
	if chance(r, 0.15) {
		return "NULL"
	}
	return c.t.gen(r)
}

// insert returns an INSERT of a new row with random values, and records its key.
func (tb *table) insert(r *rand.Rand, d dialect) string {
	k := tb.newKey(r)
	tb.rows = append(tb.rows, k)
	tb.wrote(k)
	names := make([]string, len(tb.cols))
	vals := make([]string, len(tb.cols))
	ki := 0
	for i, c := range tb.cols {
		names[i] = d.quote(c.name)
		if c.key {
			vals[i] = d.keyLiteral(tb.keyTypes[ki], k[ki])
			ki++
		} else {
			vals[i] = valueLit(r, c)
		}
	}
	return "INSERT INTO " + tb.ref(d) + " (" + strings.Join(names, ", ") + ") VALUES (" + strings.Join(vals, ", ") + ")"
}

// transaction returns 1-5 statements: inserts, updates of random columns (leaving the others,
// large ones included, untouched), key changes and deletes, each on exactly one row.
func (tb *table) transaction(r *rand.Rand, d dialect) []string {
	var stmts []string
	for range 1 + r.IntN(5) {
		p := r.IntN(100)
		if len(tb.rows) == 0 {
			p = 0
		}
		switch {
		case p < 35:
			stmts = append(stmts, tb.insert(r, d))
		case p < 75:
			i := r.IntN(len(tb.rows))
			var sets []string
			for _, c := range tb.cols {
				if !c.key && chance(r, 0.35) {
					sets = append(sets, d.quote(c.name)+" = "+valueLit(r, c))
				}
			}
			if len(sets) == 0 {
				for _, c := range tb.cols {
					if !c.key {
						sets = append(sets, d.quote(c.name)+" = "+valueLit(r, c))
						break
					}
				}
			}
			stmts = append(stmts, "UPDATE "+tb.ref(d)+" SET "+strings.Join(sets, ", ")+tb.where(d, tb.rows[i]))
			if d.name() == "mysql" {
				// MariaDB logs no row event for an update that leaves every value as it was
				// (the new random values may all equal the old ones: NULL, one of a SET's few
				// members, ...), so the row's document may not be rewritten: the update is not
				// counted as the row's write (a column added before it may be missing from the
				// document; present, it must hold the value).
				tb.clock++
			} else {
				tb.wrote(tb.rows[i])
			}
		case p < 87:
			i := r.IntN(len(tb.rows))
			old := tb.rows[i]
			nk := tb.newKey(r)
			var sets []string
			for j, c := range tb.keyCols {
				if nk[j] != old[j] {
					sets = append(sets, d.quote(c.name)+" = "+d.keyLiteral(tb.keyTypes[j], nk[j]))
				}
			}
			if len(sets) == 0 {
				continue
			}
			for _, c := range tb.cols {
				if !c.key && chance(r, 0.15) {
					sets = append(sets, d.quote(c.name)+" = "+valueLit(r, c))
				}
			}
			stmts = append(stmts, "UPDATE "+tb.ref(d)+" SET "+strings.Join(sets, ", ")+tb.where(d, old))
			tb.rows[i] = nk
			tb.wrote(nk)
			if tb.movedFrom == nil {
				tb.movedFrom = map[string][]string{}
			}
			nid := docID(nk, "|")
			tb.movedFrom[nid] = append(tb.movedFrom[nid], docID(old, "|"))
		default:
			i := r.IntN(len(tb.rows))
			stmts = append(stmts, "DELETE FROM "+tb.ref(d)+tb.where(d, tb.rows[i]))
			tb.rows = slices.Delete(tb.rows, i, i+1)
		}
	}
	return stmts
}

// marker returns the INSERT of a row whose other columns are NULL and its _id.
func (tb *table) marker(d dialect) (string, string) {
	k := make([]string, len(tb.keyTypes))
	for {
		for i, kt := range tb.keyTypes {
			if kt.text {
				k[i] = "~marker" + strconv.FormatInt(tb.nextInt, 10)
			} else {
				k[i] = strconv.FormatInt(tb.nextInt+12345, 10)
			}
		}
		tb.nextInt++
		if !tb.hasKey(k) {
			break
		}
	}
	tb.rows = append(tb.rows, k)
	tb.wrote(k)
	names := make([]string, len(tb.keyCols))
	vals := make([]string, len(tb.keyCols))
	for i, c := range tb.keyCols {
		names[i] = d.quote(c.name)
		vals[i] = d.keyLiteral(tb.keyTypes[i], k[i])
	}
	return "INSERT INTO " + tb.ref(d) + " (" + strings.Join(names, ", ") + ") VALUES (" + strings.Join(vals, ", ") + ")", docID(k, "|")
}

// compareCase reads the table back, derives every row's expected document and compares the
// index and the dead letters with them.
func compareCase(ctx context.Context, t *testing.T, d dialect, node *estest.Node, ci caseInfo, tb *table, index string, dead []cdc.DeadLetterRecord, hist *historySink) []failure {
	rows, err := d.readBack(ctx, d.quote(ci.table), tb.cols)
	if err != nil {
		t.Fatalf("%s: reading the table back: %v", ci, err)
	}
	return compareDocs(t, d, ci, tb, rows, searchAll(t, node, index), dead, hist)
}

// eventSchemaNote describes an event's position and the schema it carried (relation, columns,
// key), for the verbose log of a dead letter: which description the source decoded it with.
func eventSchemaNote(ev cdc.Event) string {
	var b strings.Builder
	if ev.Position != nil {
		fmt.Fprintf(&b, " position=%s version=%d", ev.Position, ev.Position.Version())
	}
	if ev.Schema == nil {
		return b.String() + " schema=nil"
	}
	var key []string
	for _, i := range ev.Schema.PrimaryKey {
		if i >= 0 && i < len(ev.Schema.Columns) {
			key = append(key, ev.Schema.Columns[i].Name)
		}
	}
	fmt.Fprintf(&b, " schema={relation %q, %d columns, key %v}", ev.Schema.Relation, len(ev.Schema.Columns), key)
	return b.String()
}

// compareDocs derives every row's expected document from rows (a read-back of tb) and compares
// docs (an index's documents by _id) and the dead letters of tb's changes with them.
func compareDocs(t *testing.T, d dialect, ci caseInfo, tb *table, rows [][]*string, docs map[string]json.RawMessage, dead []cdc.DeadLetterRecord, hist *historySink) []failure {
	var fails []failure
	colType := func(name string) string {
		if c := tb.column(name); c != nil {
			return c.t.sql
		}
		return ""
	}
	var exps []expectation
	for _, row := range rows {
		var e expectation
		var keys []string
		for i, c := range tb.cols {
			w, rule, err := d.expect(c, row[i], ci.opts)
			if err != nil {
				fails = append(fails, failure{kind: "oracle_error", column: c.name, typ: c.t.sql, detail: err.Error()})
				continue
			}
			if rule != "" {
				e.refused = append(e.refused, refusal{rule: rule, col: c.name})
			} else {
				e.fields = append(e.fields, fieldWant{col: c, w: w})
				if c.fieldBits != 0 && !fitsField(w, c.fieldBits) {
					e.mayRefuse = append(e.mayRefuse, refusal{rule: ruleAlteredType, col: c.name})
				}
			}
			if c.key {
				keys = append(keys, d.keyText(c, *row[i]))
			}
		}
		e.id = docID(keys, "|")
		for i, fw := range e.fields {
			// A column added after the row's last write is a field its document lacks.
			e.fields[i].optional = fw.col.addedAt > 0 && fw.col.addedAt > tb.written[e.id]
		}
		if e.id == "" {
			e.refused = append(e.refused, refusal{rule: ruleEmptyID})
		}
		exps = append(exps, e)
	}

	if os.Getenv("TRIBUTARY_DIFF_VERBOSE") != "" {
		for _, rec := range dead {
			id, _ := eventID(rec.Event)
			old := rec.Event
			old.Op = cdc.Delete
			before := "no before image"
			if oldID, ok := eventID(old); ok {
				before = "before " + strconv.Quote(oldID)
			} else if rec.Event.Before != nil {
				before = fmt.Sprintf("before image without the key: %d values", len(rec.Event.Before))
			}
			t.Logf("dead letter id=%q (%s) op=%s%s reason=%s", id, before, rec.Event.Op, eventSchemaNote(rec.Event), rec.Reason)
		}
		for id, raw := range docs {
			t.Logf("document id=%q %s", id, short(string(raw)))
		}
		for i, row := range rows {
			parts := make([]string, len(row))
			for j, v := range row {
				parts[j] = "NULL"
				if v != nil {
					parts[j] = short(*v)
				}
			}
			t.Logf("source row %d: %s", i, strings.Join(parts, " | "))
		}
	}

	// Dead letters: each must be one the documentation names, for a value that rule covers.
	bore := ci.bore
	if bore == nil {
		bore = []*table{tb}
	}
	dl, dlFails := sortDeadLetters(dead, ci.opts, tb.movedFrom, hist, bore, ci.emptied)
	for _, f := range dlFails {
		f.typ = colType(f.column)
		fails = append(fails, f)
	}
	documented, undocumented, movedAway, documentedLoss := dl.documented, dl.undocumented, dl.movedAway, dl.documentedLoss

	// A row with an undocumented dead letter is already a failure; what follows from it (the
	// document missing or older than the row, or left behind under the old key) is reported
	// once, as its consequence.
	seen := map[string]bool{}
	for _, e := range exps {
		seen[e.id] = true
		if undocumented[e.id] {
			if f := consequence(e, docs); f != nil {
				fails = append(fails, *f)
			}
			continue
		}
		if documentedLoss[e.id] {
			continue // missing or older: ruleUnchangedLost
		}
		if len(e.refused) > 0 {
			// The row may be missing (or older) only with a dead letter of a documented rule
			// that covers one of its values (the first refused value decides which).
			// A refusal under a key the row had before counts too: a key change whose value the
			// source did not resend (Unchanged) carries the stored document's value, the one
			// from before the refused change (sink/doc.go, Unchanged values).
			history := refusalsOf(documented, tb.movedFrom, e.id)
			if !slices.ContainsFunc(e.refused, func(rf refusal) bool {
				return slices.ContainsFunc(history, func(x refusal) bool {
					return x.rule == rf.rule
				})
			}) {
				rules := make([]string, len(e.refused))
				for i, rf := range e.refused {
					rules[i] = rf.rule + "(" + rf.col + ")"
				}
				fails = append(fails, failure{kind: "missing_dead_letter", id: e.id, column: e.refused[0].col, typ: colType(e.refused[0].col),
					detail: "the row's values are refused by " + strings.Join(rules, ", ") + " but no such dead letter exists"})
			}
			continue
		}
		rowFails := compareDoc(ci, e, docs)
		if len(rowFails) > 0 && len(e.mayRefuse) > 0 {
			// A value the column's old field cannot hold (an integer type widened by ALTER
			// TYPE): the row is either indexed exactly or its change was dead-lettered with the
			// cluster's rejection (sink/doc.go, Schema changes); then it may be missing or older.
			history := refusalsOf(documented, tb.movedFrom, e.id)
			if slices.ContainsFunc(history, func(x refusal) bool { return x.rule == ruleAlteredType }) {
				rowFails = nil
			} else {
				rowFails = append(rowFails, failure{kind: "missing_dead_letter", id: e.id, column: e.mayRefuse[0].col, typ: colType(e.mayRefuse[0].col),
					detail: "the row's value does not fit its column's old field, its document differs, and no dead letter exists"})
			}
		}
		fails = append(fails, rowFails...)
	}
	for id := range docs {
		switch {
		case seen[id]:
		case movedAway[id] != "":
			// A key change refused by a documented rule (an empty new _id) left the old key's
			// document although its row is gone: sink/doc.go says "When the new key forms no
			// _id ... the old _id is deleted all the same", so it fails, as its own kind.
			fails = append(fails, failure{kind: "extra_document_after_refused_key_change", id: id,
				detail: "the document of the old key stays after a key change dead-lettered by rule " + movedAway[id]})
		case undocumented[id]:
			fails = append(fails, failure{kind: "consequence", id: id, detail: "a document for no source row (the change that removed it was dead-lettered)"})
		default:
			fails = append(fails, failure{kind: "extra_document", id: id, detail: "a document for no source row"})
		}
	}
	sort.SliceStable(fails, func(i, j int) bool { return fails[i].kind < fails[j].kind })
	return fails
}

// compareDoc compares one row's expected document with the index's.
func compareDoc(ci caseInfo, e expectation, docs map[string]json.RawMessage) []failure {
	raw, ok := docs[e.id]
	if !ok {
		return []failure{{kind: "missing_document", id: e.id, detail: "the source row has no document and no documented dead letter"}}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return []failure{{kind: "unparsable_document", id: e.id, detail: err.Error()}}
	}
	var fails []failure
	for _, fw := range e.fields {
		got, ok := fields[fw.col.name]
		if !ok {
			if !fw.optional {
				fails = append(fails, failure{kind: "missing_field", id: e.id, column: fw.col.name, typ: fw.col.t.sql})
			}
			continue
		}
		delete(fields, fw.col.name)
		if m := compareValue(fw.w, got, ""); m != nil {
			fails = append(fails, failure{kind: "field_" + m.kind, id: e.id, column: fw.col.name, typ: fw.col.t.sql,
				detail: fmt.Sprintf("%s%s: expected %s, got %s", ci.opts, m.path, m.expected, m.actual)})
		}
	}
	for name := range fields {
		fails = append(fails, failure{kind: "extra_field", id: e.id, column: name})
	}
	return fails
}

// deadLetterSets is what the dead letters of a case say about its rows, by _id.
type deadLetterSets struct {
	documented   map[string][]refusal // the documented rules that refused a change of the row
	undocumented map[string]bool      // every _id an undocumented dead letter touches
	movedAway    map[string]string    // old keys of key changes refused by a documented rule
	// documentedLoss: rows whose unchanged values were unavailable because a documented dead
	// letter took an earlier change (ruleUnchangedLost): missing or older is allowed.
	documentedLoss map[string]bool
}

// sortDeadLetters classifies a case's dead letters, in the queue's order (the source's), and
// returns an undocumented_dead_letter failure for each one no rule covers (typ left empty). An
// unchanged_value_unavailable dead letter is covered when an earlier dead letter took a change
// of the row its values come from: by ruleUnchangedLost when that one was documented, as that
// one's consequence (no failure of its own) when it was not. The row its values come from is
// the old key's of a key change, or the row itself under any _id it had before (movedFrom):
// the sink coalesces a key change with the row's later changes in one batch, and the dead
// letter of the newest one then stands for all of them (sink/doc.go, Writes), without the key
// change's before image.
//
// altered holds the tables the dead letters may be of, whose integer columns ALTER TYPE widened
// (alteredFor; none outside the schema cases).
//
// emptied says the table's index was emptied during the case by a schema event: an update
// whose unchanged values found no stored document is then ruleUnchangedEmptied's.
func sortDeadLetters(dead []cdc.DeadLetterRecord, o mapOpts, movedFrom map[string][]string, hist *historySink, altered []*table, emptied bool) (deadLetterSets, []failure) {
	d := deadLetterSets{documented: map[string][]refusal{}, undocumented: map[string]bool{},
		movedAway: map[string]string{}, documentedLoss: map[string]bool{}}
	var fails []failure
	// lost: every _id whose row lost a change to a dead letter so far, and whether every such
	// dead letter was documented.
	lost := map[string]bool{}
	for _, rec := range dead {
		id, ok := eventID(rec.Event)
		rule, col := classifyDeadLetter(rec, o, hist, altered)
		if rule == "" && ok && ruleReason[ruleUnchangedLost].MatchString(rec.Reason) {
			if rootDocumented, seen := lostBefore(lost, movedFrom, unchangedSourceID(rec.Event, id), id); seen {
				if !rootDocumented {
					d.undocumented[id] = true // a consequence of a dead letter that already fails
					lost[id] = false
					continue
				}
				rule = ruleUnchangedLost
				d.documentedLoss[id] = true
			}
		}
		if rule == "" && ok && emptied && ruleReason[ruleUnchangedEmptied].MatchString(rec.Reason) {
			rule = ruleUnchangedEmptied
			d.documentedLoss[id] = true
		}
		if ok {
			if _, seen := lost[id]; !seen || rule == "" {
				lost[id] = rule != ""
			}
		}
		if rule == "" {
			d.undocumented[id] = true
			if rec.Event.Op == cdc.Update && rec.Event.Before != nil {
				old := rec.Event
				old.Op = cdc.Delete
				if oldID, ok := eventID(old); ok {
					d.undocumented[oldID] = true
				}
			}
			fails = append(fails, failure{kind: "undocumented_dead_letter", id: id, column: col,
				detail: fmt.Sprintf("%s event: %s", rec.Event.Op, rec.Reason)})
			continue
		}
		if ok {
			d.documented[id] = append(d.documented[id], refusal{rule: rule, col: col})
		}
		if rec.Event.Op == cdc.Update && rec.Event.Before != nil {
			old := rec.Event
			old.Op = cdc.Delete
			if oldID, ok := eventID(old); ok && oldID != id {
				d.movedAway[oldID] = rule
			}
		}
	}
	return d, fails
}

// consequence describes how a row with an undocumented dead letter differs from its document,
// or nil when it does not.
func consequence(e expectation, docs map[string]json.RawMessage) *failure {
	raw, ok := docs[e.id]
	if !ok {
		return &failure{kind: "consequence", id: e.id, detail: "no document (the row's change was dead-lettered)"}
	}
	if len(e.refused) > 0 {
		return nil // a documented refusal would hide the row anyway
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return &failure{kind: "consequence", id: e.id, detail: "unparsable document"}
	}
	var cols []string
	for _, fw := range e.fields {
		if got, ok := fields[fw.col.name]; !ok || compareValue(fw.w, got, "") != nil {
			cols = append(cols, fw.col.name)
		}
	}
	if len(cols) == 0 {
		return nil
	}
	return &failure{kind: "consequence", id: e.id, detail: "an older document (the row's change was dead-lettered): columns " + strings.Join(cols, ", ") + " differ"}
}

// searchAll returns every document of the index by _id (raw _source), after a refresh.
func searchAll(t *testing.T, node *estest.Node, index string) map[string]json.RawMessage {
	t.Helper()
	node.OK(t, esapi.IndicesRefreshRequest{Index: []string{index}})
	res := node.OK(t, esapi.SearchRequest{Index: []string{index}, Size: estest.Ptr(10000), TrackTotalHits: true,
		Body: strings.NewReader(`{"query":{"match_all":{}}}`)})
	var ans struct {
		Hits struct {
			Total struct {
				Value int `json:"value"`
			} `json:"total"`
			Hits []struct {
				ID     string          `json:"_id"`
				Source json.RawMessage `json:"_source"`
			} `json:"hits"`
		} `json:"hits"`
	}
	res.Decode(t, &ans)
	if ans.Hits.Total.Value != len(ans.Hits.Hits) {
		t.Fatalf("search of %s: %d hits of %d", index, len(ans.Hits.Hits), ans.Hits.Total.Value)
	}
	out := map[string]json.RawMessage{}
	for _, h := range ans.Hits.Hits {
		out[h.ID] = h.Source
	}
	return out
}

// eventID is the documented _id of a dead-lettered event's row (the before image's key for
// a delete), from the event's key values.
func eventID(ev cdc.Event) (string, bool) {
	if ev.Schema == nil || len(ev.Schema.PrimaryKey) == 0 {
		return "", false
	}
	row := ev.After
	if ev.Op == cdc.Delete {
		row = ev.Before
	}
	var parts []string
	for _, i := range ev.Schema.PrimaryKey {
		if i >= len(row) {
			return "", false
		}
		switch v := row[i].(type) {
		case string:
			parts = append(parts, v)
		case int64:
			parts = append(parts, strconv.FormatInt(v, 10))
		case uint64:
			parts = append(parts, strconv.FormatUint(v, 10))
		case cdc.Base64:
			b, err := base64.StdEncoding.DecodeString(string(v))
			if err != nil {
				return "", false
			}
			parts = append(parts, string(b))
		default:
			return "", false
		}
	}
	return docID(parts, "|"), true
}

// alteredFor returns, for a dead-lettered event of schema sch, the widened columns of the
// tables it may be of (hasColumnsOf). A column widened in several
// keeps the narrowest old width: the field an index generation may still have.
func alteredFor(tables []*table, sch *cdc.TableSchema) map[string]int {
	var m map[string]int
	for _, tb := range tables {
		if !tb.hasColumnsOf(sch) {
			continue // not this table's event
		}
		for _, c := range tb.cols {
			if c.fieldBits == 0 {
				continue
			}
			if m == nil {
				m = map[string]int{}
			}
			if old := m[c.name]; old == 0 || c.fieldBits < old {
				m[c.name] = c.fieldBits
			}
		}
	}
	return m
}

// classifyDeadLetter returns the allow-list rule a dead letter falls under -- its reason is
// the rule's and the event's row holds a value the rule covers -- or "" for an undocumented
// one; col is the column the reason names, if any.
func classifyDeadLetter(rec cdc.DeadLetterRecord, o mapOpts, hist *historySink, altered []*table) (rule, col string) {
	ev := rec.Event
	if m := regexpColumn.FindStringSubmatch(rec.Reason); m != nil {
		col = m[1]
	}
	if ev.Schema != nil && ev.Malformed != nil && ruleReason[ruleAmbiguousType].MatchString(rec.Reason) {
		if c, ok := ambiguousFor(altered, ev.Schema, rec.Reason); ok {
			return ruleAmbiguousType, c
		}
	}
	if ev.Schema == nil || ev.Malformed != nil {
		return "", col
	}
	switch {
	case ruleReason[ruleFlattened].MatchString(rec.Reason):
		if o.json == "flattened" {
			for i, c := range ev.Schema.Columns {
				if c.Kind == cdc.KindJSON && i < len(ev.After) {
					j := jsonBytes(ev.After[i])
					if _, un := ev.After[i].(cdc.Unchanged); un {
						j = hist.unchangedJSON(ev, i) // what the sink filled in from an older change
					}
					if j != nil && flattenedRefuses(j) {
						return ruleFlattened, c.Name
					}
				}
			}
		}
		// The same rejection for an integer too wide for the field its column had before
		// ALTER TYPE widened it (ruleAlteredType).
		bits := alteredFor(altered, ev.Schema)
		for i, c := range ev.Schema.Columns {
			if b := bits[c.Name]; b != 0 && i < len(ev.After) && !valueFitsField(ev.After[i], b) {
				return ruleAlteredType, c.Name
			}
		}
	case ruleReason[ruleEmptyID].MatchString(rec.Reason):
		if id, ok := eventID(ev); ok && id == "" && len(ev.Schema.PrimaryKey) == 1 {
			return ruleEmptyID, ""
		}
	}
	return "", col
}

// regexpAmbiguousColumn finds the columns an ErrAmbiguousType reason names.
var regexpAmbiguousColumn = regexp.MustCompile(`column "([^"]+)" \(`)

// ambiguousFor says whether every column an ErrAmbiguousType reason names is, in one of the
// tables the event may be of (those having every column sch names), of a type MariaDB's binlog
// cannot tell from another: JSON, UUID, INET4, INET6, or a BINARY(4) or BINARY(16). It returns
// the first column named.
func ambiguousFor(tables []*table, sch *cdc.TableSchema, reason string) (string, bool) {
	named := regexpAmbiguousColumn.FindAllStringSubmatch(reason, -1)
	if len(named) == 0 {
		return "", false
	}
	for _, tb := range tables {
		if !tb.hasColumnsOf(sch) {
			continue // not this table's event
		}
		if !slices.ContainsFunc(named, func(m []string) bool {
			c := tb.column(m[1])
			return c == nil || !slices.Contains([]string{"JSON", "UUID", "INET4", "INET6", "BINARY(4)", "BINARY(16)"}, c.t.sql)
		}) {
			return named[0][1], true
		}
	}
	return "", false
}

// priorIDs returns ids and every _id their rows had before (movedFrom, followed through
// chains of key changes), each once.
func priorIDs(movedFrom map[string][]string, ids ...string) []string {
	var out []string
	visited := map[string]bool{}
	queue := append([]string(nil), ids...)
	for len(queue) > 0 {
		x := queue[0]
		queue = queue[1:]
		if visited[x] {
			continue
		}
		visited[x] = true
		out = append(out, x)
		queue = append(queue, movedFrom[x]...)
	}
	return out
}

// refusalsOf returns the documented refusals of the row at id and of the row under every _id
// it had before (movedFrom).
func refusalsOf(documented map[string][]refusal, movedFrom map[string][]string, id string) []refusal {
	var out []refusal
	for _, x := range priorIDs(movedFrom, id) {
		out = append(out, documented[x]...)
	}
	return out
}

// lostBefore looks up the losses of the row at src and of the row at id under every _id it
// had before: seen when any is known, documented when all known ones are.
func lostBefore(lost map[string]bool, movedFrom map[string][]string, src, id string) (documented, seen bool) {
	documented = true
	for _, x := range priorIDs(movedFrom, src, id) {
		if doc, ok := lost[x]; ok {
			seen, documented = true, documented && doc
		}
	}
	return documented && seen, seen
}

// unchangedSourceID is the _id whose stored document an update's unchanged values come from
// (sink/doc.go, Unchanged values): the old _id of a key change whose before image names it,
// else the row's own.
func unchangedSourceID(ev cdc.Event, id string) string {
	if ev.Op == cdc.Update && ev.Before != nil {
		old := ev
		old.Op = cdc.Delete
		if oldID, ok := eventID(old); ok {
			return oldID
		}
	}
	return id
}

// regexpColumn finds the column a serialization failure names; the others strip what names
// one array element or one table from a reason, for the summary.
var (
	regexpColumn  = regexp.MustCompile(`column "([^"]*)"`)
	regexpElement = regexp.MustCompile(`array element \d+`)
	regexpTableOf = regexp.MustCompile(` of [a-z]+:[^ ]*:`)
)

func jsonBytes(v cdc.Value) []byte {
	switch x := v.(type) {
	case cdc.RawJSON:
		return x
	case string:
		return []byte(x)
	case cdc.Base64:
		b, _ := base64.StdEncoding.DecodeString(string(x))
		return b
	}
	return nil
}

// columnDefs are a CREATE TABLE's column definitions (key columns NOT NULL) and its quoted
// primary-key columns, in column order.
func columnDefs(quote func(string) string, cols []*column) (defs, keys []string) {
	for _, c := range cols {
		d := quote(c.name) + " " + c.t.sql
		if c.key {
			d += " NOT NULL"
			keys = append(keys, quote(c.name))
		}
		defs = append(defs, d)
	}
	return defs, keys
}
