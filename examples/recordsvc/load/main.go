// Command load measures what explicit batches buy over one-item calls on a recordsvc: it
// runs the same number of puts (or reads) first as one-item RPCs from many concurrent
// clients, which the service coalesces into backend batches, then as explicit batches, and
// prints items per second for each and their ratio. It is a measurement, not a test: it is
// not part of make check. With --op hot-merge it measures the hot-record case instead:
// --clients callers each make --each one-item merge RPCs on ONE record, and it prints merges/s,
// refusals, latency percentiles and whether the counter equals the merges that succeeded.
//
//	cd examples && go run ./recordsvc/load --config recordsvc/memory.yaml
//	cd examples && go run ./recordsvc/load --addr 127.0.0.1:8080 --store main --dataset things
//
// With --config, load builds recordsvc, starts it on that configuration (with --mode when given; the
// gRPC listen address is taken from its start-up log line, so listen.grpc may use port 0),
// and stops it at the end. With --addr it uses a running service. --create-index URL creates
// the dataset as an Elasticsearch/OpenSearch index first and deletes it afterwards.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	recordv1 "github.com/tributary-dev/tributary/examples/recordsvc/proto/tributary/record/v1"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

type params struct {
	store, namespace, dataset string
	op                        string
	clients, batch            int
	items                     int
	keys                      int
}

func run() error {
	addr := flag.String("addr", "", "gRPC address of a running recordsvc")
	config := flag.String("config", "", "start recordsvc on this configuration instead (server mode)")
	bin := flag.String("recordsvc", "", "recordsvc binary for --config (default: go build it)")
	createIndex := flag.String("create-index", "", "Elasticsearch/OpenSearch URL: create --dataset as an index first, delete it after")
	var p params
	flag.StringVar(&p.store, "store", "main", "store name")
	flag.StringVar(&p.namespace, "namespace", "load", "namespace")
	flag.StringVar(&p.dataset, "dataset", "", "dataset (default a fresh name)")
	flag.StringVar(&p.op, "op", "put", "put, read, or hot-merge (--clients callers each run --each one-item merges on ONE record)")
	each := flag.Int("each", 20, "hot-merge: merges per client")
	flag.IntVar(&p.clients, "clients", 64, "concurrent clients")
	flag.IntVar(&p.batch, "batch", 64, "items per explicit batch")
	flag.IntVar(&p.items, "items", 20000, "items per phase")
	flag.IntVar(&p.keys, "keys", 5000, "distinct record keys")
	rounds := flag.Int("rounds", 3, "rounds of both phases; the ratio is taken per round")
	batchClients := flag.Int("batch-clients", 4, "concurrent clients sending explicit batches")
	mode := flag.String("mode", "", "--mode for the recordsvc that --config starts (default: the configuration's)")
	flag.Parse()
	if p.dataset == "" {
		p.dataset = fmt.Sprintf("recordsvc-load-%d", time.Now().UnixNano())
	}
	if (*addr == "") == (*config == "") {
		return errors.New("give exactly one of --addr and --config")
	}
	if p.op != "put" && p.op != "read" && p.op != "hot-merge" {
		return errors.New("--op must be put, read or hot-merge")
	}
	if *createIndex != "" {
		if err := index(http.MethodPut, *createIndex, p.dataset); err != nil {
			return err
		}
		defer index(http.MethodDelete, *createIndex, p.dataset)
	}
	if *config != "" {
		stop, a, err := startService(*config, *bin, *mode)
		if err != nil {
			return err
		}
		defer stop()
		*addr = a
	}
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	cl := recordv1.NewRecordServiceClient(conn)
	ctx := context.Background()
	if p.op == "hot-merge" {
		for r := 1; r <= *rounds; r++ {
			if err := hotMerge(ctx, cl, p, fmt.Sprintf("hot-%d-%d", time.Now().UnixNano(), r), *each); err != nil {
				return err
			}
		}
		return nil
	}
	if p.op == "read" {
		// Reads need records: write every key once.
		if _, err := phase(ctx, cl, p, "put", p.batch, 8, p.keys); err != nil {
			return err
		}
	}
	fmt.Printf("op=%s store=%s one-item clients=%d, batch clients=%d x %d items, items/phase=%d\n", p.op, p.store, p.clients, *batchClients, p.batch, p.items)
	for r := 1; r <= *rounds; r++ {
		single, err := phase(ctx, cl, p, p.op, 1, p.clients, p.items)
		if err != nil {
			return err
		}
		batched, err := phase(ctx, cl, p, p.op, p.batch, *batchClients, p.items)
		if err != nil {
			return err
		}
		fmt.Printf("round %d: one-item calls %.0f items/s (%.0f RPC/s), batches of %d %.0f items/s; one-item/batches = %.2f\n",
			r, single, single, p.batch, batched, single/batched)
	}
	return nil
}

