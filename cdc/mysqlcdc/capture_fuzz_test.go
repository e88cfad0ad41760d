package mysqlcdc

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/cdctest"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// captureFuzzSeeds, set, makes TestCaptureFuzzSeeds write the events it captured as seeds.
const captureFuzzSeeds = "TRIBUTARY_FUZZ_CAPTURE"

// captureRow1 is the first row TestCaptureFuzzSeeds writes (fuzzColumnsDDL's columns), and
// captureWant1 its values as the stream delivers them.
const captureRow1 = `(1, -1, 65535, -8388608, -9223372036854775807, 18446744073709551615, 2024, 7.456,
	-12345678901234567890.0123456789, 1.5, 1, b'111111111111', 'abc', 'café ☃', 'café', 'hello', x'00ff', 'ab', x'00',
	'green', 'x,z', '2005-05-06', '-01:02:03.123', '2024-01-02 03:04:05.123456', '2023-05-06 10:11:12',
	'2024-06-01 12:13:14.567', '{"a": [1, true], "b": {"c": null}}')`

var captureWant1 = map[string]cdc.Value{
	"id": int64(1), "ti": int64(-1), "su": uint64(65535), "mi": int64(-8388608), "bi": int64(-9223372036854775807),
	"bu": uint64(1<<64 - 1), "yr": int64(2024), "dc": "7.456", "dw": "-12345678901234567890.0123456789", "f": 1.5,
	"d": 1.0, "bt": uint64(4095), "c": "abc", "vc": "café ☃", "vl": "café", "tx": cdc.Base64("aGVsbG8="),
	"vb": cdc.Base64("AP8="), "bn": cdc.Base64("YWIAAAAA"), "bl": cdc.Base64("AA=="), "en": "green", "st": "x,z",
	"dt": "2005-05-06", "tm": "-01:02:03.123", "dtm": "2024-01-02 03:04:05.123456", "dt0": "2023-05-06 10:11:12",
	"ts": cdc.EpochMicros(time.Date(2024, 6, 1, 12, 13, 14, 567e6, time.UTC).UnixMicro()),
	"j":  cdc.RawJSON(`{"a":[1,true],"b":{"c":null}}`),
}

