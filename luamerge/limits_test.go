package luamerge

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/store"
)

// Each limit trips with a ProgramError naming it, and the engine keeps working afterwards.
func TestLimitsTrip(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 10) + "1" + strings.Repeat("}", 10)
	big := `{"s":"` + strings.Repeat("x", 2000) + `"}`
	for _, c := range []struct {
		name              string
		opts              Options
		program           string
		current, incoming string
		kind              error
		limit             string
	}{
		{"instructions", Options{MaxInstructions: 1000}, fn(`local n = 0 for i = 1, 1e9 do n = n + i end`), "", `{}`, store.ErrInvalid, limitInstructions},
		{"timeout", Options{MaxInstructions: 1 << 62, Timeout: 20 * time.Millisecond}, fn(`while true do end`), "", `{}`, store.ErrInvalid, limitTime},
		{"input size of current", Options{MaxInputBytes: 1000}, fn(`return current`), big, `{}`, store.ErrTooLarge, limitInputSize},
		{"input size of incoming", Options{MaxInputBytes: 1000}, fn(`return current`), `{}`, big, store.ErrTooLarge, limitInputSize},
		{"output size", Options{MaxOutputBytes: 1000}, fn(`return {s = ("x"):rep(1001)}`), "", `{}`, store.ErrTooLarge, limitOutputSize},
		{"input nesting", Options{MaxDepth: 5}, fn(`return {}`), deep, `{}`, store.ErrInvalid, limitDepth},
		{"output nesting", Options{MaxDepth: 5}, fn(`local t = {} for i = 1, 10 do t = {a = t} end return t`), "", `{}`, store.ErrInvalid, limitDepth},
		{"call depth", Options{MaxCallDepth: 20}, fn(`local function f(n) if n == 0 then return 0 end return 1 + f(n - 1) end return {n = f(30)}`), "", `{}`, store.ErrInvalid, limitCallDepth},
		{"memory: strings", Options{MaxMemoryBytes: 1 << 20}, fn(`local s = "x" while true do s = s .. s end`), "", `{}`, store.ErrTooLarge, limitMemory},
		{"memory: tables", Options{MaxMemoryBytes: 1 << 20}, fn(`local t = {} for i = 1, 1e9 do t[i] = {} end`), "", `{}`, store.ErrTooLarge, limitMemory},
		{"memory: closures", Options{MaxMemoryBytes: 1 << 20}, fn(`local t = {} for i = 1, 1e9 do t[i] = function() return i end end`), "", `{}`, store.ErrTooLarge, limitMemory},
		{"memory: documents", Options{MaxMemoryBytes: 64 << 10}, fn(`return current`), `{"a":[` + strings.Repeat(`"abcdefgh",`, 10000) + `1]}`, `{}`, store.ErrTooLarge, limitMemory},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEngine(t, &c.opts)
			pe := wantFail(t, e, c.program, c.current, c.incoming, c.kind)
			if pe.Limit != c.limit {
				t.Fatalf("limit %q, want %q: %v", pe.Limit, c.limit, pe)
			}
			wantDoc(t, e, fn(`return {ok = true}`), "", `{}`, `{"ok":true}`)
		})
	}
}

func TestLimitProgramSize(t *testing.T) {
	e := newEngine(t, &Options{MaxProgramBytes: 100})
	wantFail(t, e, fn(`return {}`)+strings.Repeat(" ", 100), "", `{}`, store.ErrInvalid, "more than the limit of 100")
}

// The caller's context stops a run; its error comes back unwrapped.
func TestLimitCallerContext(t *testing.T) {
	e := newEngine(t, &Options{MaxInstructions: 1 << 62, Timeout: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(10 * time.Millisecond)
		cancel()
	}()
	_, err := e.Merge(ctx, mergeCallFor(fn(`while true do end`)))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if _, err := e.Merge(ctx, mergeCallFor(fn(`return {}`))); !errors.Is(err, context.Canceled) {
		t.Fatalf("an ended context: got %v, want context.Canceled", err)
	}
}

// A memory bomb is stopped before it allocates much more than its budget: all the Go memory
// the process allocated during the run stays within a small multiple of the budget (without
// the limit the bombs below would not stop).
func TestLimitMemoryStopsBombsEarly(t *testing.T) {
	const budget = 16 << 20
	e := newEngine(t, &Options{MaxMemoryBytes: budget, MaxInstructions: 1 << 40, Timeout: time.Minute})
	for name, body := range map[string]string{
		"doubling string":    `local s = "x" while true do s = s .. s end`,
		"wide concat":        `local s = ("x"):rep(100) while true do s = s .. s .. s .. s .. s .. s .. s .. s .. s .. s end`,
		"kept strings":       `local t, s = {}, ("x"):rep(1e5) for i = 1, 1e9 do t[i] = s .. i end`,
		"string.rep":         `local t = {} for i = 1, 1e9 do t[i] = ("x"):rep(1e6) end`,
		"table.concat":       `local t = {("x"):rep(1e5)} for i = 2, 200 do t[i] = t[1] end local u = {} for i = 1, 1e9 do u[i] = table.concat(t) end`,
		"huge table":         `local t = {} for i = 1, 1e9 do t[i] = i end`,
		"hash table":         `local t = {} for i = 1, 1e9 do t["k" .. i] = true end`,
		"nested tables":      `local t = {} for i = 1, 1e9 do t = {t, t} end`,
		"constructor":        `local t = {} for i = 1, 1e9 do t[i] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16} end`,
		"unpack and varargs": `local function f(...) return {...} end local t = {} for i = 1, 5000 do t[i] = i end local u = {} for i = 1, 1e9 do u[i] = f(table.unpack(t)) end`,
	} {
		t.Run(name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			pe := wantFail(t, e, fn(body), "", `{}`, store.ErrTooLarge)
			runtime.ReadMemStats(&after)
			if pe.Limit != limitMemory {
				t.Fatalf("limit %q, want memory: %v", pe.Limit, pe)
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			if alloc > 5*budget {
				t.Fatalf("the run allocated %d MiB with a budget of %d MiB", alloc>>20, budget>>20)
			}
			t.Logf("allocated %.1f MiB in all, budget %d MiB", float64(alloc)/(1<<20), budget>>20)
		})
	}
}

// Garbage does not count: a program may allocate far more than its budget over time as long
// as it holds little at once.
func TestLimitMemoryIgnoresGarbage(t *testing.T) {
	e := newEngine(t, &Options{MaxMemoryBytes: 1 << 20})
	wantDoc(t, e, fn(`
  local n = 0
  for i = 1, 300 do
    local s = ("x"):rep(1e4) .. i
    local t = {s, s, {i}}
    n = n + #t[1]
  end
  return {n = n}`), "", `{}`, `{"n":3000792}`)
}
