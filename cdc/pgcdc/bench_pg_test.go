package pgcdc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// The captured workload: benchRows inserted, then all of them updated, in transactions of
// benchBatch rows: 2*benchRows row changes of one table with the common column types.
const (
	benchRows  = 10000
	benchBatch = 500
)

const benchColumns = `id int PRIMARY KEY, name text, qty int8, small int2, price numeric(12,2), ratio float8,
	ok bool, day date, at timestamptz, local timestamp, doc jsonb, blob bytea, uid uuid, tags text[]`

const benchSelect = `SELECT g, 'name ' || g, g * 7, (g % 30000)::int2, g / 100.0, g / 7.0, g % 2 = 0,
	date '2024-01-01' + g % 365, timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second',
	timestamp '2024-01-01 00:00:00' + g * interval '1 minute', jsonb_build_object('k', g, 'tags', jsonb_build_array('a', 'b')),
	decode(lpad(to_hex(g), 8, '0'), 'hex'), md5(g::text)::uuid, ARRAY['x' || g, 'y']`

// replayCapture is a pgoutput stream captured once from the real server: the CopyData payloads
// (XLogData frames) of the workload, with what the pgcdc path needs to decode them without a
// server (the table's schema, cached in the source).
type replayCapture struct {
	frames  [][]byte
	at      []time.Duration // when each frame arrived, after the first
	changes int             // row changes among the frames
	src     *Source
	table   Table
	db      string
}

// captureStream runs the workload on the test server and reads its changes from a temporary
// slot, keeping the frames as they arrived.
func captureStream(tb testing.TB) *replayCapture {
	tb.Helper()
	dsn := testenv.Require(tb, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := "bench_replay_" + hex.EncodeToString(rnd[:])
	sql, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Fatal(err)
	}
	defer sql.Close(context.Background())
	exec := func(q string) {
		tb.Helper()
		if _, err := sql.Exec(ctx, q); err != nil {
			tb.Fatalf("%.80s: %v", q, err)
		}
	}
	exec(fmt.Sprintf("CREATE TABLE %s (%s)", name, benchColumns))
	defer exec("DROP TABLE IF EXISTS " + name)
	exec(fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE %s", name, name))
	defer exec("DROP PUBLICATION IF EXISTS " + name)
	var db string
	if err := sql.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		tb.Fatal(err)
	}

	c := &replayCapture{table: Table{Schema: "public", Name: name}, db: db}
	if c.src, err = New(dsn, &Options{Name: "bench", Tables: []Table{c.table}, Snapshot: cdc.SnapshotNever,
		IdleCheckpointInterval: -1}); err != nil {
		tb.Fatal(err)
	}
	// Cached in the source: the replayed relation message finds it and queries nothing.
	if _, err := c.src.LoadSchema(ctx, c.src.tableID(db, c.table)); err != nil {
		tb.Fatal(err)
	}

	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.RuntimeParams["replication"] = "database"
	repl, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	defer repl.Close(context.Background())
	// Temporary: dropped with the connection, whatever happens to the benchmark.
	slot, err := pglogrepl.CreateReplicationSlot(ctx, repl, name, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{Temporary: true, Mode: pglogrepl.LogicalReplication})
	if err != nil {
		tb.Fatal(err)
	}
	for lo := 1; lo <= benchRows; lo += benchBatch {
		exec(fmt.Sprintf("INSERT INTO %s %s FROM generate_series(%d, %d) g", name, benchSelect, lo, lo+benchBatch-1))
	}
	for lo := 1; lo <= benchRows; lo += benchBatch {
		exec(fmt.Sprintf("UPDATE %s SET name = name || '!', qty = qty + 1 WHERE id BETWEEN %d AND %d", name, lo, lo+benchBatch-1))
	}
	start, err := pglogrepl.ParseLSN(slot.ConsistentPoint)
	if err != nil {
		tb.Fatal(err)
	}
	if err := pglogrepl.StartReplication(ctx, repl, name, start, pglogrepl.StartReplicationOptions{
		Mode: pglogrepl.LogicalReplication, PluginArgs: []string{"proto_version '1'", "publication_names '" + name + "'"},
	}); err != nil {
		tb.Fatal(err)
	}
	var first time.Time
	for commits := 0; commits < 2*benchRows/benchBatch; {
		msg, err := repl.ReceiveMessage(ctx)
		if err != nil {
			tb.Fatal(err)
		}
		cd, ok := msg.(*pgproto3.CopyData)
		if !ok || len(cd.Data) == 0 || cd.Data[0] != pglogrepl.XLogDataByteID {
			continue // keepalives are the server's business, not the workload's
		}
		xld, err := pglogrepl.ParseXLogData(cd.Data[1:])
		if err != nil {
			tb.Fatal(err)
		}
		switch xld.WALData[0] {
		case 'C':
			commits++
		case 'I', 'U', 'D':
			c.changes++
		}
		if first.IsZero() {
			first = time.Now()
		}
		c.frames = append(c.frames, append([]byte(nil), cd.Data...))
		c.at = append(c.at, time.Since(first))
	}
	if c.changes != 2*benchRows {
		tb.Fatalf("captured %d row changes, want %d", c.changes, 2*benchRows)
	}
	return c
}

