package luamerge

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	lua "github.com/Shopify/go-lua"

	"github.com/tributary-dev/tributary/store"
)

// Why an outside event stopped a run.
const (
	stopNone int32 = iota
	stopTimeout
	stopCanceled
)

// run is the state of one execution of a program: its VM, its limits and what it used.
type run struct {
	l    *lua.State
	opts *Options

	steps    int64 // instructions and library work so far
	stop     atomic.Int32
	mem      int64 // upper bound of the bytes the VM holds (see memory.go)
	maxDepth int   // deepest call level charged for so far
	// depthBias is added to a frame's call level: 1 while the merge function runs, which
	// execute calls from the bottom of the stack (see there), 0 before.
	depthBias int
	depths    map[unsafe.Pointer]int
	seen      map[uintptr]struct{} // the memory walk's scratch space

	// tripped is the limit that stopped the run. It is sticky: once set, every later
	// instruction and library call raises it again, so pcall cannot swallow it.
	tripped *ProgramError
	// failure is a failure of the bridge (a document that does not decode, a program that does
	// not return a function); it travels as a Lua error to the top.
	failure *ProgramError

	// JSON bridge state: which tables are arrays, the key order of decoded objects, and the
	// decoded text of numbers whose text is not the one the encoder writes (see numberSlot).
	arrays   map[any]struct{}
	order    map[any][]string
	literals map[numberSlot]numberText

	scratch *scratch // where the maps above come from; release returns them

	// keepProgram keeps the merge function in the registry (regProgram) for the benchmark that
	// calls it again in the same VM; Merge never does.
	keepProgram bool
}

// scratch is the Go maps a run keeps its bookkeeping in, pooled across runs so that a fresh VM
// does not also pay for growing them. Only empty maps go back to the pool: they hold no Lua value
// of an earlier run (clear drops every entry), only their capacity. Maps a large run grew are
// dropped rather than kept.
type scratch struct {
	arrays   map[any]struct{}
	order    map[any][]string
	literals map[numberSlot]numberText
	depths   map[unsafe.Pointer]int
}

// scratchKeep is the most entries a map may have held to go back to the pool.
const scratchKeep = 256

var scratchPool = sync.Pool{New: func() any {
	return &scratch{arrays: map[any]struct{}{}, order: map[any][]string{}, literals: map[numberSlot]numberText{},
		depths: map[unsafe.Pointer]int{}}
}}

// release empties the run's maps and returns them to the pool. The run and its VM are not used
// again.
func (r *run) release() {
	s := r.scratch
	if s == nil {
		return
	}
	if len(r.arrays) > scratchKeep || len(r.order) > scratchKeep || len(r.literals) > scratchKeep || len(r.depths) > scratchKeep {
		s = nil
	}
	r.scratch, r.arrays, r.order, r.literals, r.depths = nil, nil, nil, nil, nil
	if s == nil {
		return
	}
	clear(s.arrays)
	clear(s.order)
	clear(s.literals)
	clear(s.depths)
	scratchPool.Put(s)
}

// The registry slots of the bridge's values, past go-lua's own (main thread, globals).
const (
	regNull = 3 + iota
	regValueMeta
	regDelete
	regUnchanged
	regStringLib
	regProgram // the merge function, which the reused-VM benchmark calls again
)

// hook runs before every Lua instruction (count 1). It counts the instruction, observes the
// timer and the caller's context, and charges the memory the instruction is about to allocate.
func (r *run) hook(l *lua.State, _ lua.Debug) {
	if r.tripped != nil {
		r.raise(l)
	}
	r.steps++
	if r.steps > r.opts.MaxInstructions {
		r.trip(l, limitInstructions, store.KindInvalid, "the program ran more than "+strconv.FormatInt(r.opts.MaxInstructions, 10)+" instructions")
	}
	switch r.stop.Load() {
	case stopTimeout:
		r.trip(l, limitTime, store.KindInvalid, "the program ran longer than "+r.opts.Timeout.String())
	case stopCanceled:
		r.trip(l, limitCanceled, store.KindCanceled, "the caller's context ended")
	}
	f, ok := currentFrame(l)
	if !ok {
		return
	}
	ins := f.code[f.pc]
	switch insOp(ins) {
	case opConcat:
		n := int64(chargeString)
		for _, v := range f.frame[insB(ins) : insC(ins)+1] {
			switch v := v.(type) {
			case string:
				n += int64(len(v))
			case float64:
				n += chargeNumber
			}
		}
		r.charge(l, n)
	case opNewTable:
		r.charge(l, chargeTable+int64(fb2int(insB(ins)))*chargeSlot+int64(fb2int(insC(ins)))*chargeEntry)
	case opSetTable, opSetTabUp:
		r.charge(l, chargeEntry)
	case opSetList:
		n := insB(ins)
		if n == 0 { // up to the stack top, which the call or vararg before it set
			n = (l.Top() + f.fn + 1) - (f.base + insA(ins) + 1)
		}
		if n > 0 {
			r.charge(l, int64(n)*chargeSlot)
		}
	case opClosure:
		r.charge(l, chargeClosure)
	case opVarArg:
		// The extra arguments sit between the function's slot and its base; at most that
		// many values are copied.
		r.charge(l, int64(f.base-f.fn)*chargeSlot)
	case opCall:
		d := r.depth(f.ci) + r.depthBias + 1
		if d > r.opts.MaxCallDepth+1 { // +1: the chunk itself runs at level 1
			r.trip(l, limitCallDepth, store.KindInvalid, "calls nested deeper than "+strconv.Itoa(r.opts.MaxCallDepth))
		}
		if d > r.maxDepth {
			// The stack only grows when a call goes deeper than any before it. (A tail call
			// replaces its caller's frame: it neither deepens nor grows anything.)
			r.maxDepth = d
			r.charge(l, chargeFrame)
		}
	}
}

