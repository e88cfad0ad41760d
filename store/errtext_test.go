package store_test

import (
	"context"
	"errors"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/queue/memqueue"
	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/accepted"
	"github.com/tributary-dev/tributary/store/driver"
	"github.com/tributary-dev/tributary/store/memstore"
)

// secret is document content that no error text may quote.
const secret = "hunter2-secret"

// errTextMerger runs the programs of the error-text tests: "array" returns a JSON array,
// "broken" returns malformed JSON holding the secret, "fail" fails; anything else keeps the
// record.
var errTextMerger = store.MergeFunc(func(_ context.Context, c *store.MergeCall) (store.MergeResult, error) {
	switch c.Program {
	case "array":
		return store.MergeResult{Doc: store.Document{JSON: []byte(`["` + secret + `"]`)}}, nil
	case "broken":
		return store.MergeResult{Doc: store.Document{JSON: []byte(`{"password":"` + secret + `" ]`)}}, nil
	case "fail":
		return store.MergeResult{}, errors.New("the program failed on its input")
	}
	return store.MergeResult{Action: store.MergeUnchanged}, nil
})

func errTextService(t *testing.T) *store.Service {
	t.Helper()
	b := memqueue.New(nil)
	pub, err := b.Publisher("errtext")
	if err != nil {
		t.Fatal(err)
	}
	s, err := store.New(map[string]store.Adapter{"main": memstore.New()}, &store.Options{
		Merger: errTextMerger, MaxDocumentBytes: 64, MaxOps: 8, Coalesce: store.CoalesceOptions{MaxBatch: 8},
		Queues: map[string]store.Queue{"main": accepted.NewPublisher(pub)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func jdoc(s string, times ...string) store.Document {
	return store.Document{JSON: []byte(s), Times: times}
}

var storePrefix = regexp.MustCompile(`(^|[^a-z])store:`)

// checkText compares an error's text with want exactly, and checks it quotes no content.
func checkText(t *testing.T, name string, err error, want string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want %q", name, want)
		return
	}
	got := err.Error()
	if got != want {
		t.Errorf("%s:\n got %s\nwant %s", name, got, want)
	}
	if strings.Contains(got, secret) || strings.Contains(got, "hunter2") {
		t.Errorf("%s: the text quotes document content: %s", name, got)
	}
	if len(storePrefix.FindAllString(got, -1)) > 1 || strings.Contains(got, "OpKind(") || strings.Contains(got, "<no key>") || strings.Contains(got, "///") {
		t.Errorf("%s: the text repeats a prefix or prints an empty operation or address: %s", name, got)
	}
}

// TestRequestErrorTexts: every validation refusal says once what was refused and why.
func TestRequestErrorTexts(t *testing.T) {
	s := errTextService(t)
	a := addr("main", "k")
	noKey := store.Address{Store: "main", Namespace: "ns", Dataset: "ds"}
	const refused = "store: request refused before any operation ran: "
	cases := []struct {
		name string
		ops  []store.Op
		mode store.Completion
		want string
	}{
		{"malformed JSON", []store.Op{store.Put(a, jdoc(`{"password":"`+secret+`" x}`))}, store.WaitApplied,
			refused + `operation 0: put main/ns/ds/"k": document is not valid JSON: syntax error at byte 29`},
		{"truncated JSON", []store.Op{store.Put(a, jdoc(`{"password":"`+secret))}, store.WaitApplied,
			refused + `operation 0: put main/ns/ds/"k": document is not valid JSON: it ends early, at byte 27`},
		{"array", []store.Op{store.Put(a, jdoc(`["`+secret+`"]`))}, store.WaitApplied,
			refused + `operation 0: put main/ns/ds/"k": document is a JSON array, not an object`},
		{"string", []store.Op{store.Put(a, jdoc(` "`+secret+`"`))}, store.WaitApplied,
			refused + `operation 0: put main/ns/ds/"k": document is a JSON string, not an object`},
		{"number", []store.Op{store.Merge(a, "keep", jdoc(`-12.5`))}, store.WaitApplied,
			refused + `operation 0: merge main/ns/ds/"k": document is a JSON number, not an object`},
		{"boolean", []store.Op{store.Put(a, jdoc(`true`))}, store.WaitApplied,
			refused + `operation 0: put main/ns/ds/"k": document is a JSON boolean, not an object`},
		{"null", []store.Op{store.Put(a, jdoc(`null`))}, store.WaitApplied,
			refused + `operation 0: put main/ns/ds/"k": document is JSON null, not an object`},
		{"empty", []store.Op{store.Put(a, jdoc(" \n"))}, store.WaitApplied,
			refused + `operation 0: put main/ns/ds/"k": document is empty: it must be a JSON object`},
		{"no document", []store.Op{store.Put(a, store.Document{})}, store.WaitApplied,
			refused + `operation 0: put main/ns/ds/"k": document is empty: it must be a JSON object`},
		{"invalid UTF-8", []store.Op{store.Put(a, jdoc("{\"p\":\"hunter\xff\"}"))}, store.WaitApplied,
			refused + `operation 0: put main/ns/ds/"k": document is not valid UTF-8: invalid byte sequence at byte 12`},
		{"too large", []store.Op{store.Put(a, jdoc(`{"p":"`+strings.Repeat("x", 80)+`"}`))}, store.WaitApplied,
			refused + `operation 0: put main/ns/ds/"k": document is 88 bytes, more than the limit of 64`},
		{"pointer to no member", []store.Op{store.Put(a, jdoc(`{"at":"`+secret+`"}`, "/when"))}, store.WaitApplied,
			refused + `operation 0: put main/ns/ds/"k": date-time pointer "/when": no such member`},
		{"pointer to a number", []store.Op{store.Put(a, jdoc(`{"at":12}`, "/at"))}, store.WaitApplied,
			refused + `operation 0: put main/ns/ds/"k": date-time pointer "/at" names a number, not a string`},
		{"pointer to a non-date", []store.Op{store.Put(a, jdoc(`{"at":"`+secret+`"}`, "/at"))}, store.WaitApplied,
			refused + `operation 0: put main/ns/ds/"k": date-time pointer "/at" names a string that is not an RFC 3339 date-time`},
		{"pointer twice", []store.Op{store.Put(a, jdoc(`{"at":"2020-01-02T03:04:05Z"}`, "/at", "/at"))}, store.WaitApplied,
			refused + `operation 0: put main/ns/ds/"k": date-time pointer "/at" is listed twice`},
		{"pointer syntax", []store.Op{store.Put(a, jdoc(`{"at":"2020-01-02T03:04:05Z"}`, "at"))}, store.WaitApplied,
			refused + `operation 0: put main/ns/ds/"k": date-time pointer "at": a pointer starts with '/'`},
		{"read with a document", []store.Op{{Kind: store.OpRead, Addr: a, Doc: jdoc(`{}`)}}, store.WaitApplied,
			refused + `operation 0: read main/ns/ds/"k": a read carries no document or program`},
		{"read without a key", []store.Op{store.Read(addr("main", "ok")), store.Read(noKey)}, store.WaitApplied,
			refused + `operation 1: read main/ns/ds: key is missing`},
		{"unknown store", []store.Op{store.Read(addr("nope", "k"))}, store.WaitApplied,
			refused + `operation 0: read nope/ns/ds/"k": no store named "nope" is configured`},
		{"empty dataset", []store.Op{store.Delete(store.Address{Store: "main", Namespace: "ns", Key: store.StringKey("k")})}, store.WaitApplied,
			refused + `operation 0: delete main/ns//"k": dataset name is empty`},
		{"zero op", []store.Op{{}}, store.WaitApplied,
			refused + `operation 0: unknown operation kind 0`},
		{"unknown op kind", []store.Op{{Kind: 9, Addr: a}}, store.WaitApplied,
			refused + `operation 0: main/ns/ds/"k": unknown operation kind 9`},
		{"zero revision", []store.Op{store.Delete(a).WithPrecondition(store.IfRevision(store.Revision{}))}, store.WaitApplied,
			refused + `operation 0: delete main/ns/ds/"k": an IfRevision precondition with the zero revision`},
		{"merge precondition", []store.Op{store.Merge(a, "keep", jdoc(`{}`)).WithPrecondition(store.IfAbsent())}, store.WaitApplied,
			refused + `operation 0: merge main/ns/ds/"k": only puts and deletes take a precondition`},
		{"merge without program", []store.Op{store.Merge(a, "", jdoc(`{}`))}, store.WaitApplied,
			refused + `operation 0: merge main/ns/ds/"k": merge without a program`},
		{"accepted program not UTF-8", []store.Op{store.Merge(a, "keep\xff", jdoc(`{}`))}, store.ReturnAccepted,
			refused + `operation 0: merge main/ns/ds/"k": an accepted-mode merge program must be valid UTF-8 to travel in a queue record`},
		{"unknown completion", []store.Op{store.Read(a)}, store.Completion(7),
			refused + `unknown completion mode 7`},
		{"too many operations", make([]store.Op, 9), store.WaitApplied,
			refused + `the request has 9 operations, more than the limit of 8`},
		{"more than three", []store.Op{store.Read(noKey), store.Read(a), store.Read(noKey), store.Read(noKey), store.Read(noKey), store.Read(noKey)}, store.WaitApplied,
			refused + `operation 0: read main/ns/ds: key is missing; operation 2: read main/ns/ds: key is missing; operation 3: read main/ns/ds: key is missing; and 2 more`},
	}
	for _, c := range cases {
		res, err := s.Do(context.Background(), c.ops, c.mode)
		var re *store.RequestError
		if !errors.As(err, &re) {
			t.Errorf("%s: Do = %v, %v; want a *RequestError", c.name, res, err)
			continue
		}
		checkText(t, c.name, err, c.want)
		for _, it := range re.Items {
			checkText(t, c.name+" (item)", it.Err, "store: "+strings.TrimPrefix(strings.SplitN(strings.TrimPrefix(c.want, refused), "; ", 2)[0], "operation "+strconv.Itoa(it.Index)+": "))
			break
		}
	}
}

// TestOperationErrorTexts: failures of operations that ran -- adapter refusals, merge programs
// and their results -- name the operation and address once.
func TestOperationErrorTexts(t *testing.T) {
	s := errTextService(t)
	ctx := context.Background()
	a := addr("main", "k")
	if _, err := s.Do(ctx, []store.Op{store.Put(a, jdoc(`{"p":"`+secret+`"}`))}, store.WaitApplied); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		op   store.Op
		want string
	}{
		{"merge result an array", store.Merge(a, "array", jdoc(`{}`)),
			`store: merge main/ns/ds/"k": the merge program's result: document is a JSON array, not an object`},
		{"merge result malformed", store.Merge(a, "broken", jdoc(`{}`)),
			`store: merge main/ns/ds/"k": the merge program's result: document is not valid JSON: syntax error at byte 29`},
		{"merge program fails", store.Merge(a, "fail", jdoc(`{}`)),
			`store: merge main/ns/ds/"k": the program failed on its input`},
		{"put if absent", store.Put(a, jdoc(`{}`)).WithPrecondition(store.IfAbsent()),
			`store: put main/ns/ds/"k": memstore: the record exists`},
		{"delete if absent", store.Delete(a).WithPrecondition(store.IfAbsent()),
			`store: delete main/ns/ds/"k": the record exists`},
	}
	for _, c := range cases {
		res, err := s.Do(ctx, []store.Op{c.op}, store.WaitApplied)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		checkText(t, c.name, res[0].Err, c.want)
	}
	// A stale revision, from a record deleted since (earlier in the same request: the Service
	// checks it against the state the delete left, in memory).
	res, err := s.Do(ctx, []store.Op{store.Read(a)}, store.WaitApplied)
	if err != nil || res[0].Err != nil {
		t.Fatal(err, res[0].Err)
	}
	res, err = s.Do(ctx, []store.Op{store.Delete(a), store.Put(a, jdoc(`{}`)).WithPrecondition(store.IfRevision(res[0].Revision))}, store.WaitApplied)
	if err != nil {
		t.Fatal(err)
	}
	checkText(t, "stale revision", res[1].Err, `store: put main/ns/ds/"k": the record does not exist`)
	// A Service without a queue for the store fails each accepted-mode write on its own:
	// retryable, of its own kind; the read runs.
	plain, err := store.New(map[string]store.Adapter{"main": memstore.New()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close(ctx)
	res, err = plain.Do(ctx, []store.Op{store.Read(a), store.Delete(a), store.Delete(a)}, store.ReturnAccepted)
	if err != nil {
		t.Fatalf("accepted mode without a queue: %v, want per-operation failures", err)
	}
	for _, i := range []int{1, 2} {
		checkText(t, "no queue", res[i].Err, `store: delete main/ns/ds/"k": store main has no durable queue for accepted-mode writes`)
		if !errors.Is(res[i].Err, store.ErrNoQueue) || errors.Is(res[i].Err, store.ErrUnavailable) || store.KindOf(res[i].Err) != store.KindNoQueue || !store.KindOf(res[i].Err).Retryable() {
			t.Errorf("no queue: %v is not ErrNoQueue alone, retryable", res[i].Err)
		}
	}
	if res[0].Err != nil || res[0].Outcome != store.Absent {
		t.Errorf("the read of an accepted-mode request without a queue: %+v", res[0])
	}
	if err := plain.Check([]store.Op{store.Read(a)}, store.ReturnAccepted); err != nil {
		t.Errorf("a read in accepted mode needs no queue: %v", err)
	}
}

// TestNestedErrorTexts: an *Error wrapped in another adds only what the outer one does not say.
func TestNestedErrorTexts(t *testing.T) {
	a := addr("main", "k")
	b := addr("main", "other")
	cause := errors.New("it broke")
	cases := []struct {
		name string
		err  *store.Error
		want string
	}{
		{"bare", &store.Error{Kind: store.KindInvalid, Err: cause}, "store: it broke"},
		{"no cause", &store.Error{Kind: store.KindConflict, Op: store.OpPut, Addr: a}, `store: put main/ns/ds/"k": conflict`},
		{"sentinel cause", &store.Error{Kind: store.KindConflict, Op: store.OpPut, Addr: a, Err: store.ErrConflict}, `store: put main/ns/ds/"k": conflict`},
		{"inner without op or address", &store.Error{Kind: store.KindInvalid, Op: store.OpPut, Addr: a, Err: &store.Error{Kind: store.KindInvalid, Err: cause}},
			`store: put main/ns/ds/"k": it broke`},
		{"inner with the same", &store.Error{Kind: store.KindInvalid, Op: store.OpPut, Addr: a, Err: &store.Error{Kind: store.KindInvalid, Op: store.OpPut, Addr: a, Err: cause}},
			`store: put main/ns/ds/"k": it broke`},
		{"inner of another record", &store.Error{Kind: store.KindInvalid, Op: store.OpPut, Addr: a, Err: &store.Error{Kind: store.KindInvalid, Op: store.OpRead, Addr: b, Err: cause}},
			`store: put main/ns/ds/"k": read main/ns/ds/"other": it broke`},
		{"driver cause", &store.Error{Kind: store.KindUnavailable, Op: store.OpRead, Addr: a, Err: driver.NewError(driver.KindUnavailable, "searchstore: get failed", cause)},
			`store: read main/ns/ds/"k": searchstore: get failed: it broke`},
		{"closed", &store.Error{Kind: store.KindInternal, Op: store.OpRead, Addr: a, Err: store.ErrClosed}, `store: read main/ns/ds/"k": closed`},
		{"long key", &store.Error{Kind: store.KindInvalid, Op: store.OpRead, Addr: addr("main", strings.Repeat("k", 2000)), Err: cause},
			`store: read main/ns/ds/"` + strings.Repeat("k", 1024-len(`main/ns/ds/"`)) + `...: it broke`},
	}
	for _, c := range cases {
		checkText(t, c.name, c.err, c.want)
	}
}

// TestNewDocumentErrorTexts: NewDocument's refusals never quote the value.
func TestNewDocumentErrorTexts(t *testing.T) {
	cases := []struct {
		name string
		v    any
		want string
	}{
		{"array", []string{secret}, "store: document is a JSON array, not an object"},
		{"string", secret, "store: document is a JSON string, not an object"},
		{"channel", map[string]any{"c": make(chan int)}, "store: the value cannot be encoded as JSON: it holds a chan int"},
		{"NaN", map[string]any{"n": math.NaN(), "p": secret}, "store: the value cannot be encoded as JSON: it holds a value JSON has no form for (NaN, an infinity, a cycle)"},
		{"marshaler", map[string]any{"m": failingMarshaler{}}, "store: the value cannot be encoded as JSON: a MarshalJSON or MarshalText method of store_test.failingMarshaler failed"},
	}
	for _, c := range cases {
		_, err := store.NewDocument(c.v)
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", c.name, err)
		}
		checkText(t, c.name, err, c.want)
	}
}

type failingMarshaler struct{}

func (failingMarshaler) MarshalJSON() ([]byte, error) { return nil, errors.New("refused " + secret) }

// TestRecordErrorTexts: the decoder's and Apply's refusals of queue records.
func TestRecordErrorTexts(t *testing.T) {
	at := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	rec := func(op store.Op) string {
		return string(accepted.Append(nil, &accepted.Record{RequestID: "r", Index: 0, AcceptedAt: at, Op: op}, accepted.ProgramHash(op.Program)))
	}
	put := rec(store.Put(addr("main", "k"), jdoc(`{"p":"`+secret+`"}`)))
	merge := rec(store.Merge(addr("main", "k"), "keep", jdoc(`{"p":"`+secret+`"}`)))
	decode := []struct {
		name, value, want string
	}{
		{"not JSON", `["` + secret + `"]`, "store: queue record is malformed: it is not a JSON object at byte 0"},
		{"cut short", put[:len(put)-5], "store: queue record is malformed: member \"doc\" is malformed or has the wrong type at byte " + strconv.Itoa(len(put)-5)},
		{"future version", strings.Replace(put, `"v":1`, `"v":2`, 1), "store: queue record is malformed: unknown record version 2 (this decoder reads 1)"},
		{"unknown op", strings.Replace(put, `"op":"put"`, `"op":"read"`, 1), "store: queue record is malformed: op is not put, merge or delete"},
		{"damaged program", strings.Replace(merge, `"program":"keep"`, `"program":"kept"`, 1),
			`store: merge main/ns/ds/"k": queue record is malformed: the program does not match program_sha256`},
		{"put without document", put[:strings.Index(put, `,"doc":`)] + `}`, `store: put main/ns/ds/"k": queue record is malformed: a put without a document`},
		{"bad precondition", strings.Replace(put, `,"doc":`, `,"if":"maybe","doc":`, 1), `store: put main/ns/ds/"k": queue record is malformed: if is not revision or absent`},
	}
	for _, c := range decode {
		_, err := accepted.Decode([]byte(c.value))
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", c.name, err)
		}
		checkText(t, c.name, err, c.want)
	}

	s := errTextService(t)
	recs := []store.QueuedOp{
		{AcceptedAt: at, Op: store.Put(addr("nope", "k"), jdoc(`{}`))},
		{AcceptedAt: at, Op: store.Put(addr("main", "k"), jdoc(`[{"p":"`+secret+`"}]`))},
		{AcceptedAt: at, Op: store.Read(addr("main", "k"))},
		{AcceptedAt: at, Op: store.Merge(addr("main", "k"), "array", jdoc(`{}`))},
	}
	res, err := s.Apply(context.Background(), recs)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{
		`store: put nope/ns/ds/"k": no store named "nope" is configured`,
		`store: put main/ns/ds/"k": document is a JSON array, not an object`,
		`store: read main/ns/ds/"k": a queued operation is a write, not a read`,
		`store: merge main/ns/ds/"k": the merge program's result: document is a JSON array, not an object`,
	} {
		checkText(t, "apply "+strconv.Itoa(i), res[i].Err, want)
	}
}
