package luamerge

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"unsafe"

	lua "github.com/Shopify/go-lua"
)

// Sharing a compiled program between VMs. Loading bytecode (go-lua's undump, which reads every
// field through encoding/binary's reflection) is most of what a fresh VM costs, so a program
// is loaded once, into a template VM, and every run gets a copy of the result: a new closure
// over a new copy of the prototype tree.
//
// go-lua's prototypes are read-only while a program runs except for one field, the closure
// cache (prototype.cache, written whenever a function expression creates a closure). Each run's
// copy therefore duplicates the prototype structs themselves -- the tree, level by level, with
// empty caches -- and shares only what go-lua never writes after compilation: instructions,
// constants (numbers, strings, booleans), line and local-variable tables and upvalue
// descriptions. The copy's main function gets fresh upvalues, its _ENV the run's own global
// table, exactly as go-lua's Load does. Nothing of one run is reachable from another's VM.
//
// go-lua exports none of these types: like vmpeek.go, this file finds the fields it needs by
// name and type with reflection once, at start-up (New fails if a go-lua version changes them).
// It writes only into objects it allocates itself, never into a VM's state.

type protoLayout struct {
	closure    reflect.Type // luaClosure
	upValue    reflect.Type // upValue
	proto      reflect.Type // prototype
	clProto    uintptr      // luaClosure.prototype, a *prototype
	clUpValues uintptr      // luaClosure.upValues, a []*upValue
	uvHome     uintptr      // upValue.home, an interface{}
	pChildren  uintptr      // prototype.prototypes, a []prototype
	pCache     uintptr      // prototype.cache, a *luaClosure
	pUpValues  uintptr      // prototype.upValues, a slice of descriptions

	upSlice, protoSlice, descSlice reflect.Type // []*upValue, []prototype, []upValueDesc
}

var (
	protoLay    protoLayout
	protoLayErr error
)

func init() {
	protoLay, protoLayErr = findProtoLayout()
	if protoLayErr == nil {
		protoLayErr = sharedOK()
	}
	if protoLayErr == nil {
		tableLay, protoLayErr = findTableLayout()
	}
}

func findProtoLayout() (protoLayout, error) {
	var lay protoLayout
	l := lua.NewState()
	if err := l.Load(strings.NewReader("return function() end"), "=layout", "t"); err != nil {
		return lay, err
	}
	ct := reflect.TypeOf(l.ToValue(-1))
	if ct == nil || ct.Kind() != reflect.Pointer || ct.Elem().Kind() != reflect.Struct {
		return lay, fmt.Errorf("a loaded chunk is not a pointer to a closure struct")
	}
	lay.closure = ct.Elem()
	field := func(t reflect.Type, name string, check func(reflect.Type) bool) (uintptr, reflect.Type, error) {
		f, ok := t.FieldByName(name)
		if !ok || len(f.Index) != 1 || !check(f.Type) {
			return 0, nil, fmt.Errorf("go-lua %s.%s is missing or has an unexpected type", t.Name(), name)
		}
		return f.Offset, f.Type, nil
	}
	ptrToStruct := func(t reflect.Type) bool { return t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct }
	var err error
	var pt, ut reflect.Type
	if lay.clProto, pt, err = field(lay.closure, "prototype", ptrToStruct); err != nil {
		return lay, err
	}
	lay.proto = pt.Elem()
	if lay.clUpValues, ut, err = field(lay.closure, "upValues", func(t reflect.Type) bool {
		return t.Kind() == reflect.Slice && ptrToStruct(t.Elem())
	}); err != nil {
		return lay, err
	}
	lay.upValue = ut.Elem().Elem()
	if lay.uvHome, _, err = field(lay.upValue, "home", func(t reflect.Type) bool {
		return t.Kind() == reflect.Interface && t.NumMethod() == 0
	}); err != nil {
		return lay, err
	}
	if lay.upValue.NumField() != 1 {
		return lay, fmt.Errorf("go-lua upValue has fields other than home")
	}
	if lay.pChildren, _, err = field(lay.proto, "prototypes", func(t reflect.Type) bool {
		return t.Kind() == reflect.Slice && t.Elem() == lay.proto
	}); err != nil {
		return lay, err
	}
	if lay.pCache, _, err = field(lay.proto, "cache", func(t reflect.Type) bool { return t == ct }); err != nil {
		return lay, err
	}
	if lay.pUpValues, lay.descSlice, err = field(lay.proto, "upValues", func(t reflect.Type) bool { return t.Kind() == reflect.Slice }); err != nil {
		return lay, err
	}
	lay.upSlice, lay.protoSlice = ut, reflect.SliceOf(lay.proto)
	// The one field the VM writes must be the only pointer to a run's objects: every other
	// field is a value or a slice that compilation filled.
	for i := range lay.proto.NumField() {
		f := lay.proto.Field(i)
		switch f.Name {
		case "cache", "prototypes":
		default:
			if f.Type.Kind() == reflect.Pointer || f.Type.Kind() == reflect.Map || f.Type.Kind() == reflect.Interface {
				return lay, fmt.Errorf("go-lua prototype.%s is a reference this package does not know to be read-only", f.Name)
			}
		}
	}
	return lay, nil
}

