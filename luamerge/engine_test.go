package luamerge

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/store"
)

func TestMergeResultConventions(t *testing.T) {
	e := newEngine(t, nil)
	prog := fn(`
  if incoming.op == "delete" then return merge.DELETE end
  if incoming.op == "keep" then return merge.UNCHANGED end
  if current == nil then return {created = true} end
  current.n = current.n + 1
  return current`)
	wantDoc(t, e, prog, "", `{}`, `{"created":true}`)
	wantDoc(t, e, prog, `{"n":1}`, `{}`, `{"n":2}`)
	for _, c := range []struct {
		op      string
		current string
		want    store.MergeAction
	}{{"delete", `{"n":1}`, store.MergeDelete}, {"delete", "", store.MergeDelete},
		{"keep", `{"n":1}`, store.MergeUnchanged}, {"keep", "", store.MergeUnchanged}} {
		res, err := mergeJSON(t, e, prog, c.current, `{"op":"`+c.op+`"}`)
		if err != nil || res.Action != c.want {
			t.Errorf("%s on %q: action %v, err %v; want %v", c.op, c.current, res.Action, err, c.want)
		}
	}
	wantFail(t, e, fn(`if current then return current end`), "", `{}`, store.ErrInvalid, "returned nothing")
	wantFail(t, e, fn(`return 42`), "", `{}`, store.ErrInvalid, "returned a number")
	wantFail(t, e, fn(`return {1, 2}`), "", `{}`, store.ErrInvalid, "returned an array")
	wantFail(t, e, `return 42`, "", `{}`, store.ErrInvalid, "must return a function")
}

func TestMergeSeesContext(t *testing.T) {
	e := newEngine(t, nil)
	prog := fn(`return {store = context.store, namespace = context.namespace, dataset = context.dataset,
	  key = context.key, key_type = context.key_type, time = context.time, attempt = context.attempt}`)
	wantDoc(t, e, prog, "", `{}`, `{"attempt":1,"dataset":"people","key":"ada","key_type":"string","namespace":"crm","store":"main","time":"2026-11-30T09:00:00Z"}`)

	call := &store.MergeCall{Program: fn(`return {key = context.key, big = tostring(context.key)}`),
		Context:  store.MergeContext{Addr: store.Address{Store: "s", Namespace: "n", Dataset: "d", Key: store.Int64Key(1<<62 + 1)}, Time: testTime, Attempt: 3},
		Incoming: store.Document{JSON: []byte(`{}`)}}
	res, err := e.Merge(context.Background(), call)
	if err != nil || string(res.Doc.JSON) != `{"big":"4611686018427387905","key":4611686018427387905}` {
		t.Fatalf("int64 key beyond 2^53: %s %v", res.Doc.JSON, err)
	}
}

// Errors carry the record (ProgramError.Addr) and name the program line, and never carry
// document contents.
func TestErrorsCarryLineAndAddressNotContents(t *testing.T) {
	e := newEngine(t, nil)
	secret := `{"password":"hunter2-secret","n":{"deep":"also-secret"}}`
	for _, c := range []struct {
		name, program string
		line          int
	}{
		{"compile", "return function(c, i)\n  local x = = 1\nend", 2},
		{"runtime", "return function(c, i)\n\n  return c.missing.field\nend", 3},
		{"arithmetic", "return function(c, i)\n  return c.password + 1\nend", 2},
		{"error table", "return function(c, i)\n  error(c)\nend", 2},
		{"bad output", "return function(c, i)\n  c.f = function() end\n  return c\nend", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := mergeJSON(t, e, c.program, secret, secret)
			pe := checkFail(t, err, store.ErrInvalid, "lua merge program")
			if pe.Addr != testAddr {
				t.Errorf("error for %v, want the record %v", pe.Addr, testAddr)
			}
			if strings.Contains(err.Error(), testAddr.String()) {
				t.Errorf("the message names the address, which the store's error around it names already: %v", err)
			}
			if c.line > 0 && pe.Line != c.line {
				t.Errorf("line %d, want %d: %v", pe.Line, c.line, err)
			}
			if c.line > 0 && !strings.Contains(err.Error(), "line ") {
				t.Errorf("message has no line: %v", err)
			}
			if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "hunter2") {
				t.Errorf("message leaks document contents: %v", err)
			}
		})
	}
}

// Every run gets a fresh VM: globals a program sets are gone in the next run, also after it
// changed the libraries.
func TestFreshVMPerRun(t *testing.T) {
	e := newEngine(t, nil)
	prog := fn(`
  counter = (counter or 0) + 1
  local up = string.upper("x")
  string.upper = function() return "hijacked" end
  rawset(_G, "math", nil)
  return {counter = counter, up = up}`)
	for range 3 {
		wantDoc(t, e, prog, "", `{}`, `{"counter":1,"up":"X"}`)
	}
}

func TestProgramCacheIsBounded(t *testing.T) {
	e := newEngine(t, &Options{MaxCachedPrograms: 2})
	for i := range 5 {
		wantDoc(t, e, fn(`return {i = `+string(rune('0'+i))+`}`), "", `{}`, `{"i":`+string(rune('0'+i))+`}`)
	}
	if n := e.lru.Len(); n != 2 || len(e.cache) != 2 {
		t.Fatalf("cache holds %d programs (%d keys), want 2", n, len(e.cache))
	}
	// A program that does not compile is cached with its error.
	if err := e.Compile("return function("); err == nil || !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Compile of a syntax error: %v", err)
	}
	if err := e.Compile(fn(`return current`)); err != nil {
		t.Fatal(err)
	}
}

func TestNewRefusesNegativeLimits(t *testing.T) {
	if _, err := New(&Options{MaxMemoryBytes: -1}); err == nil {
		t.Fatal("New accepted a negative limit")
	}
}
