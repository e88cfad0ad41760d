// Package luamerge runs merge programs written in Lua: it is the standard store.Merger.
// Applications ship their record-combining rules with their requests, versioned with their own
// code, and the store runs them in its read → merge → conditional write → retry loop.
//
//	engine, err := luamerge.New(nil) // the documented default limits
//	svc, err := store.New(adapters, &store.Options{Merger: engine})
//	svc.Do(ctx, []store.Op{store.Merge(addr, program, incoming)}, store.WaitApplied)
//
// The Lua is Lua 5.2 as github.com/Shopify/go-lua implements it, in a sandbox.
//
// # What a program looks like
//
// A program is Lua source that returns a function of three arguments:
//
//	return function(current, incoming, context)
//	  if current == nil then return incoming end          -- no record yet: create it
//	  current.visits = (current.visits or 0) + incoming.visits
//	  current.updated = context.time
//	  return current
//	end
//
// current is the stored document as a table, or nil when there is no record; incoming is the
// operation's document; context holds store, namespace, dataset, key, key_type ("string",
// "int64", "bytes", "objectid"), time (when the store accepted the request, RFC 3339 in UTC,
// the same on every attempt, truncated to the date-time precision of the record's backend --
// milliseconds on MongoDB, see Date-times below) and attempt (1 on the first run). The key is a string for string
// keys, the raw bytes for bytes keys, 24 hex digits for ObjectIDs and a number for int64 keys
// (an exact number beyond ±2^53, see below).
//
// The function's return value decides what happens to the record:
//
//   - a table: the new document, which must encode as a JSON object. It creates the record
//     when there was none.
//   - merge.DELETE: delete the record (the outcome is Absent when there was none).
//   - merge.UNCHANGED: leave the record as it is (Unchanged; Absent when there was none).
//   - anything else, nil included, fails the operation: a missing return is a bug, not a
//     decision.
//
// A failing program -- one that does not compile, raises an error, returns something else or
// trips a limit -- fails its operation with store.ErrInvalid (store.ErrTooLarge for the size
// and memory limits) and leaves the record untouched. The error is a *ProgramError naming the
// record and the program line, never document contents.
//
// # A program may run more than once: it must be pure
//
// The store runs a merge again when another writer changed the record between its read and its
// conditional write, and a queue may deliver an operation again after a crash. A program must
// therefore be a pure function of (current, incoming, context): no effects, no randomness
// (math.random is absent), no clock other than context.time. Every run gets a fresh VM, so
// nothing a run leaves in globals reaches the next one.
//
// # Compiled programs
//
// Programs are compiled once and cached by the SHA-256 of their source (Options
// MaxCachedPrograms, least recently used first out); a request that repeats one program for
// many operations costs one compilation. The compiled program is loaded once into a template;
// each run's fresh VM gets a copy of it: a new closure over a new copy of the function
// prototypes, sharing only what go-lua never writes after compiling (instructions, constants,
// debug information) -- go-lua writes a closure cache into a prototype while it runs, so the
// prototypes themselves are never shared, and nothing of one run reaches another. A fresh VM
// is otherwise nearly free: its global table starts empty and materializes a library or base
// function on first use, and the strings and stateless Go functions every VM gets alike are
// boxed once (the bridge's metatable, below, is a new table of them in every VM). The Go maps
// in which a run keeps its bookkeeping (which tables are arrays, the key order of objects)
// come from a pool, empty: they keep only their capacity from an earlier run, no value.
//
// # The sandbox
//
// A program sees the base functions assert, error, ipairs, next, pairs, pcall, rawequal,
// rawlen, rawget, rawset, select, setmetatable, getmetatable (tables only), tonumber,
// tostring, type and xpcall; the libraries string, table and math; and json and merge below.
// Naming load, loadstring, loadfile, dofile, require, module, package, collectgarbage, print,
// os, io, debug, coroutine, bit32, getfenv, setfenv, newproxy or unpack raises an error that
// says it is not available; so do math.random and math.randomseed (a merge must be pure).
// go-lua has no pattern engine: string.gsub, gmatch and match raise an error, as does
// string.dump, and string.find searches plainly (a pattern character needs plain = true).
// string.reverse reverses characters (go-lua's), not bytes. xpcall is this package's own
// (go-lua's calls the wrong function on an error): its message handler runs after the
// failing call has unwound, so it gets the message but cannot inspect the failing frame,
// which the sandbox has no way to do anyway. getmetatable refuses
// everything but tables, so the string metatable cannot be reached or changed; the metatable
// of json values is locked (__metatable). go-lua has no coroutines. Recursion through Go
// functions (pcall, metamethods) is stopped by go-lua at 200 nested calls with an ordinary
// error, so no program reaches the Go stack's limit.
//
// A limit, once tripped, is sticky: every following instruction and library call raises it
// again, so pcall cannot swallow it, and the run fails even if the program caught it and
// returned. It unwinds as a Go error rather than a Lua error, so no xpcall message handler
// runs: go-lua would run such a handler, and the program after it, with hooks disabled.
//
// # Limits
//
// Every limit is per run and configurable in Options; zero means the default, a negative value
// is refused.
//
//   - MaxInstructions, default 10 million: Lua instructions, counted exactly by a count hook
//     that go-lua calls before every instruction. Library functions that loop count their work
//     too (table.insert and remove one unit per element moved, table.concat and unpack per
//     element, table.sort n·log n, string functions one unit per 64 bytes).
//   - Timeout, default 2s, plus the caller's context: both are observed before every
//     instruction (a timer and the context set a flag the hook reads). A canceled context
//     returns the context's error; a timeout is a ProgramError.
//   - MaxInputBytes, default 8 MiB: the JSON size of current and of incoming, each.
//   - MaxOutputBytes, default 8 MiB: the JSON size of the result.
//   - MaxDepth, default 64: nesting of objects and arrays in documents, in and out.
//   - MaxMemoryBytes, default 64 MiB: see Memory.
//   - MaxCallDepth, default 200: nested calls. go-lua runs Lua-to-Lua calls without Go
//     recursion, and bounds Go-level nesting (metamethods, pcall) at 200 itself, so deep
//     recursion never reaches the Go stack.
//   - MaxProgramBytes, default 256 KiB: the source.
//
// # Memory
//
// go-lua allocates through the Go runtime and has no allocator hook, so a run keeps an upper
// bound of what its VM holds and stops the program before the bound would pass the budget:
//
//   - The count hook looks at the instruction about to run and charges what it can allocate:
//     a concatenation the sum of its operands' lengths, a table constructor its size hints, a
//     table store one entry, SETLIST its values, a closure, a call that goes deeper than any
//     before it a stack frame, a vararg expansion its values. Reading the instruction and its
//     registers needs go-lua's private call-frame record: the offsets are found by field name
//     and type with reflection at start-up, and New fails if a go-lua version changes them.
//   - Every library function that allocates charges its result before making it: string.rep,
//     format, upper, lower, reverse, byte, char, table.concat, insert, pack, unpack, rawset,
//     and the json constructors. string.rep and table.concat are this package's own, so that
//     they allocate once and not quadratically as go-lua's do.
//   - The JSON bridge charges the documents it decodes.
//   - When a charge would pass the budget, the VM's object graph is measured (reflection over
//     everything reachable from the go-lua State: stack, registry, tables, strings, closures,
//     prototypes; and the bridge's records of arrays and key order), which drops garbage from
//     the bound. The run stops, with KindTooLarge, when the charge still does not fit, or when
//     the measured size is above seven eighths of the budget: walking again and again for ever
//     smaller room would cost more than the program is worth.
//
// What is bounded: everything a program can keep reachable -- strings, tables, closures, the
// Lua stack -- at the charges' sizes, which overestimate go-lua's Go representation (16-byte
// interface slots, map entries with their overhead, boxed numbers). In the tests, bombs of
// every kind (doubling and wide concatenation, string.rep, table.concat, string.format,
// __tostring, growing arrays and hashes, nested tables, constructors, unpack into varargs)
// stop with the Go runtime having allocated less than five times a 16 MiB budget in all,
// garbage included (about three at worst in practice). What is not bounded by it: garbage the program drops stays in the Go heap
// until the Go collector runs (a loop that builds and drops strings allocates far more over
// time than it holds; the instruction budget bounds that churn); go-lua's transient buffers
// while one operation runs (a slice or map growing to twice its size) and the box of every
// number an arithmetic instruction makes; the walk's own scratch set, one entry per table,
// closure and long string; the result document's bytes, which MaxOutputBytes bounds instead.
//
// # The JSON bridge
//
// Documents cross into Lua and back without loss:
//
//   - Objects are tables with string keys; arrays are sequences (keys 1..n). The bridge
//     remembers which decoded tables were arrays, so an empty array comes back as [] and an
//     empty object as {}. A table the program builds is an object when it is empty or has
//     string keys, an array when its keys are exactly 1..n; json.array(t) and json.object(t)
//     mark a table (or a new one) explicitly, json.isarray(t) asks. Mixed keys, holes, keys of
//     other types and cycles fail the run.
//   - JSON null is json.null, a unique value distinct from nil: a member set to json.null is
//     written as null, a member set to nil is absent. json.isnull(v) asks.
//   - Numbers: a number float64 holds exactly enough to write the same value back, and whose
//     magnitude is at most 2^53, is a Lua number. One the program leaves in its place -- the
//     member or element it was decoded into still holds the same float64, -0 and 0 being
//     different -- is written back with its own text, so 1.0 stays 1.0, -0.0 stays -0.0, 1e3
//     stays 1e3 and 1.50 stays 1.50; that keeps its type on a backend that types numbers by
//     their text (MongoDB stores 1.0 as a double, 1 as an int32) and its text where the text
//     is what is stored (memstore, the search engines' _source). A number the program
//     computes, builds or moves elsewhere is written in shortest form (1.5, 100, 1e-07), also
//     when it came from a decoded one. Any other number -- an integer beyond ±2^53, or a
//     decimal with more precision than float64 -- is an exact number: a userdata that keeps
//     the literal and is written back bit for bit, wherever the program puts it. Arithmetic on it raises an error instead of rounding; it
//     compares exactly (==, <, <=) with exact and plain numbers; tostring gives the literal,
//     and .. concatenates it. json.number("12345678901234567890") makes one.
//   - Key order: members of a decoded object are written in their original order, members the
//     program added after them in sorted order, so output is deterministic although Lua
//     tables have none.
//   - Strings must be valid UTF-8 on the way out.
//   - Date-times: a program sees the marked RFC 3339 values of its inputs as plain strings.
//     The result marks a pointer when the same pointer was marked in current or incoming and
//     the result holds the same string there -- an untouched or copied-in-place date-time
//     keeps its mark. A date-time moved to another place, or a new one, is marked only when
//     the program wraps it: json.datetime(context.time) is written as the string and marked.
//     What a backend keeps of a marked date-time: memstore the string as given; searchstore
//     the string, exactly, in _source (a date field of the index mapping indexes it to the
//     millisecond, a date_nanos field to the nanosecond), and it reads back unmarked;
//     mongostore a BSON datetime, milliseconds in UTC, and it refuses a finer one. context.time
//     is truncated to the record's backend precision (store.MergeContext.Time,
//     the adapter's time precision), so json.datetime(context.time) is stored exactly on every
//     backend; a finer date-time built otherwise (json.datetime of a string with
//     microseconds) fails the merge's write on MongoDB.
//
// Tables are read raw when they are written back: metatables (__index, __pairs, ...) never
// run, and the program cannot make the bridge execute code.
package luamerge
