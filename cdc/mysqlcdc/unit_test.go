package mysqlcdc

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/tributary-dev/tributary/cdc"
)

func TestGTIDVersionsOrder(t *testing.T) {
	cases := []struct{ seq, ord uint64 }{{1, 0}, {1, 1}, {1, maxGTIDOrdinal}, {2, 0}, {2, 5}, {1 << 40, 0}}
	prev := int64(-1)
	for _, c := range cases {
		v, ok := gtidVersion(c.seq, int(c.ord))
		if !ok || v <= prev {
			t.Fatalf("gtidVersion(%d, %d) = %d (ok %v), previous %d", c.seq, c.ord, v, ok, prev)
		}
		prev = v
	}
	if _, ok := gtidVersion(5, maxGTIDOrdinal+1); ok {
		t.Fatal("an ordinal overflow is not reported")
	}
	if v, ok := gtidVersion(1<<gtidSeqBits, 0); ok || v < 0 {
		t.Fatalf("a sequence overflow gives %d, ok %v", v, ok)
	}
	// A snapshot at sequence s sits above all of s's rows and below s+1's.
	snap, _ := gtidVersion(7, maxGTIDOrdinal)
	last7, _ := gtidVersion(7, 1000)
	first8, _ := gtidVersion(8, 0)
	if !(last7 <= snap && snap < first8) {
		t.Fatalf("snapshot version %d not in [%d, %d)", snap, last7, first8)
	}
}

func TestFileVersionsOrder(t *testing.T) {
	cases := []struct {
		idx uint64
		pos uint32
		ord int
	}{{1, 4, 0}, {1, 4, 1}, {1, 5, 0}, {1, 1<<32 - 1, maxFileOrdinal}, {2, 4, 0}, {1<<fileIndexBits - 1, 1<<32 - 1, maxFileOrdinal}}
	prev := int64(-1)
	for _, c := range cases {
		v, ok := fileVersion(c.idx, c.pos, c.ord)
		if !ok || v <= prev {
			t.Fatalf("fileVersion(%d, %d, %d) = %d (ok %v), previous %d", c.idx, c.pos, c.ord, v, ok, prev)
		}
		prev = v
	}
	if _, ok := fileVersion(1, 4, maxFileOrdinal+1); ok {
		t.Fatal("an ordinal overflow is not reported")
	}
}

func TestBinlogIndex(t *testing.T) {
	if n, err := binlogIndex("mariadb-bin.000042"); err != nil || n != 42 {
		t.Fatalf("binlogIndex = %d, %v", n, err)
	}
	if _, err := binlogIndex("nodots"); err == nil {
		t.Fatal("a name without a numeric suffix is accepted")
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	c := checkpoint{File: "mariadb-bin.000003", Pos: 1234, GTID: "0-1-42,1-2-7", UseGTID: true}
	got, err := decodeCheckpoint(c.encode())
	c.Format = checkpointFormat
	if err != nil || got != c {
		t.Fatalf("decode(encode(%+v)) = %+v, %v", c, got, err)
	}
	for _, bad := range []string{`nope`, `{"v":2,"file":"f.1","pos":4}`, `{"v":1}`} {
		if _, err := decodeCheckpoint(cdc.Checkpoint(bad)); err == nil {
			t.Errorf("checkpoint %s accepted", bad)
		}
	}
}

func TestParseLabels(t *testing.T) {
	got := parseLabels(`enum('a','b c','it''s','x,y')`)
	if want := []string{"a", "b c", "it's", "x,y"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("parseLabels = %q, want %q", got, want)
	}
	if got := parseLabels(`set('')`); !reflect.DeepEqual(got, []string{""}) {
		t.Fatalf("parseLabels of an empty label = %q", got)
	}
}

func TestJSONValidColumns(t *testing.T) {
	got := jsonValidColumns("json_valid(`doc`) and JSON_VALID(`we``ird`) or json_valid(`x` )")
	if want := []string{"doc", "we`ird"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("jsonValidColumns = %q, want %q", got, want)
	}
}

func TestFirstWord(t *testing.T) {
	for q, want := range map[string]string{
		"BEGIN":                           "BEGIN",
		"/* app */ ALTER TABLE t":         "ALTER",
		"create table t(id int)":          "create",
		"/* a */ /* b */ DROP TABLE x":    "DROP",
		"/*!40000 RENAME TABLE a TO b */": "RENAME",
		"/*M!100500 DROP TABLE x */":      "DROP",
		"/*!ALTER TABLE x */":             "ALTER",
	} {
		if got := firstWord(q); got != want {
			t.Errorf("firstWord(%q) = %q, want %q", q, got, want)
		}
	}
}

func TestBinlogValues(t *testing.T) {
	u8 := colCodec{class: classUint, bits: 8}
	u24 := colCodec{class: classUint, bits: 24}
	set := colCodec{class: classSet, labels: []string{"x", "y", "z"}}
	enum := colCodec{class: classEnum, labels: []string{"a", "b"}}
	bin := colCodec{class: classBinary, padTo: 4}
	cases := []struct {
		c    colCodec
		in   any
		want cdc.Value
	}{
		{u8, int8(-1), uint64(255)},
		{u24, int32(-1), uint64(1<<24 - 1)},
		{colCodec{class: classUint, bits: 64}, int64(-1), uint64(1<<64 - 1)},
		{colCodec{class: classFloat32}, float32(0.1), 0.1},
		{set, int64(5), "x,z"},
		{set, int64(0), ""},
		{enum, int64(2), "b"},
		{enum, int64(0), ""},
		{bin, "ab", cdc.Base64("YWIAAA==")},
		{colCodec{class: classTimestamp}, "2024-01-02 03:04:05.5", cdc.EpochMicros(1704164645500000)},
		{colCodec{class: classTimestamp}, "0000-00-00 00:00:00", cdc.EpochMicros(0)},
		{colCodec{class: classJSON}, []byte(`{"a": 1}`), cdc.RawJSON(`{"a":1}`)},
		{colCodec{class: classString, charset: "latin1"}, "caf\xe9", "café"},
	}
	for _, c := range cases {
		got, err := c.c.fromBinlog(c.in)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("class %d: fromBinlog(%#v) = %#v, %v; want %#v", c.c.class, c.in, got, err, c.want)
		}
	}
	if _, err := enum.fromBinlog(int64(3)); err == nil {
		t.Error("an ENUM index beyond the labels is accepted")
	}
	if _, err := set.fromBinlog(int64(8)); err == nil {
		t.Error("a SET bit beyond the labels is accepted")
	}
	if _, err := (&colCodec{class: classJSON}).fromBinlog("{bad"); err == nil {
		t.Error("invalid JSON is accepted")
	}
}

