package mysqlcdc

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	mrand "math/rand/v2"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// benchGroup is one table of the captured workload: a group of column types decoded alike, its
// rows (values of every column but id, for row i) and the SET clause of the update every row
// gets once inserted (one column changed, as in a typical update).
type benchGroup struct {
	name    string
	columns []string
	values  func(i int, rng *mrand.Rand) string
	update  string
	rows    int
	perTx   int  // rows per transaction; 0 means 500
	bench   bool // measured by BenchmarkBinlogDecode; the others only checked by the test
}

// benchGroups are the type groups of BenchmarkBinlogDecode, "all" mixing every class of column
// in one ~20-column row, and "edges", random values at the corners of each storage format,
// which only TestMySQLBinlogDecodePathsAgree reads.
var benchGroups = []benchGroup{
	{name: "all", rows: 10000, bench: true, columns: allColumns, values: allValues,
		update: "vc = CONCAT(vc, '!'), iu = iu + 1, dtm = dtm + INTERVAL 1 SECOND"},
	// "oltp" is "all" written one row per transaction, as an application usually writes.
	{name: "oltp", rows: 2000, perTx: 1, bench: true, columns: allColumns, values: allValues,
		update: "vc = CONCAT(vc, '!'), iu = iu + 1, dtm = dtm + INTERVAL 1 SECOND"},
	// YEAR sits among the integers: MariaDB gives it a signedness bit in the table map, and a
	// reader that skips it misreads the signedness of every later column.
	{name: "integers", rows: 4000, bench: true, columns: []string{
		"ti TINYINT", "yr YEAR", "si SMALLINT", "mi MEDIUMINT", "i INT", "bi BIGINT", "iu INT UNSIGNED", "bu BIGINT UNSIGNED",
	}, values: integerValues, update: "i = i + 1"},
	{name: "numeric", rows: 4000, bench: true, columns: []string{
		"dc DECIMAL(12,3)", "dw DECIMAL(30,10)", "f FLOAT", "d DOUBLE", "bt BIT(12)",
	}, values: func(i int, _ *mrand.Rand) string {
		return fmt.Sprintf("%d.%03d, -%d.%010d, %d.5, %d.0625e%d, %d", i*37, i%1000, int64(i)*987654321, i*13, i, i, i%40-20, i%4096)
	}, update: "bt = bt ^ 1"},
	{name: "strings", rows: 4000, bench: true, columns: []string{
		"c CHAR(8)", "vc VARCHAR(64)", "vl VARCHAR(32) CHARACTER SET latin1", "vw VARCHAR(300)",
	}, values: func(i int, _ *mrand.Rand) string {
		return fmt.Sprintf("'c%d', 'varchar value %d ☃', 'café %d', '%s'", i, i, i, strings.Repeat(fmt.Sprintf("w%d ", i), 8))
	}, update: "vc = CONCAT(vc, '!')"},
	{name: "base64", rows: 4000, bench: true, columns: []string{
		"tx TEXT", "vb VARBINARY(16)", "bn BINARY(8)", "bl BLOB",
	}, values: func(i int, _ *mrand.Rand) string {
		return fmt.Sprintf("'a text column of moderate length, row %d', x'%08x', x'%04x', REPEAT(x'%02x', 100)", i, i, i%65536, i%256)
	}, update: "vb = x'00'"},
	{name: "labels", rows: 4000, bench: true, columns: []string{
		"en ENUM('red','green','blue')", "st SET('x','y','z')", "bt BIT(8)",
	}, values: func(i int, _ *mrand.Rand) string {
		return fmt.Sprintf("'%s', '%s', %d", []string{"red", "green", "blue"}[i%3], []string{"x", "x,y", "y,z", ""}[i%4], i%256)
	}, update: "bt = bt ^ 1"},
	{name: "temporal", rows: 4000, bench: true, columns: []string{
		"dt DATE", "tm TIME(3)", "dtm DATETIME(6)", "dtm0 DATETIME", "ts TIMESTAMP(3) NULL", "ts0 TIMESTAMP NULL",
	}, values: func(i int, _ *mrand.Rand) string {
		return fmt.Sprintf("'2024-%02d-%02d', '%02d:%02d:%02d.%03d', '2024-01-02 03:04:%02d.%06d', '2023-05-%02d 10:11:12', "+
			"'2024-06-01 12:%02d:%02d.%03d', FROM_UNIXTIME(%d)",
			i%12+1, i%28+1, i%24, i%60, i%60, i%1000, i%60, i, i%28+1, i%60, i%60, i%1000, 1700000000+i*61)
	}, update: "dtm = dtm + INTERVAL 1 SECOND"},
	{name: "json", rows: 4000, bench: true, columns: []string{"j JSON"},
		values: func(i int, _ *mrand.Rand) string {
			return fmt.Sprintf(`'{"k": %d, "name": "item %d", "tags": ["a", "b", "c"], "nested": {"ok": true, "ratio": %d.5, "none": null}}'`, i, i, i)
		}, update: "j = JSON_SET(j, '$.u', 1)"},
	{name: "edges", rows: 1500, columns: edgeColumns, values: edgeValues,
		update: "t1 = t2, d6 = d6 + INTERVAL 1 MICROSECOND, dec65 = -dec65, b33 = b33 ^ 1, c100 = CONCAT(IFNULL(c100, ''), 'x')"},
}

