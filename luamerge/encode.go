package luamerge

import (
	"github.com/tributary-dev/tributary/internal/jsonenc"
	"github.com/tributary-dev/tributary/store"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	lua "github.com/Shopify/go-lua"
)

// encoder writes the Lua value a program returned as JSON. It reads tables raw (metatables
// never run), refuses what JSON cannot hold, and tracks the path for errors and for the
// date-time pointers of the result.
type encoder struct {
	r     *run
	l     *lua.State
	buf   []byte
	path  []pathToken
	open  []any // tables on the current path, to name cycles
	times []string
}

type pathToken struct {
	key   string
	index int // array element index from 0; -1 for an object member
}

func (e *encoder) pointer() string {
	var b []byte
	for _, t := range e.path {
		b = append(b, '/')
		if t.index >= 0 {
			b = strconv.AppendInt(b, int64(t.index), 10)
		} else {
			b = jsonenc.AppendPointerToken(b, t.key)
		}
	}
	return string(b)
}

func (e *encoder) where() string {
	p := e.pointer()
	if p == "" {
		return "the result"
	}
	return "the result at " + cut(p, 128)
}

func (e *encoder) fail(msg string) *ProgramError { return invalid(e.where() + " " + msg) }

// value encodes the value at the absolute stack index idx.
func (e *encoder) value(idx int) *ProgramError {
	l := e.l
	switch l.TypeOf(idx) {
	case lua.TypeNil:
		return e.fail("is nil") // cannot happen for table values; guards the top level
	case lua.TypeBoolean:
		e.buf = strconv.AppendBool(e.buf, l.ToBoolean(idx))
	case lua.TypeNumber:
		f, _ := l.ToNumber(idx)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return e.fail("is NaN or infinite, which JSON cannot hold")
		}
		e.buf = appendNumber(e.buf, f)
	case lua.TypeString:
		s, _ := l.ToString(idx)
		if !utf8.ValidString(s) {
			return e.fail("is a string that is not valid UTF-8")
		}
		e.buf = appendString(e.buf, s)
	case lua.TypeTable:
		if err := e.table(idx); err != nil {
			return err
		}
		// The closing bracket counts too: the size is checked after every value, the
		// tables' own included.
	case lua.TypeUserData:
		switch v := l.ToUserData(idx).(type) {
		case nullValue:
			e.buf = append(e.buf, "null"...)
		case exactNumber:
			e.buf = append(e.buf, v...)
		case dateTime:
			e.buf = appendString(e.buf, string(v))
			e.times = append(e.times, e.pointer())
		case resultMark:
			return e.fail("holds " + string(v) + ", which is a result, not a value")
		default:
			return e.fail("is a userdata, which JSON cannot hold")
		}
	default:
		return e.fail("is a " + lua.TypeNameOf(l, idx) + ", which JSON cannot hold")
	}
	return e.checkSize()
}

func (e *encoder) checkSize() *ProgramError {
	if len(e.buf) > e.r.opts.MaxOutputBytes {
		return &ProgramError{Kind: store.KindTooLarge, Limit: limitOutputSize,
			Reason: "the result is larger than " + strconv.Itoa(e.r.opts.MaxOutputBytes) + " bytes"}
	}
	return nil
}

func (e *encoder) table(idx int) *ProgramError {
	l := e.l
	t := l.ToValue(idx)
	if slices.Contains(e.open, t) {
		return e.fail("contains itself (a cycle)")
	}
	if len(e.open)+1 > e.r.opts.MaxDepth {
		return &ProgramError{Kind: store.KindInvalid, Limit: limitDepth,
			Reason: e.where() + " is nested deeper than " + strconv.Itoa(e.r.opts.MaxDepth) + " levels"}
	}
	if !l.CheckStack(4) {
		return e.fail("is nested too deeply for the Lua stack")
	}
	e.open = append(e.open, t)
	defer func() { e.open = e.open[:len(e.open)-1] }()

	// One raw pass over the keys classifies the table.
	var names []string
	ints, maxInt := 0, 0
	l.PushNil()
	for l.Next(idx) {
		switch l.TypeOf(-2) {
		case lua.TypeString:
			k, _ := l.ToString(-2)
			names = append(names, k)
		case lua.TypeNumber:
			f, _ := l.ToNumber(-2)
			if f != math.Trunc(f) || f < 1 || f > math.MaxInt32 {
				l.Pop(2)
				return e.fail("has the key " + strconv.FormatFloat(f, 'g', -1, 64) + ", which is neither a name nor an array index")
			}
			ints++
			maxInt = max(maxInt, int(f))
		default:
			k := lua.TypeNameOf(l, -2)
			l.Pop(2)
			return e.fail("has a " + k + " key; JSON member names are strings")
		}
		l.Pop(1)
	}
	_, isArray := e.r.arrays[t]
	order, isObject := e.r.order[t]
	switch {
	case isArray && len(names) > 0:
		return e.fail("is an array with the member name " + strconv.Quote(cut(names[0], 64)))
	case ints > 0 && (len(names) > 0 || isObject):
		return e.fail("mixes array indexes with member names")
	case ints > 0 || isArray:
		if maxInt != ints {
			return e.fail("is an array with holes (indexes must run 1..n)")
		}
		return e.array(idx, t, ints)
	}
	return e.object(idx, t, names, order)
}

