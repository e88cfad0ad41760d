package luamerge

import (
	"reflect"
	"sync"
	"testing"
	"unsafe"
)

// Runs share a program's compiled form (proto.go), never its state: chunk-level locals,
// upvalues and closures start afresh in every run, sequential or concurrent, and no run writes
// into the shared template (go-lua caches closures in prototypes: a run writing its cache
// into the template would hand its closures to the next run, and race with runs at once).
func TestRunsShareNoProgramState(t *testing.T) {
	e := newEngine(t, nil)
	prog := `
local state = {n = 0}
local calls = 0
local function bump() calls = calls + 1; return calls end
leaked = (leaked or 0) + 1
return function(current, incoming, context)
  state.n = state.n + 1
  local fs = {}
  for i = 1, 3 do fs[i] = function() return bump() + i end end -- closures over upvalues
  local sum = 0
  for _, f in ipairs(fs) do sum = sum + f() end
  local mk = function() return function() return 7 end end -- a closure go-lua caches
  return {n = state.n, calls = calls, sum = sum, leaked = leaked, seven = mk()() + #fs - 3}
end`
	const want = `{"calls":3,"leaked":1,"n":1,"seven":7,"sum":12}`
	for range 3 {
		wantDoc(t, e, prog, "", `{}`, want)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				res, err := mergeJSON(t, e, prog, "", `{}`)
				if err != nil || string(res.Doc.JSON) != want {
					errs <- string(res.Doc.JSON) + " " + errString(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for msg := range errs {
		t.Errorf("concurrent run: got %s, want %s", msg, want)
	}
	p := e.program(prog)
	if p.err != nil {
		t.Fatal(p.err)
	}
	if n := cachedClosures(p.tmpl.proto); n != 0 {
		t.Fatalf("%d prototypes of the shared template hold a run's closure", n)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// cachedClosures counts the prototypes in the tree at p whose closure cache is set.
func cachedClosures(p unsafe.Pointer) int {
	n := 0
	if *(*unsafe.Pointer)(unsafe.Add(p, protoLay.pCache)) != nil {
		n++
	}
	children := reflect.NewAt(protoLay.protoSlice, unsafe.Add(p, protoLay.pChildren)).Elem()
	for i := range children.Len() {
		n += cachedClosures(children.Index(i).Addr().UnsafePointer())
	}
	return n
}
