package mongostore_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tributary-dev/tributary/store/driver"
	"github.com/tributary-dev/tributary/store/mongostore"
)

// BenchmarkBatchReadConditionalWrite measures one read-modify-write round over a batch of
// records -- read them all, then write each back conditioned on the revision just read -- done
// through the adapter and done by hand (one pre-encoded $in find, one unordered bulk of
// revision-filtered replaceOnes) against the same server and the same records. Each iteration
// runs both, in alternating order, so one run yields the ratio: x-of-handwritten is the
// adapter's throughput as a fraction of the hand-written code's (goal >= 0.7).
//
// Batches stay at 50 records or fewer: the hand-written baseline sends all its replaceOnes as
// one update command, FerretDB 1.24 deadlocks on an update of about 100 statements, and the
// test server refuses one of more than 50 (see the package documentation).
func BenchmarkBatchReadConditionalWrite(b *testing.B) {
	for _, n := range []int{16, 48} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) { benchReadWrite(b, n) })
	}
}

func benchReadWrite(b *testing.B, n int) {
	srv := connect(b)
	// A deadline, so that a server that stops answering fails the benchmark instead of hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	a, err := mongostore.New(srv.client, &mongostore.Options{FerretDB: srv.ferret})
	if err != nil {
		b.Fatal(err)
	}
	const dataset = "bench"
	coll := srv.db.Collection(dataset)
	meta := mongostore.DefaultMetadataField

	addrs := make([]driver.Address, n)
	docs := make([]driver.Document, n) // what the adapter writes
	bodies := make([]bson.Raw, n)      // the same documents, pre-encoded for the hand-written code
	ids := make(bson.A, n)
	var seed []driver.Write
	for i := range n {
		id := fmt.Sprintf("record-%04d", i)
		addrs[i] = driver.Address{Store: "m", Namespace: srv.db.Name(), Dataset: dataset, Key: driver.NewStringKey(id)}
		js := fmt.Sprintf(`{"name":"customer %d","email":"c%d@example.com","visits":%d,"score":%d.5,"tags":["a","b","c"],"address":{"city":"Lisbon","zip":"1000-%03d"}}`, i, i, i, i, i)
		docs[i] = driver.Document{JSON: []byte(js)}
		var d bson.D
		if err := bson.UnmarshalExtJSON([]byte(js), false, &d); err != nil {
			b.Fatal(err)
		}
		body, _ := bson.Marshal(d)
		bodies[i] = body
		ids[i] = id
		seed = append(seed, driver.Write{Kind: driver.Put, Addr: addrs[i], Doc: docs[i]})
	}
	if res, err := a.Write(ctx, seed, driver.WriteOptions{}); err != nil || res[0].Err != nil {
		b.Fatalf("seed: %v %v", err, res)
	}

	adapterRound := func() {
		reads, err := a.Read(ctx, addrs)
		if err != nil {
			b.Fatal(err)
		}
		writes := make([]driver.Write, n)
		for i, r := range reads {
			if r.Err != nil || !r.Found {
				b.Fatalf("read %d: %+v", i, r)
			}
			writes[i] = driver.Write{Kind: driver.Put, Addr: addrs[i], Doc: docs[i], Cond: driver.Condition{Kind: driver.IfRevision, Revision: r.Revision}}
		}
		res, err := a.Write(ctx, writes, driver.WriteOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil {
				b.Fatalf("write %d: %v", i, r.Err)
			}
		}
	}

	filter := bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}}
	handRound := func() {
		cur, err := coll.Find(ctx, filter, options.Find().SetBatchSize(int32(n)))
		if err != nil {
			b.Fatal(err)
		}
		revs := make(map[string]bson.RawValue, n)
		for cur.Next(ctx) {
			revs[cur.Current.Lookup("_id").StringValue()] = cur.Current.Lookup(meta, "rev")
		}
		if err := cur.Err(); err != nil {
			b.Fatal(err)
		}
		_ = cur.Close(ctx)
		models := make([]mongo.WriteModel, n)
		for i := range n {
			id := ids[i].(string)
			tok := make([]byte, 16)
			_, _ = rand.Read(tok)
			// The pre-encoded body with a fresh revision token appended.
			repl := append(bson.Raw(nil), bodies[i][:len(bodies[i])-1]...)
			metaDoc, _ := bson.Marshal(bson.D{{Key: "rev", Value: bson.Binary{Data: tok}}})
			repl = append(repl, byte(bson.TypeEmbeddedDocument))
			repl = append(repl, meta...)
			repl = append(repl, 0)
			repl = append(repl, metaDoc...)
			repl = append(repl, 0)
			repl[0], repl[1], repl[2], repl[3] = byte(len(repl)), byte(len(repl)>>8), byte(len(repl)>>16), byte(len(repl)>>24)
			models[i] = mongo.NewReplaceOneModel().
				SetFilter(bson.D{{Key: "_id", Value: id}, {Key: meta + ".rev", Value: revs[id]}}).
				SetReplacement(repl)
		}
		res, err := coll.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
		if err != nil || res.MatchedCount != int64(n) {
			b.Fatalf("bulk: %v %+v", err, res)
		}
	}

	adapterRound()
	handRound()
	var adapterTime, handTime time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			t0 := time.Now()
			adapterRound()
			t1 := time.Now()
			handRound()
			adapterTime += t1.Sub(t0)
			handTime += time.Since(t1)
		} else {
			t0 := time.Now()
			handRound()
			t1 := time.Now()
			adapterRound()
			handTime += t1.Sub(t0)
			adapterTime += time.Since(t1)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(adapterTime.Microseconds())/float64(b.N), "adapter-µs/op")
	b.ReportMetric(float64(handTime.Microseconds())/float64(b.N), "handwritten-µs/op")
	b.ReportMetric(float64(handTime)/float64(adapterTime), "x-of-handwritten")
}