// depth returns the call level of the frame record ci. go-lua reuses one record per level, so
// the answer is cached per record.
func (r *run) depth(ci unsafe.Pointer) int {
	if d, ok := r.depths[ci]; ok {
		return d
	}
	if r.depths == nil {
		r.depths = make(map[unsafe.Pointer]int)
	}
	d := callDepth(ci)
	r.depths[ci] = d
	return d
}

// charge accounts n bytes about to be allocated, walking the VM when the bound would pass the
// budget and stopping the run when the walk does not make room. A walk must free at least an
// eighth of the budget: a program whose live memory stays just under the budget would
// otherwise be walked again and again for ever smaller room, so it is stopped once its
// measured memory passes seven eighths of the budget and it asks for more.
func (r *run) charge(l *lua.State, n int64) {
	budget := r.opts.MaxMemoryBytes
	if r.mem+n <= budget {
		r.mem += n
		return
	}
	if r.seen == nil {
		r.seen = make(map[uintptr]struct{}, 256)
	}
	r.mem = measureVM(r.l, budget, r.seen, r.arrays, r.order, r.literals)
	if r.mem+n > budget || r.mem > budget-budget/8 {
		r.trip(l, limitMemory, store.KindTooLarge, "the program needed more than "+strconv.FormatInt(r.opts.MaxMemoryBytes, 10)+" bytes of memory")
	}
	r.mem += n
}

// work counts n units of library work (elements moved, bytes copied / 64) against the
// instruction budget, so that a Go loop inside one call is bounded like Lua code is.
func (r *run) work(l *lua.State, n int64) {
	if r.tripped != nil {
		r.raise(l)
	}
	r.steps += n
	if r.steps > r.opts.MaxInstructions {
		r.trip(l, limitInstructions, store.KindInvalid, "the program ran more than "+strconv.FormatInt(r.opts.MaxInstructions, 10)+" instructions")
	}
}

// trip records a limit and raises it as a Lua error at the current line.
func (r *run) trip(l *lua.State, limit string, kind store.ErrorKind, msg string) {
	if r.tripped == nil {
		r.tripped = &ProgramError{Kind: kind, Limit: limit, Reason: msg, Line: currentLine(l)}
	}
	r.raise(l)
}

// raise unwinds to the nearest protected call with the tripped limit. It panics with a Go
// error instead of raising a Lua error: go-lua calls an xpcall message handler for Lua errors,
// and when the error comes from inside the count hook that handler runs -- and the program
// continues -- with hooks left disabled, that is without limits. A Go error panic is caught by
// the same protected calls (pcall, xpcall, the run's own) without running any handler, and
// the protected call re-enables hooks; the limit is sticky, so the next instruction raises
// again until the run's own protected call is reached.
func (r *run) raise(l *lua.State) {
	l.PushString(r.tripped.Reason)
	panic(errLimit)
}

var errLimit = errors.New("luamerge: a limit stopped the program")

// currentLine returns the line of the innermost running Lua function, 0 when none runs.
func currentLine(l *lua.State) int {
	for level := 0; ; level++ {
		f, ok := lua.Stack(l, level)
		if !ok {
			return 0
		}
		ci := unsafe.Pointer(f)
		lci := *(*unsafe.Pointer)(unsafe.Add(ci, layout.ciLua))
		if lci == nil {
			continue // a Go function: its Lua caller has the line
		}
		if *(*int)(unsafe.Add(lci, layout.lciSavedPC)) == 0 {
			// Before the function's first instruction (or a jump back to it) go-lua's Info
			// would index the line table at -1; read the first instruction's line instead.
			return firstLine(l, f)
		}
		if d, ok := lua.Info(l, "l", f); ok && d.CurrentLine > 0 {
			return d.CurrentLine
		}
	}
}

// firstLine returns the line of a Lua function's first instruction.
func firstLine(l *lua.State, f lua.Frame) int {
	if _, ok := lua.Info(l, "f", f); !ok {
		return 0
	}
	fn := reflect.ValueOf(l.ToValue(-1))
	l.Pop(1)
	if fn.Kind() != reflect.Pointer || fn.Elem().Kind() != reflect.Struct {
		return 0
	}
	proto := fn.Elem().FieldByName("prototype")
	if proto.Kind() != reflect.Pointer || proto.IsNil() {
		return 0
	}
	lines := proto.Elem().FieldByName("lineInfo")
	if lines.Kind() != reflect.Slice || lines.Len() == 0 {
		return 0
	}
	return int(lines.Index(0).Int())
}

// lineOf extracts the line number go-lua puts in front of messages ("merge:12: ...") and
// returns the message without that prefix.
func lineOf(msg string) (int, string) {
	rest, ok := strings.CutPrefix(msg, chunkName+":")
	if !ok {
		return 0, msg
	}
	i := strings.IndexByte(rest, ':')
	if i <= 0 {
		return 0, msg
	}
	n, err := strconv.Atoi(rest[:i])
	if err != nil {
		return 0, msg
	}
	return n, strings.TrimPrefix(rest[i+1:], " ")
}
