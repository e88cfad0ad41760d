package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tributary-dev/tributary/store"
)

type behaviour struct {
	name string
	run  func(ctx context.Context, t *testing.T, e *env)
}

var behaviours = []behaviour{
	{"Outcomes", testOutcomes},
	{"StaleRevisionConflicts", testStaleRevision},
	{"IfAbsent", testIfAbsent},
	{"DeleteMissing", testDeleteMissing},
	{"RequestOrderSameAddress", testRequestOrder},
	{"KeyTypes", testKeyTypes},
	{"DateTimePointers", testDateTimes},
	{"SizeLimit", testSizeLimit},
	{"Unicode", testUnicode},
	{"RevisionSerialization", testRevisionSerialization},
	{"MalformedRevision", testMalformedRevision},
	{"InvalidRequestWritesNothing", testInvalidRequest},
	{"MergeOutcomes", testMergeOutcomes},
	{"MergeFailureLeavesRecord", testMergeFailure},
	{"VisibleMode", testVisible},
	{"AcceptedWithoutQueue", testAcceptedWithoutQueue},
	{"CoalescedSingleCalls", testCoalesced},
	{"MergeContention", testContention},
	{"HotRecordOneService", testHotRecord},
	{"CombinedSequence", testCombinedSequence},
	{"Refusals", testRefusals},
}

func testOutcomes(ctx context.Context, t *testing.T, e *env) {
	a := e.key("outcomes")
	wantOK(t, "read absent", e.one(ctx, t, store.Read(a)), store.Absent)
	r := e.one(ctx, t, store.Put(a, doc(t, map[string]any{"v": 1})))
	wantOK(t, "first put", r, store.Created)
	if r.Revision.IsZero() {
		t.Fatal("put returned no revision")
	}
	r2 := e.one(ctx, t, store.Put(a, doc(t, map[string]any{"v": 2})))
	wantOK(t, "second put", r2, store.Updated)
	if r2.Revision.Equal(r.Revision) {
		t.Fatal("a put did not change the revision")
	}
	got := e.one(ctx, t, store.Read(a))
	wantOK(t, "read", got, store.Found)
	sameJSON(t, "read", got.Doc.JSON, map[string]any{"v": 2})
	if !got.Revision.Equal(r2.Revision) {
		t.Fatalf("read revision %v, want the last put's %v", got.Revision, r2.Revision)
	}
	wantOK(t, "delete", e.one(ctx, t, store.Delete(a)), store.Deleted)
	wantOK(t, "read deleted", e.one(ctx, t, store.Read(a)), store.Absent)
}

func testStaleRevision(ctx context.Context, t *testing.T, e *env) {
	a := e.key("stale")
	first := e.one(ctx, t, store.Put(a, doc(t, map[string]any{"v": 1})))
	wantOK(t, "put", first, store.Created)
	second := e.one(ctx, t, store.Put(a, doc(t, map[string]any{"v": 2})).WithPrecondition(store.IfRevision(first.Revision)))
	wantOK(t, "put at current revision", second, store.Updated)
	wantErr(t, "put at stale revision", e.one(ctx, t, store.Put(a, doc(t, map[string]any{"v": 3})).WithPrecondition(store.IfRevision(first.Revision))), store.ErrConflict)
	wantErr(t, "delete at stale revision", e.one(ctx, t, store.Delete(a).WithPrecondition(store.IfRevision(first.Revision))), store.ErrConflict)
	sameJSON(t, "after stale writes", e.one(ctx, t, store.Read(a)).Doc.JSON, map[string]any{"v": 2})
	wantOK(t, "delete at current revision", e.one(ctx, t, store.Delete(a).WithPrecondition(store.IfRevision(second.Revision))), store.Deleted)
	// A revision of a deleted record is stale too, also once the record exists again.
	wantErr(t, "put on deleted record at old revision", e.one(ctx, t, store.Put(a, doc(t, map[string]any{"v": 4})).WithPrecondition(store.IfRevision(second.Revision))), store.ErrConflict)
	wantOK(t, "recreate", e.one(ctx, t, store.Put(a, doc(t, map[string]any{"v": 5}))), store.Created)
	wantErr(t, "put on recreated record at old revision", e.one(ctx, t, store.Put(a, doc(t, map[string]any{"v": 6})).WithPrecondition(store.IfRevision(second.Revision))), store.ErrConflict)
}

