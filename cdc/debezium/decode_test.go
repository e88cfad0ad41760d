package debezium

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/cdc"
)

// fixture reads a testdata file of {"topic","key","value"} lines as records, offsets in
// file order.
func fixture(t testing.TB, name string) []Record {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<22)
	var out []Record
	for sc.Scan() {
		var r struct {
			Topic string          `json:"topic"`
			Key   json.RawMessage `json:"key"`
			Value json.RawMessage `json:"value"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		rec := Record{Topic: r.Topic, Offset: int64(len(out))}
		if string(r.Key) != "null" {
			rec.Key = r.Key
		}
		if string(r.Value) != "null" {
			rec.Value = r.Value
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// fixtureDecoder is newDecoder with Options.PlainDates (the fixtures hold no zero date and no
// BC date), taking a null of a numeric in the precise form for a NULL (the fixtures were
// captured with decimal.handling.mode=precise, and hold no NaN).
func fixtureDecoder(name string, infer bool, v Versions) *decoder {
	d := newDecoder(name, infer, v)
	d.edge = edgeOptions{plainDates: true, preciseNulls: true}
	return d
}

type wantCol struct {
	name  string
	kind  cdc.Kind
	bits  int
	value cdc.Value
}

// TestDecodeTypes pins, column by column, the schema and the value the decoder gives for the
// type matrix captured from real Debezium with column.propagate.source.type: the kinds and
// the value shapes are pgcdc's and mysqlcdc's for the same column (see the differential
// server test for the proof against the native sources themselves).
func TestDecodeTypes(t *testing.T) {
	cases := map[string]struct {
		file string
		pk   []int
		cols []wantCol
	}{
		"postgres": {"postgres-3.6.1-types.jsonl", []int{0, 1}, []wantCol{
			{"b", cdc.KindInt, 32, int64(1)},
			{"a", cdc.KindText, 0, "k"},
			{"i2", cdc.KindInt, 16, int64(-2)},
			{"i4", cdc.KindInt, 32, int64(40000)},
			{"i8", cdc.KindInt, 64, int64(9000000000)},
			{"dec", cdc.KindDecimal, 0, "12345678.91"},
			{"vdec", cdc.KindDecimal, 0, "1.23456789"},
			{"f4", cdc.KindFloat, 32, 1.5},
			{"f8", cdc.KindFloat, 64, 2.25},
			{"bo", cdc.KindBool, 0, true},
			{"t", cdc.KindText, 0, "héllo"},
			{"vc", cdc.KindText, 0, "vc"},
			{"ch", cdc.KindText, 0, "ab "},
			{"by", cdc.KindBinary, 0, cdc.Base64("AP8Q")},
			{"d", cdc.KindDate, 0, "2024-02-29"},
			{"tm", cdc.KindTime, 0, "13:14:15.123456"},
			{"tm3", cdc.KindTime, 0, "01:02:03.456"},
			{"ts", cdc.KindDateTime, 0, "2024-02-29 13:14:15.123456"},
			{"ts3", cdc.KindDateTime, 0, "2024-02-29 13:14:15.1"},
			{"tz", cdc.KindTimestamp, 0, cdc.EpochMicros(1709205255500000)},
			{"tz0", cdc.KindTimestamp, 0, cdc.EpochMicros(1709205255000000)},
			{"iv", cdc.KindOther, 0, "1 year 2 mons 3 days 04:05:06.5"},
			{"u", cdc.KindUUID, 0, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
			{"j", cdc.KindJSON, 0, cdc.RawJSON(`{"k": [1, 2]}`)},
			{"jb", cdc.KindJSON, 0, cdc.RawJSON(`{"k": {"x": null}}`)},
			{"ia", cdc.KindArray, 0, []cdc.Value{int64(1), int64(2), int64(3)}},
			{"ta", cdc.KindArray, 0, []cdc.Value{"a", "b c"}},
			{"m", cdc.KindEnum, 0, "happy"},
			{"bt", cdc.KindBit, 4, "1010"},
			{"vb", cdc.KindBit, 8, "00000101"}, // varbit '101': padded to its declared length (lossy)
			{"ine", cdc.KindOther, 0, "10.0.0.1/8"},
			{"dom", cdc.KindInt, 32, int64(7)}, // a domain over integer: its base type
			{"oi", cdc.KindUint, 32, uint64(42)},
			{"mo", cdc.KindOther, 0, "12.50"}, // money: digits, not PostgreSQL's "$12.50"
			{"tt", cdc.KindOther, 0, "11:14:15Z"},
		}},
		"mariadb": {"mariadb-3.5.0-types.jsonl", []int{1, 0}, []wantCol{
			{"a", cdc.KindText, 0, "k"},
			{"b", cdc.KindInt, 32, int64(1)},
			{"ti", cdc.KindInt, 8, int64(-5)},
			{"tu", cdc.KindUint, 8, uint64(250)},
			{"su", cdc.KindUint, 16, uint64(65000)},
			{"mi", cdc.KindInt, 24, int64(-8000000)},
			{"mu", cdc.KindUint, 24, uint64(16000000)},
			{"iu", cdc.KindUint, 32, uint64(4000000000)},
			{"bi", cdc.KindInt, 64, int64(-9000000000000000000)},
			{"bu", cdc.KindUint, 64, uint64(math.MaxUint64)},
			{"dec1", cdc.KindDecimal, 0, "12345678.91"},
			{"du", cdc.KindDecimal, 0, "99999"},
			{"f", cdc.KindFloat, 32, 1.5},
			{"d", cdc.KindFloat, 64, 2.25},
			{"s", cdc.KindText, 0, "héllo"},
			{"l1", cdc.KindText, 0, "café"},
			{"c", cdc.KindText, 0, "ab"},
			{"tx", cdc.KindText, 0, "long"},
			{"bl", cdc.KindBinary, 0, cdc.Base64("AP8=")},
			{"bn", cdc.KindBinary, 0, cdc.Base64("AQIAAA==")},
			{"vbn", cdc.KindBinary, 0, cdc.Base64("Cgs=")},
			{"dt", cdc.KindDate, 0, "2024-02-29"},
			{"tm", cdc.KindTime, 0, "-01:02:03.456"},
			{"tm0", cdc.KindTime, 0, "838:59:59"},
			{"dtm", cdc.KindDateTime, 0, "2024-02-29 13:14:15.123456"},
			{"dtm0", cdc.KindDateTime, 0, "2024-02-29 13:14:15"},
			{"ts", cdc.KindTimestamp, 0, cdc.EpochMicros(1709212455500000)},
			{"yr", cdc.KindInt, 16, int64(2024)},
			{"e", cdc.KindEnum, 0, "b"},
			{"st", cdc.KindSet, 0, "x,y"},
			{"bt", cdc.KindBit, 4, uint64(10)},
			{"b1", cdc.KindBit, 1, uint64(1)},
			{"b64", cdc.KindBit, 64, uint64(1<<63 | 1)},
			{"j", cdc.KindText, 0, `{"k": [1]}`}, // MariaDB's JSON is LONGTEXT to Debezium
			{"tiny1", cdc.KindInt, 8, int64(1)},
			{"u", cdc.KindUUID, 0, "123e4567-e89b-12d3-a456-426614174000"},
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			recs := fixture(t, tc.file)
			d := fixtureDecoder("src", false, VersionsDefault)
			ev, skip, err := d.decode(&recs[0])
			if err != nil || skip != keep || ev.Malformed != nil {
				t.Fatalf("decode: skip %v err %v malformed %v", skip, err, ev.Malformed)
			}
			if ev.Op != cdc.Read || ev.Position.Version() != snapshotVersion {
				t.Errorf("op %v version %d, want a snapshot read at %d", ev.Op, ev.Position.Version(), snapshotVersion)
			}
			if !reflect.DeepEqual(ev.Schema.PrimaryKey, tc.pk) {
				t.Errorf("primary key %v, want %v (key order, not column order)", ev.Schema.PrimaryKey, tc.pk)
			}
			if len(ev.Schema.Columns) != len(tc.cols) {
				t.Fatalf("%d columns, want %d", len(ev.Schema.Columns), len(tc.cols))
			}
			for i, w := range tc.cols {
				c := ev.Schema.Columns[i]
				if c.Name != w.name || c.Kind != w.kind || c.Bits != w.bits {
					t.Errorf("column %d: %s %v bits %d, want %s %v bits %d", i, c.Name, c.Kind, c.Bits, w.name, w.kind, w.bits)
				}
				if got := ev.After[i]; !reflect.DeepEqual(got, w.value) {
					t.Errorf("column %s: value %#v, want %#v", w.name, got, w.value)
				}
			}
		})
	}
}

// TestDecodeEnvelopes walks the captured change streams (snapshot, an update and an insert in
// one transaction, a key change, a delete, a truncate, tombstones and transaction metadata):
// ops, versions, transaction ids and what is skipped. Those captures lack source types, so
// they decode with InferTypes.
func TestDecodeEnvelopes(t *testing.T) {
	type step struct {
		skip    skipReason
		op      cdc.Op
		version int64
		tx      string
	}
	pgSkips := []step{}
	for range 8 {
		pgSkips = append(pgSkips, step{skip: skipTransaction})
	}
	cases := map[string]struct {
		file  string
		steps []step
	}{
		"postgres": {"postgres-3.6.1.jsonl", append(pgSkips,
			step{op: cdc.Read, version: 0},
			step{op: cdc.Read, version: 0},
			step{op: cdc.Update, version: 996437280, tx: "344245"},
			step{op: cdc.Insert, version: 996437912, tx: "344245"},
			step{op: cdc.Delete, version: 996438104, tx: "344246"}, // a key change: delete, tombstone, create
			step{skip: skipTombstone},
			step{op: cdc.Insert, version: 996438104, tx: "344246"},
			step{op: cdc.Delete, version: 996438336, tx: "344247"},
			step{skip: skipTombstone},
			step{op: cdc.Truncate, version: 996441560, tx: "344248"},
		)},
		"mariadb": {"mariadb-3.5.0.jsonl", []step{
			{op: cdc.Read, version: 0},
			{op: cdc.Read, version: 0},
			{op: cdc.Update, version: 62243 << 20, tx: "0-1-62243"},
			{op: cdc.Insert, version: 62243<<20 | 1, tx: "0-1-62243"},
			{op: cdc.Delete, version: 62244 << 20, tx: "0-1-62244"},
			{skip: skipTombstone},
			{op: cdc.Insert, version: 62244<<20 | 1, tx: "0-1-62244"},
			{op: cdc.Delete, version: 62245 << 20, tx: "0-1-62245"},
			{skip: skipTombstone},
			{op: cdc.Truncate, version: 62246 << 20, tx: "0-1-62246"},
			{skip: skipTransaction}, {skip: skipTransaction}, {skip: skipTransaction}, {skip: skipTransaction},
			{skip: skipTransaction}, {skip: skipTransaction}, {skip: skipTransaction},
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			recs := fixture(t, tc.file)
			if len(recs) != len(tc.steps) {
				t.Fatalf("%d records, want %d", len(recs), len(tc.steps))
			}
			d := fixtureDecoder("src", true, VersionsDefault)
			for i, w := range tc.steps {
				ev, skip, err := d.decode(&recs[i])
				if err != nil {
					t.Fatalf("record %d: %v", i, err)
				}
				if skip != w.skip {
					t.Fatalf("record %d: skip %v, want %v", i, skip, w.skip)
				}
				if skip != keep {
					continue
				}
				if ev.Malformed != nil && !strings.Contains(ev.Malformed.Error(), "interval.handling.mode=string") {
					t.Fatalf("record %d: malformed: %v", i, ev.Malformed)
				}
				if ev.Op != w.op || ev.Position.Version() != w.version || ev.TxID != w.tx {
					t.Errorf("record %d: %v v%d tx %q, want %v v%d tx %q", i, ev.Op, ev.Position.Version(), ev.TxID, w.op, w.version, w.tx)
				}
				if ev.Table.Table == "" || ev.Table.Source != "src" {
					t.Errorf("record %d: table %v", i, ev.Table)
				}
				if ev.Op == cdc.Delete && ev.Malformed == nil && (ev.Before == nil || ev.Before[0] == nil) {
					t.Errorf("record %d: a delete without its key", i)
				}
			}
		})
	}
}

func TestDecodeVersionsFile(t *testing.T) {
	recs := fixture(t, "mariadb-3.5.0.jsonl")
	d := fixtureDecoder("src", true, VersionsFile)
	ev, _, err := d.decode(&recs[2])
	if err != nil || ev.Malformed != nil {
		t.Fatal(err, ev.Malformed)
	}
	if want := int64(25)<<45 | 1603281<<13; ev.Position.Version() != want {
		t.Fatalf("version %d, want %d", ev.Position.Version(), want)
	}
}

// A configuration that cannot work stops the stream with an error naming the fix; a record
// that cannot be read is one Malformed event naming it (never its values).
func TestDecodeRefusals(t *testing.T) {
	pg := fixture(t, "postgres-3.6.1.jsonl")
	my := fixture(t, "mariadb-3.5.0.jsonl")

	var ce *configError
	_, _, err := fixtureDecoder("src", false, VersionsDefault).decode(&pg[8])
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "column.propagate.source.type") {
		t.Errorf("no source types: %v", err)
	}

	noTx := my[2]
	noTx.Value = []byte(strings.Replace(string(noTx.Value), `"transaction":{`, `"transaction":null,"x":{`, 1))
	_, _, err = fixtureDecoder("src", true, VersionsDefault).decode(&noTx)
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "provide.transaction.metadata") {
		t.Errorf("no transaction metadata: %v", err)
	}

	schemaless := Record{Topic: "x", Value: []byte(`{"before":null,"after":{"id":1},"op":"c"}`)}
	_, _, err = fixtureDecoder("src", true, VersionsDefault).decode(&schemaless)
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "schemas.enable") {
		t.Errorf("schemaless: %v", err)
	}

	d := fixtureDecoder("src", true, VersionsDefault)
	for name, value := range map[string]string{
		"not json":   `{"schema":`,
		"unknown op": strings.Replace(string(my[2].Value), `"op":"u"`, `"op":"x"`, 1),
		"bad value":  strings.Replace(string(my[2].Value), `"i":7`, `"i":"secret-7"`, 1),
	} {
		rec := my[2]
		rec.Value = []byte(value)
		if value == string(my[2].Value) {
			t.Fatalf("%s: the edit did not apply", name)
		}
		ev, skip, err := d.decode(&rec)
		if err != nil || skip != keep || ev.Malformed == nil {
			t.Errorf("%s: err %v skip %v malformed %v", name, err, skip, ev.Malformed)
			continue
		}
		if strings.Contains(ev.Malformed.Error(), "secret") || !strings.Contains(ev.Malformed.Error(), "dbzfxmy.test.dbzfx_my[0]@2") {
			t.Errorf("%s: reason %q", name, ev.Malformed)
		}
	}
}

func TestISOInterval(t *testing.T) {
	for in, want := range map[string]string{
		"P1Y2M3DT4H5M6.5S": "1 year 2 mons 3 days 04:05:06.5",
		"PT0S":             "00:00:00",
		"P2D":              "2 days",
		"PT-1H-2M":         "-01:02:00",
		"P-1Y":             "-1 years",
		"P1DT1S":           "1 day 00:00:01",
		"P-1D":             "-1 days",
		"P1Y-2DT3H":        "1 year -2 days +03:00:00",
		"P-1M4DT-1H":       "-1 mons +4 days -01:00:00",
	} {
		got, ok := isoToPostgresInterval(in)
		if !ok || got != want {
			t.Errorf("%s: %q %v, want %q", in, got, ok, want)
		}
	}
}

// A primary-key change arrives as a delete with __debezium.newkey and a create with
// __debezium.oldkey: the delete is skipped and the create becomes the update a native source
// gives (the old key in Before), whose unchanged TOASTed values come from the old document.
func TestDecodeKeyChange(t *testing.T) {
	recs := fixture(t, "postgres-3.6.1.jsonl")
	del, create := recs[12], recs[14]
	del.Headers = []Header{{Key: headerNewKey, Value: []byte(`{"id":4}`)}}
	create.Headers = []Header{{Key: headerOldKey, Value: []byte(`{"id":3}`)}}
	d := fixtureDecoder("src", true, VersionsDefault)
	if _, skip, err := d.decode(&del); err != nil || skip != skipKeyChange {
		t.Fatalf("delete half: skip %v err %v", skip, err)
	}
	ev, skip, err := d.decode(&create)
	if err != nil || skip != keep || ev.Malformed != nil {
		t.Fatalf("create half: skip %v err %v malformed %v", skip, err, ev.Malformed)
	}
	if ev.Op != cdc.Update || ev.Before[0] != int64(3) || ev.Before[1] != nil || ev.Position.Version() != 996438104 {
		t.Fatalf("op %v before %v version %d", ev.Op, ev.Before[:2], ev.Position.Version())
	}
	// The placeholder of an unchanged value is Unchanged in the merged update, refused in a
	// plain insert (it would be written as the value).
	withPlaceholder := create
	withPlaceholder.Value = []byte(strings.Replace(string(create.Value), `"t":"three"`, `"t":"__debezium_unavailable_value"`, 1))
	if string(withPlaceholder.Value) == string(create.Value) {
		t.Fatal("the edit did not apply")
	}
	ev, _, _ = d.decode(&withPlaceholder)
	if ev.Malformed != nil || ev.After[8] != (cdc.Unchanged{}) {
		t.Fatalf("merged update: malformed %v, t %#v", ev.Malformed, ev.After[8])
	}
	withPlaceholder.Headers = nil
	ev, _, _ = d.decode(&withPlaceholder)
	if ev.Malformed == nil || !strings.Contains(ev.Malformed.Error(), "placeholder") {
		t.Fatalf("plain insert with the placeholder: %v", ev.Malformed)
	}
	bad := create
	bad.Headers = []Header{{Key: headerOldKey, Value: []byte(`{"other":3}`)}}
	if ev, _, _ = d.decode(&bad); ev.Malformed == nil {
		t.Fatal("an old key without the key column was accepted")
	}
}

// debezium-connector-mariadb 3.5.0 loses a byte of every UUID it reads from the binlog: a
// streamed row with a UUID value is dead-lettered, a snapshot row (read right) is not.
func TestDecodeMariaDBUUIDRefused(t *testing.T) {
	snap := fixture(t, "mariadb-3.5.0-types.jsonl")[0]
	d := fixtureDecoder("src", false, VersionsFile)
	if ev, _, err := d.decode(&snap); err != nil || ev.Malformed != nil {
		t.Fatalf("snapshot row: %v %v", err, ev.Malformed)
	}
	streamed := snap
	streamed.Value = []byte(strings.NewReplacer(`"op":"r"`, `"op":"c"`, `"snapshot":"last"`, `"snapshot":"false"`).Replace(string(snap.Value)))
	ev, _, err := d.decode(&streamed)
	if err != nil || ev.Malformed == nil || !strings.Contains(ev.Malformed.Error(), `column "u"`) {
		t.Fatalf("streamed row: err %v malformed %v", err, ev.Malformed)
	}
}

type fakeCatalog struct {
	schemas map[cdc.TableID]*cdc.TableSchema
	err     error
	reads   int
}

func (c *fakeCatalog) LoadSchema(_ context.Context, id cdc.TableID) (*cdc.TableSchema, error) {
	c.reads++
	if c.err != nil {
		return nil, c.err
	}
	s, ok := c.schemas[id]
	if !ok {
		return nil, fmt.Errorf("fake: %w", cdc.ErrTableNotFound)
	}
	return s, nil
}

// schemalessRecord strips a record's embedded schemas, as JsonConverter with
// schemas.enable=false writes it.
func schemalessRecord(t *testing.T, r Record) Record {
	t.Helper()
	var v, k envelope
	if err := json.Unmarshal(r.Value, &v); err != nil {
		t.Fatal(err)
	}
	r.Value = v.Payload
	if r.Key != nil {
		if err := json.Unmarshal(r.Key, &k); err != nil {
			t.Fatal(err)
		}
		r.Key = k.Payload
	}
	return r
}

// Records without an embedded schema decode with the catalog's columns (here: the columns
// the embedded schema gave, which are the native source's) to the same values; a field the
// catalog lacks makes it read again once, then is left out; a table it does not have is a
// dead letter, a catalog out of reach a retryable failure.
func TestDecodeSchemaless(t *testing.T) {
	for _, file := range []string{"postgres-3.6.1-types.jsonl", "mariadb-3.5.0-types.jsonl"} {
		t.Run(file, func(t *testing.T) {
			rec := fixture(t, file)[0]
			want, _, err := fixtureDecoder("src", false, VersionsDefault).decode(&rec)
			if err != nil || want.Malformed != nil {
				t.Fatal(err, want.Malformed)
			}
			cat := &fakeCatalog{schemas: map[cdc.TableID]*cdc.TableSchema{want.Table: want.Schema}}
			d := fixtureDecoder("src", false, VersionsDefault)
			d.catalog = cat
			bare := schemalessRecord(t, rec)
			got, skip, err := d.decode(&bare)
			if err != nil || skip != keep || got.Malformed != nil {
				t.Fatalf("err %v skip %v malformed %v", err, skip, got.Malformed)
			}
			if !reflect.DeepEqual(got.After, want.After) || got.Schema != want.Schema {
				t.Fatalf("values differ:\n got %#v\nwant %#v", got.After, want.After)
			}
			if _, _, _ = d.decode(&bare); cat.reads != 1 {
				t.Fatalf("%d catalog reads for two records", cat.reads)
			}
			// A field the catalog does not have: read once more, then left out for good.
			extra := bare
			extra.Value = []byte(strings.Replace(string(bare.Value), `"after":{`, `"after":{"gone_col":1,`, 1))
			for range 3 {
				ev, _, err := d.decode(&extra)
				if err != nil || ev.Malformed != nil || !reflect.DeepEqual(ev.After, want.After) {
					t.Fatalf("a dropped column's field: %v %v", err, ev.Malformed)
				}
			}
			if cat.reads != 2 {
				t.Fatalf("%d catalog reads, want 2", cat.reads)
			}
			other := fixtureDecoder("src", false, VersionsDefault)
			other.catalog = &fakeCatalog{}
			if ev, _, err := other.decode(&bare); err != nil || ev.Malformed == nil || !strings.Contains(ev.Malformed.Error(), "catalog") {
				t.Fatalf("a table the catalog lacks: %v %v", err, ev.Malformed)
			}
			other.catalog = &fakeCatalog{err: errors.New("connection refused")}
			other.catalogShapes = newCatalogCache()
			if _, _, err := other.decode(&bare); !errors.Is(err, errCatalog) {
				t.Fatalf("a catalog out of reach: %v", err)
			}
		})
	}
}
