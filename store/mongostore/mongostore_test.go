package mongostore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tributary-dev/tributary/internal/faultproxy"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/driver"
	"github.com/tributary-dev/tributary/store/memstore"
	"github.com/tributary-dev/tributary/store/mongostore"
	"github.com/tributary-dev/tributary/store/storetest"
)

// server is a connection to the test server and a fresh database, dropped when the test ends.
type server struct {
	client *mongo.Client
	db     *mongo.Database
	ferret bool // the server is FerretDB (buildInfo has ferretdbVersion)
}

func connect(t testing.TB) *server {
	t.Helper()
	uri := testenv.Require(t, testenv.MongoURI)
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	srv := &server{client: client, db: client.Database("mongostore_" + hex.EncodeToString(b[:]))}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.db.Drop(ctx); err != nil {
			t.Errorf("drop %s: %v", srv.db.Name(), err)
		}
		_ = client.Disconnect(ctx)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var info bson.Raw
	if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err != nil {
		t.Fatalf("buildInfo: %v", err)
	}
	_, err = info.LookupErr("ferretdbVersion")
	srv.ferret = err == nil
	return srv
}

func (srv *server) store(t testing.TB, opts *mongostore.Options) *mongostore.Store {
	t.Helper()
	var o mongostore.Options
	if opts != nil {
		o = *opts
	}
	o.FerretDB = srv.ferret
	s, err := mongostore.New(srv.client, &o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	t.Run("mongodb", func(t *testing.T) {
		srv := connect(t)
		const dataset = "records"
		refuses := memstore.MongoDB
		if srv.ferret {
			refuses = memstore.FerretDB
		}
		storetest.Run(t, storetest.Harness{
			Refuses:   refuses,
			Adapter:   srv.store(t, nil),
			Namespace: srv.db.Name(),
			Dataset:   dataset,
			Visible: func(ctx context.Context) (int, error) {
				n, err := srv.db.Collection(dataset).CountDocuments(ctx, bson.D{})
				return int(n), err
			},
		})
	})
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func addr(srv *server, coll string, k driver.Key) driver.Address {
	return driver.Address{Store: "m", Namespace: srv.db.Name(), Dataset: coll, Key: k}
}

func sk(s string) driver.Key { return driver.NewStringKey(s) }

// incrementer adds incoming "by" to the current record's "n" and keeps every other member as
// it was (their JSON, so extended-JSON values stay what they are) along with the time pointers.
var incrementer = store.MergeFunc(func(_ context.Context, c *store.MergeCall) (store.MergeResult, error) {
	cur := map[string]json.RawMessage{}
	var times []string
	if c.Current != nil {
		if err := json.Unmarshal(c.Current.JSON, &cur); err != nil {
			return store.MergeResult{}, err
		}
		times = c.Current.Times
	}
	var n, in struct{ N, By int64 }
	if raw, ok := cur["n"]; ok {
		if err := json.Unmarshal(raw, &n.N); err != nil {
			return store.MergeResult{}, err
		}
	}
	if err := json.Unmarshal(c.Incoming.JSON, &in); err != nil {
		return store.MergeResult{}, err
	}
	cur["n"], _ = json.Marshal(n.N + in.By)
	b, err := json.Marshal(cur)
	return store.MergeResult{Doc: store.Document{JSON: b, Times: times}}, err
})

func service(t *testing.T, a driver.Store, coalesce bool) *store.Service {
	t.Helper()
	opts := &store.Options{Merger: incrementer, MergeBudget: 2 * time.Minute}
	opts.Coalesce.Disabled = !coalesce
	s, err := store.New(map[string]store.Adapter{"m": a}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func rawDoc(t *testing.T, coll *mongo.Collection, id any) bson.Raw {
	t.Helper()
	var raw bson.Raw
	if err := coll.FindOne(context.Background(), bson.D{{Key: "_id", Value: id}}).Decode(&raw); err != nil {
		t.Fatalf("find %v: %v", id, err)
	}
	return raw
}

// A record written by another application has no metadata field. Its revision is the legacy
// one, and a write conditioned on it applies only while the field is still absent, so the
// first read-modify-write of a legacy record is as atomic as every later one.
func TestLegacyRecords(t *testing.T) {
	srv := connect(t)
	ctx := ctxFor(t)
	a := srv.store(t, nil)
	coll := srv.db.Collection("legacy")
	oid := bson.NewObjectID()
	at := bson.DateTime(1700000000123)
	if _, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: "cas"}, {Key: "v", Value: int32(1)}},
		bson.D{{Key: "_id", Value: "merge"}, {Key: "n", Value: int32(41)}, {Key: "ref", Value: oid}, {Key: "at", Value: at}, {Key: "tags", Value: bson.A{"x"}}},
		bson.D{{Key: "_id", Value: "contended"}, {Key: "n", Value: int32(0)}},
		bson.D{{Key: "_id", Value: "delete"}, {Key: "v", Value: int32(1)}},
	}); err != nil {
		t.Fatal(err)
	}

	t.Run("conditional write on the legacy revision", func(t *testing.T) {
		r, err := a.Read(ctx, []driver.Address{addr(srv, "legacy", sk("cas"))})
		if err != nil || r[0].Err != nil || !r[0].Found {
			t.Fatalf("read: %+v %v", r, err)
		}
		legacy := r[0].Revision
		if string(r[0].Doc.JSON) != `{"v":1}` {
			t.Fatalf("legacy document read as %s", r[0].Doc.JSON)
		}
		put := func(v int) driver.WriteResult {
			res, err := a.Write(ctx, []driver.Write{{Kind: driver.Put, Addr: addr(srv, "legacy", sk("cas")),
				Doc: driver.Document{JSON: []byte(fmt.Sprintf(`{"v":%d}`, v))}, Cond: driver.Condition{Kind: driver.IfRevision, Revision: legacy}}}, driver.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return res[0]
		}
		if w := put(2); w.Err != nil || w.Outcome != driver.Updated || bytes.Equal(w.Revision, legacy) {
			t.Fatalf("first write at the legacy revision: %+v", w)
		}
		if _, err := rawDoc(t, coll, "cas").LookupErr(mongostore.DefaultMetadataField, "rev"); err != nil {
			t.Fatalf("the first write did not add the metadata field: %v", err)
		}
		if w := put(3); driver.KindOf(w.Err) != driver.KindConflict {
			t.Fatalf("second write at the legacy revision: %+v, want conflict", w)
		}
	})

	t.Run("merge keeps BSON types", func(t *testing.T) {
		svc := service(t, a, false)
		res, err := svc.Do(ctx, []store.Op{store.Merge(sa(addr(srv, "legacy", sk("merge"))), "inc", store.Document{JSON: []byte(`{"by":1}`)})}, store.WaitApplied)
		if err != nil || res[0].Err != nil || res[0].Outcome != store.Updated {
			t.Fatalf("merge: %+v %v", res, err)
		}
		raw := rawDoc(t, coll, "merge")
		if n, ok := raw.Lookup("n").AsInt64OK(); !ok || n != 42 {
			t.Errorf("n = %v", raw.Lookup("n"))
		}
		if got, ok := raw.Lookup("ref").ObjectIDOK(); !ok || got != oid {
			t.Errorf("ref came back as %v, want the ObjectID", raw.Lookup("ref"))
		}
		if got, ok := raw.Lookup("at").DateTimeOK(); !ok || got != int64(at) {
			t.Errorf("at came back as %v, want the datetime", raw.Lookup("at"))
		}
		if _, err := raw.LookupErr(mongostore.DefaultMetadataField); err != nil {
			t.Errorf("no metadata after the merge: %v", err)
		}
	})

	t.Run("concurrent first merges lose nothing", func(t *testing.T) {
		const workers, each = 6, 5
		svcs := []*store.Service{service(t, a, true), service(t, a, false)}
		var wg sync.WaitGroup
		errs := make(chan error, workers*each)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each {
					res, err := svcs[w%2].Do(ctx, []store.Op{store.Merge(sa(addr(srv, "legacy", sk("contended"))), "inc", store.Document{JSON: []byte(`{"by":1}`)})}, store.WaitApplied)
					if err == nil {
						err = res[0].Err
					}
					if err != nil {
						errs <- err
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if n, _ := rawDoc(t, coll, "contended").Lookup("n").AsInt64OK(); n != workers*each {
			t.Fatalf("n = %d after %d merges", n, workers*each)
		}
	})

	t.Run("delete on the legacy revision", func(t *testing.T) {
		del := func() driver.WriteResult {
			res, err := a.Write(ctx, []driver.Write{{Kind: driver.Delete, Addr: addr(srv, "legacy", sk("delete")),
				Cond: driver.Condition{Kind: driver.IfRevision, Revision: []byte{0}}}}, driver.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return res[0]
		}
		if w := del(); w.Err != nil || w.Outcome != driver.Deleted {
			t.Fatalf("delete at the legacy revision: %+v", w)
		}
		if w := del(); driver.KindOf(w.Err) != driver.KindConflict {
			t.Fatalf("delete of a missing record at the legacy revision: %+v, want conflict", w)
		}
	})
}

// Documents keep member order, number types and values, unicode and date-times through the
// server, and only the marked date-times become BSON datetimes.
func TestDocumentsRoundTripThroughServer(t *testing.T) {
	srv := connect(t)
	ctx := ctxFor(t)
	a := srv.store(t, nil)
	in := `{"z":1,"a":{"y":[1,2.5,{"x":null}],"b":true},"i32":-2147483648,"i64":9223372036854775807,"i64min":-9223372036854775808,` +
		`"f":0.1,"big":1e+300,"tiny":5e-324,"whole":5.0,"text":"naïve café — 東京 🚀 \u0000\"\\","emoji🔑":"\u2028",` +
		`"at":"2026-11-30T04:05:06.789Z","looks":"2026-11-30T04:05:06Z","list":["x","2000-01-01T00:00:00Z"],"a/b~c":"2001-02-03T04:05:06Z",` +
		`"oid":{"$oid":"5f1a2b3c4d5e6f7081920a1b"},"bin":{"$binary":{"base64":"AP8=","subType":"00"}}}`
	times := []string{"/at", "/list/1", "/a~1b~0c"}
	k := addr(srv, "docs", sk("doc"))
	res, err := a.Write(ctx, []driver.Write{{Kind: driver.Put, Addr: k, Doc: driver.Document{JSON: []byte(in), Times: times}}}, driver.WriteOptions{})
	if err != nil || res[0].Err != nil {
		t.Fatalf("put: %+v %v", res, err)
	}
	raw := rawDoc(t, srv.db.Collection("docs"), "doc")
	elems, _ := raw.Elements()
	var keys []string
	for _, e := range elems {
		keys = append(keys, e.Key())
	}
	wantKeys := []string{"_id", "z", "a", "i32", "i64", "i64min", "f", "big", "tiny", "whole", "text", "emoji🔑", "at", "looks", "list", "a/b~c", "oid", "bin", mongostore.DefaultMetadataField}
	if !slices.Equal(keys, wantKeys) {
		t.Errorf("stored member order %q, want %q", keys, wantKeys)
	}
	for key, typ := range map[string]bson.Type{
		"z": bson.TypeInt32, "i32": bson.TypeInt32, "i64": bson.TypeInt64, "i64min": bson.TypeInt64, "f": bson.TypeDouble,
		"whole": bson.TypeDouble, "text": bson.TypeString, "at": bson.TypeDateTime, "looks": bson.TypeString,
		"a/b~c": bson.TypeDateTime, "oid": bson.TypeObjectID, "bin": bson.TypeBinary,
	} {
		if got := raw.Lookup(key).Type; got != typ {
			t.Errorf("%s stored as %v, want %v", key, got, typ)
		}
	}
	if got := raw.Lookup("list", "1").Type; got != bson.TypeDateTime {
		t.Errorf("list/1 stored as %v", got)
	}
	r, err := a.Read(ctx, []driver.Address{k})
	if err != nil || r[0].Err != nil {
		t.Fatalf("read: %+v %v", r, err)
	}
	// The only textual change: reads write U+2028 as itself, not escaped.
	if want := strings.Replace(in, `\u2028`, "\u2028", 1); string(r[0].Doc.JSON) != want {
		t.Errorf("read back\n got %s\nwant %s", r[0].Doc.JSON, want)
	}
	gotTimes := slices.Sorted(slices.Values(r[0].Doc.Times))
	if !slices.Equal(gotTimes, slices.Sorted(slices.Values(times))) {
		t.Errorf("time pointers %q, want %q", r[0].Doc.Times, times)
	}

	t.Run("decimal", func(t *testing.T) {
		big := `{"d":9223372036854775808,"p":1.00000000000000000001}`
		res, err := a.Write(ctx, []driver.Write{{Kind: driver.Put, Addr: addr(srv, "docs", sk("dec")), Doc: driver.Document{JSON: []byte(big)}}}, driver.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if srv.ferret {
			// FerretDB 1.x has no Decimal128: the adapter refuses before sending.
			if driver.KindOf(res[0].Err) != driver.KindInvalid {
				t.Fatalf("decimal on FerretDB: %+v, want invalid", res[0])
			}
			return
		}
		r, err := a.Read(ctx, []driver.Address{addr(srv, "docs", sk("dec"))})
		if err != nil || r[0].Err != nil || string(r[0].Doc.JSON) != big {
			t.Fatalf("decimal round trip: %+v %v", r, err)
		}
	})
}

// One Write call mixing every write kind over two collections: each outcome must be right,
// also on FerretDB, whose bulk replies number upserts among upserts -- with the puts in bulks
// and, in FerretDB mode, one by one.
func TestBatchOutcomes(t *testing.T) {
	srv := connect(t)
	t.Run("bulk", func(t *testing.T) {
		a, err := mongostore.New(srv.client, nil)
		if err != nil {
			t.Fatal(err)
		}
		testBatchOutcomes(t, srv, a, "bulk_")
	})
	t.Run("ferretdb_mode", func(t *testing.T) {
		a, err := mongostore.New(srv.client, &mongostore.Options{FerretDB: true})
		if err != nil {
			t.Fatal(err)
		}
		testBatchOutcomes(t, srv, a, "single_")
	})
}

func testBatchOutcomes(t *testing.T, srv *server, a *mongostore.Store, prefix string) {
	ctx := ctxFor(t)
	addr := func(srv *server, coll string, k driver.Key) driver.Address { return addr(srv, prefix+coll, k) }
	doc := func(v string) driver.Document { return driver.Document{JSON: []byte(`{"v":"` + v + `"}`)} }
	seed := []driver.Write{}
	for _, k := range []string{"u-old-1", "u-old-2", "i-old", "r-old", "r-stale", "d-old", "dr-old"} {
		seed = append(seed, driver.Write{Kind: driver.Put, Addr: addr(srv, "a", sk(k)), Doc: doc("seed")})
	}
	seed = append(seed, driver.Write{Kind: driver.Put, Addr: addr(srv, "b", sk("u-old-1")), Doc: doc("seed")})
	seeded, err := a.Write(ctx, seed, driver.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	revs := map[string][]byte{}
	for i, r := range seeded {
		if r.Err != nil || r.Outcome != driver.Created {
			t.Fatalf("seed %d: %+v", i, r)
		}
		revs[strings.TrimPrefix(seed[i].Addr.Dataset, prefix)+"/"+seed[i].Addr.Key.StringValue()] = r.Revision
	}
	// Make r-stale's seeded revision stale.
	if r, _ := a.Write(ctx, []driver.Write{{Kind: driver.Put, Addr: addr(srv, "a", sk("r-stale")), Doc: doc("moved")}}, driver.WriteOptions{}); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	rev := func(k string) driver.Condition {
		return driver.Condition{Kind: driver.IfRevision, Revision: revs["a/"+k]}
	}
	writes := []driver.Write{
		{Kind: driver.Put, Addr: addr(srv, "a", sk("u-new-1")), Doc: doc("1")},
		{Kind: driver.Put, Addr: addr(srv, "a", sk("u-old-1")), Doc: doc("2")},
		{Kind: driver.Put, Addr: addr(srv, "b", sk("u-old-1")), Doc: doc("3")},
		{Kind: driver.Put, Addr: addr(srv, "a", sk("u-new-2")), Doc: doc("4")},
		{Kind: driver.Put, Addr: addr(srv, "a", sk("i-old")), Doc: doc("5"), Cond: driver.Condition{Kind: driver.IfAbsent}},
		{Kind: driver.Put, Addr: addr(srv, "a", sk("u-old-2")), Doc: doc("6")},
		{Kind: driver.Put, Addr: addr(srv, "a", sk("i-new")), Doc: doc("7"), Cond: driver.Condition{Kind: driver.IfAbsent}},
		{Kind: driver.Put, Addr: addr(srv, "b", sk("u-new-1")), Doc: doc("8")},
		{Kind: driver.Put, Addr: addr(srv, "a", sk("r-old")), Doc: doc("9"), Cond: rev("r-old")},
		{Kind: driver.Put, Addr: addr(srv, "a", sk("r-stale")), Doc: doc("10"), Cond: rev("r-stale")},
		{Kind: driver.Delete, Addr: addr(srv, "a", sk("d-old"))},
		{Kind: driver.Delete, Addr: addr(srv, "a", sk("d-missing"))},
		{Kind: driver.Delete, Addr: addr(srv, "a", sk("dr-old")), Cond: rev("dr-old")},
		{Kind: driver.Delete, Addr: addr(srv, "a", sk("dr-missing")), Cond: rev("r-old")},
		{Kind: driver.Put, Addr: addr(srv, "a", sk("u-new-3")), Doc: doc("11")},
		{Kind: driver.Delete, Addr: addr(srv, "a", sk("da-old")), Cond: driver.Condition{Kind: driver.IfAbsent}},
	}
	want := []any{driver.Created, driver.Updated, driver.Updated, driver.Created, driver.KindAlreadyExists, driver.Updated,
		driver.Created, driver.Created, driver.Updated, driver.KindConflict, driver.Deleted, driver.Absent,
		driver.Deleted, driver.KindConflict, driver.Created, driver.Absent}
	res, err := a.Write(ctx, writes, driver.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var addrs []driver.Address
	for i, r := range res {
		switch w := want[i].(type) {
		case driver.Outcome:
			if r.Err != nil || r.Outcome != w {
				t.Errorf("write %d (%v): %v %v, want %v", i, writes[i].Addr.Key, r.Outcome, r.Err, w)
			}
		case driver.ErrorKind:
			if driver.KindOf(r.Err) != w || r.Outcome != 0 {
				t.Errorf("write %d (%v): %v %v, want error %v", i, writes[i].Addr.Key, r.Outcome, r.Err, w)
			}
		}
		if writes[i].Kind == driver.Put {
			addrs = append(addrs, writes[i].Addr)
		}
	}
	// Every put's revision is what a read returns; refused puts left the seed.
	reads, err := a.Read(ctx, addrs)
	if err != nil {
		t.Fatal(err)
	}
	j := 0
	for i, w := range writes {
		if w.Kind != driver.Put {
			continue
		}
		r := reads[j]
		j++
		if r.Err != nil || !r.Found {
			t.Errorf("read %v: %+v", w.Addr.Key, r)
			continue
		}
		if res[i].Err == nil && (!bytes.Equal(r.Revision, res[i].Revision) || !bytes.Equal(r.Doc.JSON, w.Doc.JSON)) {
			t.Errorf("read %v: %s at %x, want %s at %x", w.Addr.Key, r.Doc.JSON, r.Revision, w.Doc.JSON, res[i].Revision)
		}
		if res[i].Err != nil && bytes.Equal(r.Doc.JSON, w.Doc.JSON) {
			t.Errorf("refused put %v was applied", w.Addr.Key)
		}
	}
}

// Every key type becomes an _id of its own BSON type, and $in reads find each by type.
func TestKeyTypesAreIDs(t *testing.T) {
	srv := connect(t)
	ctx := ctxFor(t)
	a := srv.store(t, nil)
	oid := bson.NewObjectID()
	keys := []driver.Key{sk("1"), driver.NewInt64Key(1), driver.NewBytesKey([]byte("1")), driver.NewObjectIDKey(oid)}
	ids := []any{"1", int64(1), bson.Binary{Data: []byte("1")}, oid}
	var writes []driver.Write
	var addrs []driver.Address
	for i, k := range keys {
		writes = append(writes, driver.Write{Kind: driver.Put, Addr: addr(srv, "keys", k), Doc: driver.Document{JSON: []byte(fmt.Sprintf(`{"i":%d}`, i))}})
		addrs = append(addrs, addr(srv, "keys", k))
	}
	res, err := a.Write(ctx, writes, driver.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil || r.Outcome != driver.Created {
			t.Fatalf("put %v: %+v", keys[i], r)
		}
	}
	for i, id := range ids {
		raw := rawDoc(t, srv.db.Collection("keys"), id)
		typ, data, _ := bson.MarshalValue(id)
		if v := raw.Lookup("_id"); v.Type != typ || !bytes.Equal(v.Value, data) {
			t.Errorf("key %v stored as _id %v", keys[i], v)
		}
	}
	reads, err := a.Read(ctx, append(addrs, addr(srv, "keys", sk("2")), addr(srv, "keys", driver.NewInt64Key(2))))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range reads {
		if i < len(keys) {
			if r.Err != nil || !r.Found || string(r.Doc.JSON) != fmt.Sprintf(`{"i":%d}`, i) {
				t.Errorf("read %v: %+v", keys[i], r)
			}
		} else if r.Err != nil || r.Found {
			t.Errorf("read of a missing key: %+v", r)
		}
	}
}

func TestMetadataFieldIsConfigurable(t *testing.T) {
	srv := connect(t)
	ctx := ctxFor(t)
	a := srv.store(t, &mongostore.Options{MetadataField: "_meta"})
	put := func(k, js string) driver.WriteResult {
		res, err := a.Write(ctx, []driver.Write{{Kind: driver.Put, Addr: addr(srv, "meta", sk(k)), Doc: driver.Document{JSON: []byte(js)}}}, driver.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	if r := put("a", `{"_tributary":1}`); r.Err != nil {
		t.Fatalf("put with the default name as an ordinary member: %v", r.Err)
	}
	if _, err := rawDoc(t, srv.db.Collection("meta"), "a").LookupErr("_meta", "rev"); err != nil {
		t.Fatalf("no _meta.rev: %v", err)
	}
	if r := put("b", `{"_meta":1}`); driver.KindOf(r.Err) != driver.KindInvalid {
		t.Fatalf("put with the metadata name: %+v, want invalid", r)
	}
	r, err := a.Read(ctx, []driver.Address{addr(srv, "meta", sk("a"))})
	if err != nil || string(r[0].Doc.JSON) != `{"_tributary":1}` {
		t.Fatalf("read: %+v %v", r, err)
	}
}

// A unique secondary index refusing a document is Invalid (not AlreadyExists, not retryable),
// and no error quotes the document -- the server's own message does.
func TestUniqueSecondaryIndex(t *testing.T) {
	srv := connect(t)
	ctx := ctxFor(t)
	a := srv.store(t, nil)
	coll := srv.db.Collection("people")
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "email", Value: 1}}, Options: options.Index().SetUnique(true)}); err != nil {
		t.Fatal(err)
	}
	const secret = "ada@example.com"
	doc := driver.Document{JSON: []byte(`{"email":"` + secret + `"}`)}
	res, err := a.Write(ctx, []driver.Write{{Kind: driver.Put, Addr: addr(srv, "people", sk("ada")), Doc: doc}}, driver.WriteOptions{})
	if err != nil || res[0].Err != nil {
		t.Fatalf("first put: %+v %v", res, err)
	}
	res, err = a.Write(ctx, []driver.Write{
		{Kind: driver.Put, Addr: addr(srv, "people", sk("upsert")), Doc: doc},
		{Kind: driver.Put, Addr: addr(srv, "people", sk("insert")), Doc: doc, Cond: driver.Condition{Kind: driver.IfAbsent}},
		{Kind: driver.Put, Addr: addr(srv, "people", sk("ada")), Doc: doc, Cond: driver.Condition{Kind: driver.IfAbsent}},
		{Kind: driver.Put, Addr: addr(srv, "people", sk("other")), Doc: driver.Document{JSON: []byte(`{"email":"b@example.com"}`)}},
	}, driver.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []driver.ErrorKind{driver.KindInvalid, driver.KindInvalid, driver.KindAlreadyExists} {
		if k := driver.KindOf(res[i].Err); k != want {
			t.Errorf("write %d: %v, want %v", i, res[i].Err, want)
		}
		if res[i].Err != nil && strings.Contains(res[i].Err.Error(), secret) {
			t.Errorf("write %d: the error quotes the document: %v", i, res[i].Err)
		}
		if !errors.As(res[i].Err, new(mongo.ServerError)) {
			t.Errorf("write %d: the server's error is not reachable: %v", i, res[i].Err)
		}
	}
	if res[3].Err != nil || res[3].Outcome != driver.Created {
		t.Errorf("unrelated put in the same bulk: %+v", res[3])
	}
}

// FerretDB 1.x stops a bulk update at its first failing statement, unordered or not, and then
// leaves every count out of its reply. Without Options.FerretDB the adapter notices and reports
// the puts the reply does not account for as of unknown outcome (KindOutcomeUnknown), never a
// guessed one.
func TestFerretDBBulkReplyWithoutCounts(t *testing.T) {
	srv := connect(t)
	if !srv.ferret {
		t.Skip("the quirk is FerretDB's")
	}
	ctx := ctxFor(t)
	a, err := mongostore.New(srv.client, nil) // deliberately not in FerretDB mode
	if err != nil {
		t.Fatal(err)
	}
	coll := srv.db.Collection("quirk")
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "email", Value: 1}}, Options: options.Index().SetUnique(true)}); err != nil {
		t.Fatal(err)
	}
	doc := func(e string) driver.Document { return driver.Document{JSON: []byte(`{"email":"` + e + `"}`)} }
	if res, _ := a.Write(ctx, []driver.Write{{Kind: driver.Put, Addr: addr(srv, "quirk", sk("a")), Doc: doc("x")}}, driver.WriteOptions{}); res[0].Err != nil || res[0].Outcome != driver.Created {
		t.Fatalf("seed: %+v", res[0])
	}
	res, err := a.Write(ctx, []driver.Write{
		{Kind: driver.Put, Addr: addr(srv, "quirk", sk("b")), Doc: doc("x")},
		{Kind: driver.Put, Addr: addr(srv, "quirk", sk("c")), Doc: doc("y")},
	}, driver.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if driver.KindOf(res[0].Err) != driver.KindInvalid {
		t.Errorf("put refused by the unique index: %+v, want invalid", res[0])
	}
	if driver.KindOf(res[1].Err) != driver.KindOutcomeUnknown || !strings.Contains(res[1].Err.Error(), "Options.FerretDB") {
		t.Errorf("put after a failure in the bulk: %+v, want an outcome-unknown error naming Options.FerretDB", res[1])
	}
	// In FerretDB mode the same puts go out one by one, and each gets its own answer.
	res, err = srv.store(t, nil).Write(ctx, []driver.Write{
		{Kind: driver.Put, Addr: addr(srv, "quirk", sk("d")), Doc: doc("x")},
		{Kind: driver.Put, Addr: addr(srv, "quirk", sk("e")), Doc: doc("z")},
		{Kind: driver.Put, Addr: addr(srv, "quirk", sk("a")), Doc: doc("x")},
	}, driver.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if driver.KindOf(res[0].Err) != driver.KindInvalid || res[1].Outcome != driver.Created || res[2].Outcome != driver.Updated {
		t.Errorf("FerretDB mode: %+v", res)
	}
}

// In FerretDB mode no update command carries more than one statement: FerretDB 1.24 holds an
// SQL connection per statement until the command ends, from a pool of 100, and an update of
// more statements deadlocks the server. 150 puts to one collection must go through.
func TestFerretDBModeSendsSingleStatementUpdates(t *testing.T) {
	uri := testenv.Require(t, testenv.MongoURI)
	var mu sync.Mutex
	widest := 0
	mon := &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		if e.CommandName != "update" {
			return
		}
		// The statements travel as a document sequence that the event folds into "updates".
		n := 0
		if v, err := e.Command.LookupErr("updates"); err == nil {
			if vals, err := v.Array().Values(); err == nil {
				n = len(vals)
			}
		}
		mu.Lock()
		widest = max(widest, n)
		mu.Unlock()
	}}
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetMonitor(mon))
	if err != nil {
		t.Fatal(err)
	}
	srv := connect(t)
	defer client.Disconnect(context.Background())
	ctx := ctxFor(t)
	a, err := mongostore.New(client, &mongostore.Options{FerretDB: true})
	if err != nil {
		t.Fatal(err)
	}
	var writes []driver.Write
	for i := range 150 {
		writes = append(writes, driver.Write{Kind: driver.Put, Addr: addr(srv, "wide", driver.NewInt64Key(int64(i))), Doc: driver.Document{JSON: []byte(`{"v":1}`)}})
	}
	for round, want := range []driver.Outcome{driver.Created, driver.Updated} {
		res, err := a.Write(ctx, writes, driver.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil || r.Outcome != want {
				t.Fatalf("round %d, put %d: %+v, want %v", round, i, r, want)
			}
		}
	}
	if widest != 1 {
		t.Fatalf("an update command carried %d statements", widest)
	}
}

// The Service refuses names MongoDB refuses before anything is written.
func TestNamesAreValidatedBeforeWriting(t *testing.T) {
	srv := connect(t)
	ctx := ctxFor(t)
	svc := service(t, srv.store(t, nil), false)
	ok := addr(srv, "c", sk("k"))
	bad := driver.Address{Store: "m", Namespace: "no.dots", Dataset: "c", Key: sk("k")}
	_, err := svc.Do(ctx, []store.Op{store.Put(sa(ok), store.Document{JSON: []byte(`{}`)}), store.Put(sa(bad), store.Document{JSON: []byte(`{}`)})}, store.WaitApplied)
	var re *store.RequestError
	if !errors.As(err, &re) || !errors.Is(err, store.ErrInvalid) || len(re.Items) != 1 || re.Items[0].Index != 1 {
		t.Fatalf("error %v, want a RequestError for operation 1", err)
	}
	if n, _ := srv.db.Collection("c").CountDocuments(ctx, bson.D{}); n != 0 {
		t.Fatalf("%d documents written by a refused request", n)
	}
}

// A reply lost after the server got the command: a TCP proxy (internal/faultproxy) between
// the driver and the server swallows it, then resets the connection or the caller gives up.
// A write is then of unknown outcome (the server did apply it), never Internal or Unavailable;
// a read is Unavailable; the Service reports the write and does not resend it.
func TestDroppedAnswer(t *testing.T) {
	srv := connect(t)
	uri := testenv.Require(t, testenv.MongoURI)
	ctx := ctxFor(t)
	target := options.Client().ApplyURI(uri).Hosts
	if len(target) != 1 {
		t.Skipf("the test proxies one server; the URI names %d", len(target))
	}
	coll := srv.db.Collection("dropped")
	// lost runs op through a proxy that swallows the reply to it, then resets the connection
	// (or, with leave, ends op's context instead), and returns op's error.
	lost := func(t *testing.T, leave bool, op func(context.Context, driver.Store) error) error {
		t.Helper()
		p, err := faultproxy.NewTCP(target[0], faultproxy.TCPOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		// Monitoring stays quiet for a minute (the only traffic is op's), and the driver
		// retries nothing, so op's error is the lost reply's.
		client, err := mongo.Connect(options.Client().ApplyURI(uri).SetHosts([]string{p.Addr()}).SetDirect(true).
			SetHeartbeatInterval(time.Minute).SetRetryWrites(false).SetRetryReads(false))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
		a, err := mongostore.New(client, &mongostore.Options{FerretDB: srv.ferret})
		if err != nil {
			t.Fatal(err)
		}
		// A read first, so that op finds a connection made and the server known.
		if _, err := a.Read(ctx, []driver.Address{addr(srv, "dropped", sk("warm"))}); err != nil {
			t.Fatal(err)
		}
		before := p.Stats().DroppedToClient
		p.SetBlackhole(faultproxy.ToClient)
		opCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- op(opCtx, a) }()
		if err := p.Wait(ctx, func(s faultproxy.TCPStats) bool { return s.DroppedToClient > before }); err != nil {
			t.Fatal(err)
		}
		p.SetBlackhole(faultproxy.None)
		if leave {
			cancel()
		} else if p.ResetAll() == 0 {
			t.Fatal("no connection to reset")
		}
		return <-done
	}
	write := func(w driver.Write) func(context.Context, driver.Store) error {
		return func(ctx context.Context, a driver.Store) error {
			res, err := a.Write(ctx, []driver.Write{w}, driver.WriteOptions{})
			if err != nil {
				return err
			}
			return res[0].Err
		}
	}
	applied := func(t *testing.T, id string) {
		t.Helper()
		if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Err(); err != nil {
			t.Fatalf("the server did not apply the write (%v): the test proves nothing", err)
		}
	}
	wantKind := func(t *testing.T, what string, err error, want driver.ErrorKind) {
		t.Helper()
		if err == nil || driver.KindOf(err) != want {
			t.Fatalf("%s: %v (kind %v), want %v", what, err, driver.KindOf(err), want)
		}
	}
	doc := driver.Document{JSON: []byte(`{"v":1}`)}

	t.Run("put", func(t *testing.T) {
		err := lost(t, false, write(driver.Write{Kind: driver.Put, Addr: addr(srv, "dropped", sk("put")), Doc: doc}))
		wantKind(t, "put whose reply was lost", err, driver.KindOutcomeUnknown)
		applied(t, "put")
	})
	t.Run("if-absent put", func(t *testing.T) {
		err := lost(t, false, write(driver.Write{Kind: driver.Put, Addr: addr(srv, "dropped", sk("absent")), Doc: doc, Cond: driver.Condition{Kind: driver.IfAbsent}}))
		wantKind(t, "if-absent put whose reply was lost", err, driver.KindOutcomeUnknown)
		applied(t, "absent")
	})
	t.Run("caller left", func(t *testing.T) {
		err := lost(t, true, write(driver.Write{Kind: driver.Put, Addr: addr(srv, "dropped", sk("left")), Doc: doc}))
		wantKind(t, "put whose caller left while it was in flight", err, driver.KindOutcomeUnknown)
		applied(t, "left")
	})
	t.Run("read", func(t *testing.T) {
		err := lost(t, false, func(ctx context.Context, a driver.Store) error {
			res, err := a.Read(ctx, []driver.Address{addr(srv, "dropped", sk("put"))})
			if err != nil {
				return err
			}
			return res[0].Err
		})
		wantKind(t, "read whose reply was lost", err, driver.KindUnavailable)
	})
	t.Run("through the store", func(t *testing.T) {
		// An if-absent put the Service sent again would find its own first attempt and answer
		// AlreadyExists; reported as of unknown outcome, it was sent once.
		err := lost(t, false, func(ctx context.Context, a driver.Store) error {
			s, err := store.New(map[string]store.Adapter{"m": a}, &store.Options{Coalesce: store.CoalesceOptions{Disabled: true}})
			if err != nil {
				return err
			}
			defer s.Close(context.Background())
			res, err := s.Do(ctx, []store.Op{store.Put(sa(addr(srv, "dropped", sk("svc"))), store.Document{JSON: []byte(`{"v":1}`)}).WithPrecondition(store.IfAbsent())}, store.WaitApplied)
			if err != nil {
				return err
			}
			return res[0].Err
		})
		if !errors.Is(err, store.ErrOutcomeUnknown) {
			t.Fatalf("if-absent put through the store: %v, want ErrOutcomeUnknown", err)
		}
		applied(t, "svc")
	})
}
