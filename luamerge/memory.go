package luamerge

import (
	"reflect"
	"unsafe"

	lua "github.com/Shopify/go-lua"
)

// Memory accounting. go-lua allocates through the Go runtime with no hook, so a run keeps an
// upper bound of the bytes its VM holds: the size measured by the last walk of the VM's object
// graph, plus every allocation charged since. Charges are made before the allocation happens --
// by the count hook for the instruction about to run, by the library functions for their
// results, by the JSON bridge for the documents -- and they never undercount. When a charge
// would pass the budget, the VM is walked again (garbage drops out of the bound); only if the
// charge still does not fit is the run stopped. Walks are therefore rare: a run whose live data
// stays far below the budget walks at most once per budget's worth of charges.

// Charges, in bytes. They overestimate go-lua's Go representation (values are 16-byte
// interfaces, tables are a slice plus a map, numbers are boxed float64s) so that the bound
// stays an upper bound; walks replace them with measured sizes.
const (
	chargeString   = 32 // header and allocation rounding of a new string
	chargeSlot     = 32 // one array or stack slot: an interface, doubled for slice growth
	chargeEntry    = 96 // one hash entry: key and value interfaces, map overhead, growth
	chargeTable    = 128
	chargeClosure  = 256
	chargeFrame    = 256*chargeSlot + 256 // a Lua call frame at most: 255 registers and a record
	chargeNumber   = 24                   // a number converted to a string
	chargeUserData = 96
)

// sizer measures the Go memory reachable from a value. It follows pointers, interfaces,
// slices (to their capacity), maps and strings, counting each allocation once, and skips
// functions: go-lua's Go functions are shared code, and the closures this package pushes hold
// only run state that the run accounts for separately.
type sizer struct {
	seen  map[uintptr]struct{}
	total int64
	limit int64 // stop early: the caller only needs to know the walk passed it
}

func (s *sizer) mark(p uintptr) bool {
	if p == 0 {
		return false
	}
	if _, ok := s.seen[p]; ok {
		return false
	}
	s.seen[p] = struct{}{}
	return true
}

// measureVM returns the bytes reachable from l and from also (the run's Go-side records of
// tables, which keep tables alive the VM itself dropped), or a number above limit once it
// knows the graph is larger than limit. seen is scratch space, reused between walks of a run.
func measureVM(l *lua.State, limit int64, seen map[uintptr]struct{}, also ...any) int64 {
	clear(seen)
	s := sizer{seen: seen, limit: limit}
	v := reflect.ValueOf(l)
	s.mark(v.Pointer())
	s.total += int64(v.Type().Elem().Size())
	s.walk(v.Elem())
	for _, a := range also {
		s.walk(reflect.ValueOf(a))
	}
	return s.total
}

func (s *sizer) walk(v reflect.Value) {
	if s.total > s.limit {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || !s.mark(v.Pointer()) {
			return
		}
		s.total += int64(v.Type().Elem().Size())
		s.walk(v.Elem())
	case reflect.Interface:
		if v.IsNil() {
			return
		}
		e := v.Elem()
		switch e.Kind() {
		case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.UnsafePointer:
		default:
			s.total += int64(e.Type().Size()) // a non-pointer value is boxed in its own allocation
		}
		s.walk(e)
	case reflect.Struct:
		for i := range v.NumField() {
			s.walk(v.Field(i))
		}
	case reflect.Array:
		if !hasPointers(v.Type().Elem()) {
			return
		}
		for i := range v.Len() {
			s.walk(v.Index(i))
		}
	case reflect.Slice:
		// Slices and maps are not marked: each belongs to the one struct that holds it (go-lua's
		// call frames are windows on its stack, so those are counted twice, which only
		// overestimates). Marking only pointers keeps the walk's own memory small.
		if v.IsNil() {
			return
		}
		s.total += int64(v.Cap()) * int64(v.Type().Elem().Size())
		if !hasPointers(v.Type().Elem()) {
			return
		}
		// Elements between len and cap stay allocated but are not reachable through v; go-lua
		// keeps its stack at full length, so nothing that matters hides there.
		for i := range v.Len() {
			s.walk(v.Index(i))
		}
	case reflect.Map:
		if v.IsNil() {
			return
		}
		k := int64(v.Type().Key().Size())
		per := k + int64(v.Type().Elem().Size()) + 8
		// Buckets at their load factor, tophash and growth, plus the key snapshot go-lua
		// takes when a program iterates the table with next or pairs.
		s.total += 64 + int64(v.Len())*(per*2+k)
		it := v.MapRange()
		for it.Next() {
			s.walk(it.Key())
			s.walk(it.Value())
		}
	case reflect.String:
		// Long strings are counted once however many values share them; short ones once per
		// reference, which overestimates by little and keeps the walk's own memory small.
		str := v.String()
		if len(str) < 64 || s.mark(uintptr(unsafe.Pointer(unsafe.StringData(str)))) {
			s.total += int64(len(str))
		}
	}
}

var pointerFree = map[reflect.Kind]bool{
	reflect.Bool: true, reflect.Int: true, reflect.Int8: true, reflect.Int16: true, reflect.Int32: true,
	reflect.Int64: true, reflect.Uint: true, reflect.Uint8: true, reflect.Uint16: true, reflect.Uint32: true,
	reflect.Uint64: true, reflect.Uintptr: true, reflect.Float32: true, reflect.Float64: true,
	reflect.Complex64: true, reflect.Complex128: true,
}

func hasPointers(t reflect.Type) bool {
	switch {
	case pointerFree[t.Kind()]:
		return false
	case t.Kind() == reflect.Array:
		return hasPointers(t.Elem())
	case t.Kind() == reflect.Struct:
		for i := range t.NumField() {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
		return false
	}
	return true
}
