package luamerge

import (
	"bytes"
	"container/list"
	"context"
	"crypto/sha256"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	lua "github.com/Shopify/go-lua"
	"github.com/tributary-dev/tributary/store"
)

// chunkName is how go-lua names the program in messages ("merge:12: ...").
const chunkName = "merge"

// Engine runs Lua merge programs; it implements store.Merger. It is safe for concurrent use:
// every run has its own VM.
type Engine struct {
	opts Options

	mu    sync.Mutex
	cache map[[sha256.Size]byte]*list.Element // of *program
	lru   list.List                           // most recently used first

	// last is the program found last: a caller that repeats a program finds it by comparing
	// the source, without hashing it or taking the lock.
	last atomic.Pointer[program]
}

var _ store.Merger = (*Engine)(nil)

// program is a compiled program, cached by the SHA-256 of its source.
type program struct {
	sum      [sha256.Size]byte
	source   string // a copy of the source when it is short (fastSource), for Engine.last
	bytecode []byte
	tmpl     *template     // the program loaded once, copied into every run (see proto.go)
	baseline int64         // bytes of a fresh sandbox VM with the program loaded
	err      *ProgramError // a program that does not compile is cached too
}

// New returns an Engine with the given limits (nil: the defaults).
func New(opts *Options) (*Engine, error) {
	if layoutErr != nil {
		return nil, fmt.Errorf("luamerge: this go-lua version is not supported: %w", layoutErr)
	}
	if protoLayErr != nil {
		return nil, fmt.Errorf("luamerge: this go-lua version is not supported: %w", protoLayErr)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Engine{opts: o, cache: make(map[[sha256.Size]byte]*list.Element)}, nil
}

// Compile checks that source compiles, caching the result. The error, if any, is a
// *store.Error wrapping a *ProgramError with the line of the syntax error.
func (e *Engine) Compile(source string) error {
	if p := e.program(source); p.err != nil {
		pe := *p.err
		return pe.wrap(store.Address{})
	}
	return nil
}

// fastSource is the longest source Engine.last finds by comparison; a program keeps a copy of
// a source this short.
const fastSource = 4 << 10

func (e *Engine) program(source string) *program {
	if p := e.last.Load(); p != nil && p.source != "" && p.source == source {
		return p
	}
	p := e.lookup(source)
	if p.source != "" {
		e.last.Store(p)
	}
	return p
}

func (e *Engine) lookup(source string) *program {
	// Hash the source in place: Sum256 only reads it, and a copy of a large program per run
	// would be garbage.
	sum := sha256.Sum256(unsafe.Slice(unsafe.StringData(source), len(source)))
	e.mu.Lock()
	if el, ok := e.cache[sum]; ok {
		e.lru.MoveToFront(el)
		e.mu.Unlock()
		return el.Value.(*program)
	}
	e.mu.Unlock()

	// Compile outside the lock; two callers may compile the same program at once, and the
	// second result simply replaces the first.
	p := &program{sum: sum}
	if len(source) <= fastSource {
		p.source = strings.Clone(source)
	}
	p.bytecode, p.err = compile(source, e.opts.MaxProgramBytes)
	if p.err == nil {
		var err error
		if p.tmpl, err = loadTemplate(p.bytecode); err != nil {
			p.err = invalid("cannot be loaded: " + err.Error())
		} else {
			p.baseline = e.baseline(p)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if el, ok := e.cache[sum]; ok {
		e.lru.MoveToFront(el)
		return el.Value.(*program)
	}
	e.cache[sum] = e.lru.PushFront(p)
	for e.lru.Len() > e.opts.MaxCachedPrograms {
		old := e.lru.Back()
		e.lru.Remove(old)
		delete(e.cache, old.Value.(*program).sum)
	}
	return p
}

// compile parses source and returns its bytecode. The bytecode is loaded once into a template
// (see proto.go) that every run copies: what a run executes is exactly what loading the
// bytecode into its VM would give.
func compile(source string, limit int) ([]byte, *ProgramError) {
	if len(source) > limit {
		return nil, invalid("the program is " + strconv.Itoa(len(source)) + " bytes, more than the limit of " + strconv.Itoa(limit))
	}
	l := lua.NewState()
	// Source only: a binary chunk would bypass the parser's checks.
	if err := l.Load(strings.NewReader(source), "="+chunkName, "t"); err != nil {
		msg, _ := l.ToString(-1)
		if msg == "" {
			msg = err.Error()
		}
		line, reason := lineOf(msg)
		return nil, &ProgramError{Kind: store.KindInvalid, Line: line, Reason: "does not compile: " + cut(reason, 256)}
	}
	var buf bytes.Buffer
	if err := l.Dump(&buf); err != nil {
		return nil, invalid("cannot be compiled to bytecode: " + err.Error())
	}
	return buf.Bytes(), nil
}

// baseline measures what a run holds before the program starts: the sandbox and the loaded
// program. Every run starts its memory bound there.
func (e *Engine) baseline(p *program) int64 {
	r := e.newRun()
	defer r.release()
	r.setup()
	p.tmpl.push(r.l)
	return measureVM(r.l, math.MaxInt64, make(map[uintptr]struct{}, 256))
}

// newRun returns a run with a fresh VM and, from scratchPool, the Go maps of its bookkeeping;
// release hands them back.
func (e *Engine) newRun() *run {
	s := scratchPool.Get().(*scratch)
	return &run{l: lua.NewState(), opts: &e.opts, scratch: s, arrays: s.arrays, order: s.order, depths: s.depths}
}

// Merge runs call.Program on the call's documents in a fresh VM. See the package
// documentation for what a program looks like, the sandbox, the limits and the JSON bridge.
func (e *Engine) Merge(ctx context.Context, call *store.MergeCall) (res store.MergeResult, err error) {
	if err := ctx.Err(); err != nil {
		return res, err
	}
	addr := call.Context.Addr
	for _, in := range []struct {
		what string
		doc  *store.Document
	}{{"current document", call.Current}, {"incoming document", &call.Incoming}} {
		if in.doc != nil && len(in.doc.JSON) > e.opts.MaxInputBytes {
			pe := &ProgramError{Kind: store.KindTooLarge, Limit: limitInputSize,
				Reason: fmt.Sprintf("the %s is %d bytes, more than the limit of %d", in.what, len(in.doc.JSON), e.opts.MaxInputBytes)}
			return res, pe.wrap(addr)
		}
	}
	p := e.program(call.Program)
	if p.err != nil {
		pe := *p.err
		return res, pe.wrap(addr)
	}

	r := e.newRun()
	r.mem = p.baseline
	defer r.release()
	defer func() {
		// go-lua panics with non-error values on some internal failures; never let one take
		// the process down. The VM is discarded anyway.
		if v := recover(); v != nil {
			res, err = store.MergeResult{}, (&ProgramError{Kind: store.KindInvalid, Reason: fmt.Sprintf("the Lua VM failed: %v", v)}).wrap(addr)
		}
	}()
	r.setup()
	return r.execute(ctx, call, p, true)
}

// execute runs the program on call in r's VM; load says whether the program must be loaded
// first (always, except in the benchmark that measures what a fresh VM costs).
func (r *run) execute(ctx context.Context, call *store.MergeCall, p *program, load bool) (store.MergeResult, error) {
	addr := call.Context.Addr
	timer := time.AfterFunc(r.opts.Timeout, func() { r.stop.CompareAndSwap(stopNone, stopTimeout) })
	defer timer.Stop()
	defer context.AfterFunc(ctx, func() { r.stop.CompareAndSwap(stopNone, stopCanceled) })()
	lua.SetDebugHook(r.l, r.hook, lua.MaskCount, 1)

	var in inputTimes
	r.depthBias = 0
	r.l.PushGoFunction(r.main(call, p, &in, load))
	callErr := r.l.ProtectedCall(0, 4, 0)
	if callErr == nil && r.tripped == nil {
		// The merge function and its arguments are at the bottom of the stack; calling it from
		// there rather than from inside main keeps main's slot from under its frame, which is
		// often what lets a fresh VM's stack (40 slots) do without growing. Its frames count one
		// level deeper, as if main were still below them, so MaxCallDepth means what it did.
		r.depthBias = 1
		callErr = r.l.ProtectedCall(3, 1, 0)
	}
	lua.SetDebugHook(r.l, nil, 0, 0)
	if pe := r.failed(callErr); pe != nil {
		r.l.SetTop(0)
		if pe.Limit == limitCanceled && ctx.Err() != nil {
			return store.MergeResult{}, ctx.Err()
		}
		return store.MergeResult{}, pe.wrap(addr)
	}
	res, pe := r.result(call, &in)
	r.l.SetTop(0)
	if pe != nil {
		return store.MergeResult{}, pe.wrap(addr)
	}
	return res, nil
}

// inputTimes are the marked date-times of the inputs, read before the program could change
// them.
type inputTimes []struct{ pointer, value string }

// main is the protected body of a run's first part: it loads the program and builds the
// arguments, and returns the merge function and them (execute calls it). Everything that can
// fail runs protected, so failures become Lua errors that ProtectedCall catches.
func (r *run) main(call *store.MergeCall, p *program, times *inputTimes, load bool) lua.Function {
	return func(l *lua.State) int {
		if load {
			p.tmpl.push(l)
			l.Call(0, 1)
			if !l.IsFunction(-1) {
				r.fail(l, invalid("must return a function(current, incoming, context); it returned "+article(lua.TypeNameOf(l, -1))))
			}
			if r.keepProgram {
				l.PushValue(-1)
				l.RawSetInt(lua.RegistryIndex, regProgram)
			}
		} else {
			l.RawGetInt(lua.RegistryIndex, regProgram)
		}
		if call.Current == nil {
			l.PushNil()
		} else if pe := r.pushDocument(l, call.Current.JSON, "current document"); pe != nil {
			r.fail(l, pe)
		}
		if pe := r.pushDocument(l, call.Incoming.JSON, "incoming document"); pe != nil {
			r.fail(l, pe)
		}
		for i, doc := range []*store.Document{call.Current, &call.Incoming} {
			if doc == nil {
				continue
			}
			for _, ptr := range doc.Times {
				if r.lookup(l, l.Top()-1+i, ptr) {
					if s, ok := l.ToString(-1); ok && l.TypeOf(-1) == lua.TypeString {
						*times = append(*times, struct{ pointer, value string }{ptr, s})
					}
					l.Pop(1)
				}
			}
		}
		r.pushContext(l, call.Context)
		return 4
	}
}

// fail stops the run with a failure of the bridge or the harness (not of a limit).
func (r *run) fail(l *lua.State, pe *ProgramError) {
	if r.failure == nil {
		r.failure = pe
	}
	l.PushString(pe.Reason)
	l.Error()
}

// failed turns the outcome of the protected call into a ProgramError, nil on success.
func (r *run) failed(callErr error) *ProgramError {
	switch {
	case r.tripped != nil:
		return r.tripped // also when the program caught it and returned: a limit is final
	case r.failure != nil:
		return r.failure
	case callErr == nil:
		return nil
	}
	msg, ok := r.l.ToString(-1)
	if !ok || r.l.TypeOf(-1) != lua.TypeString {
		msg = strings.TrimPrefix(callErr.Error(), "runtime error: ")
	}
	line, reason := lineOf(msg)
	return &ProgramError{Kind: store.KindInvalid, Line: line, Reason: "raised an error: " + cut(reason, 256)}
}

// result reads the merge function's return value, on top of the stack.
func (r *run) result(call *store.MergeCall, in *inputTimes) (store.MergeResult, *ProgramError) {
	l := r.l
	top := l.Top()
	switch l.TypeOf(top) {
	case lua.TypeNil, lua.TypeNone:
		return store.MergeResult{}, invalid("the merge function returned nothing: return a document, merge.DELETE or merge.UNCHANGED")
	case lua.TypeUserData:
		switch v := l.ToUserData(top).(type) {
		case resultMark:
			if v == "merge.DELETE" {
				return store.MergeResult{Action: store.MergeDelete}, nil
			}
			return store.MergeResult{Action: store.MergeUnchanged}, nil
		}
	case lua.TypeTable:
		e := encoder{r: r, l: l, buf: make([]byte, 0, 256+len(call.Incoming.JSON)+currentLen(call))}
		if pe := e.value(top); pe != nil {
			return store.MergeResult{}, pe
		}
		if e.buf[0] != '{' {
			return store.MergeResult{}, invalid("the merge function returned an array; a document is a JSON object")
		}
		times := e.times
		for _, t := range *in {
			if slices.Contains(times, t.pointer) || !r.lookup(l, top, t.pointer) {
				continue
			}
			if s, ok := l.ToString(-1); ok && l.TypeOf(-1) == lua.TypeString && s == t.value {
				times = append(times, t.pointer)
			}
			l.Pop(1)
		}
		return store.MergeResult{Action: store.MergeWrite, Doc: store.Document{JSON: e.buf, Times: times}}, nil
	}
	return store.MergeResult{}, invalid("the merge function returned " + article(lua.TypeNameOf(l, top)) +
		"; return a document, merge.DELETE or merge.UNCHANGED")
}

func currentLen(call *store.MergeCall) int {
	if call.Current == nil {
		return 0
	}
	return len(call.Current.JSON)
}

func article(typeName string) string {
	switch typeName {
	case "nil":
		return "nil"
	case "no value":
		return "nothing"
	}
	return "a " + typeName
}

// pushContext pushes the context table: store, namespace, dataset, key and key_type, time
// (RFC 3339, UTC) and attempt.
func (r *run) pushContext(l *lua.State, c store.MergeContext) {
	l.CreateTable(0, 7)
	for _, f := range [...]struct{ k, v string }{
		{"store", c.Addr.Store}, {"namespace", c.Addr.Namespace}, {"dataset", c.Addr.Dataset},
		{"key_type", c.Addr.Key.Kind().String()}, {"time", c.Time.UTC().Format(time.RFC3339Nano)},
	} {
		l.PushString(f.k)
		l.PushString(f.v)
		l.RawSet(-3)
	}
	switch k := c.Addr.Key; k.Kind() {
	case store.KindStringKey:
		l.PushString(k.StringValue())
	case store.KindInt64Key:
		if n := k.Int64Value(); n >= -twoTo53 && n <= twoTo53 {
			l.PushNumber(float64(n))
		} else {
			r.pushExact(l, strconv.FormatInt(n, 10))
		}
	case store.KindBytesKey:
		l.PushString(string(k.BytesValue()))
	case store.KindObjectIDKey:
		id := k.ObjectIDValue()
		l.PushString(fmt.Sprintf("%x", id[:]))
	default:
		l.PushNil()
	}
	l.SetField(-2, "key")
	l.PushString("attempt")
	l.PushInteger(c.Attempt)
	l.RawSet(-3)
}