func TestUnixTimestampMicros(t *testing.T) {
	for in, want := range map[string]cdc.EpochMicros{"0": 0, "1700000000": 1700000000e6, "1700000000.5": 1700000000500000, "1.000001": 1000001} {
		if got, err := unixTimestampMicros(in); err != nil || got != want {
			t.Errorf("unixTimestampMicros(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}

func TestTruncatedTableNames(t *testing.T) {
	cases := []struct {
		q, db string
		want  TableName
		ok    bool
	}{
		{"TRUNCATE TABLE t", "d", TableName{"d", "t"}, true},
		{"truncate t", "d", TableName{"d", "t"}, true},
		{"TRUNCATE `Mixed Case`", "d", TableName{"d", "Mixed Case"}, true},
		{"TRUNCATE TABLE `db`.`t`", "other", TableName{"db", "t"}, true},
		{"TRUNCATE TABLE db . t", "", TableName{"db", "t"}, true},
		{"TRUNCATE TABLE `a``b`.\"c\"\"d\"", "", TableName{"a`b", `c"d`}, true},
		{"/* c1 */ TRUNCATE /* c2 */ TABLE -- c3\n `t` WAIT 5", "d", TableName{"d", "t"}, true},
		{"TRUNCATE TABLE table_x", "d", TableName{"d", "table_x"}, true},
		{"TRUNCATE tablé", "d", TableName{"d", "tablé"}, true},
		{"TRUNCATE TABLE t", "", TableName{}, false}, // no default database to resolve it in
		{"TRUNCATE TABLE `unterminated", "d", TableName{}, false},
		{"TRUNCATE TABLE ``", "d", TableName{}, false},
		{"TRUNCATEX t", "d", TableName{}, false},
		{"DELETE FROM t", "d", TableName{}, false},
	}
	for _, c := range cases {
		got, ok := truncatedTable(c.q, c.db)
		if ok != c.ok || got != c.want {
			t.Errorf("truncatedTable(%q, %q) = %v, %v; want %v, %v", c.q, c.db, got, ok, c.want, c.ok)
		}
	}
}

// TestCheckpointEncodingMatchesJSON checks the hand-written checkpoint encoding against
// encoding/json, and gtidText against go-mysql's String.
func TestCheckpointEncodingMatchesJSON(t *testing.T) {
	for _, c := range []checkpoint{
		{File: "mariadb-bin.000042", Pos: 1234},
		{File: "mariadb-bin.000042", Pos: 4, GTID: "0-1-99,1-2-3", UseGTID: true},
		{File: `odd "name"\ \x01`, Pos: 1<<32 - 1, UseGTID: true},
		{File: "f.000001", Pos: 4, Snapshot: &snapshotMark{Done: []TableName{{"d", "t"}}}},
	} {
		want := c
		want.Format = checkpointFormat
		wantJSON, _ := json.Marshal(want)
		if got := c.encode(); string(got) != string(wantJSON) {
			t.Errorf("encode() = %s, json.Marshal %s", got, wantJSON)
		}
	}
	for _, g := range []mysql.MariadbGTID{{}, {DomainID: 0, ServerID: 1, SequenceNumber: 2}, {DomainID: 1<<32 - 1, ServerID: 7, SequenceNumber: 1<<64 - 1}} {
		if got, want := gtidText(g), g.String(); got != want {
			t.Errorf("gtidText(%+v) = %q, String() %q", g, got, want)
		}
	}
}

// TestBinlogErrorsCarryNoRowData checks that go-mysql's parse errors, which quote the event's
// bytes, lose them in binlogError's message.
func TestBinlogErrorsCarryNoRowData(t *testing.T) {
	secret := "row-data-4711"
	parseErr := &replication.EventError{Header: &replication.EventHeader{EventType: replication.WRITE_ROWS_EVENTv1, LogPos: 99},
		Err: "parse rows event panic, data " + secret, Data: []byte(secret)}
	for _, err := range []error{
		&binlogError{err: parseErr},
		&binlogError{op: "decode rows event", err: &quietError{msg: "go-mysql cannot decode the row images", cause: errors.New(secret)}},
	} {
		if msg := err.Error(); strings.Contains(msg, secret) || !strings.HasPrefix(msg, "mysqlcdc: ") {
			t.Errorf("message %q", msg)
		}
	}
	var ee *replication.EventError
	if !errors.As(&binlogError{err: parseErr}, &ee) {
		t.Error("the parse error is not reachable through errors.As")
	}
}

// TestSingleByteMapsMatchTheCharsetDecoder checks the byte maps of the single-byte character
// sets against internal/charset on every byte, alone and in a string.
func TestSingleByteMapsMatchTheCharsetDecoder(t *testing.T) {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	for cs := range singleByteCharsets {
		m := singleByteMap(cs)
		if m == nil {
			t.Errorf("%s: no byte map", cs)
			continue
		}
		for _, b := range [][]byte{all, []byte("plain ascii"), {}} {
			want, err := decodeText(cs, b)
			if got := decodeByteMap(m, b); err != nil || got != want {
				t.Errorf("%s: %q, the decoder %q (%v)", cs, got, want, err)
			}
		}
	}
	if singleByteMap("utf8mb4") != nil || singleByteMap("sjis") != nil {
		t.Error("a byte map for a character set that is not single-byte")
	}
}

// TestPassesCreditedOnceAcknowledged: a position the reader passed outside a captured
// transaction counts for Lag at once when every delivered change is acknowledged, else once
// Ack reaches the checkpoint delivered last before it (issue 31), never before.
func TestPassesCreditedOnceAcknowledged(t *testing.T) {
	const file = "mariadb-bin.000003"
	at := func(pos uint32) uint64 { return axis(file, pos) }
	s := &stream{}
	ack := func(pos uint32) {
		t.Helper()
		if err := s.Ack(context.Background(), checkpoint{File: file, Pos: pos}.encode()); err != nil {
			t.Fatal(err)
		}
	}
	check := func(want uint32, when string) {
		t.Helper()
		if got := s.caughtUp.Load(); got != at(want) {
			t.Fatalf("%s: caughtUp %d, want position %d (%d)", when, got, want, at(want))
		}
	}
	s.passed(file, 100)
	check(100, "passed with nothing delivered")
	s.delivered(file, 200)
	s.passed(file, 300)
	check(100, "passed with a change delivered and not acknowledged")
	s.passed(file, 400)
	ack(150) // not the last delivered checkpoint
	check(100, "acknowledged short of the checkpoint delivered before the pass")
	ack(200)
	check(400, "acknowledged up to it")
	s.delivered(file, 500)
	s.passed(file, 600)
	s.delivered(file, 700)
	s.passed(file, 800)
	ack(500)
	check(400, "a later pass waits for the later checkpoint")
	ack(700)
	check(800, "acknowledged up to the later checkpoint")
	s.passed(file, 50) // never backwards
	check(800, "an earlier position")
}