// walsender is an in-process fake of the server's side of a replication connection: it
// accepts any startup, answers START_REPLICATION with the captured frames, then ends the copy.
// With at, it sends each frame no earlier than it arrived from the real server (relative to
// the first), to within a millisecond: a stream at the server's pace, without its variance.
// The frames are encoded once, up front: the fake shares the clients' process, and encoding
// them anew on every pass (pgproto3's Backend reallocates its buffer after each flush) would
// load the garbage collector that both measured paths run under.
type walsender struct {
	at []time.Duration
	// hold, when set, keeps the copy open after the frames (no CopyDone) until it is closed.
	hold <-chan struct{}
	// copyIn, when set, receives the payload of every CopyData message the client sends.
	copyIn chan<- []byte

	ln   net.Listener
	wire []byte // the CopyData messages of all frames, back to back
	ends []int  // where each frame's message ends in wire
	wg   sync.WaitGroup
}

func newWalsender(tb testing.TB, frames [][]byte, at []time.Duration) *walsender {
	return startWalsender(tb, &walsender{at: at}, frames)
}

// startWalsender starts w (configured, not yet started) serving frames.
func startWalsender(tb testing.TB, w *walsender, frames [][]byte) *walsender {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	w.ln = ln
	for _, f := range frames {
		if w.wire, err = (&pgproto3.CopyData{Data: f}).Encode(w.wire); err != nil {
			tb.Fatal(err)
		}
		w.ends = append(w.ends, len(w.wire))
	}
	w.wg.Add(1)
	go w.serve()
	tb.Cleanup(func() {
		_ = ln.Close()
		w.wg.Wait()
	})
	return w
}

func (w *walsender) serve() {
	defer w.wg.Done()
	for {
		conn, err := w.ln.Accept()
		if err != nil {
			return
		}
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			defer conn.Close()
			_ = w.session(conn)
		}()
	}
}