// template is a program loaded once; push makes a run's copy.
type template struct {
	proto unsafe.Pointer // the main function's *prototype, never run
	keep  any            // the template closure, which keeps proto alive
	nUp   int            // the main function's upvalues (1: _ENV)
	// Array types that let push allocate the main function's prototype with its children in
	// one allocation, and its upvalue pointers in another.
	protos reflect.Type // [1+children]prototype
	ups    reflect.Type // [nUp]*upValue
}

// loadTemplate loads bytecode into a throwaway VM and keeps the main function's prototype.
func loadTemplate(bytecode []byte) (*template, error) {
	l := lua.NewState()
	if err := l.Load(bytes.NewReader(bytecode), "="+chunkName, "b"); err != nil {
		return nil, err
	}
	c := l.ToValue(-1)
	v := reflect.ValueOf(c)
	if !v.IsValid() || v.Type() != reflect.PointerTo(protoLay.closure) {
		return nil, fmt.Errorf("the loaded chunk is not a Lua function")
	}
	cp := v.UnsafePointer()
	t := &template{proto: *(*unsafe.Pointer)(unsafe.Add(cp, protoLay.clProto)), keep: c}
	t.nUp = reflect.NewAt(protoLay.upSlice, unsafe.Add(cp, protoLay.clUpValues)).Elem().Len()
	if n := reflect.NewAt(protoLay.descSlice, unsafe.Add(t.proto, protoLay.pUpValues)).Elem().Len(); n != t.nUp {
		return nil, fmt.Errorf("the loaded chunk has %d upvalues for %d descriptions", t.nUp, n)
	}
	children := reflect.NewAt(protoLay.protoSlice, unsafe.Add(t.proto, protoLay.pChildren)).Elem().Len()
	t.protos = reflect.ArrayOf(1+children, protoLay.proto)
	t.ups = reflect.ArrayOf(t.nUp, protoLay.upSlice.Elem())
	return t, nil
}

// sliceHeader is how Go lays out a slice; push points go-lua's slices at arrays it allocates.
type sliceHeader struct {
	data     unsafe.Pointer
	len, cap int
}

// push pushes a new closure of the program's main function onto l's stack, as Load would:
// its own prototype tree and upvalues, _ENV bound to l's global table.
func (t *template) push(l *lua.State) {
	lay := &protoLay
	// The main prototype and copies of its children, in one array: [main, child 1, ...].
	arr := reflect.New(t.protos).Elem()
	arr.Index(0).Set(reflect.NewAt(lay.proto, t.proto).Elem())
	p := arr.Index(0).Addr().UnsafePointer()
	*(*unsafe.Pointer)(unsafe.Add(p, lay.pCache)) = nil
	children := (*sliceHeader)(unsafe.Add(p, lay.pChildren))
	if n := children.len; n > 0 {
		reflect.Copy(arr.Slice(1, 1+n), reflect.NewAt(lay.protoSlice, unsafe.Pointer(children)).Elem())
		*children = sliceHeader{data: arr.Index(1).Addr().UnsafePointer(), len: n, cap: n}
		for i := range n {
			copyTree(arr.Index(1 + i).Addr().UnsafePointer())
		}
	}

	c := reflect.New(lay.closure)
	cp := c.UnsafePointer()
	*(*unsafe.Pointer)(unsafe.Add(cp, lay.clProto)) = p
	if t.nUp > 0 {
		ups := reflect.New(t.ups).Elem()
		for i := range t.nUp {
			ups.Index(i).Set(reflect.New(lay.upValue))
		}
		*(*sliceHeader)(unsafe.Add(cp, lay.clUpValues)) = sliceHeader{data: ups.Addr().UnsafePointer(), len: t.nUp, cap: t.nUp}
		l.PushGlobalTable()
		home := (*any)(unsafe.Add(ups.Index(0).UnsafePointer(), lay.uvHome))
		*home = l.ToValue(-1)
		l.Pop(1)
	}
	l.PushLightUserData(c.Interface()) // the dynamic type is go-lua's closure: a Lua function
}

// copyTree gives the prototype at p, a fresh copy, an empty closure cache and copies of its
// nested prototypes, recursively.
func copyTree(p unsafe.Pointer) {
	lay := &protoLay
	*(*unsafe.Pointer)(unsafe.Add(p, lay.pCache)) = nil
	children := reflect.NewAt(lay.protoSlice, unsafe.Add(p, lay.pChildren)).Elem()
	n := children.Len()
	if n == 0 {
		return
	}
	copied := reflect.MakeSlice(children.Type(), n, n)
	reflect.Copy(copied, children)
	children.Set(copied)
	for i := range n {
		copyTree(copied.Index(i).Addr().UnsafePointer())
	}
}

// Values boxed once for every VM. go-lua holds every Lua value as a Go interface, and pushing a
// string or a Go function boxes it anew (one allocation each). The strings and the Go
// functions without upvalues or state that every VM gets alike are boxed once and pushed as
// they are: both are immutable, so no VM can change what another sees.

