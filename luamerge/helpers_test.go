package luamerge

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/store"
)

var testAddr = store.Address{Store: "main", Namespace: "crm", Dataset: "people", Key: store.StringKey("ada")}

var testTime = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// testTimeout is the wall-clock limit of a test engine whose Options set none. It is generous
// on purpose: a test that expects another limit (instructions, memory, call depth) must see
// that one trip, and under -race on a loaded machine the default 2 s clock can otherwise run
// out first. Tests of the time limit set their own Timeout.
const testTimeout = 5 * time.Minute

// newEngine returns an engine with the options o (nil: the defaults), except that the clock is
// testTimeout when o does not set one.
func newEngine(t testing.TB, o *Options) *Engine {
	t.Helper()
	var opts Options
	if o != nil {
		opts = *o
	}
	if opts.Timeout == 0 {
		opts.Timeout = testTimeout
	}
	e, err := New(&opts)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// mergeJSON runs program on current (absent when "") and incoming.
func mergeJSON(t testing.TB, e *Engine, program, current, incoming string) (store.MergeResult, error) {
	t.Helper()
	call := &store.MergeCall{Program: program, Incoming: store.Document{JSON: []byte(incoming)},
		Context: store.MergeContext{Addr: testAddr, Time: testTime, Attempt: 1}}
	if current != "" {
		call.Current = &store.Document{JSON: []byte(current)}
	}
	return e.Merge(context.Background(), call)
}

// wantDoc runs program and requires a written document equal, byte for byte, to want.
func wantDoc(t *testing.T, e *Engine, program, current, incoming, want string) store.MergeResult {
	t.Helper()
	res, err := mergeJSON(t, e, program, current, incoming)
	if err != nil {
		t.Fatalf("merge failed: %v", err)
	}
	if res.Action != store.MergeWrite || string(res.Doc.JSON) != want {
		t.Fatalf("got action %v %s\nwant write %s", res.Action, res.Doc.JSON, want)
	}
	return res
}

// wantFail runs program and requires a ProgramError of the given kind whose message contains
// every one of parts.
func wantFail(t *testing.T, e *Engine, program, current, incoming string, kind error, parts ...string) *ProgramError {
	t.Helper()
	_, err := mergeJSON(t, e, program, current, incoming)
	return checkFail(t, err, kind, parts...)
}

func checkFail(t *testing.T, err error, kind error, parts ...string) *ProgramError {
	t.Helper()
	if err == nil {
		t.Fatalf("merge succeeded, want an error containing %q", parts)
	}
	if !errors.Is(&store.Error{Kind: store.KindOf(err)}, kind) {
		t.Fatalf("error kind %v, want %v: %v", store.KindOf(err), kind, err)
	}
	var pe *ProgramError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *ProgramError", err, err)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not contain %q", err, p)
		}
	}
	return pe
}

// fn wraps a Lua function body as a program.
func fn(body string) string {
	return "return function(current, incoming, context)\n" + body + "\nend"
}

func mergeCallFor(program string) *store.MergeCall {
	return &store.MergeCall{Program: program, Incoming: store.Document{JSON: []byte(`{}`)},
		Context: store.MergeContext{Addr: testAddr, Time: testTime, Attempt: 1}}
}