// integerValues is row i of the "integers" group.
func integerValues(i int, _ *mrand.Rand) string {
	return fmt.Sprintf("%d, %d, %d, %d, %d, %d, %d, %d", i%256-128, 1901+i%255, i*7%65536-32768, i*1031-8388608+i, i*104729,
		int64(i)*1e12+7, uint32(i)*2654435761, uint64(i)*11400714819323198485)
}

// allColumns mix the column classes the decoder normalizes differently in a ~20-column row.
var allColumns = []string{
	"ti TINYINT", "si SMALLINT", "bi BIGINT", "iu INT UNSIGNED",
	"dc DECIMAL(12,3)", "f FLOAT", "d DOUBLE", "bt BIT(8)",
	"c CHAR(8)", "vc VARCHAR(64)", "vl VARCHAR(32) CHARACTER SET latin1", "tx TEXT",
	"vb VARBINARY(16)", "en ENUM('red','green','blue')", "st SET('x','y','z')",
	"dt DATE", "tm TIME(3)", "dtm DATETIME(6)", "ts TIMESTAMP(3) NULL", "j JSON", "yr YEAR",
}

// allValues is row i of allColumns, every value depending on i as real data does.
func allValues(i int, _ *mrand.Rand) string {
	return fmt.Sprintf("%d, %d, %d, %d, %d.%03d, %d.25, %d.125, b'%08b', 'c%d', 'varchar value %d ☃', 'café %d', "+
		"'a text column of moderate length, row %d', x'%08x', '%s', '%s', "+
		"'2024-%02d-%02d', '%02d:%02d:%02d.%03d', '2024-01-02 03:04:%02d.%06d', '2024-06-01 12:%02d:%02d.%03d', "+
		"'{\"k\": %d, \"tags\": [\"a\", \"b\"], \"nested\": {\"ok\": true}}', %d",
		i%128, i%32768, int64(i)*1e9, i, i, i%1000, i, i, i%256, i, i, i, i, i,
		[]string{"red", "green", "blue"}[i%3], []string{"x", "x,y", "y,z", ""}[i%4],
		i%12+1, i%28+1, i%24, i%60, i%60, i%1000, i%60, i, i%60, i%60, i%1000, i, 1901+i%200)
}

