package debezium_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/debezium"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/internal/connecttest"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/queue"
	"github.com/tributary-dev/tributary/queue/kafkaqueue"
	"github.com/tributary-dev/tributary/sink"
	"github.com/tributary-dev/tributary/statestore"
)

// The captured change stream of BenchmarkDebeziumVsNative: dbzBenchRows rows inserted, all of
// them updated, every dbzBenchDeleteEvery-th deleted, in transactions of dbzBenchTx row
// changes, then one sentinel insert.
const (
	dbzBenchRowsDefault = 50000
	dbzBenchRowsEnv     = "TRIBUTARY_DBZBENCH_ROWS"
	dbzBenchTx          = 100
	dbzBenchDeleteEvery = 5
	// dbzBenchAckEvery is how often the source-only readers acknowledge: as a runner with its
	// default BatchMaxEvents does, once per 1000 events, at the last checkpoint among them.
	dbzBenchAckEvery = 1000
)

// dbzBenchPartitions are the partition counts of the three Debezium connectors' topics.
var dbzBenchPartitions = []int{1, 2, 4}

const dbzBenchDDL = `CREATE TABLE %s (id bigint PRIMARY KEY, name text NOT NULL, qty int NOT NULL,
	price numeric(10,2), at timestamptz, doc jsonb)`

const dbzBenchSelect = `SELECT g, 'name ' || g, (g %% 1000)::int, (g %% 100000) / 100.0,
	timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second', jsonb_build_object('k', g, 'tag', 'x' || g %% 10)
	FROM generate_series(%d, %d) g`

// dbzBench is the benchmark's fixture: one table whose changes a native slot (a template,
// copied for each native read) and three Debezium connectors captured, and where they are.
type dbzBench struct {
	dsn     string
	brokers []string
	node    *estest.Node
	db      *pgx.Conn
	adm     *kadm.Client

	table    string // the captured table
	pub      string // the native source's publication
	template string // the native slot created before the writes; never read, only copied
	index    string // every index of the benchmark starts with it
	topics   map[int]string

	rows    int
	events  int // row change events in the stream: inserts, updates, deletes, the sentinel
	records int // records in each Debezium topic: the events and one tombstone per delete

	mu     sync.Mutex
	seq    int
	groups []string
	slots  []string

	results map[string]*dbzContender // by "<sub-benchmark>/<contender>"
	order   []string
}

// dbzContender is one way of reading the stream, with its totals over the rounds.
type dbzContender struct {
	name string
	run  func(b *testing.B) dbzRun
	dbzRun
	rounds int
	rates  []float64 // each round's, by round
}

// dbzRun is one reading of the stream: events over took, the steady part (from the first
// event delivered, or for a pipeline the first batch applied, to the last); startup is from
// Open (Run) to that start, and total the whole reading. cpu is this process's CPU time over
// the whole reading (user and system: the reader, its client libraries, for a pipeline the
// runner and the sink), esCPU Elasticsearch's (pipelines).
type dbzRun struct {
	events  int
	took    time.Duration
	startup time.Duration
	total   time.Duration
	cpu     time.Duration
	esCPU   time.Duration
	backoff int   // times the sink pushed back (pipelines)
	bytes   int64 // keys and values of the records read (fetch-pN)
}

func (r dbzRun) rate() float64 { return float64(r.events) / r.took.Seconds() }

