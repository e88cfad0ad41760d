package mongostore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/store/driver"
)

// captureFuzzSeeds gates TestCaptureFuzzSeeds, which writes seed files into testdata.
const captureFuzzSeeds = "TRIBUTARY_FUZZ_CAPTURE"

// zeros is a revision-token source of zero bytes, so that captured seeds are the same on
// every run.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestCaptureFuzzSeeds writes the real server's documents as seeds of FuzzDecodeBSON (the raw
// BSON the driver reads back) and FuzzEncodeJSON (the JSON and date-time pointers the adapter
// reads back), under testdata/fuzz/<target>/<server>-<name>: documents of every BSON type
// FerretDB 1.x stores, inserted directly with the driver, and documents put through the
// adapter (numbers of each BSON type, marked date-times, extended JSON). Run it with the test
// servers up:
//
//	TRIBUTARY_FUZZ_CAPTURE=1 go test -run TestCaptureFuzzSeeds ./store/mongostore
func TestCaptureFuzzSeeds(t *testing.T) {
	uri := testenv.Require(t, testenv.MongoURI)
	if os.Getenv(captureFuzzSeeds) == "" {
		t.Skipf("seed capture skipped: %s is unset (it rewrites testdata/fuzz)", captureFuzzSeeds)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	db := client.Database("fuzzstore_" + hex.EncodeToString(b[:]))
	defer func() {
		_ = db.Drop(context.Background())
		_ = client.Disconnect(context.Background())
	}()
	var info bson.Raw
	if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err != nil {
		t.Fatal(err)
	}
	server := "mongodb"
	_, ferr := info.LookupErr("ferretdbVersion")
	if ferr == nil {
		server = "ferretdb"
	}
	s, err := New(client, &Options{FerretDB: server == "ferretdb", Rand: zeros{}})
	if err != nil {
		t.Fatal(err)
	}
	const coll = "seeds"
	c := db.Collection(coll)

	oid := bson.ObjectID{0x65, 0x5f, 0x1a, 0x2b, 0x3c, 0x4d, 0x5e, 0x6f, 0x70, 0x81, 0x92, 0xa3}
	direct := []struct {
		name string
		doc  bson.D
	}{
		{"double", bson.D{{Key: "a", Value: 1.5}, {Key: "b", Value: 1.0}, {Key: "c", Value: 1e300}, {Key: "d", Value: 5e-324},
			{Key: "e", Value: -2.25e-8}, {Key: "f", Value: math.MaxFloat64}, {Key: "g", Value: 0.1}}},
		{"string", bson.D{{Key: "a", Value: ""}, {Key: "b", Value: "naïve 東京 🚀 \u2028"}, {Key: "c", Value: "q\"b\\\n\t\x01"}}},
		{"document", bson.D{{Key: "a", Value: bson.D{{Key: "b", Value: bson.D{{Key: "c", Value: int32(1)}}}, {Key: "_id", Value: "inner"}}}, {Key: "e", Value: bson.D{}}}},
		// FerretDB 1.x refuses arrays in arrays ("nested arrays are not supported").
		{"array", bson.D{{Key: "a", Value: bson.A{int32(1), "x", bson.D{{Key: "b", Value: nil}}, bson.D{{Key: "c", Value: bson.A{true}}}}}, {Key: "e", Value: bson.A{}}}},
		{"binary", bson.D{{Key: "generic", Value: bson.Binary{Subtype: 0, Data: []byte{0, 0xff, 1}}},
			{Key: "uuid", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}, {Key: "user", Value: bson.Binary{Subtype: 0x80, Data: []byte("u")}},
			{Key: "empty", Value: bson.Binary{Subtype: 0, Data: []byte{}}}}},
		{"objectid", bson.D{{Key: "ref", Value: oid}, {Key: "zero", Value: bson.ObjectID{}}}},
		{"bool", bson.D{{Key: "t", Value: true}, {Key: "f", Value: false}}},
		{"datetime", bson.D{{Key: "now", Value: bson.DateTime(1764489600123)}, {Key: "epoch", Value: bson.DateTime(0)},
			{Key: "before", Value: bson.DateTime(-62135596800000)}, {Key: "late", Value: bson.DateTime(253402300799999)},
			{Key: "in", Value: bson.A{bson.D{{Key: "at", Value: bson.DateTime(1)}}}}}},
		{"null", bson.D{{Key: "n", Value: nil}}},
		{"regex", bson.D{{Key: "re", Value: bson.Regex{Pattern: "^a\\.b$", Options: "im"}}, {Key: "empty", Value: bson.Regex{}}}},
		{"int32", bson.D{{Key: "min", Value: int32(math.MinInt32)}, {Key: "max", Value: int32(math.MaxInt32)}, {Key: "zero", Value: int32(0)}}},
		{"timestamp", bson.D{{Key: "ts", Value: bson.Timestamp{T: 1764489600, I: 7}}, {Key: "max", Value: bson.Timestamp{T: math.MaxUint32, I: math.MaxUint32}}}},
		{"int64", bson.D{{Key: "small", Value: int64(5)}, {Key: "big", Value: int64(1) << 40}, {Key: "min", Value: int64(math.MinInt64)},
			{Key: "max", Value: int64(math.MaxInt64)}, {Key: "in", Value: bson.A{int64(-1)}}}},
	}
	var all bson.D
	for _, d := range direct {
		for _, e := range d.doc {
			all = append(all, bson.E{Key: d.name + "_" + e.Key, Value: e.Value})
		}
	}
	direct = append(direct, struct {
		name string
		doc  bson.D
	}{"all", all})
	var ids []string
	for _, d := range direct {
		id := "direct-" + d.name
		if _, err := c.InsertOne(ctx, append(bson.D{{Key: "_id", Value: id}}, d.doc...)); err != nil {
			t.Fatalf("insert %s: %v", id, err)
		}
		ids = append(ids, id)
	}

	adapter := []struct {
		name  string
		json  string
		times []string
	}{
		{"numbers", `{"i32":7,"i32min":-2147483648,"i64":2147483648,"i64max":9223372036854775807,"dbl":0.5,"dblint":2.0,"exp":1e300,"small":2.5e-8,"neg":-1.25}`, nil},
		{"strings", `{"plain":"x","unicode":"naïve 東京 🚀","escapes":"\"\\\/\b\f\n\r\t\u0001","empty":"","looks":"2026-11-30T04:05:06Z"}`, nil},
		{"nested", `{"b":1,"a":2,"c":{"z":1,"y":[1,2,{"x":null}]},"_":true,"o":{},"arr":[],"n":[{}],"inner":{"_id":1,"_tributary":2}}`, nil},
		{"times", `{"at":"2026-11-30T04:05:06.123Z","off":"2026-11-30T05:05:06+01:00","l":[{"w":"1970-01-01T00:00:00Z"}],"a~/b":"0001-01-01T00:00:00Z","plain":"2026-11-30T04:05:06Z"}`,
			[]string{"/at", "/off", "/l/0/w", "/a~0~1b"}},
		{"extended", `{"id":{"$oid":"5f1a2b3c4d5e6f7081920a1b"},"bin":{"$binary":{"base64":"AP8=","subType":"00"}},` +
			`"uuid":{"$binary":{"base64":"AAAAAAAAAAAAAAAAAAAAAA==","subType":"04"}},"ts":{"$timestamp":{"t":5,"i":6}},` +
			`"re":{"$regularExpression":{"pattern":"^a\\.b","options":"i"}}}`, nil},
	}
	var writes []driver.Write
	for _, d := range adapter {
		writes = append(writes, driver.Write{Kind: driver.Put,
			Addr: driver.Address{Store: "m", Namespace: db.Name(), Dataset: coll, Key: driver.NewStringKey("adapter-" + d.name)},
			Doc:  driver.Document{JSON: []byte(d.json), Times: d.times}})
		ids = append(ids, "adapter-"+d.name)
	}
	res, err := s.Write(ctx, writes, driver.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("put %s: %v", adapter[i].name, r.Err)
		}
	}

	addrs := make([]driver.Address, len(ids))
	for i, id := range ids {
		addrs[i] = driver.Address{Store: "m", Namespace: db.Name(), Dataset: coll, Key: driver.NewStringKey(id)}
	}
	reads, err := s.Read(ctx, addrs)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		raw, err := c.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Raw()
		if err != nil {
			t.Fatalf("find %s: %v", id, err)
		}
		if reads[i].Err != nil || !reads[i].Found {
			t.Fatalf("read %s: found %v, %v", id, reads[i].Found, reads[i].Err)
		}
		name := server + "-" + id
		writeSeed(t, "FuzzDecodeBSON", name, fmt.Sprintf("[]byte(%q)", []byte(raw)))
		doc := reads[i].Doc
		writeSeed(t, "FuzzEncodeJSON", name, fmt.Sprintf("[]byte(%q)\nstring(%q)", doc.JSON, strings.Join(doc.Times, "\x00")))
		t.Logf("%s: %d bytes of BSON, %s", name, len(raw), doc.JSON)
	}
}

func writeSeed(t *testing.T, target, name, values string) {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte("go test fuzz v1\n"+values+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}
