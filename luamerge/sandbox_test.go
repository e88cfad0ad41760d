package luamerge

import (
	"testing"

	"github.com/tributary-dev/tributary/store"
)

// Every escape attempt fails with an error that says what was refused.
func TestSandboxEscapesFail(t *testing.T) {
	e := newEngine(t, &Options{MaxMemoryBytes: 8 << 20, MaxInstructions: 2_000_000})
	for _, c := range []struct {
		name, body string
		kind       error
		want       string
	}{
		{"load", `return load("return 1")()`, store.ErrInvalid, "'load' is not available"},
		{"loadstring", `return loadstring("return 1")()`, store.ErrInvalid, "'loadstring' is not available"},
		{"dofile", `return dofile("/etc/passwd")`, store.ErrInvalid, "'dofile' is not available"},
		{"loadfile", `return loadfile("/etc/passwd")`, store.ErrInvalid, "'loadfile' is not available"},
		{"require", `return require("os")`, store.ErrInvalid, "'require' is not available"},
		{"collectgarbage", `collectgarbage("collect") return {}`, store.ErrInvalid, "'collectgarbage' is not available"},
		{"print", `print("hi") return {}`, store.ErrInvalid, "'print' is not available"},
		{"os", `return {t = os.time()}`, store.ErrInvalid, "'os' is not available"},
		{"io", `return io.open("/etc/passwd")`, store.ErrInvalid, "'io' is not available"},
		{"debug", `return debug.getregistry()`, store.ErrInvalid, "'debug' is not available"},
		{"package", `return package.loaded`, store.ErrInvalid, "'package' is not available"},
		{"os through _G", `return _G["o" .. "s"].exit()`, store.ErrInvalid, "'os' is not available"},
		{"os through rawget", `local os = rawget(_G, "os") return os.exit()`, store.ErrInvalid, "attempt to index local 'os' (a nil value)"},
		{"coroutine", `local co = coroutine.create(function() end) return {}`, store.ErrInvalid, "'coroutine' is not available"},
		{"string metatable", `return getmetatable("").__index`, store.ErrInvalid, "getmetatable is limited to tables"},
		{"setmetatable on a string", `setmetatable("", {}) return {}`, store.ErrInvalid, "table expected"},
		{"json value metatable", `return getmetatable(json.null)`, store.ErrInvalid, "getmetatable is limited to tables"},
		{"setmetatable on json.null", `setmetatable(json.null, {}) return {}`, store.ErrInvalid, "table expected"},
		{"global metatable", `setmetatable(_G, nil) return {}`, store.ErrInvalid, "cannot change a protected metatable"},
		{"string.dump", `return string.dump(function() end)`, store.ErrInvalid, "string.dump is not available"},
		{"patterns", `return ("a.b"):gsub("%.", "")`, store.ErrInvalid, "string.gsub is not available"},
		{"find with a pattern", `return {("x"):find("x+")}`, store.ErrInvalid, "plain searches only"},
		{"math.random", `return {r = math.random()}`, store.ErrInvalid, "math.random is not available"},
		{"error object carrying a table", `error({secret = current})`, store.ErrInvalid, "raised an error with a table value"},
		{"string.rep bomb", `return {s = string.rep("x", 1e12)}`, store.ErrTooLarge, "larger than the memory limit"},
		{"string.rep bomb with separator", `return {s = ("ab"):rep(1e6, string.rep("y", 1e3))}`, store.ErrTooLarge, "memory"},
		{"concat bomb", `local s = "x" while true do s = s .. s end`, store.ErrTooLarge, "more than 8388608 bytes of memory"},
		{"wide concat bomb", `local s = ("x"):rep(1000) while true do s = s .. s .. s .. s .. s .. s .. s .. s end`, store.ErrTooLarge, "memory"},
		{"table.concat bomb", `local t = {("x"):rep(1e5)} for i = 1, 200 do t[i] = t[1] end return {s = table.concat(t)}`, store.ErrTooLarge, "memory"},
		{"table growth bomb", `local t = {} local i = 0 while true do i = i + 1 t[i] = {i} end`, store.ErrTooLarge, "memory"},
		{"format bomb", `local s = ("x"):rep(1e6) local t = {} for i = 1, 100 do t[i] = string.format("%s%s", s, s) end`, store.ErrTooLarge, "memory"},
		{"__tostring bomb", `local t = setmetatable({}, {__tostring = function() return ("x"):rep(1e9) end}) return {s = tostring(t)}`, store.ErrTooLarge, "memory"},
		{"unpack onto the stack", `local t = {} for i = 1, 1e6 do t[i] = i end return {table.unpack(t)}`, store.ErrTooLarge, "memory"},
		{"dropped json arrays", `for i = 1, 1e9 do json.array() end`, store.ErrTooLarge, "memory"},
		{"infinite tail calls", `local function f(n) return f(n + 1) end return f(1)`, store.ErrInvalid, "instructions"},
		{"infinite loop", `while true do end`, store.ErrInvalid, "more than 2000000 instructions"},
		{"pcall swallowing a limit", `while true do pcall(string.rep, "x", 1e12) end`, store.ErrTooLarge, "memory"},
		{"pcall swallowing then returning", `pcall(function() while true do end end) return {}`, store.ErrInvalid, "instructions"},
		{"error handler swallowing", `xpcall(function() while true do end end, function() return "ok" end) return {}`, store.ErrInvalid, "instructions"},
		{"looping error handler", `xpcall(function() error("x") end, function() while true do end end) return {}`, store.ErrInvalid, "instructions"},
		{"deep recursion", `local function f(n) return 1 + f(n + 1) end return {n = f(1)}`, store.ErrInvalid, "calls nested deeper than 200"},
		{"recursion through metamethods", `local t = setmetatable({}, {}) getmetatable(t).__index = function(t, k) return t[k] end return {x = t.x}`, store.ErrInvalid, "stack overflow"},
		{"insert with a huge border", `local t = {} for k = 40, 0, -1 do t[2^k] = 1 end assert(#t == 2^40) table.insert(t, 1, 0) return {}`, store.ErrInvalid, "instructions"},
		{"concat with a huge border", `local t = {} for k = 40, 0, -1 do t[2^k] = "x" end return {s = table.concat(t)}`, store.ErrInvalid, "instructions"},
		{"unpack with a huge border", `local t = {} for k = 40, 0, -1 do t[2^k] = "x" end return {table.unpack(t)}`, store.ErrInvalid, "too many results"},
		{"remove with a huge border", `local t = {} for k = 40, 0, -1 do t[2^k] = "x" end table.remove(t, 1) return {}`, store.ErrInvalid, "instructions"},
		{"sort with a huge border", `local t = {} for k = 40, 0, -1 do t[2^k] = "x" end table.sort(t) return {}`, store.ErrInvalid, "instructions"},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantFail(t, e, fn(c.body), `{"a":1}`, `{"b":2}`, c.kind, c.want)
		})
	}
	// The process is unharmed: an ordinary merge still works.
	wantDoc(t, e, fn(`current.b = incoming.b return current`), `{"a":1}`, `{"b":2}`, `{"a":1,"b":2}`)
}