func testIfAbsent(ctx context.Context, t *testing.T, e *env) {
	a := e.key("absent")
	wantOK(t, "delete if absent on absent", e.one(ctx, t, store.Delete(a).WithPrecondition(store.IfAbsent())), store.Absent)
	wantOK(t, "put if absent", e.one(ctx, t, store.Put(a, doc(t, map[string]any{"v": 1})).WithPrecondition(store.IfAbsent())), store.Created)
	wantErr(t, "put if absent on existing", e.one(ctx, t, store.Put(a, doc(t, map[string]any{"v": 2})).WithPrecondition(store.IfAbsent())), store.ErrAlreadyExists)
	wantErr(t, "delete if absent on existing", e.one(ctx, t, store.Delete(a).WithPrecondition(store.IfAbsent())), store.ErrAlreadyExists)
	sameJSON(t, "after refused writes", e.one(ctx, t, store.Read(a)).Doc.JSON, map[string]any{"v": 1})
}

func testDeleteMissing(ctx context.Context, t *testing.T, e *env) {
	a := e.key("missing")
	wantOK(t, "delete of a missing record", e.one(ctx, t, store.Delete(a)), store.Absent)
	rev := e.one(ctx, t, store.Put(a, doc(t, map[string]any{"v": 1}))).Revision
	wantOK(t, "delete", e.one(ctx, t, store.Delete(a)), store.Deleted)
	wantErr(t, "delete of a missing record at a revision", e.one(ctx, t, store.Delete(a).WithPrecondition(store.IfRevision(rev))), store.ErrConflict)
}

func testRequestOrder(ctx context.Context, t *testing.T, e *env) {
	a, b := e.key("order-a"), e.key("order-b")
	res := e.do(ctx, t, store.WaitApplied,
		store.Read(a),
		store.Put(a, doc(t, map[string]any{"v": 1})),
		store.Put(b, doc(t, map[string]any{"w": 1})),
		store.Read(a),
		store.Put(a, doc(t, map[string]any{"v": 2})),
		store.Read(a),
		store.Delete(a),
		store.Read(a),
		store.Put(a, doc(t, map[string]any{"v": 3})),
		store.Read(b),
	)
	wantOK(t, "0 read", res[0], store.Absent)
	wantOK(t, "1 put", res[1], store.Created)
	wantOK(t, "2 put b", res[2], store.Created)
	wantOK(t, "3 read", res[3], store.Found)
	sameJSON(t, "3 read", res[3].Doc.JSON, map[string]any{"v": 1})
	wantOK(t, "4 put", res[4], store.Updated)
	wantOK(t, "5 read", res[5], store.Found)
	sameJSON(t, "5 read", res[5].Doc.JSON, map[string]any{"v": 2})
	wantOK(t, "6 delete", res[6], store.Deleted)
	wantOK(t, "7 read", res[7], store.Absent)
	wantOK(t, "8 put", res[8], store.Created)
	wantOK(t, "9 read b", res[9], store.Found)
	if !res[3].Revision.Equal(res[1].Revision) || !res[5].Revision.Equal(res[4].Revision) {
		t.Fatal("reads did not see the revisions of the writes before them")
	}
}

func testKeyTypes(ctx context.Context, t *testing.T, e *env) {
	var oid [12]byte
	copy(oid[:], e.prefix)
	keys := []store.Key{
		store.StringKey(e.prefix + "1"),
		store.Int64Key(int64(len(e.prefix))*1e15 + 1),
		store.Int64Key(-1 - int64(len(e.prefix))),
		store.BytesKey([]byte(e.prefix + "1")),
		store.BytesKey([]byte{0, 0xff, 0xfe, '/', '%'}),
		store.ObjectIDKey(oid),
	}
	var ops []store.Op
	for i, k := range keys {
		ops = append(ops, store.Put(e.addr(k), doc(t, map[string]any{"i": i})))
	}
	for i, r := range e.do(ctx, t, store.WaitApplied, ops...) {
		wantOK(t, fmt.Sprintf("put key %v", keys[i]), r, store.Created)
	}
	ops = ops[:0]
	for _, k := range keys {
		ops = append(ops, store.Read(e.addr(k)))
	}
	for i, r := range e.do(ctx, t, store.WaitApplied, ops...) {
		wantOK(t, fmt.Sprintf("read key %v", keys[i]), r, store.Found)
		sameJSON(t, fmt.Sprintf("key %v", keys[i]), r.Doc.JSON, map[string]any{"i": i})
	}
	for _, k := range keys {
		wantOK(t, fmt.Sprintf("delete key %v", k), e.one(ctx, t, store.Delete(e.addr(k))), store.Deleted)
	}
}