func (e *encoder) array(idx int, t any, n int) *ProgramError {
	l := e.l
	e.buf = append(e.buf, '[')
	for i := 1; i <= n; i++ {
		if i > 1 {
			e.buf = append(e.buf, ',')
		}
		e.path = append(e.path, pathToken{index: i - 1})
		l.RawGetInt(idx, i)
		err := e.member(t, numberSlot{index: i})
		l.Pop(1)
		e.path = e.path[:len(e.path)-1]
		if err != nil {
			return err
		}
	}
	e.buf = append(e.buf, ']')
	return nil
}

// object writes members in the decoded document's order, then members the program added,
// sorted, so output is deterministic although Lua tables have no order.
func (e *encoder) object(idx int, t any, names, order []string) *ProgramError {
	sort.Strings(names)
	keys := names
	if len(order) > 0 {
		keys = make([]string, 0, len(names))
		done := make([]bool, len(names))
		for _, k := range order {
			if i := sort.SearchStrings(names, k); i < len(names) && names[i] == k && !done[i] {
				done[i] = true
				keys = append(keys, k)
			}
		}
		for i, k := range names {
			if !done[i] {
				keys = append(keys, k)
			}
		}
	}
	l := e.l
	e.buf = append(e.buf, '{')
	for i, k := range keys {
		if !utf8.ValidString(k) {
			return e.fail("has a member name that is not valid UTF-8")
		}
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.buf = appendString(e.buf, k)
		e.buf = append(e.buf, ':')
		e.path = append(e.path, pathToken{key: k, index: -1})
		l.PushString(k)
		l.RawGet(idx)
		err := e.member(t, numberSlot{name: k, index: 0})
		l.Pop(1)
		e.path = e.path[:len(e.path)-1]
		if err != nil {
			return err
		}
	}
	e.buf = append(e.buf, '}')
	return nil
}

// member encodes the value on top of the stack, the slot of table t: with its decoded text when
// the slot still holds the number it was decoded with (see numberSlot).
func (e *encoder) member(t any, slot numberSlot) *ProgramError {
	slot.t = t
	if lit, ok := e.r.literal(e.l, slot, e.l.Top()); ok {
		e.buf = append(e.buf, lit...)
		return e.checkSize()
	}
	return e.value(e.l.Top())
}

// appendNumber writes f as encoding/json does: integers and moderate magnitudes in plain
// decimal, others with an exponent, always the shortest form that reads back as f.
func appendNumber(b []byte, f float64) []byte {
	abs := math.Abs(f)
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		return strconv.AppendFloat(b, f, 'e', -1, 64)
	}
	return strconv.AppendFloat(b, f, 'f', -1, 64)
}

func appendString(b []byte, s string) []byte { return jsonenc.AppendString(b, s) }

// lookup pushes the value at a JSON Pointer below the table at idx, reading raw, and reports
// whether there is one; it pushes nothing when there is not.
func (r *run) lookup(l *lua.State, idx int, pointer string) bool {
	if pointer == "" || pointer[0] != '/' {
		return false
	}
	l.PushValue(idx)
	for _, tok := range strings.Split(pointer[1:], "/") {
		if l.TypeOf(-1) != lua.TypeTable {
			l.Pop(1)
			return false
		}
		tok = jsonenc.UnescapePointerToken(tok)
		if _, isArray := r.arrays[l.ToValue(-1)]; isArray {
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 {
				l.Pop(1)
				return false
			}
			l.RawGetInt(-1, i+1)
		} else {
			l.PushString(tok)
			l.RawGet(-2)
			if l.IsNil(-1) {
				// A program-built table that encodes as an array.
				if i, err := strconv.Atoi(tok); err == nil && i >= 0 {
					l.Pop(1)
					l.RawGetInt(-1, i+1)
				}
			}
		}
		l.Remove(-2)
	}
	if l.IsNil(-1) {
		l.Pop(1)
		return false
	}
	return true
}