// phase sends items operations as calls of size items each from clients goroutines and
// returns the items per second.
func phase(ctx context.Context, cl recordv1.RecordServiceClient, p params, op string, size, clients, items int) (float64, error) {
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	fail := func(err error) { once.Do(func() { firstErr = err }) }
	calls := int64((items + size - 1) / size)
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := next.Add(1) - 1
				if n >= calls || firstErr != nil {
					return
				}
				if err := call(ctx, cl, p, op, int(n)*size, size); err != nil {
					fail(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	return float64(calls*int64(size)) / time.Since(start).Seconds(), nil
}

func call(ctx context.Context, cl recordv1.RecordServiceClient, p params, op string, first, size int) error {
	addrs := make([]*recordv1.Address, size)
	for i := range addrs {
		k := strconv.Itoa((first + i) % p.keys)
		addrs[i] = &recordv1.Address{Store: p.store, Namespace: p.namespace, Dataset: p.dataset, Key: &recordv1.Key{Kind: &recordv1.Key_String_{String_: "k" + k}}}
	}
	var results []*recordv1.Result
	switch op {
	case "read":
		resp, err := cl.Read(ctx, &recordv1.ReadRequest{Addresses: addrs})
		if err != nil {
			return err
		}
		results = resp.Results
	default:
		items := make([]*recordv1.WriteItem, size)
		for i, a := range addrs {
			js := `{"n":` + strconv.Itoa(first+i) + `,"name":"load test record"}`
			items[i] = &recordv1.WriteItem{Address: a, Op: &recordv1.WriteItem_Put{Put: &recordv1.Put{Document: &recordv1.Document{Json: js}}}}
		}
		resp, err := cl.Write(ctx, &recordv1.WriteRequest{Items: items})
		if err != nil {
			return err
		}
		results = resp.Results
	}
	for _, r := range results {
		if r.Error != nil {
			return fmt.Errorf("%s: %s", r.Error.Kind, r.Error.Message)
		}
	}
	return nil
}

// hotIncrement is the hot-merge program: it adds one to the record's counter.
const hotIncrement = `return function(current, incoming, context)
  if current == nil then return {n = 1} end
  current.n = current.n + 1
  return current
end`

// hotMerge runs p.clients callers each making each one-item merge RPCs on one record, then
// reads the record: it prints merges/s, the merges refused (with the first refusal), the
// 50th/99th percentile latency, and whether the counter equals the merges that succeeded.
func hotMerge(ctx context.Context, cl recordv1.RecordServiceClient, p params, key string, each int) error {
	a := &recordv1.Address{Store: p.store, Namespace: p.namespace, Dataset: p.dataset, Key: &recordv1.Key{Kind: &recordv1.Key_String_{String_: key}}}
	req := &recordv1.WriteRequest{Items: []*recordv1.WriteItem{{Address: a, Op: &recordv1.WriteItem_Merge{Merge: &recordv1.Merge{
		Incoming: &recordv1.Document{Json: `{}`}, Program: &recordv1.Merge_Source{Source: hotIncrement}}}}}}
	var mu sync.Mutex
	var lat []time.Duration
	var refused atomic.Int64
	var first atomic.Value
	start := time.Now()
	var wg sync.WaitGroup
	for range p.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, each)
			for range each {
				t0 := time.Now()
				resp, err := cl.Write(ctx, req)
				mine = append(mine, time.Since(t0))
				if err == nil && resp.Results[0].Error != nil {
					err = fmt.Errorf("%s: %s", resp.Results[0].Error.Kind, resp.Results[0].Error.Message)
				}
				if err != nil {
					refused.Add(1)
					first.CompareAndSwap(nil, err.Error())
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(lat)
	total := p.clients * each
	fmt.Printf("hot-merge %d clients x %d merges on one record: %.0f merges/s, p50 %v, p99 %v, refused %d",
		p.clients, each, float64(total)/elapsed.Seconds(), lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)*99/100].Round(time.Millisecond), refused.Load())
	if f := first.Load(); f != nil {
		fmt.Printf(" (first: %s)", f)
	}
	resp, err := cl.Read(ctx, &recordv1.ReadRequest{Addresses: []*recordv1.Address{a}})
	if err != nil {
		return err
	}
	var got struct{ N int64 }
	if r := resp.Results[0]; r.Error == nil && r.Document != nil {
		_ = json.Unmarshal([]byte(r.Document.Json), &got)
	}
	want := int64(total) - refused.Load()
	fmt.Printf("; counter %d (succeeded %d)\n", got.N, want)
	if got.N != want {
		return fmt.Errorf("hot-merge: the counter is %d but %d merges succeeded: an update was lost", got.N, want)
	}
	return nil
}

var grpcAddr = regexp.MustCompile(`msg="recordsvc started".* grpc=(\S+)`)

// startService runs recordsvc in server mode and returns its gRPC address, read from its
// start-up log line.
func startService(config, bin, mode string) (stop func(), addr string, err error) {
	if bin == "" {
		dir, err := os.MkdirTemp("", "recordsvc-load")
		if err != nil {
			return nil, "", err
		}
		bin = filepath.Join(dir, "recordsvc")
		build := exec.Command("go", "build", "-o", bin, "github.com/tributary-dev/tributary/examples/recordsvc")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return nil, "", fmt.Errorf("building recordsvc: %w", err)
		}
	}
	args := []string{"--config", config}
	if mode != "" {
		args = append(args, "--mode", mode)
	}
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := grpcAddr.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
				break
			}
			fmt.Fprintln(os.Stderr, sc.Text())
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}
	select {
	case addr = <-found:
		return stop, addr, nil
	case <-time.After(60 * time.Second):
		stop()
		return nil, "", errors.New("recordsvc did not log its start within a minute")
	}
}

// index creates or deletes an index.
func index(method, base, name string) error {
	var body io.Reader
	if method == http.MethodPut {
		body = strings.NewReader(`{"settings":{"number_of_shards":1,"number_of_replicas":0}}`)
	}
	req, err := http.NewRequest(method, strings.TrimSuffix(base, "/")+"/"+name, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s index %s: %s", method, name, resp.Status)
	}
	return nil
}