// BenchmarkDebeziumVsNative compares the Debezium path (debezium.Source over Kafka, topics of 1,
// 2 and 4 partitions) with the native source (pgcdc) on the same change stream of one table:
// three Debezium PostgreSQL connectors (snapshot.mode no_data) and a native slot capture the
// same writes (TRIBUTARY_DBZBENCH_ROWS rows, default 50000: inserts, updates of every row,
// deletes of a fifth, in transactions of 100, then a sentinel), and every Debezium topic
// holds the whole stream before anything is measured: what is measured is the consumer side,
// never Debezium's capture. Two sub-benchmarks, each round running its contenders in a
// rotating order:
//
//   - source: the stream read to its end, acknowledging once per 1000 events as a runner
//     does: native (pgcdc from a copy of the slot made before the writes, so from the first
//     change), dbz-pN (debezium.Source, a new consumer group, so from the first offset) and
//     fetch-pN (the same topic through kafkaqueue alone, no decoding: the Kafka ceiling of
//     the Debezium path);
//   - pipeline: a cdc.Runner with its defaults over native and dbz-pN into a new
//     Elasticsearch index each (mapping decimal and uint64 as keyword), until every event
//     is applied.
//
// Rates are events/s of the steady part: from the first event delivered (source) or the first
// batch applied (pipeline) to the last, so that connecting, joining the group and creating
// the index (reported as startup in the log) are not spread over the stream; a contender's
// rate is its events over its time summed over the rounds. Ratios pN/native are the Debezium
// path's rate over the native one's; pN/fetch the share of the bare Kafka rate the decoding
// path keeps. The log (go test -v: make bench-debezium) has each round and a summary table
// with the CPU time per event of this process (reader, clients, runner, sink) and, for
// pipelines, of Elasticsearch: where the time goes. No assertion is made on any rate.
func BenchmarkDebeziumVsNative(b *testing.B) {
	conn := connecttest.Require(b)
	x := &dbzBench{
		dsn:     testenv.Require(b, testenv.PostgresDSN),
		brokers: conn.Brokers,
		rows:    dbzBenchRowsDefault,
		topics:  map[int]string{},
		results: map[string]*dbzContender{},
	}
	esURL := testenv.Require(b, testenv.ElasticsearchURL)
	if v := os.Getenv(dbzBenchRowsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < dbzBenchTx {
			b.Fatalf("%s=%q: want an integer of at least %d", dbzBenchRowsEnv, v, dbzBenchTx)
		}
		x.rows = n / dbzBenchTx * dbzBenchTx
	}
	x.node = estest.Connect(b, estest.Elasticsearch, esURL)
	x.setup(b, conn)
	b.Log("setup: " + x.machine())

	b.Run("source", func(b *testing.B) {
		cs := []*dbzContender{{name: "native", run: x.readNative}}
		for _, p := range dbzBenchPartitions {
			cs = append(cs, &dbzContender{name: fmt.Sprintf("dbz-p%d", p), run: x.readDebezium(p)},
				&dbzContender{name: fmt.Sprintf("fetch-p%d", p), run: x.fetchKafka(p)})
		}
		x.measure(b, "source", cs)
		for _, p := range dbzBenchPartitions {
			x.ratio(b, "source", fmt.Sprintf("dbz-p%d", p), "native", fmt.Sprintf("p%d/native", p))
		}
		for _, p := range dbzBenchPartitions {
			x.ratio(b, "source", fmt.Sprintf("dbz-p%d", p), fmt.Sprintf("fetch-p%d", p), fmt.Sprintf("p%d/fetch", p))
		}
	})
	b.Run("pipeline", func(b *testing.B) {
		x.node.EnforceAutoCreateRule(b)
		cs := []*dbzContender{{name: "native", run: x.pipeline("native", x.nativeSource)}}
		for _, p := range dbzBenchPartitions {
			cs = append(cs, &dbzContender{name: fmt.Sprintf("dbz-p%d", p), run: x.pipeline(fmt.Sprintf("dbz-p%d", p), x.debeziumSource(p))})
		}
		x.measure(b, "pipeline", cs)
		for _, p := range dbzBenchPartitions {
			x.ratio(b, "pipeline", fmt.Sprintf("dbz-p%d", p), "native", fmt.Sprintf("p%d/native", p))
		}
		x.summary(b)
	})
}

