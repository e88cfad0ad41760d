package luamerge

import (
	"math/bits"
	"strings"
	"sync"

	lua "github.com/Shopify/go-lua"

	"github.com/tributary-dev/tributary/store"
)

// The sandbox. A fresh VM starts with an empty global table whose metatable materializes a
// name on its first use: a base function, or one of the libraries string, table, math, json and
// merge. Nothing else exists. A fresh VM therefore costs almost nothing to make, and a program
// pays only for what it touches.
//
// go-lua's library functions are taken once from a template state and shared: they are plain
// Go functions without state. Functions that allocate or loop are replaced or wrapped so that
// they charge the run's memory and instruction budgets before they work.

// goLib holds go-lua's own functions, by library and name.
var goLib = func() map[string]map[string]lua.Function {
	l := lua.NewState()
	out := map[string]map[string]lua.Function{}
	for _, lib := range []struct {
		name string
		open lua.Function
	}{{"_G", lua.BaseOpen}, {"string", lua.StringOpen}, {"table", lua.TableOpen}, {"math", lua.MathOpen}} {
		lua.Require(l, lib.name, lib.open, true)
		fns := map[string]lua.Function{}
		l.PushNil()
		for l.Next(-2) {
			if name, ok := l.ToString(-2); ok && l.IsGoFunction(-1) {
				fns[name] = l.ToGoFunction(-1)
			}
			l.Pop(1)
		}
		l.Pop(1)
		out[lib.name] = fns
	}
	return out
}()

// baseNames are go-lua's base functions a merge program gets as they are: none allocates more
// than a constant, runs unbounded Go loops, or reaches outside the VM.
var baseNames = []string{"assert", "ipairs", "next", "pairs", "pcall", "rawequal", "rawlen",
	"rawget", "select", "tonumber", "tostring", "type", "setmetatable"}

// refused are names of standard Lua that a merge program must not reach. Naming one raises a
// clear error, so a program never mistakes a missing sandbox feature for a nil variable.
var refused = map[string]string{
	"load": "loads code", "loadstring": "loads code", "loadfile": "reads files", "dofile": "reads files",
	"require": "loads modules", "module": "loads modules", "package": "loads modules",
	"collectgarbage": "controls the host's garbage collector", "print": "writes to the host's output",
	"os": "reaches the operating system", "io": "reaches files", "debug": "breaks the sandbox",
	"coroutine": "is not supported by go-lua", "bit32": "is not part of the merge sandbox",
	"getfenv": "breaks the sandbox", "setfenv": "breaks the sandbox", "newproxy": "breaks the sandbox",
	"unpack": "is table.unpack in Lua 5.2",
}

// refusedString are string functions that go-lua does not implement (it has no pattern
// engine) or that expose bytecode.
var refusedString = map[string]string{
	"gsub": "go-lua has no pattern matching", "gmatch": "go-lua has no pattern matching",
	"match": "go-lua has no pattern matching", "dump": "exposes bytecode",
}

// setup prepares a fresh VM: the lazy global table and the string metatable, which are one
// table. Its __index looks up the string library for a string and materializes a global for
// the global table -- nothing else can have it: getmetatable refuses strings and returns
// "sandbox" for the global table, and setmetatable refuses to replace a locked metatable.
func (r *run) setup() {
	l := r.l
	l.PushGlobalTable()
	l.CreateTable(0, 2)
	pushShared(l, sharedIndex)
	l.PushGoFunction(r.metaIndex)
	l.RawSet(-3)
	r.lockedMeta(l, sharedSandbox)
	// Method syntax on strings ("x"):upper() goes through the string metatable to the string
	// library; getmetatable refuses strings, so the program cannot reach or change it.
	l.PushString("")
	l.PushValue(-2)
	l.SetMetaTable(-2)
	l.Pop(1)
	l.SetMetaTable(-2)
	l.Pop(1)
}

var (
	sharedIndex     = shared("__index")
	sharedMetatable = shared("__metatable")
	sharedSandbox   = shared("sandbox")
)

// lockedMeta sets __metatable on the metatable on top, so getmetatable returns the name and
// setmetatable refuses to replace it.
func (r *run) lockedMeta(l *lua.State, name any) {
	pushShared(l, sharedMetatable)
	pushShared(l, name)
	l.RawSet(-3)
}

// metaIndex is the __index of the sandbox metatable: a string's method, or a global.
func (r *run) metaIndex(l *lua.State) int {
	if l.TypeOf(1) == lua.TypeString {
		r.pushStringLib(l)
		l.PushValue(2)
		l.RawGet(-2)
		return 1
	}
	return r.globalIndex(l)
}