// shared boxes a string once.
func shared(s string) any { return s }

// sharedFunction boxes a Go function without upvalues once, as go-lua would box it.
var sharedFunction = func() func(lua.Function) any {
	l := lua.NewState()
	return func(f lua.Function) any {
		l.PushGoFunction(f)
		v := l.ToValue(-1)
		l.Pop(1)
		return v
	}
}()

// pushShared pushes a value made by shared or sharedFunction. PushLightUserData pushes the
// interface as it is; go-lua tells a value's Lua type by its dynamic Go type, so a string is a
// string and a Go function a function (sharedOK checks both at start-up).
func pushShared(l *lua.State, v any) { l.PushLightUserData(v) }

// sharedOK checks that values pushed by pushShared are what they were boxed from.
func sharedOK() error {
	l := lua.NewState()
	pushShared(l, shared("x"))
	if s, ok := l.ToString(-1); !ok || s != "x" || l.TypeOf(-1) != lua.TypeString {
		return fmt.Errorf("a shared string is not a Lua string")
	}
	pushShared(l, sharedFunction(func(l *lua.State) int { l.PushString("called"); return 1 }))
	if !l.IsGoFunction(-1) {
		return fmt.Errorf("a shared Go function is not a Lua function")
	}
	l.Call(0, 1)
	if s, _ := l.ToString(-1); s != "called" {
		return fmt.Errorf("a shared Go function does not run")
	}
	return nil
}

// Tables built from a template. go-lua boxes a string key anew on every table store (its put
// converts the key back to an interface), so a table of many fixed entries costs an allocation
// per entry on top of its map. A tableTemplate holds such entries boxed once -- shared strings
// and stateless Go functions, immutable like the values above -- and push makes a new go-lua
// table of them: a new table struct and a new map, filled without boxing. The table is the
// run's own; only the immutable keys and values are shared.

type tableLayout struct {
	table reflect.Type // go-lua's table struct
	hash  uintptr      // table.hash, a map of interfaces to interfaces
	hashT reflect.Type
}

var tableLay tableLayout

func findTableLayout() (tableLayout, error) {
	var lay tableLayout
	l := lua.NewState()
	l.NewTable()
	t := reflect.TypeOf(l.ToValue(-1))
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return lay, fmt.Errorf("a table is not a pointer to a struct")
	}
	lay.table = t.Elem()
	f, ok := lay.table.FieldByName("hash")
	isAny := func(t reflect.Type) bool { return t.Kind() == reflect.Interface && t.NumMethod() == 0 }
	if !ok || len(f.Index) != 1 || f.Type.Kind() != reflect.Map || !isAny(f.Type.Key()) || !isAny(f.Type.Elem()) {
		return lay, fmt.Errorf("go-lua table.hash is missing or has an unexpected type")
	}
	lay.hash, lay.hashT = f.Offset, f.Type
	tableLay = lay
	// go-lua makes a table of a new struct with only the map set (newTableWithSize without an
	// array part): check that such a table built here behaves as one.
	tmpl := newTableTemplate(shared("k"), shared("v"))
	tmpl.push(l)
	l.Field(-1, "k")
	if s, ok := l.ToString(-1); !ok || s != "v" || l.TypeOf(-2) != lua.TypeTable {
		return lay, fmt.Errorf("a table built from a template is not a Lua table")
	}
	l.PushString("w")
	l.SetField(-3, "k2")
	l.Field(-2, "k2")
	if s, _ := l.ToString(-1); s != "w" || l.RawLength(-3) != 0 {
		return lay, fmt.Errorf("a table built from a template does not take new entries")
	}
	return lay, nil
}

// tableTemplate is the fixed entries of a table, boxed once, as keys and values of the map
// type of go-lua's tables.
type tableTemplate []struct{ k, v reflect.Value }

// newTableTemplate makes a template of key, value pairs made by shared or sharedFunction.
func newTableTemplate(kv ...any) tableTemplate {
	t := make(tableTemplate, len(kv)/2)
	for i := range t {
		t[i].k, t[i].v = mapEntry(kv[2*i]), mapEntry(kv[2*i+1])
	}
	return t
}

// mapEntry holds v as a key or value of a go-lua table's map, so that storing it copies the
// interface rather than boxing anew.
func mapEntry(v any) reflect.Value {
	e := reflect.New(tableLay.hashT.Key()).Elem()
	if v != nil {
		e.Set(reflect.ValueOf(v))
	}
	return e
}

// push pushes a new table holding the template's entries, with room for extra more.
func (t tableTemplate) push(l *lua.State, extra ...reflect.Value) {
	m := reflect.MakeMapWithSize(tableLay.hashT, len(t)+len(extra)/2)
	for _, e := range t {
		m.SetMapIndex(e.k, e.v)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		m.SetMapIndex(extra[i], extra[i+1])
	}
	p := reflect.New(tableLay.table)
	reflect.NewAt(tableLay.hashT, unsafe.Add(p.UnsafePointer(), tableLay.hash)).Elem().Set(m)
	l.PushLightUserData(p.Interface()) // the dynamic type is go-lua's table: a Lua table
}
