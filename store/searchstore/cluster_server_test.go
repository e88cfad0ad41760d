package searchstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/search"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/store/driver"
	"github.com/tributary-dev/tributary/store/searchstore"
)

// TestClusterStoppedNodeFirst: on the three-node cluster (escluster), with a stopped node
// listed before the three, every write, read and dataset check succeeds, and the requests
// are spread over the live nodes (round robin), not all sent to the first that answers. (One
// of the three may be down meanwhile, stopped by a fault test: the same holds.)
func TestClusterStoppedNodeFirst(t *testing.T) {
	urls := testenv.RequireCluster(t)
	// The admin client too lists every node: a fault test may have one down meanwhile.
	tp, err := search.NewClient(search.Options{URLs: urls})
	if err != nil {
		t.Fatal(err)
	}
	admin := &estest.Node{Engine: "Elasticsearch", URL: urls[0], Transport: tp}
	index := admin.TempIndex(t, "searchstore-cluster", map[string]any{"settings": map[string]any{"number_of_shards": 3, "number_of_replicas": 1}})
	dead := estest.ClosedURL(t, "http")
	before := httpRequestsPerNode(t, admin)
	s, err := searchstore.NewFromURLs(append([]string{dead}, urls...), &searchstore.Options{DatasetTTL: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n = 30
	for i := range n {
		a := driver.Address{Store: "s", Namespace: "n", Dataset: index, Key: driver.NewStringKey(fmt.Sprint(i))}
		res, err := s.Write(ctx, []driver.Write{{Kind: driver.Put, Addr: a, Doc: driver.Document{JSON: []byte(`{"i":1}`)}, Cond: driver.Condition{Kind: driver.IfAbsent}}}, driver.WriteOptions{})
		if err != nil || res[0].Err != nil || res[0].Outcome != driver.Created {
			t.Fatalf("write %d: %+v, %v", i, res, err)
		}
		rr, err := s.Read(ctx, []driver.Address{a})
		if err != nil || rr[0].Err != nil || !rr[0].Found {
			t.Fatalf("read %d: %+v, %v", i, rr, err)
		}
	}
	after := httpRequestsPerNode(t, admin)
	t.Logf("HTTP requests per node: before %v, after %v", before, after)
	served := 0
	for node, c := range after {
		if c-before[node] >= n/2 { // 3n requests (check, write, read) over three nodes
			served++
		}
	}
	if served < 2 {
		t.Fatalf("requests per node before %v, after %v: want the load on at least two nodes", before, after)
	}
}

// httpRequestsPerNode returns, per node name, the HTTP requests its recent clients sent
// (_nodes/stats/http: clients[].request_count; closed clients stay listed for minutes).
func httpRequestsPerNode(t *testing.T, admin *estest.Node) map[string]int {
	t.Helper()
	var stats struct {
		Nodes map[string]struct {
			Name string `json:"name"`
			HTTP struct {
				Clients []struct {
					RequestCount int `json:"request_count"`
				} `json:"clients"`
			} `json:"http"`
		} `json:"nodes"`
	}
	admin.OK(t, esapi.NodesStatsRequest{Metric: []string{"http"}}).Decode(t, &stats)
	out := map[string]int{}
	for _, n := range stats.Nodes {
		for _, c := range n.HTTP.Clients {
			out[n.Name] += c.RequestCount
		}
	}
	return out
}