// globalIndex materializes a global on first use.
func (r *run) globalIndex(l *lua.State) int {
	name, ok := l.ToString(2)
	if !ok || l.TypeOf(2) != lua.TypeString {
		l.PushNil()
		return 1
	}
	if why, bad := refused[name]; bad {
		lua.Errorf(l, "'%s' is not available in merge programs: it %s", name, why)
	}
	switch name {
	case "_G":
		l.PushGlobalTable()
	case "_VERSION":
		l.PushString(lua.VersionString)
	case "string":
		r.pushStringLib(l)
	case "table":
		r.pushLib(l, r.tableLib())
	case "math":
		r.pushMathLib(l)
	case "json":
		r.pushJSONLib(l)
	case "merge":
		r.pushMergeLib(l)
	case "getmetatable":
		pushShared(l, sharedGetmetatable())
	case "error":
		pushShared(l, sharedRaise())
	case "xpcall":
		l.PushGoFunction(r.xpcall)
	case "rawset":
		l.PushGoFunction(func(l *lua.State) int {
			r.charge(l, chargeEntry)
			return goLib["_G"]["rawset"](l)
		})
	default:
		f, ok := sharedBase()[name]
		if !ok {
			l.PushNil()
			return 1
		}
		pushShared(l, f)
	}
	// Keep it, so the next use is an ordinary global access.
	l.PushValue(2)
	l.PushValue(-2)
	l.RawSet(1)
	return 1
}

// The stateless functions of the sandbox, boxed once (see proto.go): the base functions, and
// the math library as a table template.
var (
	sharedBase = sync.OnceValue(func() map[string]any {
		m := make(map[string]any, len(baseNames))
		for _, n := range baseNames {
			m[n] = sharedFunction(goLib["_G"][n])
		}
		return m
	})
	sharedGetmetatable = sync.OnceValue(func() any { return sharedFunction(getmetatable) })
	sharedRaise        = sync.OnceValue(func() any { return sharedFunction(raise) })
	mathLib            = sync.OnceValue(func() tableTemplate {
		var kv []any
		for name, f := range goLib["math"] {
			if name != "random" && name != "randomseed" { // a merge must be a pure function
				kv = append(kv, shared(name), sharedFunction(f))
			}
		}
		kv = append(kv, shared("pi"), any(3.141592653589793), shared("huge"), any(1.7976931348623157e308))
		for _, name := range []string{"random", "randomseed"} {
			kv = append(kv, shared(name), sharedFunction(func(l *lua.State) int {
				lua.Errorf(l, "math.%s is not available in merge programs: a merge must be a pure function", name)
				return 0
			}))
		}
		return newTableTemplate(kv...)
	})
)

// getmetatable works on tables only: the metatables of strings and of the bridge's values are
// the sandbox's, not the program's.
func getmetatable(l *lua.State) int {
	if l.TypeOf(1) != lua.TypeTable {
		lua.Errorf(l, "getmetatable is limited to tables in merge programs")
	}
	return goLib["_G"]["getmetatable"](l)
}

// raise is error() for string messages. go-lua turns an error value that is not a string
// into an unrelated "bad argument" error; this says what happened instead, and keeps the
// table's contents out of the message.
func raise(l *lua.State) int {
	if t := l.TypeOf(1); t != lua.TypeString && t != lua.TypeNumber && t != lua.TypeNone && t != lua.TypeNil {
		l.PushString("the program raised an error with " + article(lua.TypeNameOf(l, 1)) + " value; only string messages are reported")
		l.Replace(1)
	}
	return goLib["_G"]["error"](l)
}

// xpcall replaces go-lua's, which passes the message handler's position relative to its own
// frame where go-lua reads an absolute stack slot: on an error it calls whatever sits at the
// bottom of the stack -- in a run, the run's own entry function -- instead of the handler.
// This one calls the handler after unwinding (so the handler sees the message, not the
// failing frame), and never for a tripped limit.
func (r *run) xpcall(l *lua.State) int {
	n := l.Top()
	lua.ArgumentCheck(l, n >= 2, 2, "value expected")
	l.PushValue(1) // [f, h, args...] -> [h, f, args...]
	l.PushValue(2)
	l.Replace(1)
	l.Replace(2)
	if err := l.ProtectedCall(n-2, lua.MultipleReturns, 0); err != nil {
		if r.tripped != nil {
			r.raise(l)
		}
		l.PushValue(1)
		l.Insert(-2) // [h, message] on top
		if err := l.ProtectedCall(1, 1, 0); err != nil {
			if r.tripped != nil {
				r.raise(l)
			}
			l.Pop(1)
			l.PushString("error in error handling")
		}
		l.PushBoolean(false)
		l.Insert(-2)
		return 2
	}
	l.PushBoolean(true)
	l.Replace(1)
	return l.Top()
}