func testDateTimes(ctx context.Context, t *testing.T, e *env) {
	a := e.key("times")
	in := map[string]any{
		"at":      "2026-11-30T04:05:06.789Z",
		"looks":   "2026-11-30T04:05:06Z", // not marked: stays an ordinary string
		"nested":  map[string]any{"when": "1969-07-20T20:17:40Z"},
		"list":    []any{"x", "2000-01-01T00:00:00Z"},
		"a/b~c":   "2001-02-03T04:05:06Z",
		"numbers": []any{1, 2.5},
	}
	times := []string{"/at", "/nested/when", "/list/1", "/a~1b~0c"}
	wantOK(t, "put", e.one(ctx, t, store.Put(a, doc(t, in, times...))), store.Created)
	got := e.one(ctx, t, store.Read(a))
	wantOK(t, "read", got, store.Found)
	sameJSON(t, "round trip", got.Doc.JSON, in)
	if e.h.PlainTimes {
		if len(got.Doc.Times) != 0 {
			t.Fatalf("a plain-times backend returned pointers %q", got.Doc.Times)
		}
		return
	}
	if strings.Join(sortedCopy(got.Doc.Times), ",") != strings.Join(sortedCopy(times), ",") {
		t.Fatalf("time pointers %q, want %q", got.Doc.Times, times)
	}
}

func testSizeLimit(ctx context.Context, t *testing.T, e *env) {
	a, b := e.key("near-limit"), e.key("over-limit")
	pad := func(n int) store.Document {
		return store.Document{JSON: []byte(`{"pad":"` + strings.Repeat("y", n-len(`{"pad":""}`)) + `"}`)}
	}
	wantOK(t, "document at the limit", e.one(ctx, t, store.Put(a, pad(docLimit))), store.Created)
	got := e.one(ctx, t, store.Read(a))
	if len(got.Doc.JSON) < docLimit-16 {
		t.Fatalf("read back %d bytes of a %d-byte document", len(got.Doc.JSON), docLimit)
	}
	_, err := e.s.Do(ctx, []store.Op{store.Put(b, pad(docLimit+1))}, store.WaitApplied)
	if !errorsIs(err, store.ErrTooLarge) {
		t.Fatalf("document over the limit: error %v, want ErrTooLarge", err)
	}
	wantOK(t, "nothing written", e.one(ctx, t, store.Read(b)), store.Absent)
}

func testUnicode(ctx context.Context, t *testing.T, e *env) {
	a := e.addr(store.StringKey(e.prefix + "ключ-鍵-🔑"))
	in := map[string]any{"text": "naïve café — 東京 🚀", "emoji🔑": "\u0000\u001f\u2028"}
	wantOK(t, "put", e.one(ctx, t, store.Put(a, doc(t, in))), store.Created)
	got := e.one(ctx, t, store.Read(a))
	wantOK(t, "read", got, store.Found)
	sameJSON(t, "unicode", got.Doc.JSON, in)
}

func testRevisionSerialization(ctx context.Context, t *testing.T, e *env) {
	a := e.key("rev-text")
	rev := e.one(ctx, t, store.Put(a, doc(t, map[string]any{"v": 1}))).Revision
	text, err := json.Marshal(struct{ Rev store.Revision }{rev})
	if err != nil {
		t.Fatal(err)
	}
	var back struct{ Rev store.Revision }
	if err := json.Unmarshal(text, &back); err != nil {
		t.Fatal(err)
	}
	if !back.Rev.Equal(rev) {
		t.Fatalf("revision %v came back from JSON as %v", rev, back.Rev)
	}
	parsed, err := store.ParseRevision(rev.String())
	if err != nil || !parsed.Equal(rev) {
		t.Fatalf("ParseRevision(String()) = %v, %v", parsed, err)
	}
	wantOK(t, "put at a deserialized revision", e.one(ctx, t, store.Put(a, doc(t, map[string]any{"v": 2})).WithPrecondition(store.IfRevision(back.Rev))), store.Updated)
}