// session plays one connection: startup, START_REPLICATION, the frames, CopyDone, then waits
// for the client to close; what the client sends during the copy (status updates) is read
// and dropped.
func (w *walsender) session(conn net.Conn) error {
	be := pgproto3.NewBackend(conn, conn)
	if _, err := be.ReceiveStartupMessage(); err != nil {
		return err
	}
	be.Send(&pgproto3.AuthenticationOk{})
	be.Send(&pgproto3.ParameterStatus{Name: "server_version", Value: "15.0"})
	be.Send(&pgproto3.BackendKeyData{ProcessID: 1, SecretKey: []byte{0, 0, 0, 1}})
	be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	if err := be.Flush(); err != nil {
		return err
	}
	if _, err := be.Receive(); err != nil { // START_REPLICATION
		return err
	}
	be.Send(&pgproto3.CopyBothResponse{})
	if err := be.Flush(); err != nil {
		return err
	}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for {
			msg, err := be.Receive()
			if err != nil {
				return
			}
			if cd, ok := msg.(*pgproto3.CopyData); ok && w.copyIn != nil {
				w.copyIn <- append([]byte(nil), cd.Data...)
			}
		}
	}()
	start := time.Now()
	sent := 0 // bytes of wire written
	flush := func(upTo int) error {
		if upTo == sent {
			return nil
		}
		_, err := conn.Write(w.wire[sent:upTo])
		sent = upTo
		return err
	}
	for i, end := range w.ends {
		if w.at != nil {
			// Sleeping for less than a millisecond would oversleep; the frames due meanwhile
			// go out together, as a busy server's do.
			if ahead := w.at[i] - time.Since(start); ahead > time.Millisecond {
				if err := flush(w.frameStart(i)); err != nil {
					return err
				}
				time.Sleep(ahead)
			}
		}
		if i%64 == 63 {
			if err := flush(end); err != nil {
				return err
			}
		}
	}
	if err := flush(len(w.wire)); err != nil {
		return err
	}
	if w.hold != nil {
		<-w.hold
	}
	be.Send(&pgproto3.CopyDone{})
	if err := be.Flush(); err != nil {
		return err
	}
	// Like a real walsender, keep the connection until the client closes it: closing first
	// would answer the client's next status update with a reset, which discards the frames
	// the client has not read yet.
	<-drained
	return nil
}

// frameStart is where frame i's message starts in wire.
func (w *walsender) frameStart(i int) int {
	if i == 0 {
		return 0
	}
	return w.ends[i-1]
}

// connect opens a replication connection to the fake and starts the copy.
func (w *walsender) connect(ctx context.Context) (*pgconn.PgConn, error) {
	conn, err := pgconn.Connect(ctx, "postgres://bench@"+w.ln.Addr().String()+"/bench?sslmode=disable&replication=database")
	if err != nil {
		return nil, err
	}
	if err := pglogrepl.StartReplication(ctx, conn, "bench", 0, pglogrepl.StartReplicationOptions{
		Mode: pglogrepl.LogicalReplication, PluginArgs: []string{"proto_version '1'"},
	}); err != nil {
		_ = conn.Close(ctx)
		return nil, err
	}
	return conn, nil
}

// raw is path (a): a client that only receives the CopyData messages. It returns their count.
func raw(conn *pgconn.PgConn) (int, error) {
	n := 0
	for {
		msg, err := conn.ReceiveMessage(context.Background())
		if err != nil {
			return n, err
		}
		switch msg.(type) {
		case *pgproto3.CopyData:
			n++
		case *pgproto3.CopyDone:
			return n, nil
		}
	}
}

// decoded is path (b): pgcdc's receive loop (parse, decode, events with positions and
// checkpoints) on one goroutine and a consumer taking every event on another, as a pipeline
// runs them. It returns the number of events.
func (c *replayCapture) decoded(conn *pgconn.PgConn) (int, error) {
	st := newStream(c.src, nil, conn, &plan{database: c.db, tables: []Table{c.table}})
	got := make(chan int)
	go func() {
		n := 0
		for ev := range st.events {
			if ev.Malformed == nil {
				n++
			}
		}
		got <- n
	}()
	err := st.receive(context.Background())
	close(st.events)
	n := <-got
	if err != nil && err.Error() != "pgcdc: the server ended the replication stream" {
		return n, err
	}
	return n, nil
}