// edgeColumns are storage formats with variants the other groups leave out: every fractional
// precision, wide and narrow DECIMALs, BIT widths, two-byte ENUM and SET, long CHAR and VARCHAR
// (two-byte lengths), MEDIUMBLOB and LONGBLOB, a single-byte character set's upper half.
var edgeColumns = []string{
	"t0 TIME", "t1 TIME(1)", "t2 TIME(2)", "t4 TIME(4)", "t5 TIME(5)", "t6 TIME(6)",
	"d0 DATETIME", "d1 DATETIME(1)", "d2 DATETIME(2)", "d4 DATETIME(4)", "d6 DATETIME(6)",
	"s1 TIMESTAMP(1) NULL", "s2 TIMESTAMP(2) NULL", "s5 TIMESTAMP(5) NULL", "s6 TIMESTAMP(6) NULL",
	"dec65 DECIMAL(65,30)", "dec10 DECIMAL(10,0)", "dec18 DECIMAL(18,9)", "dec9 DECIMAL(9,9)", "dec1 DECIMAL(1,0)", "dec20 DECIMAL(20,2) UNSIGNED",
	"b1 BIT(1)", "b7 BIT(7)", "b33 BIT(33)", "b64 BIT(64)",
	"mi MEDIUMINT", "mu MEDIUMINT UNSIGNED", "su SMALLINT UNSIGNED", "tu TINYINT UNSIGNED", "yr YEAR",
	"f FLOAT", "d DOUBLE",
	"set12 SET('a','b','c','d','e','f','g','h','i','j','k','l')", "en300 " + enum300(),
	"c100 CHAR(100)", "v300 VARCHAR(300)", "tt TINYTEXT", "mb MEDIUMBLOB", "lb LONGBLOB", "bn BINARY(6)",
	"l1 VARCHAR(40) CHARACTER SET latin1", "g2 VARCHAR(20) CHARACTER SET latin2", "j JSON",
}

func enum300() string {
	labels := make([]string, 300)
	for i := range labels {
		labels[i] = fmt.Sprintf("'e%03d'", i)
	}
	return "ENUM(" + strings.Join(labels, ",") + ")"
}

