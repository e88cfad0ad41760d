package mongostore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tributary-dev/tributary/luamerge"
	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/driver"
	"github.com/tributary-dev/tributary/store/mongostore"
)

// luaService returns a Service over a whose merges run Lua, with the clock now (nil: time.Now).
func luaService(t *testing.T, a driver.Store, now func() time.Time) *store.Service {
	t.Helper()
	engine, err := luamerge.New(&luamerge.Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// The adapter itself, not a wrapper: a wrapper would hide driver.TimePrecisioner.
	s, err := store.New(map[string]store.Adapter{"m": a}, &store.Options{Merger: engine, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// typesServer is connect with a database of this file's own prefix, dropped when the test ends.
func typesServer(t *testing.T) *server {
	t.Helper()
	srv := connect(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	srv.db = srv.client.Database("mongotypes_" + hex.EncodeToString(b[:]))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.db.Drop(ctx); err != nil {
			t.Errorf("drop %s: %v", srv.db.Name(), err)
		}
	})
	return srv
}

func do(t *testing.T, s *store.Service, op store.Op) store.Result {
	t.Helper()
	res, err := s.Do(ctxFor(t), []store.Op{op}, store.WaitApplied)
	if err != nil {
		t.Fatal(err)
	}
	return res[0]
}

const incrementN = `return function(current) current.n = current.n + 1 return current end`

// wantDouble checks that the field at path is a BSON double with exactly the bits of f (the
// sign of zero included).
func wantDouble(t *testing.T, raw bson.Raw, f float64, path ...string) {
	t.Helper()
	v := raw.Lookup(path...)
	if v.Type != bson.TypeDouble || math.Float64bits(v.Double()) != math.Float64bits(f) {
		t.Errorf("%v stored as %v %v, want the double %v (sign bit %v)", path, v.Type, v, f, math.Signbit(f))
	}
}

func wantInt(t *testing.T, raw bson.Raw, typ bson.Type, n int64, path ...string) {
	t.Helper()
	v := raw.Lookup(path...)
	got, ok := v.AsInt64OK()
	if v.Type != typ || !ok || got != n {
		t.Errorf("%v stored as %v %v, want %v %d", path, v.Type, v, typ, n)
	}
}

// A Lua merge that only increments n leaves every other value as it was stored: its BSON type
// and value (the sign of zero included) in the collection, its JSON text through the Service.
func TestMergeKeepsUntouchedValues(t *testing.T) {
	srv := typesServer(t)
	a := srv.store(t, nil)
	s := luaService(t, a, nil)
	coll := srv.db.Collection("untouched")
	at := addr(srv, "untouched", sk("r"))
	doc := `{"f":1.0,"z":-0.0,"n":1,"i":5,"big":9007199254740993,"e":1e0,"k":1.5e3,"arr":[1.0,-0.0,7],"o":{"x":2.50,"y":[0.0]}}`
	zero := math.Copysign(0, -1)
	put := do(t, s, store.Put(sa(at), store.Document{JSON: []byte(doc)}))
	if srv.ferret {
		// FerretDB 1.x stores -0.0 as 0.0: FerretDB mode refuses it rather than change it.
		if store.KindOf(put.Err) != store.KindInvalid || !strings.Contains(put.Err.Error(), "-0") {
			t.Fatalf("put of -0.0 on FerretDB: %+v, want invalid naming -0", put)
		}
		if n, err := coll.CountDocuments(ctxFor(t), bson.D{}); err != nil || n != 0 {
			t.Fatalf("the refused put left %d records (%v)", n, err)
		}
		doc = strings.ReplaceAll(doc, "-0.0", "0.0")
		zero = 0
		put = do(t, s, store.Put(sa(at), store.Document{JSON: []byte(doc)}))
	}
	if put.Err != nil {
		t.Fatalf("put: %v", put.Err)
	}
	read := func() string {
		t.Helper()
		r := do(t, s, store.Read(sa(at)))
		if r.Err != nil || r.Outcome != store.Found {
			t.Fatalf("read: %+v", r)
		}
		return string(r.Doc.JSON)
	}
	z := "-0.0"
	if srv.ferret {
		z = "0.0"
	}
	stored := `{"f":1.0,"z":` + z + `,"n":1,"i":5,"big":9007199254740993,"e":1.0,"k":1500.0,"arr":[1.0,` + z + `,7],"o":{"x":2.5,"y":[0.0]}}`
	if got := read(); got != stored {
		t.Fatalf("after the put the record reads\n %s\nwant\n %s", got, stored)
	}
	check := func(n int64) {
		t.Helper()
		raw := rawDoc(t, coll, "r")
		wantDouble(t, raw, 1, "f")
		wantDouble(t, raw, zero, "z")
		wantInt(t, raw, bson.TypeInt32, n, "n")
		wantInt(t, raw, bson.TypeInt32, 5, "i")
		wantInt(t, raw, bson.TypeInt64, 9007199254740993, "big")
		wantDouble(t, raw, 1, "e")
		wantDouble(t, raw, 1500, "k")
		wantDouble(t, raw, 1, "arr", "0")
		wantDouble(t, raw, zero, "arr", "1")
		wantInt(t, raw, bson.TypeInt32, 7, "arr", "2")
		wantDouble(t, raw, 2.5, "o", "x")
		wantDouble(t, raw, 0, "o", "y", "0")
	}
	check(1)
	for n := int64(2); n <= 3; n++ {
		if m := do(t, s, store.Merge(sa(at), incrementN, store.Document{JSON: []byte(`{}`)})); m.Err != nil || m.Outcome != store.Updated {
			t.Fatalf("merge: %+v", m)
		}
		check(n)
		want := strings.Replace(stored, `"n":1`, `"n":`+string(rune('0'+n)), 1)
		if got := read(); got != want {
			t.Fatalf("after merge %d the record reads\n %s\nwant\n %s", n-1, got, want)
		}
	}
}

// Values another application stored with a type whose JSON text the encoder would store as
// another one -- an int64 within the int32 range; on MongoDB also Decimal128s that read as 5,
// 1.50 or 0.1 -- keep their type through merges, untouched or changed to a number the type
// holds; values the program sets to one the type cannot hold follow the ordinary rule.
func TestMergeKeepsOtherApplicationsTypes(t *testing.T) {
	srv := typesServer(t)
	a := srv.store(t, nil)
	s := luaService(t, a, nil)
	coll := srv.db.Collection("foreign")
	fields := bson.D{
		{Key: "_id", Value: "r"}, {Key: "n", Value: int64(10)}, {Key: "small", Value: int64(5)},
		{Key: "neg", Value: int64(-7)}, {Key: "dbl", Value: 2.0}, {Key: "i", Value: int32(3)},
		{Key: "list", Value: bson.A{int64(1), 2.5, bson.D{{Key: "deep", Value: int64(0)}}}},
		{Key: "gone", Value: int64(4)},
	}
	if !srv.ferret { // FerretDB 1.x has no Decimal128
		for _, d := range []struct{ k, v string }{{"d5", "5"}, {"dhalf", "1.50"}, {"dtenth", "0.1"}, {"dprice", "19.99"}} {
			v, err := bson.ParseDecimal128(d.v)
			if err != nil {
				t.Fatal(err)
			}
			fields = append(fields, bson.E{Key: d.k, Value: v})
		}
	}
	if _, err := coll.InsertOne(ctxFor(t), fields); err != nil {
		t.Fatal(err)
	}
	at := addr(srv, "foreign", sk("r"))
	program := `return function(current)
	  current.n = current.n + 1          -- a changed int64: still an int64
	  if current.gone == 4 then current.gone = 4.5 end -- an int64 cannot hold 4.5: a double
	  if current.dprice then current.dprice = current.dprice * 2 end
	  return current
	end`
	for round := int64(1); round <= 2; round++ {
		if m := do(t, s, store.Merge(sa(at), program, store.Document{JSON: []byte(`{}`)})); m.Err != nil || m.Outcome != store.Updated {
			t.Fatalf("merge %d: %+v", round, m)
		}
		raw := rawDoc(t, coll, "r")
		wantInt(t, raw, bson.TypeInt64, 10+round, "n")
		wantInt(t, raw, bson.TypeInt64, 5, "small")
		wantInt(t, raw, bson.TypeInt64, -7, "neg")
		wantDouble(t, raw, 2, "dbl")
		wantInt(t, raw, bson.TypeInt32, 3, "i")
		wantInt(t, raw, bson.TypeInt64, 1, "list", "0")
		wantDouble(t, raw, 2.5, "list", "1")
		wantInt(t, raw, bson.TypeInt64, 0, "list", "2", "deep")
		wantDouble(t, raw, 4.5, "gone")
		if !srv.ferret {
			for k, want := range map[string]string{"d5": "5", "dhalf": "1.50", "dtenth": "0.1", "dprice": []string{"", "39.98", "79.96"}[round]} {
				v := raw.Lookup(k)
				if v.Type != bson.TypeDecimal128 || v.Decimal128().String() != want {
					t.Errorf("%s stored as %v %v, want the Decimal128 %s", k, v.Type, v, want)
				}
			}
		}
		if _, err := raw.LookupErr(mongostore.DefaultMetadataField, "rev"); err != nil {
			t.Fatalf("merge %d wrote no revision: %v", round, err)
		}
	}
	// The Service starts a later round from the revision its own write returned, not from a
	// read (a read queued behind a write is answered by the write): the types hold for it too.
	res, err := s.Do(ctxFor(t), []store.Op{
		store.Merge(sa(at), incrementN, store.Document{JSON: []byte(`{}`)}),
		store.Read(sa(at)),
		store.Merge(sa(at), incrementN, store.Document{JSON: []byte(`{}`)}),
	}, store.WaitApplied)
	if err != nil || res[0].Err != nil || res[1].Err != nil || res[2].Err != nil {
		t.Fatalf("merge, read, merge: %v %+v", err, res)
	}
	raw := rawDoc(t, coll, "r")
	wantInt(t, raw, bson.TypeInt64, 14, "n")
	wantInt(t, raw, bson.TypeInt64, 5, "small")
	wantInt(t, raw, bson.TypeInt64, 0, "list", "2", "deep")
	// An unconditional put has no read behind it: the ordinary rule applies.
	if p := do(t, s, store.Put(sa(at), store.Document{JSON: []byte(`{"small":5}`)})); p.Err != nil {
		t.Fatal(p.Err)
	}
	wantInt(t, rawDoc(t, coll, "r"), bson.TypeInt32, 5, "small")
}

// json.datetime(context.time), the documented way to stamp a record, works on MongoDB: the
// Service truncates the context time to the adapter's millisecond precision, and the record
// holds a BSON datetime that reads back as a marked date-time equal to the truncated time.
func TestMergeStampsContextTime(t *testing.T) {
	srv := typesServer(t)
	a := srv.store(t, nil)
	if p := a.TimePrecision(); p != time.Millisecond {
		t.Fatalf("TimePrecision %v, want 1ms", p)
	}
	now := time.Date(2026, 12, 2, 10, 11, 12, 123456789, time.FixedZone("x", 3600))
	s := luaService(t, a, func() time.Time { return now })
	coll := srv.db.Collection("stamped")
	at := addr(srv, "stamped", sk("r"))
	program := `return function(current, incoming, context)
	  local doc = current or {n = 0}
	  doc.n = doc.n + 1
	  doc.t = json.datetime(context.time)
	  return doc
	end`
	want := now.Truncate(time.Millisecond)
	for round := 1; round <= 2; round++ {
		if m := do(t, s, store.Merge(sa(at), program, store.Document{JSON: []byte(`{}`)})); m.Err != nil {
			t.Fatalf("merge %d: %v", round, m.Err)
		}
		raw := rawDoc(t, coll, "r")
		if v, ok := raw.Lookup("t").DateTimeOK(); !ok || v != want.UnixMilli() {
			t.Fatalf("t stored as %v, want the datetime %d (%s)", raw.Lookup("t"), want.UnixMilli(), want.UTC().Format(time.RFC3339Nano))
		}
		r := do(t, s, store.Read(sa(at)))
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		wantJSON := `{"n":` + string(rune('0'+round)) + `,"t":"2026-12-02T09:11:12.123Z"}`
		if string(r.Doc.JSON) != wantJSON || !slices.Equal(r.Doc.Times, []string{"/t"}) {
			t.Fatalf("read %s with times %q, want %s marked at /t", r.Doc.JSON, r.Doc.Times, wantJSON)
		}
		if got, err := time.Parse(time.RFC3339Nano, "2026-12-02T09:11:12.123Z"); err != nil || !got.Equal(want) {
			t.Fatalf("the stamp %v is not the truncated merge time %v", got, want)
		}
	}
	// The adapter still refuses a finer date-time given to it directly: the truncation is the
	// Service's, for merge context times only.
	w, err := a.Write(ctxFor(t), []driver.Write{{Kind: driver.Put, Addr: at,
		Doc: driver.Document{JSON: []byte(`{"t":"2026-12-02T09:11:12.123456789Z"}`), Times: []string{"/t"}}}}, driver.WriteOptions{})
	if err != nil || driver.KindOf(w[0].Err) != driver.KindInvalid {
		t.Fatalf("a nanosecond date-time: %+v %v, want invalid", w, err)
	}
}