// pushLib pushes a new table holding fns.
func (r *run) pushLib(l *lua.State, fns map[string]lua.Function) {
	l.CreateTable(0, len(fns))
	for name, f := range fns {
		l.PushGoFunction(f)
		l.SetField(-2, name)
	}
}

// pushStringLib pushes the run's string library, the same table for the global and for
// method calls.
func (r *run) pushStringLib(l *lua.State) {
	l.RawGetInt(lua.RegistryIndex, regStringLib)
	if !l.IsNil(-1) {
		return
	}
	l.Pop(1)
	g := goLib["string"]
	r.pushLib(l, map[string]lua.Function{
		"len": g["len"],
		"sub": g["sub"], // go-lua slices: the result shares the argument's memory
		"lower": func(l *lua.State) int {
			r.chargeCopy(l, len(lua.CheckString(l, 1)))
			return g["lower"](l)
		},
		"upper": func(l *lua.State) int {
			r.chargeCopy(l, len(lua.CheckString(l, 1)))
			return g["upper"](l)
		},
		"reverse": func(l *lua.State) int {
			r.chargeCopy(l, 4*len(lua.CheckString(l, 1))) // go-lua reverses runes via []rune
			return g["reverse"](l)
		},
		"byte": func(l *lua.State) int {
			s := lua.CheckString(l, 1)
			r.charge(l, int64(len(s))*chargeSlot) // at most one result per byte, on the stack
			r.work(l, int64(len(s)))
			return g["byte"](l)
		},
		"char": func(l *lua.State) int {
			r.charge(l, chargeString+int64(l.Top()))
			r.work(l, int64(l.Top()))
			return g["char"](l)
		},
		"find":   r.find,
		"format": r.format,
		"rep":    r.rep,
	})
	for name, why := range refusedString {
		l.PushGoFunction(func(l *lua.State) int {
			lua.Errorf(l, "string.%s is not available in merge programs: %s", name, why)
			return 0
		})
		l.SetField(-2, name)
	}
	l.PushValue(-1)
	l.RawSetInt(lua.RegistryIndex, regStringLib)
}

func (r *run) chargeCopy(l *lua.State, n int) {
	r.charge(l, chargeString+int64(n))
	r.work(l, int64(n/64))
}

// find supports plain searches only: go-lua's find asserts on patterns.
func (r *run) find(l *lua.State) int {
	s, p := lua.CheckString(l, 1), lua.CheckString(l, 2)
	plain := l.ToBoolean(4)
	if !plain && strings.ContainsAny(p, "^$*+?.([%-") {
		lua.Errorf(l, "string.find supports plain searches only (go-lua has no pattern matching): pass true as the fourth argument")
	}
	r.work(l, int64(len(s)/64+len(p)))
	l.SetTop(4)
	l.PushBoolean(true)
	l.Replace(4)
	return goLib["string"]["find"](l)
}

// format charges an upper bound of its result first: each conversion yields its argument's
// text (strings, or a table's __tostring result, which is charged when made) plus at most a
// few hundred bytes (go-lua limits widths and precisions to two digits).
func (r *run) format(l *lua.State) int {
	f := lua.CheckString(l, 1)
	n := int64(len(f) + chargeString)
	for i := 2; i <= l.Top(); i++ {
		n += 512
		if l.TypeOf(i) == lua.TypeString {
			s, _ := l.ToString(i)
			n += int64(len(s))
		}
	}
	r.charge(l, n)
	r.work(l, n/64)
	return goLib["string"]["format"](l)
}

// rep builds the repetition after charging its exact size.
func (r *run) rep(l *lua.State) int {
	s, n, sep := lua.CheckString(l, 1), lua.CheckInteger(l, 2), lua.OptString(l, 3, "")
	if n <= 0 {
		l.PushString("")
		return 1
	}
	hi, size := bits.Mul64(uint64(n), uint64(len(s)+len(sep)))
	if hi != 0 || size > uint64(r.opts.MaxMemoryBytes) {
		r.trip(l, limitMemory, store.KindTooLarge, "string.rep would build a string larger than the memory limit")
	}
	r.charge(l, chargeString+int64(size))
	r.work(l, int64(size/64))
	if sep == "" {
		l.PushString(strings.Repeat(s, n))
		return 1
	}
	var b strings.Builder
	b.Grow(int(size))
	for i := range n {
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(s)
	}
	l.PushString(b.String())
	return 1
}

func (r *run) pushMathLib(l *lua.State) {
	mathLib().push(l)
}

