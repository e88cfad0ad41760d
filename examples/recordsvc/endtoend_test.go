package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	recordv1 "github.com/tributary-dev/tributary/examples/recordsvc/proto/tributary/record/v1"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/accepted"
	"github.com/tributary-dev/tributary/store/worker"
)

// addVisits is the Lua merge the scenarios run: it creates the record or adds to its counter.
const addVisits = `
return function(current, incoming, context)
  if current == nil then
    current = {name = incoming.name, visits = 0}
  end
  current.visits = current.visits + incoming.visits
  return current
end`

// scenario drives one store through the API: puts with preconditions, merges, reads, deletes,
// per-item errors in request order and whole-request refusal. ds must exist on search stores.
// keepsTimes says the store returns date-time pointers on reads (memory, MongoDB); search
// stores keep the strings and do not.
func scenario(t *testing.T, s *service, storeName, ns, ds string, keepsTimes bool) {
	ctx := testCtx(t)
	a := addr(storeName, ns, ds, "ada")
	b := addr(storeName, ns, ds, "bob")
	applied := recordv1.Completion_COMPLETION_WAIT_UNTIL_APPLIED

	// A put, then a read that returns the document, its date-time pointer and a revision.
	w, err := s.rpc.Write(ctx, &recordv1.WriteRequest{Completion: applied, Items: []*recordv1.WriteItem{
		put(a, doc(`{"name":"Ada","visits":1,"since":"2020-01-02T03:04:05Z"}`, "/since"), ifAbsent()),
	}})
	if err != nil {
		t.Fatal(err)
	}
	wantOutcomes(t, "create", w.Results, recordv1.Outcome_OUTCOME_CREATED)
	rev1 := w.Results[0].Revision
	if len(rev1) == 0 {
		t.Fatal("a created record came back without a revision")
	}
	r, err := s.rpc.Read(ctx, &recordv1.ReadRequest{Addresses: []*recordv1.Address{a, b}})
	if err != nil {
		t.Fatal(err)
	}
	wantOutcomes(t, "read", r.Results, recordv1.Outcome_OUTCOME_FOUND, recordv1.Outcome_OUTCOME_NOT_FOUND)
	var got map[string]any
	if err := json.Unmarshal([]byte(r.Results[0].Document.GetJson()), &got); err != nil || got["name"] != "Ada" || got["since"] != "2020-01-02T03:04:05Z" {
		t.Errorf("read document %s (%v), want the put's", r.Results[0].Document.GetJson(), err)
	}
	if tp := r.Results[0].Document.GetTimePointers(); keepsTimes && (len(tp) != 1 || tp[0] != "/since") {
		t.Errorf("read time pointers %v, want [/since]", tp)
	}
	if !bytes.Equal(r.Results[0].Revision, rev1) {
		t.Errorf("read revision differs from the write's")
	}

	// One batch, per-item results in request order: a put at the current revision, a put at
	// the now stale one, an if-absent put on an existing record, two merges sharing one
	// program (the second sees the first), and a merge on a new record.
	w, err = s.rpc.Write(ctx, &recordv1.WriteRequest{Completion: applied, Programs: []string{addVisits}, Items: []*recordv1.WriteItem{
		put(a, doc(`{"name":"Ada","visits":10}`), ifRevision(rev1)),
		put(a, doc(`{"name":"Ada","visits":99}`), ifRevision(rev1)),
		put(a, doc(`{"name":"Ada","visits":98}`), ifAbsent()),
		mergeIdx(a, doc(`{"visits":5}`), 0),
		mergeIdx(a, doc(`{"visits":7}`), 0),
		mergeSrc(b, doc(`{"name":"Bob","visits":2}`), addVisits),
	}})
	if err != nil {
		t.Fatal(err)
	}
	wantOutcomes(t, "mixed batch", w.Results,
		recordv1.Outcome_OUTCOME_UPDATED,
		recordv1.ErrorKind_ERROR_KIND_CONFLICT,
		recordv1.ErrorKind_ERROR_KIND_ALREADY_EXISTS,
		recordv1.Outcome_OUTCOME_UPDATED,
		recordv1.Outcome_OUTCOME_UPDATED,
		recordv1.Outcome_OUTCOME_CREATED)
	if e := w.Results[1].Error; e != nil && (e.Retryable || !strings.Contains(e.Message, "ada")) {
		t.Errorf("conflict error %+v: want not retryable, naming the address", e)
	}
	if err := json.Unmarshal([]byte(w.Results[4].Document.GetJson()), &got); err != nil || got["visits"] != float64(22) {
		t.Errorf("after the merges the document is %s, want visits 22", w.Results[4].Document.GetJson())
	}

	// Concurrent one-item merges (coalesced by the service) lose no increment.
	const writers, each = scenarioWriters, scenarioEach
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				res, err := s.rpc.Write(ctx, &recordv1.WriteRequest{Items: []*recordv1.WriteItem{mergeSrc(b, doc(`{"visits":1}`), addVisits)}})
				if err == nil && res.Results[0].Error != nil {
					err = fmt.Errorf("%s", describe(res.Results[0]))
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
		t.Errorf("concurrent merge: %v", err)
	}
	r, err = s.rpc.Read(ctx, &recordv1.ReadRequest{Addresses: []*recordv1.Address{b}})
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(r.Results[0].Document.GetJson()), &got); err != nil || got["visits"] != float64(2+writers*each) {
		t.Errorf("after %d concurrent merges the document is %s, want visits %d", writers*each, r.Results[0].Document.GetJson(), 2+writers*each)
	}

	// A request with a malformed item is refused whole: the valid put before it is not written.
	c := addr(storeName, ns, ds, "carol")
	_, err = s.rpc.Write(ctx, &recordv1.WriteRequest{Items: []*recordv1.WriteItem{
		put(c, doc(`{"name":"Carol"}`), nil),
		put(addr("no-such-store", ns, ds, "x"), doc(`{}`), nil),
		put(c, doc(`[1,2]`), nil),
	}})
	wantRefused(t, err, "items[1]", "items[2]")
	r, err = s.rpc.Read(ctx, &recordv1.ReadRequest{Addresses: []*recordv1.Address{c}})
	if err != nil {
		t.Fatal(err)
	}
	wantOutcomes(t, "read after a refused request", r.Results, recordv1.Outcome_OUTCOME_NOT_FOUND)

	// Deletes: a stale revision conflicts, if-absent on an existing record is a failed check,
	// a plain delete deletes, and a second one finds nothing.
	d, err := s.rpc.Delete(ctx, &recordv1.DeleteRequest{Completion: recordv1.Completion_COMPLETION_WAIT_UNTIL_VISIBLE, Items: []*recordv1.DeleteItem{
		{Address: a, Precondition: ifRevision(rev1)},
		{Address: a, Precondition: ifAbsent()},
		{Address: a},
		{Address: a},
		{Address: b},
	}})
	if err != nil {
		t.Fatal(err)
	}
	wantOutcomes(t, "deletes", d.Results,
		recordv1.ErrorKind_ERROR_KIND_CONFLICT,
		recordv1.ErrorKind_ERROR_KIND_ALREADY_EXISTS,
		recordv1.Outcome_OUTCOME_DELETED,
		recordv1.Outcome_OUTCOME_NOT_FOUND,
		recordv1.Outcome_OUTCOME_DELETED)

	// The deleted record's old revision still conflicts after it is created again.
	w, err = s.rpc.Write(ctx, &recordv1.WriteRequest{Items: []*recordv1.WriteItem{
		put(a, doc(`{"name":"Ada again"}`), nil),
		put(a, doc(`{"name":"stale"}`), ifRevision(rev1)),
	}})
	if err != nil {
		t.Fatal(err)
	}
	wantOutcomes(t, "recreate", w.Results, recordv1.Outcome_OUTCOME_CREATED, recordv1.ErrorKind_ERROR_KIND_CONFLICT)

	// Accepted mode on a store without a queue fails that item on its own, retryable, with
	// its own kind (not UNAVAILABLE); the request's other items run.
	w, err = s.rpc.Write(ctx, &recordv1.WriteRequest{Completion: recordv1.Completion_COMPLETION_RETURN_AFTER_ACCEPTED, Items: []*recordv1.WriteItem{put(c, doc(`{}`), nil)}})
	if err != nil {
		t.Fatalf("accepted mode without a queue: %v, want a per-item failure", err)
	}
	wantOutcomes(t, "accepted mode without a queue", w.Results, recordv1.ErrorKind_ERROR_KIND_NO_QUEUE)
	if e := w.Results[0].Error; !e.GetRetryable() || !strings.Contains(e.GetMessage(), "store "+storeName+" has no durable queue") {
		t.Errorf("accepted mode without a queue: %v, want retryable, naming the store", e)
	}
}