// What a run changes stays in its VM, and the bridge never runs the program's metamethods.
func TestSandboxChangesStayInTheRun(t *testing.T) {
	e := newEngine(t, &Options{MaxInstructions: 100_000})
	wantDoc(t, e, fn(`
  rawset(_G, "string", nil)
  setmetatable(math, {__index = function() error("boom") end})
  local up = ("x"):upper() -- method calls still reach the real string library
  local t = setmetatable({a = 1}, {__index = function() while true do end end, __pairs = function() while true do end end})
  return {up = up, t = t}`), "", `{}`, `{"t":{"a":1},"up":"X"}`)
	wantDoc(t, e, fn(`return {up = string.upper("y"), pi = math.floor(math.pi)}`), "", `{}`, `{"pi":3,"up":"Y"}`)
}

func TestSandboxRefusesBinaryChunks(t *testing.T) {
	e := newEngine(t, nil)
	wantFail(t, e, "\x1bLua\x52\x00", "", `{}`, store.ErrInvalid, "does not compile")
}

// Recursion through Go functions (pcall, metamethods) nests Go calls; go-lua stops it at 200
// levels with an ordinary error, which pcall may catch as in Lua. The Go stack stays small.
func TestSandboxGoRecursionIsBounded(t *testing.T) {
	e := newEngine(t, nil)
	wantDoc(t, e, fn(`local function f() return pcall(f) end f() return {done = true}`), "", `{}`, `{"done":true}`)
	wantFail(t, e, fn(`local t = setmetatable({}, {__index = function(t, k) return t[k .. "x"] end}) return {v = t.a}`), "", `{}`, store.ErrInvalid, "stack overflow")
}

// xpcall calls the message handler with the error and returns its result (go-lua's own xpcall
// calls the wrong function).
func TestSandboxXpcallCallsTheHandler(t *testing.T) {
	e := newEngine(t, nil)
	wantDoc(t, e, fn(`
  local calls = 0
  local ok, e = xpcall(function() calls = calls + 1 error("boom", 0) end, function(m) return "handled " .. m end)
  local ok2, a, b = xpcall(function(x, y) return x + y, "second" end, error, 1, 2)
  local ok3, e3 = xpcall(function() error("x") end, function() error("again") end)
  return {calls = calls, ok = ok, e = e, ok2 = ok2, a = a, b = b, ok3 = ok3, e3 = e3}`), "", `{}`,
		`{"a":3,"b":"second","calls":1,"e":"handled boom","e3":"error in error handling","ok":false,"ok2":true,"ok3":false}`)
}