// edgeValues draws row i of the edges group; about one value in eight is NULL.
func edgeValues(_ int, rng *mrand.Rand) string {
	var vals []string
	add := func(v string) {
		if rng.IntN(8) == 0 {
			v = "NULL"
		}
		vals = append(vals, v)
	}
	sign := func() string { return []string{"", "-"}[rng.IntN(2)] }
	frac := func(n int) string {
		if n == 0 {
			return ""
		}
		return "." + fmt.Sprintf("%06d", rng.IntN(1000000))[:n]
	}
	digits := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteByte(byte('0' + rng.IntN(10)))
		}
		return b.String()
	}
	for _, n := range []int{0, 1, 2, 4, 5, 6} {
		add(fmt.Sprintf("'%s%d:%02d:%02d%s'", sign(), rng.IntN(839), rng.IntN(60), rng.IntN(60), frac(n)))
	}
	for _, n := range []int{0, 1, 2, 4, 6} {
		add(fmt.Sprintf("'%04d-%02d-%02d %02d:%02d:%02d%s'", 1000+rng.IntN(9000), 1+rng.IntN(12), 1+rng.IntN(28),
			rng.IntN(24), rng.IntN(60), rng.IntN(60), frac(n)))
	}
	for _, n := range []int{1, 2, 5, 6} {
		add(fmt.Sprintf("FROM_UNIXTIME(%d%s)", 1+rng.IntN(1<<31-2), frac(n)))
	}
	add(sign() + digits(35) + "." + digits(30))
	add(sign() + digits(1+rng.IntN(10)))
	add(sign() + digits(rng.IntN(10)) + "." + digits(9))
	add(sign() + "0." + digits(9))
	add(sign() + digits(1))
	add(digits(1+rng.IntN(18)) + "." + digits(2))
	add(fmt.Sprintf("b'%b'", rng.IntN(2)))
	add(fmt.Sprintf("b'%b'", rng.IntN(128)))
	add(fmt.Sprintf("%d", rng.Int64N(1<<33)))
	add(fmt.Sprintf("%d", rng.Uint64()))
	add(fmt.Sprintf("%d", rng.IntN(1<<24)-1<<23))
	add(fmt.Sprintf("%d", rng.IntN(1<<24)))
	add(fmt.Sprintf("%d", rng.IntN(1<<16)))
	add(fmt.Sprintf("%d", rng.IntN(256)))
	add([]string{"0", "1901", "2155", fmt.Sprint(1901 + rng.IntN(255))}[rng.IntN(4)])
	add(fmt.Sprintf("%g", float32(rng.NormFloat64()*1e6)))
	add(fmt.Sprintf("%g", rng.NormFloat64()*1e-300))
	add(fmt.Sprintf("%d", rng.IntN(1<<12)))
	add(fmt.Sprintf("'e%03d'", rng.IntN(300)))
	add("'" + strings.Repeat("ü", rng.IntN(100)) + "'")
	add("'" + strings.Repeat("ab☃", rng.IntN(100)) + "'")
	add("'" + strings.Repeat("t", rng.IntN(255)) + "'")
	add(fmt.Sprintf("REPEAT(x'%02x00', %d)", rng.IntN(256), rng.IntN(3000)))
	add(fmt.Sprintf("REPEAT('L', %d)", rng.IntN(5000)))
	add(fmt.Sprintf("x'%02x%02x'", rng.IntN(256), rng.IntN(256)))
	high := make([]string, 1+rng.IntN(20))
	for k := range high {
		high[k] = fmt.Sprintf("%02x", 0x41+rng.IntN(0xff-0x41))
	}
	add("_latin1 x'" + strings.Join(high, "") + "'")
	add("_latin2 x'" + strings.Join(high, "") + "'")
	add(fmt.Sprintf(`'{ "a" : [1, -2.5e3, "x\\u00e9\\n", true, false, null], "b": {"c": {}, "d": []}, "n": %d }'`, rng.IntN(1000)))
	return strings.Join(vals, ", ")
}

// unit is the captured binlog of one group's phase (inserts or updates): the stream's rotate
// and format description events, then the phase's transactions, as raw event bytes.
type unit struct {
	raw  [][]byte
	rows int // row changes
}

