package mysqlcdc

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// The captured workload: benchRows inserted, then all of them updated, in transactions of
// benchBatch rows, so the binlog holds 2*benchRows row changes of one table.
const (
	benchRows  = 10000
	benchBatch = 500
)

// benchColumns mixes the column classes fromBinlog normalizes differently (integers, decimals,
// floats, character and binary strings, enum/set labels, temporals, JSON) in a ~20-column row.
var benchColumns = []string{
	"id INT NOT NULL PRIMARY KEY",
	"ti TINYINT", "si SMALLINT", "bi BIGINT", "iu INT UNSIGNED",
	"dc DECIMAL(12,3)", "f FLOAT", "d DOUBLE", "bt BIT(8)",
	"c CHAR(8)", "vc VARCHAR(64)", "vl VARCHAR(32) CHARACTER SET latin1", "tx TEXT",
	"vb VARBINARY(16)", "en ENUM('red','green','blue')", "st SET('x','y','z')",
	"dt DATE", "tm TIME(3)", "dtm DATETIME(6)", "ts TIMESTAMP(3) NULL", "j JSON", "yr YEAR",
}

// benchValues is row i's values for every column but id, all depending on i so that row images
// differ the way real data does.
func benchValues(i int) string {
	return fmt.Sprintf("%d, %d, %d, %d, %d.%03d, %d.25, %d.125, b'%08b', 'c%d', 'varchar value %d ☃', 'café %d', "+
		"'a text column of moderate length, row %d', x'%08x', '%s', '%s', "+
		"'2024-%02d-%02d', '%02d:%02d:%02d.%03d', '2024-01-02 03:04:%02d.%06d', '2024-06-01 12:%02d:%02d.%03d', "+
		"'{\"k\": %d, \"tags\": [\"a\", \"b\"], \"nested\": {\"ok\": true}}', %d",
		i%128, i%32768, int64(i)*1e9, i, i, i%1000, i, i, i%256, i, i, i, i, i,
		[]string{"red", "green", "blue"}[i%3], []string{"x", "x,y", "y,z", ""}[i%4],
		i%12+1, i%28+1, i%24, i%60, i%60, i%1000, i%60, i, i%60, i%60, i%1000, i, 1901+i%200)
}

// decodeCapture is a stretch of real binlog, kept as raw event bytes, with what the mysqlcdc
// path needs to decode it without a server: the source and the table's catalog schema.
type decodeCapture struct {
	raw  [][]byte
	src  *Source
	name TableName
	tbl  *table
}