// setup creates the table, the native slot and the three connectors, waits until every
// connector streams, writes the changes and waits until every topic holds them all.
func (x *dbzBench) setup(b *testing.B, conn *connecttest.Connect) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	suffix := fmt.Sprintf("%08x", rand.Uint32())
	x.table = "dbzbench_" + suffix
	mark := x.table + "_mark" // the connectors' readiness markers: a table (and topic) of their own
	x.pub, x.template = x.table+"_npub", x.table+"_ntmpl"
	x.index = "dbzbench-" + suffix
	x.node.DeleteAtCleanup(b, x.index+"-*")

	var err error
	if x.db, err = pgx.Connect(ctx, x.dsn); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { x.db.Close(context.Background()) })
	cl, err := kgo.NewClient(kgo.SeedBrokers(x.brokers...), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	x.adm = kadm.NewClient(cl)

	// Registered first, so run last: after the connectors, slots and streams are gone.
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := x.db.Exec(ctx, fmt.Sprintf("DROP TABLE IF EXISTS %s, %s", x.table, mark)); err != nil {
			b.Errorf("dropping the tables: %v", err)
		}
	})
	x.exec(ctx, b, fmt.Sprintf(dbzBenchDDL, x.table), fmt.Sprintf("CREATE TABLE %s (id int PRIMARY KEY)", mark))

	// The native capture: a slot made now, before any change, copied for each read.
	b.Cleanup(func() {
		x.mu.Lock()
		slots := append([]string{x.template}, x.slots...)
		x.mu.Unlock()
		for _, s := range slots {
			if err := x.dropSlot(s); err != nil {
				b.Errorf("dropping slot %s: %v", s, err)
			}
		}
		if _, err := x.db.Exec(context.Background(), "DROP PUBLICATION IF EXISTS "+x.pub); err != nil {
			b.Errorf("dropping publication %s: %v", x.pub, err)
		}
	})
	x.exec(ctx, b, fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE %s", x.pub, x.table),
		fmt.Sprintf("SELECT pg_create_logical_replication_slot('%s', 'pgoutput')", x.template))

	// The Debezium captures. Transaction metadata is off: PostgreSQL versions do not need it
	// (doc.go), and its topic would only slow the connectors' capture down.
	b.Cleanup(func() {
		x.mu.Lock()
		groups := x.groups
		x.mu.Unlock()
		if len(groups) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := x.adm.DeleteGroups(ctx, groups...)
		if err != nil {
			b.Errorf("deleting consumer groups: %v", err)
			return
		}
		for _, r := range res.Sorted() {
			if r.Err != nil {
				b.Errorf("deleting consumer group %s: %v", r.Group, r.Err)
			}
		}
	})
	markTopics := map[int]string{}
	start := time.Now()
	for _, p := range dbzBenchPartitions {
		name := fmt.Sprintf("%s_p%d", x.table, p)
		prefix := fmt.Sprintf("dbzbench%sp%d", suffix, p)
		conn.CreatePostgres(b, name, connecttest.PostgresConnector{TopicPrefix: prefix, DecimalHandling: "string", // price is a nullable numeric
			Tables: []string{"public." + x.table, "public." + mark}, SnapshotMode: "no_data", NoTransactionMetadata: true,
			Extra: map[string]string{"topic.creation.default.partitions": strconv.Itoa(p),
				"topic.creation.default.replication.factor": "1"}})
		x.topics[p] = prefix + ".public." + x.table
		markTopics[p] = prefix + ".public." + mark
	}
	// A connector is RUNNING before its slot streams: a marker row, written again until every
	// connector's marker topic holds one, proves each streams every change after it.
	for id := 1; ; id++ {
		x.exec(ctx, b, fmt.Sprintf("INSERT INTO %s VALUES (%d)", mark, id))
		ready := func() bool {
			for _, p := range dbzBenchPartitions {
				if n, _ := x.topicRecords(ctx, markTopics[p]); n == 0 {
					return false
				}
			}
			return true
		}
		if x.poll(ctx, 5*time.Second, ready) {
			break
		}
		if ctx.Err() != nil {
			b.Fatal("the connectors never streamed a marker")
		}
	}
	b.Logf("setup: 3 connectors created and streaming in %v", time.Since(start).Round(time.Millisecond))

	// The change stream.
	start = time.Now()
	for lo := 1; lo <= x.rows; lo += dbzBenchTx {
		x.exec(ctx, b, fmt.Sprintf("INSERT INTO %s (id, name, qty, price, at, doc) "+dbzBenchSelect, x.table, lo, lo+dbzBenchTx-1))
	}
	for lo := 1; lo <= x.rows; lo += dbzBenchTx {
		x.exec(ctx, b, fmt.Sprintf("UPDATE %s SET name = name || '!', qty = qty + 1, price = price + 1, at = at + interval '1 day' WHERE id BETWEEN %d AND %d",
			x.table, lo, lo+dbzBenchTx-1))
	}
	for lo := 1; lo <= x.rows; lo += dbzBenchTx * dbzBenchDeleteEvery {
		x.exec(ctx, b, fmt.Sprintf("DELETE FROM %s WHERE id BETWEEN %d AND %d AND id %% %d = 0", x.table, lo, lo+dbzBenchTx*dbzBenchDeleteEvery-1, dbzBenchDeleteEvery))
	}
	deletes := x.rows / dbzBenchDeleteEvery
	x.exec(ctx, b, fmt.Sprintf("INSERT INTO %s (id, name, qty) VALUES (%d, 'sentinel', 0)", x.table, x.sentinel()))
	x.events = 2*x.rows + deletes + 1
	x.records = x.events + deletes
	wrote := time.Since(start)

	// Kafka holds the whole stream before anything is measured.
	for _, p := range dbzBenchPartitions {
		topic := x.topics[p]
		var n int64
		if !x.poll(ctx, 15*time.Minute, func() bool { n, _ = x.topicRecords(ctx, topic); return n >= int64(x.records) }) {
			b.Fatalf("topic %s holds %d records after %v, want %d", topic, n, time.Since(start), x.records)
		}
	}
	b.Logf("setup: %d row changes (%d rows: inserts, updates, %d deletes, a sentinel) written in %v, in every topic after %v",
		x.events, x.rows, deletes, wrote.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

func (x *dbzBench) sentinel() int64 { return int64(x.rows) + 1 }

func (x *dbzBench) exec(ctx context.Context, b *testing.B, stmts ...string) {
	b.Helper()
	for _, s := range stmts {
		if _, err := x.db.Exec(ctx, s); err != nil {
			b.Fatalf("%.80s: %v", s, err)
		}
	}
}

// poll calls ok every 50ms until it holds (true) or d passes (false).
func (x *dbzBench) poll(ctx context.Context, d time.Duration, ok func() bool) bool {
	end := time.Now().Add(d)
	for {
		if ok() {
			return true
		}
		if time.Now().After(end) || ctx.Err() != nil {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// topicRecords is the sum of the topic's partitions' end offsets: its records, the topic never
// being compacted or trimmed while the benchmark runs.
func (x *dbzBench) topicRecords(ctx context.Context, topic string) (int64, error) {
	offs, err := x.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	var n int64
	var ferr error
	offs.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			ferr = o.Err
		}
		n += o.Offset
	})
	return n, ferr
}

// name returns a new name for one reading's slot ("n") or consumer group ("g"), which the
// clean-up removes, or its index prefix ("i").
func (x *dbzBench) name(kind string) string {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.seq++
	switch kind {
	case "n":
		x.slots = append(x.slots, fmt.Sprintf("%s_n%d", x.table, x.seq))
		return x.slots[len(x.slots)-1]
	case "g":
		x.groups = append(x.groups, fmt.Sprintf("%s_g%d", x.table, x.seq))
		return x.groups[len(x.groups)-1]
	}
	return fmt.Sprintf("%s-%d", x.index, x.seq)
}

// copySlot makes a new slot at the template's position: a native read from the first change.
func (x *dbzBench) copySlot(ctx context.Context, b *testing.B) string {
	slot := x.name("n")
	x.exec(ctx, b, fmt.Sprintf("SELECT pg_copy_logical_replication_slot('%s', '%s')", x.template, slot))
	return slot
}

// dropSlot drops a slot, waiting for a walsender of a stream just closed to let go of it.
func (x *dbzBench) dropSlot(slot string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		_, err := x.db.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, slot)
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55006" { // object_in_use
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (x *dbzBench) nativeSource(ctx context.Context, b *testing.B) (cdc.Source, func()) {
	slot := x.copySlot(ctx, b)
	src, err := pgcdc.New(x.dsn, &pgcdc.Options{Name: "pg", Slot: slot, Publication: x.pub, NoCreateSlot: true,
		NoCreatePublication: true, Tables: []pgcdc.Table{{Schema: "public", Name: x.table}}, Snapshot: cdc.SnapshotNever})
	if err != nil {
		b.Fatal(err)
	}
	return src, func() {
		if err := x.dropSlot(slot); err != nil {
			b.Errorf("dropping slot %s: %v", slot, err)
		}
	}
}

func (x *dbzBench) debeziumSource(p int) func(ctx context.Context, b *testing.B) (cdc.Source, func()) {
	return func(ctx context.Context, b *testing.B) (cdc.Source, func()) {
		group, topic := x.name("g"), x.topics[p]
		src, err := debezium.New(func(ctx context.Context) (queue.Consumer, error) {
			return kafkaqueue.NewConsumer(ctx, kafkaqueue.Config{Brokers: x.brokers, Topics: []string{topic}, Group: group}, nil)
		}, &debezium.Options{Name: "pg"})
		if err != nil {
			b.Fatal(err)
		}
		return src, func() {}
	}
}

func (x *dbzBench) readNative(b *testing.B) dbzRun {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	src, done := x.nativeSource(ctx, b)
	defer done()
	return x.read(ctx, b, src)
}

func (x *dbzBench) readDebezium(p int) func(b *testing.B) dbzRun {
	return func(b *testing.B) dbzRun {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		src, done := x.debeziumSource(p)(ctx, b)
		defer done()
		return x.read(ctx, b, src)
	}
}

// read opens a stream of src and takes every event of the change stream, acknowledging as a
// runner does; it checks the events are the stream's: every insert, update and delete once.
func (x *dbzBench) read(ctx context.Context, b *testing.B, src cdc.Source) dbzRun {
	t0, cpu0 := time.Now(), processCPU()
	st, err := src.Open(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	var ops [8]int
	var first time.Time
	var last cdc.Checkpoint
	sentinel := false
	for n, unacked := 0, 0; n < x.events; {
		select {
		case ev, ok := <-st.Events():
			if !ok {
				b.Fatalf("the stream ended after %d events: %v", n, st.Err())
			}
			if n == 0 {
				first = time.Now()
			}
			n++
			if ev.Malformed != nil {
				b.Fatalf("malformed event at %s: %v", ev.Position, ev.Malformed)
			}
			if int(ev.Op) < len(ops) {
				ops[ev.Op]++
			}
			if ev.Op == cdc.Insert && ev.After[0] == x.sentinel() {
				sentinel = true
			}
			if ev.Checkpoint != nil {
				last = ev.Checkpoint
			}
			if unacked++; (unacked >= dbzBenchAckEvery || n == x.events) && last != nil {
				if err := st.Ack(ctx, last); err != nil {
					b.Fatalf("ack: %v", err)
				}
				unacked, last = 0, nil
			}
		case <-ctx.Done():
			b.Fatalf("the stream was not read to its end in time")
		}
	}
	end := time.Now()
	deletes := x.rows / dbzBenchDeleteEvery
	if !sentinel || ops[cdc.Insert] != x.rows+1 || ops[cdc.Update] != x.rows || ops[cdc.Delete] != deletes {
		b.Fatalf("read %d inserts, %d updates, %d deletes (sentinel %v); want %d, %d, %d",
			ops[cdc.Insert], ops[cdc.Update], ops[cdc.Delete], sentinel, x.rows+1, x.rows, deletes)
	}
	return dbzRun{events: x.events - 1, took: end.Sub(first), startup: first.Sub(t0), total: end.Sub(t0), cpu: processCPU() - cpu0}
}

// fetchKafka reads the topic of p partitions as the Debezium source does, without decoding:
// kafkaqueue's Fetch, every record finished, a commit per 1000 records.
func (x *dbzBench) fetchKafka(p int) func(b *testing.B) dbzRun {
	return func(b *testing.B) dbzRun {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		t0, cpu0 := time.Now(), processCPU()
		cons, err := kafkaqueue.NewConsumer(ctx, kafkaqueue.Config{Brokers: x.brokers, Topics: []string{x.topics[p]}, Group: x.name("g")}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cons.Close()
		var first time.Time
		var size int64
		refs := make([]queue.Message, 0, 1000)
		for n := 0; n < x.records; {
			msgs, err := cons.Fetch(ctx)
			if err != nil {
				b.Fatalf("fetch after %d records: %v", n, err)
			}
			if n == 0 && len(msgs) > 0 {
				first = time.Now()
			}
			for _, m := range msgs {
				refs = append(refs, queue.Message{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset})
				size += int64(len(m.Key) + len(m.Value))
			}
			n += len(msgs)
			if len(refs) >= dbzBenchAckEvery || n >= x.records {
				cons.Finish(refs...)
				if err := cons.Commit(ctx); err != nil {
					b.Fatalf("commit: %v", err)
				}
				refs = refs[:0]
			}
		}
		end := time.Now()
		// The same stream's events over the time its records took: comparable with dbz-pN.
		return dbzRun{events: x.events - 1, took: end.Sub(first), startup: first.Sub(t0), total: end.Sub(t0),
			cpu: processCPU() - cpu0, bytes: size}
	}
}

// pipeline runs a cdc.Runner (every default) over a source into a new index until every
// event is applied, then checks the index holds the table's rows.
func (x *dbzBench) pipeline(name string, source func(context.Context, *testing.B) (cdc.Source, func())) func(*testing.B) dbzRun {
	return func(b *testing.B) dbzRun {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		src, done := source(ctx, b)
		defer done()
		index := x.name("i") + "-" + name
		cfg := sink.Config{ID: "dbzbench", URL: x.node.URL, Index: index + "-{table}", Auth: sink.Auth{Type: sink.AuthNone},
			Shards: 1, Replicas: estest.Ptr(0),
			// The test build of Elasticsearch has neither scaled_float nor unsigned_long.
			Mapping: sink.MappingConfig{Decimal: "keyword", Uint64: "keyword"}}
		state := statestore.NewMemory()
		k, err := sink.New(cfg, "dbzbench-"+name, state, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer k.Close()
		obs := &dbzApplied{want: int64(x.events), done: make(chan struct{})}
		dlq := &dbzDLQ{}
		r, err := cdc.NewRunner("dbzbench-"+name, src, k, state, dlq, &cdc.RunnerOptions{Observer: obs})
		if err != nil {
			b.Fatal(err)
		}
		runCtx, stop := context.WithCancel(ctx)
		ran := make(chan error, 1)
		es0 := x.esCPU(b)
		t0, cpu0 := time.Now(), processCPU()
		go func() { ran <- r.Run(runCtx) }()
		select {
		case <-obs.done:
		case err := <-ran:
			stop()
			b.Fatalf("%s: the runner stopped after %d events: %v", name, obs.applied(), err)
		case <-ctx.Done():
			stop()
			b.Fatalf("%s: %d of %d events applied in time", name, obs.applied(), x.events)
		}
		cpu := processCPU() - cpu0
		stop()
		if err := <-ran; err != nil && !errors.Is(err, context.Canceled) {
			b.Fatalf("%s: Run: %v", name, err)
		}
		esCPU := x.esCPU(b) - es0
		if n, reason := dlq.get(); n > 0 {
			b.Fatalf("%s: %d dead letters, the first: %s", name, n, reason)
		}
		obs.mu.Lock()
		run := dbzRun{events: int(obs.n - obs.firstN), took: obs.last.Sub(obs.first), startup: obs.first.Sub(t0),
			total: obs.last.Sub(t0), cpu: cpu, esCPU: esCPU, backoff: obs.pushedBack}
		obs.mu.Unlock()
		x.node.OK(b, esapi.IndicesRefreshRequest{Index: []string{index + "-*"}})
		docs, err := x.node.Count(ctx, index+"-*")
		if want := x.rows - x.rows/dbzBenchDeleteEvery + 1; err != nil || docs != want {
			b.Fatalf("%s: the index holds %d documents (%v), want %d", name, docs, err, want)
		}
		return run
	}
}

// processCPU is the user plus system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// esCPU is the CPU time the Elasticsearch node's process has used. The node samples it at
// most once a second (monitor.process.refresh_interval): esCPU waits that long first, so that
// the sample is taken after what came before the call (a pipeline's last writes), and a
// pipeline's reading is not cut short by it.
func (x *dbzBench) esCPU(b *testing.B) time.Duration {
	time.Sleep(1100 * time.Millisecond)
	var ans struct {
		Nodes map[string]struct {
			Process struct {
				CPU struct {
					TotalInMillis int64 `json:"total_in_millis"`
				} `json:"cpu"`
			} `json:"process"`
		} `json:"nodes"`
	}
	x.node.OK(b, esapi.NodesStatsRequest{NodeID: []string{"_local"}, Metric: []string{"process"}}).Decode(b, &ans)
	var ms int64
	for _, n := range ans.Nodes {
		ms += n.Process.CPU.TotalInMillis
	}
	return time.Duration(ms) * time.Millisecond
}

// machine describes where the benchmark runs.
func (x *dbzBench) machine() string {
	var version string
	_ = x.db.QueryRow(context.Background(), "SHOW server_version").Scan(&version)
	return fmt.Sprintf("%d CPUs (GOMAXPROCS %d), %s, PostgreSQL %s", runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), version)
}

// dbzApplied is the runner's Observer: it counts applied events and closes done once all are.
type dbzApplied struct {
	want       int64
	done       chan struct{}
	mu         sync.Mutex
	n, firstN  int64
	first      time.Time
	last       time.Time
	pushedBack int
}

func (o *dbzApplied) BatchDone(s cdc.BatchStats) {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n += int64(s.Events)
	if o.first.IsZero() {
		o.first, o.firstN = now, o.n
	}
	if o.n >= o.want && o.last.IsZero() {
		o.last = now
		close(o.done)
	}
}

func (o *dbzApplied) Backpressure(int, time.Duration) {
	o.mu.Lock()
	o.pushedBack++
	o.mu.Unlock()
}

func (o *dbzApplied) applied() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n
}

// dbzDLQ counts dead letters and keeps the first reason.
type dbzDLQ struct {
	mu    sync.Mutex
	n     int
	first string
}

func (d *dbzDLQ) WriteDeadLetters(_ context.Context, recs []cdc.DeadLetterRecord) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n == 0 && len(recs) > 0 {
		d.first = recs[0].Reason
	}
	d.n += len(recs)
	return nil
}

func (d *dbzDLQ) get() (int, string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n, d.first
}

// measure runs every contender once per round, in an order rotating by round, and reports
// each one's events/s.
func (x *dbzBench) measure(b *testing.B, sub string, cs []*dbzContender) {
	for round := 0; b.Loop(); round++ {
		for i := range cs {
			c := cs[(round+i)%len(cs)]
			r := c.run(b)
			c.events += r.events
			c.took += r.took
			c.startup += r.startup
			c.total += r.total
			c.cpu += r.cpu
			c.esCPU += r.esCPU
			c.backoff += r.backoff
			c.bytes += r.bytes
			c.rounds++
			c.rates = append(c.rates, r.rate())
			line := fmt.Sprintf("round %d: %-9s %8.0f events/s (startup %v, total %v, this process %.1f µs CPU/event",
				round, c.name, r.rate(), r.startup.Round(time.Millisecond), r.total.Round(time.Millisecond), perEvent(r.cpu, x.events))
			if r.esCPU > 0 {
				line += fmt.Sprintf(", Elasticsearch %.1f", perEvent(r.esCPU, x.events))
			}
			if r.backoff > 0 {
				line += fmt.Sprintf(", pushed back %d times", r.backoff)
			}
			if r.bytes > 0 {
				line += fmt.Sprintf(", %d B/record", r.bytes/int64(x.records))
			}
			b.Log(line + ")")
		}
	}
	for _, c := range cs {
		b.ReportMetric(c.rate(), c.name+"-events/s")
		x.results[sub+"/"+c.name] = c
		x.order = append(x.order, sub+"/"+c.name)
	}
}

func (x *dbzBench) ratio(b *testing.B, sub, num, den, unit string) {
	b.ReportMetric(x.results[sub+"/"+num].rate()/x.results[sub+"/"+den].rate(), unit)
}

// perEvent is d in microseconds per event of a reading of n events.
func perEvent(d time.Duration, n int) float64 { return float64(d.Microseconds()) / float64(n) }

// summary logs every rate and the ratios to native side by side.
func (x *dbzBench) summary(b *testing.B) {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d events per reading\n", x.events)
	fmt.Fprintf(&sb, "%-20s %10s %9s %9s %9s %9s %9s %9s %6s\n", "contender", "events/s", "x native", "median x",
		"startup", "total", "cpu µs/ev", "es µs/ev", "rounds")
	for _, key := range x.order {
		c := x.results[key]
		sub, _, _ := strings.Cut(key, "/")
		native := x.results[sub+"/native"]
		if native == nil || c.rounds == 0 || native.rounds != c.rounds {
			continue
		}
		n := time.Duration(c.rounds)
		es := "-"
		if c.esCPU > 0 {
			es = fmt.Sprintf("%.1f", perEvent(c.esCPU/n, x.events))
		}
		var ratios []float64
		for r := range c.rates {
			ratios = append(ratios, c.rates[r]/native.rates[r])
		}
		sort.Float64s(ratios)
		fmt.Fprintf(&sb, "%-20s %10.0f %9.3f %9.3f %9v %9v %9.1f %9s %6d\n", key, c.rate(), c.rate()/native.rate(),
			ratios[len(ratios)/2], (c.startup / n).Round(time.Millisecond), (c.total / n).Round(time.Millisecond),
			perEvent(c.cpu/n, x.events), es, c.rounds)
	}
	b.Logf("summary: events/s of the steady part over all rounds, x native its ratio to native's and median x the "+
		"median of the rounds' ratios; startup, total and CPU (this process; Elasticsearch) are means per reading\n%s", sb.String())
}