// decodeCapture is a stretch of real binlog, kept as raw event bytes, with what the mysqlcdc
// path needs to decode it without a server: the source and the tables' catalog schemas.
type decodeCapture struct {
	src      *Source
	tables   map[TableName]*table
	charsets collations
	units    map[string]*unit // by "group/insert" and "group/update"
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
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
	suffix := fmt.Sprintf("%08x", binary.BigEndian.Uint32(rnd[:]))
	exec := func(q string) {
		tb.Helper()
		if _, err := conn.Execute(q); err != nil {
			tb.Fatalf("%.80s: %v", q, err)
		}
	}
	exec("SET SESSION time_zone = '+00:00'")
	tableOf := map[string]string{} // table name -> group
	var names []TableName
	for _, g := range benchGroups {
		tableName := "bench_decode_" + g.name + "_" + suffix
		tableOf[tableName] = g.name
		names = append(names, TableName{Database: db, Table: tableName})
		cols := append([]string{"id INT NOT NULL PRIMARY KEY"}, g.columns...)
		exec(fmt.Sprintf("CREATE TABLE `%s` (%s) DEFAULT CHARSET=utf8mb4", tableName, strings.Join(cols, ", ")))
		// Dropped once captured: the benchmark keeps the catalog schemas in memory.
		defer exec("DROP TABLE IF EXISTS `" + tableName + "`")
	}

	startFile, startPos, _, err := binlogStatus(conn)
	if err != nil {
		tb.Fatal(err)
	}
	perTx := func(g benchGroup) int {
		if g.perTx > 0 {
			return g.perTx
		}
		return 500
	}
	for k, g := range benchGroups {
		rng := mrand.New(mrand.NewPCG(uint64(k), 7))
		per := perTx(g)
		if g.name == "edges" {
			per = 50 // rows of up to ~12 KB: keep statements well below max_allowed_packet
		}
		for lo := 0; lo < g.rows; lo += per {
			var b strings.Builder
			fmt.Fprintf(&b, "INSERT INTO `%s` VALUES ", names[k].Table)
			for i := lo; i < min(lo+per, g.rows); i++ {
				if i > lo {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "(%d, %s)", i, g.values(i, rng))
			}
			exec(b.String())
		}
	}
	for k, g := range benchGroups {
		for lo := 0; lo < g.rows; lo += perTx(g) {
			exec(fmt.Sprintf("UPDATE `%s` SET %s WHERE id >= %d AND id < %d", names[k].Table, g.update, lo, lo+perTx(g)))
		}
	}
	endFile, endPos, _, err := binlogStatus(conn)
	if err != nil {
		tb.Fatal(err)
	}

	src, err := New(addr, user, pass, names, nil)
	if err != nil {
		tb.Fatal(err)
	}
	c := &decodeCapture{src: src, tables: map[TableName]*table{}}
	// Loaded before the drop; the benchmark's readers find them cached and never query.
	cat := &catalog{src: src}
	defer cat.close()
	for _, n := range names {
		if c.tables[n], err = cat.load(ctx, src.tableID(n)); err != nil {
			tb.Fatal(err)
		}
	}
	if c.charsets, err = cat.collations(ctx); err != nil {
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
	var raw [][]byte
	file := startFile
	for file != endFile || len(raw) == 0 || lastPos(raw) < endPos {
		ev, err := streamer.GetEvent(ctx)
		if err != nil {
			tb.Fatalf("capture binlog up to %s:%d: %v", endFile, endPos, err)
		}
		// Copied: the capture outlives the syncer.
		raw = append(raw, append([]byte(nil), ev.RawData...))
		if r, ok := ev.Event.(*replication.RotateEvent); ok {
			file = string(r.NextLogName)
		}
	}
	if c.units, err = splitUnits(raw, db, tableOf); err != nil {
		tb.Fatal(err)
	}
	for _, g := range benchGroups {
		for _, phase := range []string{"insert", "update"} {
			if u := c.units[g.name+"/"+phase]; u == nil || u.rows != g.rows {
				n := 0
				if u != nil {
					n = u.rows
				}
				tb.Fatalf("capture of %s/%s: %d row changes, want %d", g.name, phase, n, g.rows)
			}
		}
	}
	return c
}

// splitUnits sorts the captured transactions by group and phase, dropping those of other
// sessions: other tests share the server, and their DDL would make a reader reload a dropped
// table mid-pass. The binlog serializes transactions, so each is a GTID event and what follows
// up to the next one; rotations and format descriptions belong to the stream and go to every unit.
func splitUnits(raw [][]byte, db string, tableOf map[string]string) (map[string]*unit, error) {
	p := replication.NewBinlogParser()
	units := map[string]*unit{}
	var stream, tx [][]byte
	key, rows := "", 0
	flush := func() {
		if key != "" {
			u := units[key]
			if u == nil {
				u = &unit{raw: append([][]byte(nil), stream...)}
				units[key] = u
			}
			u.raw = append(u.raw, tx...)
			u.rows += rows
		}
		tx, key, rows = nil, "", 0
	}
	for _, b := range raw {
		ev, err := p.Parse(b)
		if err != nil {
			return nil, err
		}
		switch e := ev.Event.(type) {
		case *replication.RotateEvent, *replication.FormatDescriptionEvent:
			stream = append(stream, b)
			for _, u := range units {
				u.raw = append(u.raw, b)
			}
			continue
		case *replication.MariadbGTIDEvent:
			flush()
		case *replication.RowsEvent:
			group, ok := tableOf[string(e.Table.Table)]
			if !ok || string(e.Table.Schema) != db {
				break
			}
			phase := "insert"
			n := len(e.Rows)
			if e.Type() == replication.EnumRowsEventTypeUpdate {
				phase, n = "update", n/2
			}
			key, rows = group+"/"+phase, rows+n
		}
		tx = append(tx, b)
	}
	flush()
	return units, nil
}

// lastPos is the end position of the last captured event (0 for the syncer's fake rotation).
func lastPos(raw [][]byte) uint32 {
	return binary.LittleEndian.Uint32(raw[len(raw)-1][13:17])
}

// splitDSN splits a go-sql-driver/mysql DSN, user:pass@tcp(host:port)/db[?...].
func splitDSN(dsn string) (user, pass, addr, db string, err error) {
	m, err := testenv.ParseMySQLDSN(dsn)
	return m.User, m.Password, m.Addr, m.DB, err
}

// decodeGoMySQL is path (a): go-mysql's parser with its default options turns every event
// into its Event value (rows events into RowsEvent with []any rows). It returns the number of
// row changes (an update's before and after images count once).
func decodeGoMySQL(u *unit) (int, error) {
	p := replication.NewBinlogParser()
	n := 0
	for _, raw := range u.raw {
		ev, err := p.Parse(raw)
		if err != nil {
			return n, err
		}
		if e, ok := ev.Event.(*replication.RowsEvent); ok {
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
// st; consume takes the events off st after each binlog event, on the same goroutine, as a
// consumer keeping up would (so st needs room for one rows event's rows only). A fresh reader
// per pass is a reader that just connected, with the schemas cached. Without direct, rows are
// decoded by go-mysql and normalized from its values, as before the direct decoder existed:
// TestMySQLBinlogDecodePathsAgree compares the two.
func (c *decodeCapture) decodeMySQLCDC(u *unit, st *stream, direct bool, consume func(cdc.Event)) error {
	p := replication.NewBinlogParser()
	p.SetFlavor(string(c.src.opts.Flavor))
	p.SetTimestampStringLocation(time.UTC)
	p.SetVerifyChecksum(true)
	if direct {
		p.SetRowsEventDecodeFunc(deferRows)
	}
	r := newReader(st)
	r.charsets = c.charsets
	for name, t := range c.tables {
		r.tables[name] = t
	}
	ctx := context.Background()
	for _, raw := range u.raw {
		ev, err := p.Parse(raw)
		if err != nil {
			return err
		}
		if err := r.handle(ctx, ev); err != nil {
			return err
		}
		for len(st.events) > 0 {
			consume(<-st.events)
		}
	}
	return nil
}

// countUncaptured reads u with a source that captures none of its tables and returns the row
// changes the reader counted towards version ordinals.
func (c *decodeCapture) countUncaptured(u *unit, direct bool) (int, error) {
	src, err := New(c.src.addr, c.src.user, c.src.password, []TableName{{Database: "none", Table: "none"}}, nil)
	if err != nil {
		return 0, err
	}
	st := &stream{src: src, events: make(chan cdc.Event, 1), done: make(chan struct{})}
	p := replication.NewBinlogParser()
	p.SetFlavor(string(src.opts.Flavor))
	if direct {
		p.SetRowsEventDecodeFunc(deferRows)
	}
	r := newReader(st)
	n := 0
	for _, raw := range u.raw {
		ev, err := p.Parse(raw)
		if err != nil {
			return n, err
		}
		_, rows := ev.Event.(*replication.RowsEvent)
		before := r.txRows
		if err := r.handle(context.Background(), ev); err != nil {
			return n, err
		}
		if rows {
			n += r.txRows - before
		}
	}
	return n, nil
}

// benchStream is a stream with room for the events of any one rows event of the workload
// (rows events are cut at 8 KiB), so the sends in path (b) never block.
func (c *decodeCapture) benchStream() *stream {
	return &stream{src: c.src, events: make(chan cdc.Event, 2048), done: make(chan struct{})}
}

// collect decodes u on the mysqlcdc path and returns its events.
func (c *decodeCapture) collect(u *unit, direct bool) ([]cdc.Event, error) {
	var evs []cdc.Event
	err := c.decodeMySQLCDC(u, c.benchStream(), direct, func(ev cdc.Event) { evs = append(evs, ev) })
	return evs, err
}

// TestMySQLBinlogDecodePathsAgree runs both benchmarked paths over every group's capture: each
// must see every row change, and the mysqlcdc path's events -- values, positions, checkpoints
// -- must be exactly those of go-mysql's decoding normalized the way it was before the direct
// decoder, so the benchmark compares two complete decodes and the values did not change.
func TestMySQLBinlogDecodePathsAgree(t *testing.T) {
	c := captureBinlog(t)
	keys := make([]string, 0, len(c.units))
	for k := range c.units {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		u := c.units[k]
		n, err := decodeGoMySQL(u)
		if err != nil || n != u.rows {
			t.Fatalf("%s: go-mysql decoded %d row changes (%v), want %d", k, n, err, u.rows)
		}
		// A table not captured is only counted (the GTID version ordinal counts every row).
		for _, direct := range []bool{true, false} {
			if n, err := c.countUncaptured(u, direct); err != nil || n != u.rows {
				t.Fatalf("%s (direct %v): %d rows counted for a table not captured (%v), want %d", k, direct, n, err, u.rows)
			}
		}
		var got [2][]cdc.Event
		for i, direct := range []bool{true, false} {
			if got[i], err = c.collect(u, direct); err != nil {
				t.Fatalf("%s (direct %v): %v", k, direct, err)
			}
			if direct {
				for name, tbl := range c.tables {
					if strings.Contains(name.Table, "_"+strings.Split(k, "/")[0]+"_") && tbl.plan == nil {
						t.Fatalf("%s: the direct decoder left table %s to go-mysql", k, name.Table)
					}
				}
			}
		}
		if len(got[0]) != u.rows || len(got[1]) != u.rows {
			t.Fatalf("%s: %d and %d events, want %d", k, len(got[0]), len(got[1]), u.rows)
		}
		for i := range got[0] {
			a, b := got[0][i], got[1][i]
			if a.Malformed != nil || b.Malformed != nil {
				t.Fatalf("%s event %d malformed: %v / %v", k, i, a.Malformed, b.Malformed)
			}
			if a.Op != b.Op || a.Position != b.Position || string(a.Checkpoint) != string(b.Checkpoint) || a.Schema != b.Schema {
				t.Fatalf("%s event %d: %v at %v, go-mysql's %v at %v", k, i, a.Op, a.Position, b.Op, b.Position)
			}
			for _, img := range [][2][]cdc.Value{{a.Before, b.Before}, {a.After, b.After}} {
				if !reflect.DeepEqual(img[0], img[1]) {
					if len(img[0]) != len(img[1]) {
						t.Fatalf("%s event %d: %d values, go-mysql's %d", k, i, len(img[0]), len(img[1]))
					}
					for col := range img[1] {
						if !reflect.DeepEqual(img[0][col], img[1][col]) {
							t.Errorf("%s event %d column %s: %#v, go-mysql's %#v", k, i, a.Schema.Columns[col].Name, img[0][col], img[1][col])
						}
					}
					t.FailNow()
				}
			}
		}
	}
	// Spot checks against values written by hand, so both paths agreeing on a wrong value
	// does not pass: the last row of "all" after its update.
	evs, err := c.collect(c.units["all/update"], true)
	if err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1]
	i := benchGroups[0].rows - 1
	want := map[string]cdc.Value{
		"id": int64(i), "iu": uint64(i + 1), "vc": fmt.Sprintf("varchar value %d ☃!", i),
		"vl": fmt.Sprintf("café %d", i), "en": "red", "st": "", // 9999 % 4 == 3: the empty set
		"dc":  fmt.Sprintf("%d.%03d", i, i%1000),
		"dtm": fmt.Sprintf("2024-01-02 03:04:%02d.%06d", i%60+1, i),
		"ts":  cdc.EpochMicros(time.Date(2024, 6, 1, 12, i%60, i%60, i%1000*1e6, time.UTC).UnixMicro()),
		"j":   cdc.RawJSON(fmt.Sprintf(`{"k":%d,"tags":["a","b"],"nested":{"ok":true}}`, i)),
		"tx":  cdc.Base64(base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("a text column of moderate length, row %d", i)))),
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
	// And the integers, signed and UNSIGNED after a YEAR, of every row as written: the
	// signedness comes from the table map's bits, which both paths read alike.
	evs, err = c.collect(c.units["integers/insert"], true)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		i := int(ev.After[0].(int64))
		want := []cdc.Value{int64(i), int64(i%256 - 128), int64(1901 + i%255), int64(i*7%65536 - 32768), int64(i*1031 - 8388608 + i),
			int64(i * 104729), int64(i)*1e12 + 7, uint64(uint32(i) * 2654435761), uint64(i) * 11400714819323198485}
		if !reflect.DeepEqual(ev.After, want) {
			t.Fatalf("integers row %d: %v, want %v", i, ev.After, want)
		}
	}
}

// BenchmarkBinlogDecode compares, over the same captured binlog bytes, go-mysql's default
// decoding (a) with the mysqlcdc path to normalized cdc.Events (b), per type group and phase
// (inserts; updates, whose before and after images both count). Each iteration runs a then b
// (then b then a), so load changes on a shared machine hit both alike; garbage collection is
// paid by whichever pass triggers it, so by each path in proportion to its allocation. Metrics:
// ns/row and allocs/row of each, and speed-x = a's time / b's (the goal is >= 1).
func BenchmarkBinlogDecode(b *testing.B) {
	c := captureBinlog(b)
	for _, g := range benchGroups {
		if !g.bench {
			continue
		}
		for _, phase := range []string{"insert", "update"} {
			u := c.units[g.name+"/"+phase]
			b.Run(g.name+"/"+phase, func(b *testing.B) {
				st := c.benchStream()
				n := 0
				consume := func(ev cdc.Event) {
					if ev.Malformed != nil {
						b.Fatal(ev.Malformed)
					}
					n++
				}
				var ns [2]time.Duration
				var allocs [2]uint64
				pass := func(path int) {
					var m runtime.MemStats
					runtime.ReadMemStats(&m)
					before := m.Mallocs
					start := time.Now()
					if path == 0 {
						if _, err := decodeGoMySQL(u); err != nil {
							b.Fatal(err)
						}
					} else {
						// Receiving is part of the pass: a consumer takes every event off the channel.
						n = 0
						if err := c.decodeMySQLCDC(u, st, true, consume); err != nil || n != u.rows {
							b.Fatalf("%d events (want %d): %v", n, u.rows, err)
						}
					}
					ns[path] += time.Since(start)
					runtime.ReadMemStats(&m)
					allocs[path] += m.Mallocs - before
				}
				for i := 0; b.Loop(); i++ {
					pass(i % 2)
					pass(1 - i%2)
				}
				rows := float64(u.rows) * float64(b.N)
				b.ReportMetric(float64(ns[0].Nanoseconds())/rows, "gomysql-ns/row")
				b.ReportMetric(float64(ns[1].Nanoseconds())/rows, "mysqlcdc-ns/row")
				b.ReportMetric(float64(allocs[0])/rows, "gomysql-allocs/row")
				b.ReportMetric(float64(allocs[1])/rows, "mysqlcdc-allocs/row")
				b.ReportMetric(float64(ns[0])/float64(ns[1]), "speed-x")
			})
		}
	}
}