func testMalformedRevision(ctx context.Context, t *testing.T, e *env) {
	a := e.key("bad-rev")
	wantOK(t, "put", e.one(ctx, t, store.Put(a, doc(t, map[string]any{"v": 1}))), store.Created)
	junk, err := store.ParseRevision("bm90LWEtcmV2aXNpb24tYXQtYWxs")
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, "put at a malformed revision", e.one(ctx, t, store.Put(a, doc(t, map[string]any{"v": 2})).WithPrecondition(store.IfRevision(junk))), store.ErrInvalid)
	sameJSON(t, "untouched", e.one(ctx, t, store.Read(a)).Doc.JSON, map[string]any{"v": 1})
}

func testInvalidRequest(ctx context.Context, t *testing.T, e *env) {
	good, other := e.key("valid-1"), e.key("valid-2")
	ops := []store.Op{
		store.Put(good, doc(t, map[string]any{"v": 1})),
		store.Put(other, store.Document{JSON: []byte(`["not", "an", "object"]`)}),
		store.Put(e.addr(store.StringKey("")), doc(t, map[string]any{"v": 1})),
		store.Read(store.Address{Store: "no-such-store", Namespace: "n", Dataset: "d", Key: store.StringKey("k")}),
		store.Merge(good, "", doc(t, map[string]any{})),
		store.Put(good, store.Document{JSON: []byte(`{"at":"yesterday"}`), Times: []string{"/at"}}),
	}
	_, err := e.s.Do(ctx, ops, store.WaitApplied)
	var re *store.RequestError
	if !errorsAs(err, &re) || !errorsIs(err, store.ErrInvalid) {
		t.Fatalf("error %v, want a *RequestError matching ErrInvalid", err)
	}
	var idx []int
	for _, it := range re.Items {
		idx = append(idx, it.Index)
	}
	if fmt.Sprint(idx) != "[1 2 3 4 5]" {
		t.Fatalf("refused operations %v, want [1 2 3 4 5]", idx)
	}
	wantOK(t, "the valid put was not applied", e.one(ctx, t, store.Read(good)), store.Absent)
}

func testMergeOutcomes(ctx context.Context, t *testing.T, e *env) {
	a := e.key("merge")
	inc := doc(t, map[string]any{"by": 5})
	r := e.one(ctx, t, store.Merge(a, "increment", inc))
	wantOK(t, "merge on absent", r, store.Created)
	sameJSON(t, "merge result", r.Doc.JSON, map[string]any{"n": 5})
	r = e.one(ctx, t, store.Merge(a, "increment", inc))
	wantOK(t, "merge on existing", r, store.Updated)
	sameJSON(t, "merge result", r.Doc.JSON, map[string]any{"n": 10})
	keep := e.one(ctx, t, store.Merge(a, "keep", inc))
	wantOK(t, "unchanged", keep, store.Unchanged)
	if !keep.Revision.Equal(r.Revision) {
		t.Fatal("an unchanged merge moved the revision")
	}
	wantOK(t, "merge delete", e.one(ctx, t, store.Merge(a, "delete", inc)), store.Deleted)
	wantOK(t, "merge delete on absent", e.one(ctx, t, store.Merge(a, "delete", inc)), store.Absent)
	wantOK(t, "merge keep on absent", e.one(ctx, t, store.Merge(a, "keep", inc)), store.Absent)
	wantOK(t, "read", e.one(ctx, t, store.Read(a)), store.Absent)
}

func testMergeFailure(ctx context.Context, t *testing.T, e *env) {
	a := e.key("merge-fail")
	wantOK(t, "put", e.one(ctx, t, store.Put(a, doc(t, map[string]any{"n": 1}))), store.Created)
	wantErr(t, "failing program", e.one(ctx, t, store.Merge(a, "fail", doc(t, map[string]any{}))), store.ErrInvalid)
	wantErr(t, "oversized result", e.one(ctx, t, store.Merge(a, "oversize", doc(t, map[string]any{}))), store.ErrTooLarge)
	sameJSON(t, "untouched", e.one(ctx, t, store.Read(a)).Doc.JSON, map[string]any{"n": 1})
}