// wantRefused checks that err refuses a whole request as INVALID_ARGUMENT with a BadRequest
// naming exactly the given fields.
func wantRefused(t *testing.T, err error, fields ...string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != codes.InvalidArgument {
		t.Fatalf("malformed request: %v, want InvalidArgument", err)
	}
	var got []string
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.FieldViolations {
				got = append(got, v.Field)
			}
		}
	}
	if strings.Join(got, ",") != strings.Join(fields, ",") {
		t.Errorf("refusal names %v, want %v", got, fields)
	}
}

// The scenario's concurrent merges: scenarioWriters callers each make scenarioEach.
const scenarioWriters, scenarioEach = 8, 5

// scenarioService is the service section of the scenario's configurations. A merge loses its
// compare-and-set only to another merge's write, so with one attempt per concurrent merge none
// can give up on a correct store however slow the machine is: the scenario proves that no
// increment is lost, not that the merges are fast (the default, 16, gave up under load).
var scenarioService = "service: {merge_budget: 2m}\n"

var memoryConfig = `
listen: {grpc: 127.0.0.1:0, metrics: 127.0.0.1:0}
stores:
  main: {kind: memory}
  other: {kind: memory}
` + scenarioService

func TestEndToEndMemory(t *testing.T) {
	s := startService(t, memoryConfig, modeServer)
	scenario(t, s, "main", "crm", "people", true)
}

