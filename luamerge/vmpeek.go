package luamerge

import (
	"fmt"
	"reflect"
	"unsafe"

	lua "github.com/Shopify/go-lua"
)

// go-lua has no allocator hook, and the one operator that can multiply memory with no library
// call in between -- string concatenation, `..` -- is executed inside the VM. To charge an
// instruction's allocation before it happens, the count hook (which go-lua calls before every
// instruction when the count is 1) reads the instruction about to run and the registers it
// uses. go-lua exposes neither, so this file reads them from its call-frame record through
// offsets that are looked up by field name and type with reflection once, at start-up: if a
// go-lua version changes the layout, New fails with layoutErr instead of reading garbage.
//
// Only reads happen here; nothing in go-lua's state is ever written.

type vmLayout struct {
	ciPrevious, ciFunction, ciTop, ciLua uintptr // in callInfo
	lciFrame, lciSavedPC, lciCode        uintptr // in luaCallInfo
}

var (
	layout    vmLayout
	layoutErr error
)

func init() { layout, layoutErr = findLayout() }

func findLayout() (vmLayout, error) {
	var lay vmLayout
	ci := reflect.TypeOf(lua.Frame(nil))
	if ci.Kind() != reflect.Pointer || ci.Elem().Kind() != reflect.Struct {
		return lay, fmt.Errorf("lua.Frame is not a pointer to a struct")
	}
	ciT := ci.Elem()
	field := func(t reflect.Type, name string, check func(reflect.Type) bool) (uintptr, error) {
		f, ok := t.FieldByName(name)
		if !ok || len(f.Index) != 1 || !check(f.Type) {
			return 0, fmt.Errorf("go-lua %s.%s is missing or has an unexpected type", t.Name(), name)
		}
		return f.Offset, nil
	}
	isInt := func(t reflect.Type) bool { return t.Kind() == reflect.Int }
	var err error
	if lay.ciPrevious, err = field(ciT, "previous", func(t reflect.Type) bool { return t == reflect.PointerTo(ciT) }); err != nil {
		return lay, err
	}
	if lay.ciFunction, err = field(ciT, "function", isInt); err != nil {
		return lay, err
	}
	if lay.ciTop, err = field(ciT, "top", isInt); err != nil {
		return lay, err
	}
	var lciT reflect.Type
	if lay.ciLua, err = field(ciT, "luaCallInfo", func(t reflect.Type) bool {
		lciT = t
		return t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct
	}); err != nil {
		return lay, err
	}
	lciT = lciT.Elem()
	if lay.lciFrame, err = field(lciT, "frame", func(t reflect.Type) bool {
		return t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Interface && t.Elem().NumMethod() == 0
	}); err != nil {
		return lay, err
	}
	if lay.lciSavedPC, err = field(lciT, "savedPC", isInt); err != nil {
		return lay, err
	}
	if lay.lciCode, err = field(lciT, "code", func(t reflect.Type) bool {
		return t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint32
	}); err != nil {
		return lay, err
	}
	return lay, nil
}

// luaFrame is a read-only view of the Lua function running at a hook.
type luaFrame struct {
	ci    unsafe.Pointer // the go-lua callInfo, identifies the call level while it lives
	frame []any          // registers, from the frame's base
	code  []uint32
	pc    int // index in code of the instruction about to run
	fn    int // stack slot of the running function
	base  int // stack slot of register 0
}

// currentFrame returns the frame of the running Lua function; ok is false when a Go function
// is running (hooks run only for Lua code, but be defensive).
func currentFrame(l *lua.State) (f luaFrame, ok bool) {
	fr, ok := lua.Stack(l, 0)
	if !ok {
		return f, false
	}
	ci := unsafe.Pointer(fr)
	lci := *(*unsafe.Pointer)(unsafe.Add(ci, layout.ciLua))
	if lci == nil {
		return f, false
	}
	f.ci = ci
	f.frame = *(*[]any)(unsafe.Add(lci, layout.lciFrame))
	f.code = *(*[]uint32)(unsafe.Add(lci, layout.lciCode))
	f.pc = *(*int)(unsafe.Add(lci, layout.lciSavedPC))
	f.fn = *(*int)(unsafe.Add(ci, layout.ciFunction))
	f.base = *(*int)(unsafe.Add(ci, layout.ciTop)) - len(f.frame) // go-lua keeps frame = stack[base:top]
	return f, f.pc >= 0 && f.pc < len(f.code)
}

// callDepth counts the call levels below ci.
func callDepth(ci unsafe.Pointer) int {
	n := 0
	for ci != nil {
		ci = *(*unsafe.Pointer)(unsafe.Add(ci, layout.ciPrevious))
		n++
	}
	return n
}

// Lua 5.2 instruction fields, as go-lua encodes them.
const (
	opNewTable = 11
	opSetTabUp = 8
	opSetTable = 10
	opConcat   = 22
	opCall     = 29
	opTailCall = 30
	opSetList  = 36
	opClosure  = 37
	opVarArg   = 38
)

func insOp(i uint32) int { return int(i & 0x3f) }
func insA(i uint32) int  { return int(i >> 6 & 0xff) }
func insB(i uint32) int  { return int(i >> 23 & 0x1ff) }
func insC(i uint32) int  { return int(i >> 14 & 0x1ff) }

// fb2int decodes the "floating point byte" of NEWTABLE's size hints.
func fb2int(x int) int {
	if x < 8 {
		return x
	}
	return ((x & 7) + 8) << (uint(x>>3) - 1)
}