func testVisible(ctx context.Context, t *testing.T, e *env) {
	if e.h.Visible == nil {
		t.Skip("the harness cannot count search hits")
	}
	before, err := e.h.Visible(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ops []store.Op
	for i := range 3 {
		ops = append(ops, store.Put(e.key(fmt.Sprint("visible-", i)), doc(t, map[string]any{"i": i})))
	}
	for _, r := range e.do(ctx, t, store.WaitVisible, ops...) {
		wantOK(t, "visible put", r, store.Created)
	}
	after, err := e.h.Visible(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after < before+3 {
		t.Fatalf("a search right after visible-mode puts counts %d documents, want at least %d", after, before+3)
	}
}

func testAcceptedWithoutQueue(ctx context.Context, t *testing.T, e *env) {
	a := e.key("accepted")
	// The specification's refusal: the write fails on its own, retryable, of its own kind (not
	// a transient queue failure); the request's read runs.
	res := e.do(ctx, t, store.ReturnAccepted, store.Put(a, doc(t, map[string]any{"v": 1})), store.Read(a))
	wantErr(t, "accepted-mode put without a queue", res[0], store.ErrNoQueue)
	if k := store.KindOf(res[0].Err); k != store.KindNoQueue || !k.Retryable() || errors.Is(res[0].Err, store.ErrUnavailable) {
		t.Fatalf("accepted-mode put without a queue: %v (kind %v), want KindNoQueue alone, retryable", res[0].Err, k)
	}
	wantOK(t, "read in the same request", res[1], store.Absent)
	res = e.do(ctx, t, store.ReturnAccepted, store.Read(a))
	wantOK(t, "read in accepted mode", res[0], store.Absent)
}

func testCoalesced(ctx context.Context, t *testing.T, e *env) {
	const n = 64
	errs := make(chan error, n)
	parallel(n, func(i int) {
		a := e.key(fmt.Sprint("single-", i))
		res, err := e.s.Do(ctx, []store.Op{store.Put(a, doc(t, map[string]any{"i": i}))}, store.WaitApplied)
		if err == nil && res[0].Err != nil {
			err = res[0].Err
		}
		if err == nil {
			res, err = e.s.Do(ctx, []store.Op{store.Read(a)}, store.WaitApplied)
			if err == nil && (res[0].Outcome != store.Found || !strings.Contains(string(res[0].Doc.JSON), fmt.Sprintf(`"i":%d`, i))) {
				err = fmt.Errorf("call %d read back %v %s", i, res[0].Outcome, res[0].Doc.JSON)
			}
		}
		errs <- err
	})
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// The contention behaviour's size: contentionWorkers goroutines each run contentionEach merges.
const contentionWorkers, contentionEach = 8, 10

// testContention: N goroutines each run M increment merges on one record, concurrently, half
// through the coalescing service and half through a second service over the same adapter (as a
// second process would); the counter must end at exactly N*M. The services' merge budget
// (mergeAttempts) cannot run out, so a failure here is a lost or refused update, never a slow
// machine.
func testContention(ctx context.Context, t *testing.T, e *env) {
	const workers, each = contentionWorkers, contentionEach
	a := e.key("counter")
	inc := doc(t, map[string]any{"by": 1})
	if n, first := increments(ctx, workers, each, a, inc, func(w int) *store.Service {
		if w%2 == 1 {
			return e.direct
		}
		return e.s
	}); n > 0 {
		t.Fatalf("%d merges failed, first: %v", n, first)
	}
	got := e.one(ctx, t, store.Read(a))
	sameJSON(t, "counter", got.Doc.JSON, map[string]any{"n": workers * each})
}

// testHotRecord: hotClients concurrent one-operation merges on one record through ONE Service
// with the default options (the default merge budget included). Operations on one record never
// race each other within a Service, so not one merge may be refused nor retried after a lost
// compare-and-set, however slow the machine.
func testHotRecord(ctx context.Context, t *testing.T, e *env) {
	obs := &conflictCounter{}
	s, err := store.New(map[string]store.Adapter{storeName: unclosable{e.h.Adapter}}, &store.Options{Merger: merger{}, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close(ctx) }()
	a := e.key("hot")
	inc := doc(t, map[string]any{"by": 1})
	if n, first := increments(ctx, hotClients, hotEach, a, inc, func(int) *store.Service { return s }); n > 0 {
		t.Fatalf("%d of %d merges failed in one Service, first: %v", n, hotClients*hotEach, first)
	}
	if n := obs.conflicts.Load(); n > 0 {
		t.Fatalf("%d merges lost a compare-and-set to their own Service", n)
	}
	got := e.one(ctx, t, store.Read(a))
	sameJSON(t, "counter", got.Doc.JSON, map[string]any{"n": hotClients * hotEach})
}

const hotClients, hotEach = 40, 10

// conflictCounter counts merges retried after a lost compare-and-set.
type conflictCounter struct {
	store.NopObserver
	conflicts atomic.Int64
}

func (c *conflictCounter) Retry(r store.Retry) {
	if r.Reason == store.RetryMergeConflict {
		c.conflicts.Add(int64(r.Ops))
	}
}

// testCombinedSequence: one request holding a sequence of operations on one record, which the
// Service runs as segments on the state in memory with one conditional write each, gives the
// results the operations give one at a time, and the record ends as they leave it.
func testCombinedSequence(ctx context.Context, t *testing.T, e *env) {
	a := e.key("sequence")
	inc := doc(t, map[string]any{"by": 1})
	res := e.do(ctx, t, store.WaitApplied,
		store.Merge(a, "increment", inc), // 0: created n=1
		store.Merge(a, "increment", inc), // 1: n=2
		store.Put(a, doc(t, map[string]any{"n": 10})).WithPrecondition(store.IfAbsent()), // 2: exists
		store.Merge(a, "keep", inc),      // 3: unchanged
		store.Read(a),                    // 4: n=2, after a write
		store.Merge(a, "increment", inc), // 5: n=3
		store.Merge(a, "delete", inc),    // 6: deleted
		store.Merge(a, "increment", inc), // 7: created n=1
		store.Merge(a, "fail", inc),      // 8: invalid
		store.Merge(a, "increment", inc), // 9: n=2
	)
	wantOK(t, "first merge", res[0], store.Created)
	wantOK(t, "second merge", res[1], store.Updated)
	wantErr(t, "put if absent", res[2], store.ErrAlreadyExists)
	wantOK(t, "keep", res[3], store.Unchanged)
	wantOK(t, "read", res[4], store.Found)
	sameJSON(t, "read", res[4].Doc.JSON, map[string]any{"n": 2})
	if res[4].Revision.IsZero() {
		t.Fatal("the read after the writes reports no revision")
	}
	wantOK(t, "third merge", res[5], store.Updated)
	wantOK(t, "delete merge", res[6], store.Deleted)
	wantOK(t, "merge after delete", res[7], store.Created)
	wantErr(t, "failing merge", res[8], store.ErrInvalid)
	wantOK(t, "last merge", res[9], store.Updated)
	sameJSON(t, "last merge", res[9].Doc.JSON, map[string]any{"n": 2})
	got := e.one(ctx, t, store.Read(a))
	wantOK(t, "read at the end", got, store.Found)
	sameJSON(t, "at the end", got.Doc.JSON, map[string]any{"n": 2})
	if !got.Revision.Equal(res[9].Revision) {
		t.Fatalf("the record is at %v, the last merge reported %v", got.Revision, res[9].Revision)
	}
	// A stale revision from before the request conflicts; the current one applies.
	wantErr(t, "put at the read's revision", e.one(ctx, t, store.Put(a, doc(t, map[string]any{"n": 0})).WithPrecondition(store.IfRevision(res[4].Revision))), store.ErrConflict)
	wantOK(t, "put at the current revision", e.one(ctx, t, store.Put(a, doc(t, map[string]any{"n": 0})).WithPrecondition(store.IfRevision(got.Revision))), store.Updated)
}

// increments runs workers goroutines, each making each one-operation increment merges of a
// through svc(worker), and returns how many failed and the first failure.
func increments(ctx context.Context, workers, each int, a store.Address, inc store.Document, svc func(worker int) *store.Service) (int64, error) {
	var mu sync.Mutex
	var failures int64
	var first error
	parallel(workers, func(w int) {
		for range each {
			res, err := svc(w).Do(ctx, []store.Op{store.Merge(a, "increment", inc)}, store.WaitApplied)
			if err == nil {
				err = res[0].Err
			}
			if err != nil {
				mu.Lock()
				if failures++; first == nil {
					first = err
				}
				mu.Unlock()
			}
		}
	})
	return failures, first
}