// TestEndToEndMemoryYAML starts the shipped no-server configuration as it is (its mode: all
// included, no --mode), with its listen addresses moved to free ports.
func TestEndToEndMemoryYAML(t *testing.T) {
	cfg, err := loadConfig("memory.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Stores) == 0 {
		t.Fatal("memory.yaml configures no store")
	}
	raw, err := readFile("memory.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.NewReplacer("127.0.0.1:8080", "127.0.0.1:0", "127.0.0.1:9090", "127.0.0.1:0").Replace(raw)
	s := startService(t, text, "")
	ctx := testCtx(t)
	a := addr("main", "demo", "things", "one")
	w, err := s.rpc.Write(ctx, &recordv1.WriteRequest{Completion: recordv1.Completion_COMPLETION_RETURN_AFTER_ACCEPTED,
		Items: []*recordv1.WriteItem{mergeSrc(a, doc(`{"name":"one","visits":3}`), addVisits)}})
	if err != nil {
		t.Fatal(err)
	}
	wantOutcomes(t, "accepted merge", w.Results, recordv1.Outcome_OUTCOME_ACCEPTED)
	eventually(t, ctx, "the worker applies the accepted merge", func() bool {
		r, err := s.rpc.Read(ctx, &recordv1.ReadRequest{Addresses: []*recordv1.Address{a}})
		return err == nil && r.Results[0].Outcome == recordv1.Outcome_OUTCOME_FOUND
	})
}

// TestEndToEndAcceptedAppliedByWorker: accepted-mode puts, merges and deletes go through the
// in-process queue and the worker applies them in submission order; a record the worker
// cannot apply is dead-lettered and counted.
func TestEndToEndAcceptedAppliedByWorker(t *testing.T) {
	s := startService(t, `
listen: {grpc: 127.0.0.1:0, metrics: 127.0.0.1:0}
stores:
  main:
    kind: memory
    queue: {kind: memory, worker: {max_attempts: 2, backoff_base: 1ms, backoff_max: 2ms}}
`, modeAll)
	acceptedMode(t, s, s.metrics, "main", "acc", "things")
}

// TestEndToEndAcceptedWithoutQueue: a RETURN_AFTER_ACCEPTED request over a store with a queue
// and one without: the item of the store without a queue fails alone (ERROR_KIND_NO_QUEUE,
// retryable), the other store's item is accepted and applied, and nothing is queued for the
// failed one.
func TestEndToEndAcceptedWithoutQueue(t *testing.T) {
	s := startService(t, `
listen: {grpc: 127.0.0.1:0, metrics: 127.0.0.1:0}
stores:
  main:
    kind: memory
    queue: {kind: memory}
  plain: {kind: memory}
`, modeAll)
	ctx := testCtx(t)
	q, p := addr("main", "acc", "things", "q"), addr("plain", "acc", "things", "p")
	w, err := s.rpc.Write(ctx, &recordv1.WriteRequest{Completion: recordv1.Completion_COMPLETION_RETURN_AFTER_ACCEPTED, Items: []*recordv1.WriteItem{
		put(p, doc(`{"v":1}`), nil),
		put(q, doc(`{"v":1}`), nil),
		put(p, doc(`{"v":2}`), nil),
	}})
	if err != nil {
		t.Fatalf("a request over a store with a queue and one without: %v, want per-item results", err)
	}
	nq := recordv1.ErrorKind_ERROR_KIND_NO_QUEUE
	wantOutcomes(t, "mixed stores", w.Results, nq, recordv1.Outcome_OUTCOME_ACCEPTED, nq)
	for _, i := range []int{0, 2} {
		if e := w.Results[i].Error; !e.GetRetryable() || !strings.Contains(e.GetMessage(), "store plain has no durable queue") {
			t.Errorf("item %d: %v, want retryable, naming the store", i, e)
		}
	}
	d, err := s.rpc.Delete(ctx, &recordv1.DeleteRequest{Completion: recordv1.Completion_COMPLETION_RETURN_AFTER_ACCEPTED, Items: []*recordv1.DeleteItem{{Address: p}}})
	if err != nil {
		t.Fatal(err)
	}
	wantOutcomes(t, "accepted delete without a queue", d.Results, nq)
	eventually(t, ctx, "the worker applies the accepted put", func() bool {
		r, err := s.rpc.Read(ctx, &recordv1.ReadRequest{Addresses: []*recordv1.Address{q}})
		return err == nil && r.Results[0].Outcome == recordv1.Outcome_OUTCOME_FOUND
	})
	r, err := s.rpc.Read(ctx, &recordv1.ReadRequest{Addresses: []*recordv1.Address{p}})
	if err != nil {
		t.Fatal(err)
	}
	wantOutcomes(t, "the failed items wrote nothing", r.Results, recordv1.Outcome_OUTCOME_NOT_FOUND)
	if v, _ := scrape(t, s.metrics, `recordsvc_queue_published_total{result="ok",store="main"}`); v != 1 {
		t.Errorf("queue_published_total ok = %v, want 1", v)
	}
	// The same write with a synchronous completion succeeds: the retry the kind promises.
	w, err = s.rpc.Write(ctx, &recordv1.WriteRequest{Items: []*recordv1.WriteItem{put(p, doc(`{"v":3}`), nil)}})
	if err != nil {
		t.Fatal(err)
	}
	wantOutcomes(t, "synchronous retry", w.Results, recordv1.Outcome_OUTCOME_CREATED)
}

// acceptedMode drives the accepted-mode path of storeName through s; a worker (whose metrics are
// at workerMetrics) applies the records.
func acceptedMode(t *testing.T, s *service, workerMetrics, storeName, ns, ds string) {
	ctx := testCtx(t)
	a := addr(storeName, ns, ds, "a")
	b := addr(storeName, ns, ds, "b")
	acc := recordv1.Completion_COMPLETION_RETURN_AFTER_ACCEPTED
	w, err := s.rpc.Write(ctx, &recordv1.WriteRequest{Completion: acc, Programs: []string{addVisits}, Items: []*recordv1.WriteItem{
		put(a, doc(`{"name":"A","visits":1}`), nil),
		mergeIdx(a, doc(`{"visits":2}`), 0),
		mergeIdx(a, doc(`{"visits":3}`), 0),
		put(b, doc(`{"name":"B"}`), nil),
		// A merge whose program fails: permanent, so dead-lettered.
		mergeSrc(addr(storeName, ns, ds, "bad"), doc(`{}`), "return function(c) error('no') end"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	o := recordv1.Outcome_OUTCOME_ACCEPTED
	wantOutcomes(t, "accepted writes", w.Results, o, o, o, o, o)
	d, err := s.rpc.Delete(ctx, &recordv1.DeleteRequest{Completion: acc, Items: []*recordv1.DeleteItem{{Address: b}}})
	if err != nil {
		t.Fatal(err)
	}
	wantOutcomes(t, "accepted delete", d.Results, o)

	eventually(t, ctx, "the worker applies the queued writes in order", func() bool {
		r, err := s.rpc.Read(ctx, &recordv1.ReadRequest{Addresses: []*recordv1.Address{a, b}})
		if err != nil || r.Results[0].Outcome != recordv1.Outcome_OUTCOME_FOUND || r.Results[1].Outcome != recordv1.Outcome_OUTCOME_NOT_FOUND {
			return false
		}
		var got map[string]any
		return json.Unmarshal([]byte(r.Results[0].Document.GetJson()), &got) == nil && got["visits"] == float64(6)
	})
	eventually(t, ctx, "the failing merge is dead-lettered and counted", func() bool {
		v, _ := scrape(t, workerMetrics, `recordsvc_worker_records_total{result="dead_lettered",store="`+storeName+`"}`)
		return v == 1
	})
	if v, _ := scrape(t, s.metrics, `recordsvc_queue_published_total{result="ok",store="`+storeName+`"}`); v != 6 {
		t.Errorf("queue_published_total ok = %v, want 6", v)
	}
}

// TestEndToEndSizeLimit: a request over limits.max_request_bytes is refused by gRPC before it
// is decoded; a smaller one on the same connection still works.
func TestEndToEndSizeLimit(t *testing.T) {
	s := startService(t, `
listen: {grpc: 127.0.0.1:0, metrics: "off"}
limits: {max_request_bytes: 4096, max_document_bytes: 2048}
stores: {main: {kind: memory}}
`, modeServer, grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(1<<20)))
	ctx := testCtx(t)
	a := addr("main", "ns", "ds", "big")
	big := doc(`{"pad":"` + strings.Repeat("x", 8000) + `"}`)
	_, err := s.rpc.Write(ctx, &recordv1.WriteRequest{Items: []*recordv1.WriteItem{put(a, big, nil)}})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("8 KB request against a 4 KiB limit: %v, want ResourceExhausted", err)
	}
	// Within the request limit but over the document limit: refused whole, naming the item.
	_, err = s.rpc.Write(ctx, &recordv1.WriteRequest{Items: []*recordv1.WriteItem{put(a, doc(`{"pad":"`+strings.Repeat("x", 3000)+`"}`), nil)}})
	wantRefused(t, err, "items[0]")
	w, err := s.rpc.Write(ctx, &recordv1.WriteRequest{Items: []*recordv1.WriteItem{put(a, doc(`{"small":true}`), nil)}})
	if err != nil {
		t.Fatal(err)
	}
	wantOutcomes(t, "small write", w.Results, recordv1.Outcome_OUTCOME_CREATED)
}

// TestEndToEndMalformedItems: translation errors (no key, a short ObjectID, a program index
// beyond the list, an item without an operation) refuse the request whole, naming each item.
func TestEndToEndMalformedItems(t *testing.T) {
	s := startService(t, memoryConfig, modeServer)
	ctx := testCtx(t)
	ok := addr("main", "ns", "ds", "k")
	_, err := s.rpc.Write(ctx, &recordv1.WriteRequest{Items: []*recordv1.WriteItem{
		put(ok, doc(`{}`), nil),
		put(&recordv1.Address{Store: "main", Namespace: "ns", Dataset: "ds"}, doc(`{}`), nil),
		put(&recordv1.Address{Store: "main", Namespace: "ns", Dataset: "ds", Key: &recordv1.Key{Kind: &recordv1.Key_ObjectId{ObjectId: []byte{1, 2}}}}, doc(`{}`), nil),
		mergeIdx(ok, doc(`{}`), 3),
		{Address: ok},
	}})
	wantRefused(t, err, "items[1]", "items[2]", "items[3]", "items[4]")
	_, err = s.rpc.Read(ctx, &recordv1.ReadRequest{Addresses: []*recordv1.Address{ok, nil}})
	wantRefused(t, err, "addresses[1]")
	// The Service's refusals (a bad document, an unknown store) and the translation failures
	// (a missing address, an item without an operation) come in one answer, in one format.
	_, err = s.rpc.Write(ctx, &recordv1.WriteRequest{Items: []*recordv1.WriteItem{
		put(ok, doc(`{}`), nil),
		put(ok, doc(`[1,2]`), nil),
		put(addr("no-such-store", "ns", "ds", "x"), doc(`{}`), nil),
		put(nil, doc(`{}`), nil),
		{Address: ok},
	}})
	wantRefused(t, err, "items[1]", "items[2]", "items[3]", "items[4]")
	st, _ := status.FromError(err)
	var descs []string
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.FieldViolations {
				descs = append(descs, v.Description)
			}
		}
	}
	want := []string{
		`put main/ns/ds/"k": document is a JSON array, not an object`,
		`put no-such-store/ns/ds/"x": no store named "no-such-store" is configured`,
		`put: address is missing`,
		`main/ns/ds/"k": item is neither a put nor a merge`,
	}
	if strings.Join(descs, "\n") != strings.Join(want, "\n") {
		t.Errorf("one-pass refusal describes\n%s\nwant\n%s", strings.Join(descs, "\n"), strings.Join(want, "\n"))
	}
	// Every key type round-trips.
	keys := []*recordv1.Key{
		strKey("s"),
		{Kind: &recordv1.Key_Int64{Int64: -1 << 62}},
		{Kind: &recordv1.Key_Bytes{Bytes: []byte{0, 255}}},
		{Kind: &recordv1.Key_ObjectId{ObjectId: bytes.Repeat([]byte{7}, 12)}},
	}
	var items []*recordv1.WriteItem
	var addrs []*recordv1.Address
	for _, k := range keys {
		a := &recordv1.Address{Store: "main", Namespace: "ns", Dataset: "keys", Key: k}
		items = append(items, put(a, doc(`{}`), nil))
		addrs = append(addrs, a)
	}
	if _, err := s.rpc.Write(ctx, &recordv1.WriteRequest{Items: items}); err != nil {
		t.Fatal(err)
	}
	r, err := s.rpc.Read(ctx, &recordv1.ReadRequest{Addresses: addrs})
	if err != nil {
		t.Fatal(err)
	}
	f := recordv1.Outcome_OUTCOME_FOUND
	wantOutcomes(t, "keys", r.Results, f, f, f, f)
}

// TestEndToEndMetricsScrape: the items, adapter and merge metrics move with the calls made.
func TestEndToEndMetricsScrape(t *testing.T) {
	s := startService(t, memoryConfig, modeServer)
	ctx := testCtx(t)
	a := addr("main", "ns", "ds", "m")
	for range 3 {
		if _, err := s.rpc.Write(ctx, &recordv1.WriteRequest{Items: []*recordv1.WriteItem{mergeSrc(a, doc(`{"name":"m","visits":1}`), addVisits)}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.rpc.Read(ctx, &recordv1.ReadRequest{Addresses: []*recordv1.Address{a, addr("main", "ns", "ds", "none")}}); err != nil {
		t.Fatal(err)
	}
	_, _ = s.rpc.Write(ctx, &recordv1.WriteRequest{Items: []*recordv1.WriteItem{put(addr("nope", "ns", "ds", "x"), doc(`{}`), nil)}})
	for series, want := range map[string]float64{
		`recordsvc_items_total{op="merge",result="created",store="main"}`:     1,
		`recordsvc_items_total{op="merge",result="updated",store="main"}`:     2,
		`recordsvc_items_total{op="read",result="found",store="main"}`:        1,
		`recordsvc_items_total{op="read",result="absent",store="main"}`:       1,
		`recordsvc_coalesced_batch_size_count{store="main"}`:                  3,
		`recordsvc_coalesced_batch_size_sum{store="main"}`:                    3,
		`recordsvc_coalescer_waiting{store="main"}`:                           0,
		`recordsvc_item_duration_seconds_count{op="merge",store="main"}`:      3,
		`recordsvc_item_duration_seconds_count{op="read",store="main"}`:       1,
		`recordsvc_rpc_requests_total{code="OK",method="Write"}`:              3,
		`recordsvc_rpc_requests_total{code="InvalidArgument",method="Write"}`: 1,
		`recordsvc_rpc_requests_total{code="OK",method="Read"}`:               1,
		`recordsvc_rpc_items_count{method="Read"}`:                            1,
		`recordsvc_rpc_items_sum{method="Read"}`:                              2,
		`recordsvc_items_in_flight{store="main"}`:                             0,
		`recordsvc_dependency_healthy{dependency="storage",store="main"}`:     1,
	} {
		if got, ok := scrape(t, s.metrics, series); !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, want)
		}
	}
	// Adapter calls: the first merge reads (nothing there); the later merges read again, or --
	// when the record's lane still holds the state the last write stored -- merge on it,
	// proved by their conditional writes (store's doc: a state the lane remembers). The read
	// request reads its two records in one call, or in two when the first record's lane is
	// still owned by the executor of the last merge, which then reads it in a round of its own.
	// Which, depends on how long the lanes stayed: 2 to 5 reads.
	if got, _ := scrape(t, s.metrics, `recordsvc_adapter_batch_size_count{call="read",store="main"}`); got < 2 || got > 5 {
		t.Errorf("adapter read calls = %v, want 2 to 5", got)
	}
	if got, _ := scrape(t, s.metrics, `recordsvc_adapter_batch_size_sum{call="write",store="main"}`); got != 3 {
		t.Errorf("adapter records written = %v, want 3", got)
	}
}

// TestEndToEndElasticsearch, ...OpenSearch and ...FerretDB run the scenario against the real
// servers.
func TestEndToEndElasticsearch(t *testing.T) {
	url := testenv.Require(t, testenv.ElasticsearchURL)
	searchEndToEnd(t, "elasticsearch", url)
}

func TestEndToEndOpenSearch(t *testing.T) {
	url := testenv.Require(t, testenv.OpenSearchURL)
	searchEndToEnd(t, "opensearch", url)
}

func searchEndToEnd(t *testing.T, kind, url string) {
	index := estest.Connect(t, kind, url).TempIndex(t, "recordsvc-e2e", nil)
	s := startService(t, fmt.Sprintf(`
listen: {grpc: 127.0.0.1:0, metrics: 127.0.0.1:0}
stores:
  main: {kind: %s, urls: [%q], timeout: 30s}
%s`, kind, url, scenarioService), modeServer)
	scenario(t, s, "main", "crm", index, false)
}

func TestEndToEndFerretDB(t *testing.T) {
	uri := testenv.Require(t, testenv.MongoURI)
	db := strings.ReplaceAll(uniqueName("recordsvc_e2e"), "-", "_")
	dropDatabase(t, uri, db)
	s := startService(t, fmt.Sprintf(`
listen: {grpc: 127.0.0.1:0, metrics: 127.0.0.1:0}
stores:
  main: {kind: mongodb, uri: %q, ferretdb: %v, timeout: 30s}
%s`, uri, isFerretDB(t, uri), scenarioService), modeServer)
	scenario(t, s, "main", db, "people", true)
}

// dropDatabase drops db when the test ends.
func dropDatabase(t *testing.T, uri, db string) {
	t.Cleanup(func() {
		ctx := context.Background()
		client, err := mongo.Connect(options.Client().ApplyURI(uri))
		if err != nil {
			return
		}
		defer client.Disconnect(ctx)
		_ = client.Database(db).Drop(ctx)
	})
}

// isFerretDB asks the server, as the adapter's own tests do: FerretDB needs the adapter's
// FerretDB mode.
func isFerretDB(t *testing.T, uri string) bool {
	ctx := testCtx(t)
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(ctx)
	var info map[string]any
	if err := client.Database("admin").RunCommand(ctx, map[string]any{"buildInfo": 1}).Decode(&info); err != nil {
		t.Fatal(err)
	}
	_, ferret := info["ferretdbVersion"]
	return ferret
}

// TestEndToEndKafkaWorker: accepted-mode writes through a real Kafka topic, applied by the
// worker of the same process (--mode all, a memory store).
func TestEndToEndKafkaWorker(t *testing.T) {
	brokers := testenv.Require(t, testenv.KafkaBrokers)
	topic := uniqueName("recordsvc-e2e")
	deleteTopics(t, brokers, topic, topic+".dlq")
	s := startService(t, fmt.Sprintf(`
listen: {grpc: 127.0.0.1:0, metrics: 127.0.0.1:0}
stores:
  main:
    kind: memory
    queue: %s
`, kafkaQueue(brokers, topic)), modeAll)
	acceptedMode(t, s, s.metrics, "main", "acc", "things")
	for _, name := range []string{queueServicePrefix + "main", kafkaServicePrefix + "main"} {
		h, err := s.health.Check(testCtx(t), healthRequest(name))
		if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("kafka health %q: %v %v, want SERVING", name, h, err)
		}
	}
}

// TestEndToEndKafkaSeparateWorker: one process in server mode accepts writes into Kafka, a
// second in worker mode applies them to Elasticsearch, where the first reads them.
func TestEndToEndKafkaSeparateWorker(t *testing.T) {
	brokers := testenv.Require(t, testenv.KafkaBrokers)
	url := testenv.Require(t, testenv.ElasticsearchURL)
	topic := uniqueName("recordsvc-e2e")
	deleteTopics(t, brokers, topic, topic+".dlq")
	index := estest.Connect(t, estest.Elasticsearch, url).TempIndex(t, "recordsvc-e2e", nil)
	cfg := fmt.Sprintf(`
listen: {grpc: 127.0.0.1:0, metrics: 127.0.0.1:0}
stores:
  main:
    kind: elasticsearch
    urls: [%q]
    queue: %s
`, url, kafkaQueue(brokers, topic))
	api := startService(t, cfg, modeServer)
	work := startService(t, cfg, modeWorker)
	if work.rpc != nil {
		t.Error("worker mode opened a gRPC listener")
	}
	acceptedMode(t, api, work.metrics, "main", "acc", index)
}

// TestEndToEndKafkaWorkerAppliesItsOwnStoreOnly: a record for store es, which has no queue,
// published on store async's Kafka topic (as a misconfigured publisher would) is
// dead-lettered by async's worker with reason other_store and never applied to es, although
// the process configures es; async's own accepted writes are applied.
func TestEndToEndKafkaWorkerAppliesItsOwnStoreOnly(t *testing.T) {
	brokers := testenv.Require(t, testenv.KafkaBrokers)
	topic := uniqueName("errtext-own-store")
	deleteTopics(t, brokers, topic, topic+".dlq")
	s := startService(t, fmt.Sprintf(`
listen: {grpc: 127.0.0.1:0, metrics: 127.0.0.1:0}
stores:
  async:
    kind: memory
    queue: %s
  es: {kind: memory}
`, kafkaQueue(brokers, topic)), modeAll)
	ctx := testCtx(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...),
		kgo.ConsumeTopics(topic+".dlq"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	stray := store.Address{Store: "es", Namespace: "acc", Dataset: "things", Key: store.StringKey("stray")}
	value := accepted.Append(nil, &accepted.Record{RequestID: "0123456789abcdef0123456789abcdef", AcceptedAt: time.Now(),
		Op: store.Put(stray, store.Document{JSON: []byte(`{"name":"stray"}`)})}, "")
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: accepted.MessageKey(stray), Value: value}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	own := addr("async", "acc", "things", "own")
	w, err := s.rpc.Write(ctx, &recordv1.WriteRequest{Completion: recordv1.Completion_COMPLETION_RETURN_AFTER_ACCEPTED,
		Items: []*recordv1.WriteItem{put(own, doc(`{"name":"own"}`), nil)}})
	if err != nil {
		t.Fatal(err)
	}
	wantOutcomes(t, "accepted put", w.Results, recordv1.Outcome_OUTCOME_ACCEPTED)
	eventually(t, ctx, "the worker applies async's own record", func() bool {
		r, err := s.rpc.Read(ctx, &recordv1.ReadRequest{Addresses: []*recordv1.Address{own}})
		return err == nil && r.Results[0].Outcome == recordv1.Outcome_OUTCOME_FOUND
	})

	// The stray record arrives in the dead-letter topic, unchanged, with its reason.
	var dead *kgo.Record
	for dead == nil {
		f := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("no dead letter arrived within the test's bound")
		}
		if errs := f.Errors(); len(errs) > 0 {
			t.Fatalf("reading the dead-letter topic: %v", errs[0].Err)
		}
		f.EachRecord(func(r *kgo.Record) {
			if dead == nil {
				dead = r
			}
		})
	}
	headers := map[string]string{}
	for _, h := range dead.Headers {
		headers[h.Key] = string(h.Value)
	}
	if headers[worker.HeaderReason] != worker.ReasonOtherStore || headers[worker.HeaderErrorKind] != "invalid" ||
		headers[worker.HeaderAttempts] != "0" || headers[worker.HeaderTopic] != topic {
		t.Errorf("dead letter headers %v, want reason other_store, kind invalid, attempts 0, source topic %s", headers, topic)
	}
	if !bytes.Equal(dead.Value, value) || !bytes.Equal(dead.Key, accepted.MessageKey(stray)) {
		t.Error("the dead letter is not the stray record as published")
	}
	// Dead-lettered before its offset was committed, and never applied.
	r, err := s.rpc.Read(ctx, &recordv1.ReadRequest{Addresses: []*recordv1.Address{addr("es", "acc", "things", "stray")}})
	if err != nil {
		t.Fatal(err)
	}
	wantOutcomes(t, "the stray record's address in es", r.Results, recordv1.Outcome_OUTCOME_NOT_FOUND)
	eventually(t, ctx, "the dead letter is counted", func() bool {
		v, _ := scrape(t, s.metrics, `recordsvc_worker_records_total{result="dead_lettered",store="async"}`)
		return v == 1
	})
}

// kafkaQueue is a store's queue on topic, its worker group named after the topic too: each
// test its own group (not the default tributary-recordsvc-<store>, which concurrent runs would
// share), which deleteTopics removes with the topic.
func kafkaQueue(brokers, topic string) string {
	return fmt.Sprintf(`{kind: kafka, brokers: [%q], topic: %q, group: %q, create_topics: {partitions: 3}, fetch_max_wait: 200ms,
      worker: {max_attempts: 2, backoff_base: 1ms, backoff_max: 5ms}}`, brokers, topic, topic)
}

// deleteTopics removes the test's topics, and the consumer groups of the same names (see
// kafkaQueue; a name no group has is no error), when it ends -- after the services the test
// started later stopped, so their workers have left the groups.
func deleteTopics(t *testing.T, brokers string, topics ...string) {
	t.Cleanup(func() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
		if err != nil {
			return
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		_, _ = adm.DeleteTopics(context.Background(), topics...)
		_, _ = adm.DeleteGroups(context.Background(), topics...)
	})
}

func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}