// BenchmarkPostgresStream compares, on the same captured pgoutput stream replayed over loopback
// by an in-process walsender, a client that only receives the CopyData messages (a: the raw
// stream rate) with pgcdc's receive and decode path delivering events to a consumer (b):
// "replay" sends the frames as fast as the clients take them, so the ratio is the cost of
// decoding against the bare protocol; "paced" sends them at the pace the real server produced
// them during the capture, so the ratio is the share of the server's rate a pipeline sees.
// Each iteration runs a then b (then b then a), so load changes on a shared machine hit both
// alike. Metrics: ns/row of each and throughput-x = a's time / b's (the goal is >= 0.95).
func BenchmarkPostgresStream(b *testing.B) {
	c := captureStream(b)
	for _, mode := range []string{"replay", "paced"} {
		b.Run(mode, func(b *testing.B) {
			var at []time.Duration
			if mode == "paced" {
				at = c.at
			}
			w := newWalsender(b, c.frames, at)
			ctx := context.Background()
			var ns [2]time.Duration
			pass := func(path int) {
				conn, err := w.connect(ctx)
				if err != nil {
					b.Fatal(err)
				}
				defer conn.Close(ctx)
				start := time.Now()
				var n, want int
				if path == 0 {
					n, err = raw(conn)
					want = len(c.frames)
				} else {
					n, err = c.decoded(conn)
					want = c.changes
				}
				ns[path] += time.Since(start)
				if err != nil || n != want {
					b.Fatalf("path %d: %d messages (want %d): %v", path, n, want, err)
				}
			}
			for i := 0; b.Loop(); i++ {
				pass(i % 2)
				pass(1 - i%2)
			}
			rows := float64(c.changes) * float64(b.N)
			b.ReportMetric(float64(ns[0].Nanoseconds())/rows, "raw-ns/row")
			b.ReportMetric(float64(ns[1].Nanoseconds())/rows, "pgcdc-ns/row")
			b.ReportMetric(float64(ns[0])/float64(ns[1]), "throughput-x")
		})
	}
}

// BenchmarkPostgresDecode is the decoding alone: the captured frames go straight from memory
// to the stream's frame handler (no socket, no receive loop) and one consumer takes the
// events. Without the network and the fake server, ns/row and allocs/row are steady enough to
// compare changes of the decoder, which the stream benchmark's ratios blur on a busy machine.
func BenchmarkPostgresDecode(b *testing.B) {
	c := captureStream(b)
	ctx := context.Background()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for b.Loop() {
		st := newStream(c.src, nil, nil, &plan{database: c.db, tables: []Table{c.table}})
		got := make(chan int)
		go func() {
			n := 0
			for range st.events {
				n++
			}
			got <- n
		}()
		for _, f := range c.frames {
			if err := st.handleCopyData(ctx, f); err != nil {
				b.Fatal(err)
			}
		}
		close(st.events)
		if n := <-got; n != c.changes {
			b.Fatalf("%d events, want %d", n, c.changes)
		}
	}
	runtime.ReadMemStats(&after)
	rows := float64(c.changes) * float64(b.N)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/rows, "ns/row")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/rows, "allocs/row")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/rows, "B/row")
}

// TestPostgresReplayDecodesEveryChange checks the benchmark's two paths once: the fake
// walsender's replay reaches both whole, and pgcdc decodes every change without a malformed
// row, so BenchmarkPostgresStream compares complete runs. Every captured change also decodes
// to the same rows as through pglogrepl.Parse, the real server's output for each type of the
// workload.
func TestPostgresReplayDecodesEveryChange(t *testing.T) {
	c := captureStream(t)
	ti := c.src.cached(c.src.tableID(c.db, c.table))
	for _, f := range c.frames {
		wal := f[25:] // after the XLogData header
		switch wal[0] {
		case 'I', 'U', 'D':
		default:
			continue
		}
		wantBefore, wantAfter := decodeWithPglogrepl(t, ti, wal)
		cf, err := parseChangeFrame(wal)
		if err != nil {
			t.Fatal(err)
		}
		before, after, bad, err := decodeChange(ti, cf)
		if err != nil || bad != nil || !reflect.DeepEqual(before, wantBefore) || !reflect.DeepEqual(after, wantAfter) {
			t.Fatalf("%c: %v, %v: %#v / %#v\nwant %#v / %#v", wal[0], err, bad, before, after, wantBefore, wantAfter)
		}
	}
	w := newWalsender(t, c.frames, nil)
	ctx := context.Background()
	for path, want := range []int{len(c.frames), c.changes} {
		conn, err := w.connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if path == 0 {
			n, err = raw(conn)
		} else {
			n, err = c.decoded(conn)
		}
		_ = conn.Close(ctx)
		if err != nil || n != want {
			t.Fatalf("path %d: %d (want %d): %v", path, n, want, err)
		}
	}
}
