package luamerge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/mongostore"
	"github.com/tributary-dev/tributary/store/searchstore"
)

// The Lua tests through the store also run on the real search engines: each gets a fresh index
// (the adapter never creates one), deleted when the test ends.
func init() {
	luaBackends = append(luaBackends,
		luaBackend{"elasticsearch", func(t testing.TB) (store.Adapter, string, string) {
			return searchBackend(t, estest.Elasticsearch, testenv.ElasticsearchURL)
		}},
		luaBackend{"opensearch", func(t testing.TB) (store.Adapter, string, string) {
			return searchBackend(t, estest.OpenSearch, testenv.OpenSearchURL)
		}},
		luaBackend{"mongodb", mongoBackend},
	)
}

// mongoBackend uses a fresh database, dropped when the test ends.
func mongoBackend(t testing.TB) (store.Adapter, string, string) {
	uri := testenv.Require(t, testenv.MongoURI)
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	db := "luamerge_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var info bson.Raw
	if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err != nil {
		t.Fatalf("buildInfo: %v", err)
	}
	_, notFerret := info.LookupErr("ferretdbVersion")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = client.Database(db).Drop(ctx)
		_ = client.Disconnect(ctx)
	})
	a, err := mongostore.New(client, &mongostore.Options{FerretDB: notFerret == nil})
	if err != nil {
		t.Fatal(err)
	}
	return a, db, "counters"
}

func searchBackend(t testing.TB, engine, variable string) (store.Adapter, string, string) {
	base := testenv.Require(t, variable)
	index := estest.Connect(t, engine, base).TempIndex(t, "luamerge", map[string]any{"mappings": map[string]any{"dynamic": false}})
	a, err := searchstore.NewFromURLs([]string{base}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a, "lua", index
}