// captureBinlog writes the workload on the test server and reads it back through a raw-mode
// BinlogSyncer, so both benchmarked paths start from the same bytes the server sent.
func captureBinlog(tb testing.TB) *decodeCapture {
	tb.Helper()
	dsn := testenv.Require(tb, testenv.MySQLDSN)
	user, pass, addr, db, err := splitDSN(dsn)
	if err != nil {
		tb.Fatalf("%s: %v", testenv.MySQLDSN, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	conn, err := client.ConnectWithContext(ctx, addr, user, pass, db, 10*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	// Bounded, so a stalled server fails the test instead of hanging it.
	conn.ReadTimeout, conn.WriteTimeout = 30*time.Second, 30*time.Second
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	tableName := fmt.Sprintf("bench_decode_%08x", binary.BigEndian.Uint32(rnd[:]))
	exec := func(q string) {
		tb.Helper()
		if _, err := conn.Execute(q); err != nil {
			tb.Fatalf("%.80s: %v", q, err)
		}
	}
	exec(fmt.Sprintf("CREATE TABLE `%s` (%s) DEFAULT CHARSET=utf8mb4", tableName, strings.Join(benchColumns, ", ")))
	// The table is dropped once captured: the benchmark keeps its catalog schema in memory.
	defer exec("DROP TABLE IF EXISTS `" + tableName + "`")

	startFile, startPos, _, err := binlogStatus(conn)
	if err != nil {
		tb.Fatal(err)
	}
	for lo := 0; lo < benchRows; lo += benchBatch {
		var b strings.Builder
		fmt.Fprintf(&b, "INSERT INTO `%s` VALUES ", tableName)
		for i := lo; i < lo+benchBatch; i++ {
			if i > lo {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "(%d, %s)", i, benchValues(i))
		}
		exec(b.String())
	}
	for lo := 0; lo < benchRows; lo += benchBatch {
		exec(fmt.Sprintf("UPDATE `%s` SET vc = CONCAT(vc, '!'), iu = iu + 1, dtm = dtm + INTERVAL 1 SECOND WHERE id >= %d AND id < %d",
			tableName, lo, lo+benchBatch))
	}
	endFile, endPos, _, err := binlogStatus(conn)
	if err != nil {
		tb.Fatal(err)
	}

	src, err := New(addr, user, pass, Options{Tables: []TableName{{Database: db, Table: tableName}}})
	if err != nil {
		tb.Fatal(err)
	}
	c := &decodeCapture{src: src, name: TableName{Database: db, Table: tableName}}
	// Loaded before the drop; the benchmark's readers find it cached and never query the server.
	cat := &catalog{src: src}
	defer cat.close()
	if c.tbl, err = cat.load(ctx, src.tableID(c.name)); err != nil {
		tb.Fatal(err)
	}

	var rid [4]byte
	_, _ = rand.Read(rid[:])
	syncer := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{
		ServerID: 1<<24 + binary.BigEndian.Uint32(rid[:])%(1<<30), // unlike any other reader's id
		Flavor:   string(MariaDB),
		Host:     src.host, Port: src.port, User: user, Password: pass,
		// Raw mode: the syncer decodes nothing but rotations and the format description, so
		// the capture holds undecoded events and no decoding state leaks into the benchmark.
		RawModeEnabled: true,
		Logger:         libraryLogger(src.log),
	})
	defer syncer.Close()
	streamer, err := syncer.StartSync(mysql.Position{Name: startFile, Pos: startPos})
	if err != nil {
		tb.Fatal(err)
	}
	file := startFile
	for file != endFile || len(c.raw) == 0 || c.lastPos() < endPos {
		ev, err := streamer.GetEvent(ctx)
		if err != nil {
			tb.Fatalf("capture binlog up to %s:%d: %v", endFile, endPos, err)
		}
		// Copied: the syncer may reuse its read buffer for the next event.
		c.raw = append(c.raw, append([]byte(nil), ev.RawData...))
		if r, ok := ev.Event.(*replication.RotateEvent); ok {
			file = string(r.NextLogName)
		}
	}
	if err := c.keepOwnTransactions(); err != nil {
		tb.Fatal(err)
	}
	return c
}

// keepOwnTransactions drops the transactions of other sessions from the capture. Other tests
// share the server, and their DDL would make the reader reload the (by then dropped) table
// mid-pass; their rows would also make the workload, and so ns/row, vary between runs. The
// binlog serializes transactions, so each is a GTID event and what follows up to the next one;
// rotations and format descriptions belong to the stream, not to a transaction, and stay.
func (c *decodeCapture) keepOwnTransactions() error {
	p := replication.NewBinlogParser()
	var kept, tx [][]byte
	own := true // the stream's opening events, before the first transaction
	for _, raw := range c.raw {
		ev, err := p.Parse(raw)
		if err != nil {
			return err
		}
		switch e := ev.Event.(type) {
		case *replication.RotateEvent, *replication.FormatDescriptionEvent:
			kept = append(kept, raw)
			continue
		case *replication.MariadbGTIDEvent:
			if own {
				kept = append(kept, tx...)
			}
			tx, own = nil, false
		case *replication.TableMapEvent:
			own = own || string(e.Schema) == c.name.Database && string(e.Table) == c.name.Table
		}
		tx = append(tx, raw)
	}
	if own {
		kept = append(kept, tx...)
	}
	c.raw = kept
	return nil
}

// lastPos is the end position of the last captured event (0 for the syncer's fake rotation).
func (c *decodeCapture) lastPos() uint32 {
	return binary.LittleEndian.Uint32(c.raw[len(c.raw)-1][13:17])
}

// splitDSN splits a go-sql-driver/mysql DSN, user:pass@tcp(host:port)/db[?...].
func splitDSN(dsn string) (user, pass, addr, db string, err error) {
	at := strings.LastIndex(dsn, "@")
	if at < 0 {
		return "", "", "", "", fmt.Errorf("no user@ part in the DSN")
	}
	user, pass, _ = strings.Cut(dsn[:at], ":")
	rest, ok := strings.CutPrefix(dsn[at+1:], "tcp(")
	if !ok {
		return "", "", "", "", fmt.Errorf("the DSN's address is not tcp(host:port)")
	}
	addr, rest, ok = strings.Cut(rest, ")")
	if !ok || !strings.HasPrefix(rest, "/") {
		return "", "", "", "", fmt.Errorf("the DSN has no /database")
	}
	db, _, _ = strings.Cut(rest[1:], "?")
	return user, pass, addr, db, nil
}

// decodeGoMySQL is path (a): go-mysql's parser with its default options turns every event
// into its Event value (rows events into RowsEvent with []any rows). It returns the number of
// row changes of the captured table (an update's before and after images count once).
func (c *decodeCapture) decodeGoMySQL() (int, error) {
	p := replication.NewBinlogParser()
	n := 0
	for _, raw := range c.raw {
		ev, err := p.Parse(raw)
		if err != nil {
			return n, err
		}
		if e, ok := ev.Event.(*replication.RowsEvent); ok && e.Table != nil && string(e.Table.Table) == c.name.Table {
			if e.Type() == replication.EnumRowsEventTypeUpdate {
				n += len(e.Rows) / 2
			} else {
				n += len(e.Rows)
			}
		}
	}
	return n, nil
}

// decodeMySQLCDC is path (b): the parser configured as reader.syncOnce configures its syncer,
// then reader.handle, which tracks transactions, checks each table map against the cached
// schema, normalizes every value, derives positions and checkpoints and sends the events on
// st. A fresh reader per pass is a reader that just connected, with the schema already cached.
func (c *decodeCapture) decodeMySQLCDC(st *stream) error {
	p := replication.NewBinlogParser()
	p.SetFlavor(string(c.src.opts.Flavor))
	p.SetTimestampStringLocation(time.UTC)
	p.SetVerifyChecksum(true)
	r := newReader(st)
	r.tables[c.name] = c.tbl
	ctx := context.Background()
	for _, raw := range c.raw {
		ev, err := p.Parse(raw)
		if err != nil {
			return err
		}
		if err := r.handle(ctx, ev); err != nil {
			return err
		}
	}
	return nil
}

// benchStream is a stream whose channel holds a whole pass, so the sends in path (b) never
// block and the benchmark measures decoding, not a consumer's pace.
func (c *decodeCapture) benchStream() *stream {
	return &stream{src: c.src, events: make(chan cdc.Event, 2*benchRows+16), done: make(chan struct{})}
}

// drain empties st after a pass, returning the events' count and the first malformed one.
func drain(st *stream) (n int, malformed error, last cdc.Event) {
	for len(st.events) > 0 {
		last = <-st.events
		n++
		if last.Malformed != nil && malformed == nil {
			malformed = last.Malformed
		}
	}
	return n, malformed, last
}

// TestMySQLBinlogDecodePathsAgree runs both benchmarked paths once over the capture: each must
// see every row change, the mysqlcdc path without a malformed event and with correctly
// normalized values, so BenchmarkBinlogDecode compares two complete decodes of the same data.
func TestMySQLBinlogDecodePathsAgree(t *testing.T) {
	c := captureBinlog(t)
	size := 0
	for _, raw := range c.raw {
		size += len(raw)
	}
	t.Logf("captured %d events, %d bytes", len(c.raw), size)
	n, err := c.decodeGoMySQL()
	if err != nil {
		t.Fatal(err)
	}
	if n != 2*benchRows {
		t.Fatalf("go-mysql decoded %d row changes, want %d", n, 2*benchRows)
	}
	st := c.benchStream()
	if err := c.decodeMySQLCDC(st); err != nil {
		t.Fatal(err)
	}
	got, malformed, last := drain(st)
	if got != 2*benchRows || malformed != nil {
		t.Fatalf("mysqlcdc emitted %d events (want %d), malformed: %v", got, 2*benchRows, malformed)
	}
	// The last event is the last row's update: check a few normalized values of its image.
	i := benchRows - 1
	want := map[string]cdc.Value{
		"id": int64(i), "iu": uint64(i + 1), "vc": fmt.Sprintf("varchar value %d ☃!", i),
		"vl": fmt.Sprintf("café %d", i), "en": "red", "st": "", // 9999 % 4 == 3: the empty set
		"dtm": fmt.Sprintf("2024-01-02 03:04:%02d.%06d", i%60+1, i),
		"j":   cdc.RawJSON(fmt.Sprintf(`{"k":%d,"tags":["a","b"],"nested":{"ok":true}}`, i)),
	}
	if last.Op != cdc.Update || last.Checkpoint == nil {
		t.Fatalf("last event: op %v, checkpoint %v", last.Op, last.Checkpoint)
	}
	for name, w := range want {
		k := last.Schema.ColumnIndex(name)
		if k < 0 || !reflect.DeepEqual(last.After[k], w) {
			t.Errorf("column %s: got %#v, want %#v", name, last.After[max(k, 0)], w)
		}
	}
}

// BenchmarkBinlogDecode compares, over the same captured binlog bytes, go-mysql's default
// decoding (a: "gomysql") with the mysqlcdc path to normalized cdc.Events (b: "mysqlcdc").
// Both report ns/row (per row change); b also reports its cost relative to a, "x-gomysql"
// (the throughput ratio b/a is its inverse), when a ran in the same invocation.
func BenchmarkBinlogDecode(b *testing.B) {
	c := captureBinlog(b)
	rows := float64(2 * benchRows)
	var gomysqlNs float64
	b.Run("gomysql", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.decodeGoMySQL(); err != nil {
				b.Fatal(err)
			}
		}
		gomysqlNs = float64(b.Elapsed().Nanoseconds()) / float64(b.N) / rows
		b.ReportMetric(gomysqlNs, "ns/row")
	})
	b.Run("mysqlcdc", func(b *testing.B) {
		b.ReportAllocs()
		st := c.benchStream()
		for b.Loop() {
			if err := c.decodeMySQLCDC(st); err != nil {
				b.Fatal(err)
			}
			// Receiving is part of the pass: a consumer takes every event off the channel.
			if n, malformed, _ := drain(st); n != 2*benchRows || malformed != nil {
				b.Fatalf("%d events (want %d), malformed: %v", n, 2*benchRows, malformed)
			}
		}
		ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / rows
		b.ReportMetric(ns, "ns/row")
		if gomysqlNs > 0 {
			b.ReportMetric(ns/gomysqlNs, "x-gomysql")
		}
	})
}