// TestCaptureFuzzSeeds writes rows of every storage format the fuzz targets' table has
// (fuzzColumnsDDL) on the test server -- an insert of two rows, one of them all NULL, an
// update and a delete -- and streams them through a Source, whose reader hands each binlog
// event to eventHook first. The stream must deliver the values written, and the captured
// bytes, put through the fuzz harness (checkBinlogRows' parsers and reader), must decode to
// the same events. With TRIBUTARY_FUZZ_CAPTURE=1 it writes them as seeds,
// testdata/fuzz/<target>/capture-*, of FuzzBinlogRows, FuzzBinlogTableMap and FuzzBinlogValue
// (the schema renamed "fz", as the harness's source captures):
//
//	TRIBUTARY_FUZZ_CAPTURE=1 go test -run TestCaptureFuzzSeeds ./cdc/mysqlcdc
func TestCaptureFuzzSeeds(t *testing.T) {
	dsn := testenv.Require(t, testenv.MySQLDSN)
	m, err := testenv.ParseMySQLDSN(dsn)
	if err != nil {
		t.Fatalf("%s: %v", testenv.MySQLDSN, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := client.ConnectWithContext(ctx, m.Addr, m.User, m.Password, m.DB, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.ReadTimeout, conn.WriteTimeout = 30*time.Second, 30*time.Second
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	table := fmt.Sprintf("fzmy_rows_%08x", binary.BigEndian.Uint32(rnd[:]))
	exec := func(q string) {
		t.Helper()
		if _, err := conn.Execute(q); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	exec("SET SESSION time_zone = '+00:00'")
	exec(fmt.Sprintf("CREATE TABLE `%s` (%s) DEFAULT CHARSET=utf8mb4", table, strings.Join(fuzzColumnsDDL, ", ")))
	defer exec("DROP TABLE IF EXISTS `" + table + "`")

	// The hook records this table's table maps and rows events, and the format description
	// (whether events end with a checksum).
	var mu sync.Mutex
	var captured []*replication.BinlogEvent
	checksum := false
	hook := func(ev *replication.BinlogEvent) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.Event.(type) {
		case *replication.FormatDescriptionEvent:
			checksum = e.ChecksumAlgorithm == replication.BINLOG_CHECKSUM_ALG_CRC32
		case *replication.TableMapEvent:
			if string(e.Table) == table {
				captured = append(captured, &replication.BinlogEvent{Header: ev.Header, RawData: append([]byte(nil), ev.RawData...), Event: e})
			}
		case *replication.RowsEvent:
			if e.Table != nil && string(e.Table.Table) == table {
				captured = append(captured, &replication.BinlogEvent{Header: ev.Header, RawData: append([]byte(nil), ev.RawData...), Event: e})
			}
		}
	}
	eventHook.Store(&hook)
	defer eventHook.Store(nil)

	name := TableName{Database: m.DB, Table: table}
	src, err := New(m.Addr, m.User, m.Password, []TableName{name}, &Options{Snapshot: cdc.SnapshotNever,
		ServerID: 1<<24 + binary.BigEndian.Uint32(rnd[:])%(1<<30)})
	if err != nil {
		t.Fatal(err)
	}
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	exec("INSERT INTO `" + table + "` (" + columnNames() + ") VALUES " + captureRow1 + ", (2" + strings.Repeat(", NULL", len(fuzzColumns)-1) + ")")
	exec("UPDATE `" + table + "` SET ti = 5, vc = 'x', dtm = '1000-01-01 00:00:00.000001' WHERE id = 1")
	exec("DELETE FROM `" + table + "` WHERE id = 2")

	var evs []cdc.Event
	for range 4 {
		evs = append(evs, cdctest.NextEvent(ctx, t, st))
	}
	want2 := map[string]cdc.Value{"id": int64(2)}
	for _, c := range fuzzColumns[1:] {
		want2[c.name] = nil
	}
	updated := map[string]cdc.Value{}
	for k, v := range captureWant1 {
		updated[k] = v
	}
	updated["ti"], updated["vc"], updated["dtm"] = int64(5), "x", "1000-01-01 00:00:00.000001"
	for i, w := range []struct {
		op            cdc.Op
		before, after map[string]cdc.Value
	}{{cdc.Insert, nil, captureWant1}, {cdc.Insert, nil, want2}, {cdc.Update, captureWant1, updated}, {cdc.Delete, want2, nil}} {
		ev := evs[i]
		if ev.Op != w.op || ev.Malformed != nil {
			t.Fatalf("event %d: %v (malformed %v), want %v", i, ev.Op, ev.Malformed, w.op)
		}
		for _, img := range []struct {
			got  []cdc.Value
			want map[string]cdc.Value
		}{{ev.Before, w.before}, {ev.After, w.after}} {
			if (img.got == nil) != (img.want == nil) {
				t.Fatalf("event %d: image %v, want %v", i, img.got, img.want)
			}
			for col, v := range img.want {
				k := ev.Schema.ColumnIndex(col)
				if k < 0 || !reflect.DeepEqual(img.got[k], v) {
					t.Errorf("event %d column %s: %#v, want %#v", i, col, img.got[max(k, 0)], v)
				}
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	st.Close()
	eventHook.Store(nil) // the harness's readers below call it too

	// The captured bytes, through the harness.
	mu.Lock()
	defer mu.Unlock()
	body := func(ev *replication.BinlogEvent) []byte {
		b := ev.RawData[replication.EventHeaderSize:]
		if checksum {
			b = b[:len(b)-replication.BinlogChecksumLength]
		}
		return b
	}
	seeds := map[string][]string{} // target -> file contents
	hsrc := fuzzSource()
	var tmBody []byte
	n := 0
	for _, ev := range captured {
		if _, ok := ev.Event.(*replication.TableMapEvent); ok {
			tmBody = asFuzzSchema(body(ev))
			seeds["FuzzBinlogTableMap"] = append(seeds["FuzzBinlogTableMap"], corpusFile(tmBody, false))
			continue
		}
		if tmBody == nil {
			t.Fatal("a rows event before its table map")
		}
		tp := ev.Header.EventType
		p := fuzzParser(true)
		tmEv, err := parseFuzzEvent(p, replication.TABLE_MAP_EVENT, tmBody)
		if err != nil {
			t.Fatal(err)
		}
		rowsEv, err := parseFuzzEvent(p, tp, body(ev))
		if err != nil {
			t.Fatal(err)
		}
		tbl := fuzzTableFor(tmEv.Event.(*replication.TableMapEvent))
		hst := &stream{src: hsrc, events: make(chan cdc.Event, 8), done: make(chan struct{})}
		var grown uint64
		got, err := readRows(hst, tbl, tmEv, rowsEv, &grown)
		if err != nil {
			t.Fatal(err)
		}
		if tbl.plan == nil {
			t.Fatal("the harness left the captured table to go-mysql's decoder")
		}
		for _, g := range got {
			if n >= len(evs) {
				t.Fatalf("the harness read more than %d events", len(evs))
			}
			if g.Op != evs[n].Op || !reflect.DeepEqual(g.Before, evs[n].Before) || !reflect.DeepEqual(g.After, evs[n].After) {
				t.Fatalf("event %d through the harness: %v %v -> %v, the stream's %v %v -> %v", n, g.Op, g.Before, g.After,
					evs[n].Op, evs[n].Before, evs[n].After)
			}
			n++
		}
		seeds["FuzzBinlogRows"] = append(seeds["FuzzBinlogRows"], corpusFile(tmBody, body(ev), rowsTypeIndex(tp)))
		if tp == replication.WRITE_ROWS_EVENTv1 || tp == replication.WRITE_ROWS_EVENTv2 {
			seeds["FuzzBinlogValue"] = append(seeds["FuzzBinlogValue"], valueSeeds(t, tmEv.Event.(*replication.TableMapEvent), rowsEv.Event.(*replication.RowsEvent))...)
		}
	}
	if n != len(evs) {
		t.Fatalf("the harness read %d events of the %d streamed", n, len(evs))
	}
	if os.Getenv(captureFuzzSeeds) == "" {
		t.Logf("seeds not written: %s is unset", captureFuzzSeeds)
		return
	}
	for target, files := range seeds {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, f := range files {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("capture-mariadb-%02d", i)), []byte(f), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("%s: %d seeds", target, len(files))
	}
}

// columnNames lists fuzzColumns' names for an INSERT.
func columnNames() string {
	names := make([]string, len(fuzzColumns))
	for i, c := range fuzzColumns {
		names[i] = c.name
	}
	return strings.Join(names, ", ")
}

// asFuzzSchema renames a table map body's database "fz" (the harness's source captures it).
func asFuzzSchema(b []byte) []byte {
	const head = 6 + 2 // table id, flags
	l := int(b[head])
	out := append([]byte(nil), b[:head]...)
	out = append(out, 2, 'f', 'z')
	return append(out, b[head+1+l:]...)
}

// valueSeeds are FuzzBinlogValue seeds of every non-NULL value of the first image of an
// insert (all columns present), as stored.
func valueSeeds(t *testing.T, tm *replication.TableMapEvent, e *replication.RowsEvent) []string {
	images, _ := pendingImages(e)
	n := int(tm.ColumnCount)
	nulls := images[:(n+7)/8]
	pos := len(nulls)
	var out []string
	for i := range n {
		if nulls[i/8]&(1<<(i%8)) != 0 {
			continue
		}
		tp, strLen := realType(tm.ColumnType[i], tm.ColumnMeta[i])
		size := valueSize(images[pos:], tp, tm.ColumnMeta[i], strLen)
		if size < 0 {
			t.Fatalf("column %d: no size", i)
		}
		v := []byte(images[pos : pos+size])
		pos += size
		if i == 0 {
			continue
		}
		c := fuzzColumns[i]
		k := strings.IndexByte(string(fuzzValueTypes), tm.ColumnType[i])
		if k < 0 {
			t.Fatalf("column %s: type %d is not one FuzzBinlogValue picks", c.name, tm.ColumnType[i])
		}
		coll := map[uint64]uint8{45: 0, 8: 1, binaryCollation: 2, 46: 3}[c.collation]
		out = append(out, corpusFile(uint8(k), tm.ColumnMeta[i], c.unsigned, coll, c.name == "j", v))
	}
	return out
}

// corpusFile is a seed file in the go fuzz corpus format of the values.
func corpusFile(vals ...any) string {
	var b strings.Builder
	b.WriteString("go test fuzz v1\n")
	for _, v := range vals {
		switch x := v.(type) {
		case []byte:
			fmt.Fprintf(&b, "[]byte(%q)\n", x)
		case uint8:
			fmt.Fprintf(&b, "byte(%q)\n", x)
		case uint16:
			fmt.Fprintf(&b, "uint16(%d)\n", x)
		case bool:
			fmt.Fprintf(&b, "bool(%v)\n", x)
		default:
			panic(fmt.Sprintf("corpusFile: %T", v))
		}
	}
	return b.String()
}