// tableLib holds the table functions. go-lua's loop over the length that # reports, which a
// table with a __len metamethod or a sparse border can make huge with no memory behind it, so
// these use the raw length and charge the work before they loop.
func (r *run) tableLib() map[string]lua.Function {
	g := goLib["table"]
	return map[string]lua.Function{
		"concat": r.tableConcat,
		"insert": func(l *lua.State) int {
			lua.CheckType(l, 1, lua.TypeTable)
			n := l.RawLength(1)
			r.charge(l, chargeEntry)
			switch l.Top() {
			case 2:
				l.RawSetInt(1, n+1)
			case 3:
				pos := lua.CheckInteger(l, 2)
				lua.ArgumentCheck(l, 1 <= pos && pos <= n+1, 2, "position out of bounds")
				r.work(l, int64(n-pos+1))
				for i := n + 1; i > pos; i-- {
					l.RawGetInt(1, i-1)
					l.RawSetInt(1, i)
				}
				l.RawSetInt(1, pos)
			default:
				lua.Errorf(l, "wrong number of arguments to 'insert'")
			}
			return 0
		},
		"remove": func(l *lua.State) int {
			lua.CheckType(l, 1, lua.TypeTable)
			n := l.RawLength(1)
			pos := lua.OptInteger(l, 2, n)
			if n == 0 && l.IsNoneOrNil(2) {
				return 0
			}
			if pos != n {
				lua.ArgumentCheck(l, 1 <= pos && pos <= n+1, 2, "position out of bounds")
			}
			r.work(l, int64(n-pos+1))
			l.RawGetInt(1, pos)
			for ; pos < n; pos++ {
				l.RawGetInt(1, pos+1)
				l.RawSetInt(1, pos)
			}
			l.PushNil()
			l.RawSetInt(1, pos)
			return 1
		},
		"pack": func(l *lua.State) int {
			r.charge(l, chargeTable+int64(l.Top())*chargeSlot)
			r.work(l, int64(l.Top()))
			return g["pack"](l)
		},
		"unpack": func(l *lua.State) int {
			lua.CheckType(l, 1, lua.TypeTable)
			i := lua.OptInteger(l, 2, 1)
			e := lua.OptInteger(l, 3, l.RawLength(1))
			if i > e {
				return 0
			}
			n := e - i + 1
			if n <= 0 || n > 1<<20 {
				lua.Errorf(l, "too many results to unpack")
			}
			r.charge(l, int64(n)*chargeSlot)
			r.work(l, int64(n))
			if !l.CheckStack(n) {
				lua.Errorf(l, "too many results to unpack")
			}
			for ; i <= e; i++ {
				l.RawGetInt(1, i)
			}
			return n
		},
		"sort": func(l *lua.State) int {
			lua.CheckType(l, 1, lua.TypeTable)
			if lua.MetaField(l, 1, "__len") {
				lua.Errorf(l, "table.sort does not take tables with a __len metamethod in merge programs")
			}
			n := l.RawLength(1)
			r.work(l, int64(n)*int64(bits.Len(uint(n))+1))
			return g["sort"](l)
		},
	}
}

// tableConcat measures, charges, then builds in one allocation (go-lua's appends to a string
// in a loop: quadratic time, and its garbage is invisible to any budget).
func (r *run) tableConcat(l *lua.State) int {
	lua.CheckType(l, 1, lua.TypeTable)
	sep := lua.OptString(l, 2, "")
	i := lua.OptInteger(l, 3, 1)
	last := lua.OptInteger(l, 4, l.RawLength(1))
	if i > last {
		l.PushString("")
		return 1
	}
	r.work(l, int64(last-i+1))
	size := 0
	for k := i; k <= last; k++ {
		l.RawGetInt(1, k)
		s, ok := "", false
		if t := l.TypeOf(-1); t == lua.TypeString || t == lua.TypeNumber {
			s, ok = l.ToString(-1)
		}
		if !ok {
			lua.Errorf(l, "invalid value (a %s) at index %d in table for 'concat'", lua.TypeNameOf(l, -1), k)
		}
		size += len(s)
		if k < last {
			size += len(sep)
		}
		l.Pop(1)
		if int64(size) > r.opts.MaxMemoryBytes {
			r.trip(l, limitMemory, store.KindTooLarge, "table.concat would build a string larger than the memory limit")
		}
	}
	r.charge(l, chargeString+int64(size))
	r.work(l, int64(size/64))
	var b strings.Builder
	b.Grow(size)
	for k := i; k <= last; k++ {
		l.RawGetInt(1, k)
		s, _ := l.ToString(-1)
		b.WriteString(s)
		if k < last {
			b.WriteString(sep)
		}
		l.Pop(1)
	}
	l.PushString(b.String())
	return 1
}
