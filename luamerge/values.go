package luamerge

import (
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	lua "github.com/Shopify/go-lua"
)

// The JSON values Lua has no type for are userdata with locked metatables, so a program can
// neither change their behaviour nor mistake them for something else.
type (
	nullValue   struct{}
	exactNumber string // a JSON number literal float64 cannot hold exactly
	dateTime    string // an RFC 3339 date-time the program asks to be marked
	resultMark  string // merge.DELETE, merge.UNCHANGED
)

const twoTo53 = 1 << 53

// numberValue decides how a JSON number literal enters Lua: as a plain number when float64
// holds its value exactly enough to write the same number back (its shortest decimal form is
// the same decimal value) and it is not an integer beyond ±2^53, where float64 arithmetic
// silently rounds; otherwise as an exact number that keeps the literal.
func numberValue(lit string) (float64, bool) {
	if digits := len(strings.TrimPrefix(lit, "-")); digits <= 15 && isPlainInteger(lit) {
		// Fast path: integers of at most 15 digits are below 10^15 < 2^53.
		n, err := strconv.ParseInt(lit, 10, 64)
		if n == 0 && lit[0] == '-' {
			return math.Copysign(0, -1), true
		}
		return float64(n), err == nil
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || math.IsInf(f, 0) || math.Abs(f) > twoTo53 {
		return 0, false
	}
	return f, sameDecimal(lit, strconv.FormatFloat(f, 'e', -1, 64))
}

// canonicalNumber reports whether lit is the text the encoder writes for f (appendNumber).
func canonicalNumber(lit string, f float64) bool {
	if isPlainInteger(lit) {
		return true // plain numbers' integers are at most 2^53: written back digit for digit
	}
	var buf [32]byte
	return string(appendNumber(buf[:0], f)) == lit
}

// A numberSlot is a member (name) or an element (index, from 1) of a table t. The bridge keeps
// the decoded text of a number whose text is not the shortest form the encoder would write
// (1.0, -0.0, 1e3, 1.50) by the slot it was decoded into: while the slot still holds that
// number, the number is written back with its own text, so a value the program did not touch
// keeps its spelling -- and with it its type on a backend that types numbers by their spelling
// (MongoDB: 1.0 is a double, 1 an int32).
type numberSlot struct {
	t     any
	name  string
	index int
}

// numberText is a decoded number's text and the bits of the float64 it decoded to.
type numberText struct {
	bits uint64
	text string
}

// rememberLiteral records lit, the text of the number on top of the stack, for the slot of the
// table at idx the number is about to be stored in; an empty lit forgets the slot (a repeated
// member name replaces an earlier value).
func (r *run) rememberLiteral(l *lua.State, idx int, slot numberSlot, lit string) {
	if lit == "" {
		if len(r.literals) > 0 {
			slot.t = l.ToValue(idx)
			delete(r.literals, slot)
		}
		return
	}
	slot.t = l.ToValue(idx)
	f, _ := l.ToNumber(-1)
	r.charge(l, chargeEntry+chargeString+int64(len(lit)))
	if r.literals == nil {
		r.literals = r.scratch.literals // empty; nil until first used, as the memory walk counts it
	}
	r.literals[slot] = numberText{bits: math.Float64bits(f), text: lit}
}

// literal returns the decoded text of the number at the absolute stack index idx when the slot
// still holds the number it was decoded with (the same float64 bits: 0 and -0 differ).
func (r *run) literal(l *lua.State, slot numberSlot, idx int) (string, bool) {
	if len(r.literals) == 0 || l.TypeOf(idx) != lua.TypeNumber {
		return "", false
	}
	n, ok := r.literals[slot]
	if !ok {
		return "", false
	}
	f, _ := l.ToNumber(idx)
	return n.text, math.Float64bits(f) == n.bits
}

func isPlainInteger(s string) bool {
	if strings.HasPrefix(s, "-") {
		s = s[1:]
	}
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// sameDecimal reports whether two decimal literals denote the same number.
func sameDecimal(a, b string) bool {
	na, da, ea, oka := normDecimal(a)
	nb, db, eb, okb := normDecimal(b)
	return oka && okb && na == nb && da == db && (da == "" || ea == eb)
}

// normDecimal writes a literal as sign, significant digits and exponent, so that the value is
// 0.digits × 10^exp; zero has no digits.
func normDecimal(s string) (neg bool, digits string, exp int, ok bool) {
	if strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	} else {
		s = strings.TrimPrefix(s, "+")
	}
	mant, e := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		n, err := strconv.Atoi(s[i+1:])
		if err != nil {
			return false, "", 0, false
		}
		mant, e = s[:i], n
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	all := intPart + frac
	e += len(intPart)
	trimmed := strings.TrimLeft(all, "0")
	e -= len(all) - len(trimmed)
	trimmed = strings.TrimRight(trimmed, "0")
	return neg, trimmed, e, true
}

// bigRat converts a literal for comparisons; literals whose exponent would make the rational
// huge are refused rather than expanded.
func bigRat(lit string) (*big.Rat, bool) {
	if _, _, e, ok := normDecimal(lit); !ok || e > 400 || e < -400 {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(lit)
	return r, ok
}

func validDateTime(s string) bool {
	_, err := time.Parse(time.RFC3339Nano, s)
	return err == nil
}

// pushNull pushes the run's one JSON null, making it on first use.
func (r *run) pushNull(l *lua.State) {
	r.pushSingleton(l, regNull, nullValue{})
}

// pushMark pushes merge.DELETE or merge.UNCHANGED.
func (r *run) pushMark(l *lua.State, slot int, name string) {
	r.pushSingleton(l, slot, resultMark(name))
}

func (r *run) pushSingleton(l *lua.State, slot int, v any) {
	l.RawGetInt(lua.RegistryIndex, slot)
	if !l.IsNil(-1) {
		return
	}
	l.Pop(1)
	r.pushUserData(l, v)
	l.PushValue(-1)
	l.RawSetInt(lua.RegistryIndex, slot)
}

// pushExact pushes an exact number holding lit.
func (r *run) pushExact(l *lua.State, lit string) {
	r.charge(l, chargeUserData+int64(len(lit)))
	r.pushUserData(l, exactNumber(lit))
}

// pushDateTime pushes a marked date-time holding s.
func (r *run) pushDateTime(l *lua.State, s string) {
	r.charge(l, chargeUserData+int64(len(s)))
	r.pushUserData(l, dateTime(s))
}

// pushUserData pushes v with the bridge's metatable, which every bridge value shares (one
// table to build per VM, made on first use).
func (r *run) pushUserData(l *lua.State, v any) {
	l.PushUserData(v)
	l.RawGetInt(lua.RegistryIndex, regValueMeta)
	if l.IsNil(-1) {
		l.Pop(1)
		l.PushGoFunction(r.concatText)
		concat := mapEntry(l.ToValue(-1))
		l.Pop(1)
		valueMeta().push(l, sharedConcatKey(), concat)
		l.PushValue(-1)
		l.RawSetInt(lua.RegistryIndex, regValueMeta)
	}
	l.SetMetaTable(-2)
}

// valueMeta is the bridge metatable's entries that are the same in every VM: the methods,
// which hold no state, and the __metatable lock. __concat charges its run and is added per VM.
var valueMeta = sync.OnceValue(func() tableTemplate {
	var kv []any
	for _, m := range valueMethods {
		kv = append(kv, shared(m.name), sharedFunction(m.fn))
	}
	return newTableTemplate(append(kv, shared("__metatable"), shared("json value"))...)
})

var sharedConcatKey = sync.OnceValue(func() reflect.Value { return mapEntry(shared("__concat")) })

// text returns the string form of a bridge value at index, or of a string or number, for
// __concat, __tostring and comparisons.
func text(l *lua.State, index int) (string, bool) {
	switch v := l.ToUserData(index).(type) {
	case exactNumber:
		return string(v), true
	case dateTime:
		return string(v), true
	case nullValue:
		return "null", true
	case resultMark:
		return string(v), true
	}
	if l.TypeOf(index) == lua.TypeString || l.TypeOf(index) == lua.TypeNumber {
		s, ok := l.ToString(index)
		return s, ok
	}
	return "", false
}

// Metamethods of the bridge's values. They are plain functions so that building the
// metatable allocates little; each dispatches on the value's kind.
var valueMethods = []struct {
	name string
	fn   lua.Function
}{
	{"__add", valueArith}, {"__sub", valueArith}, {"__mul", valueArith}, {"__div", valueArith},
	{"__mod", valueArith}, {"__pow", valueArith}, {"__unm", valueArith}, {"__len", valueArith},
	{"__tostring", func(l *lua.State) int {
		s, _ := text(l, 1)
		l.PushString(s)
		return 1
	}},
	{"__eq", func(l *lua.State) int {
		c, ok := valueCmp(l)
		l.PushBoolean(ok && c == 0) // == never fails, as in Lua
		return 1
	}},
	{"__lt", func(l *lua.State) int { l.PushBoolean(mustCmp(l) < 0); return 1 }},
	{"__le", func(l *lua.State) int { l.PushBoolean(mustCmp(l) <= 0); return 1 }},
}

func mustCmp(l *lua.State) int {
	c, ok := valueCmp(l)
	if !ok {
		lua.Errorf(l, "cannot compare these values: exact numbers compare with numbers, date-times with date-times and strings")
	}
	return c
}

func valueArith(l *lua.State) int {
	_, exact1 := l.ToUserData(1).(exactNumber)
	_, exact2 := l.ToUserData(2).(exactNumber)
	if exact1 || exact2 {
		lua.Errorf(l, "arithmetic on an exact number (an integer beyond ±2^53 or a number float64 cannot hold) would round; "+
			"compare it, pass it on or convert it explicitly with tonumber(tostring(x))")
	}
	lua.Errorf(l, "attempt to perform arithmetic on a JSON value that is not a number")
	return 0
}

// valueCmp compares exact numbers with each other and with plain numbers exactly, and
// date-times with each other and with strings as strings (chronological for the usual UTC
// form). ok is false for values that do not compare.
func valueCmp(l *lua.State) (c int, ok bool) {
	_, exact1 := l.ToUserData(1).(exactNumber)
	_, exact2 := l.ToUserData(2).(exactNumber)
	if exact1 || exact2 {
		a, aok := ratAt(l, 1)
		b, bok := ratAt(l, 2)
		if !aok || !bok {
			return 0, false
		}
		return a.Cmp(b), true
	}
	_, time1 := l.ToUserData(1).(dateTime)
	_, time2 := l.ToUserData(2).(dateTime)
	a, aok := text(l, 1)
	b, bok := text(l, 2)
	if !(time1 || time2) || !aok || !bok {
		return 0, false
	}
	return strings.Compare(a, b), true
}

// ratAt converts an exact or plain number at index to a rational, exactly.
func ratAt(l *lua.State, index int) (*big.Rat, bool) {
	if v, ok := l.ToUserData(index).(exactNumber); ok {
		return bigRat(string(v))
	}
	if l.TypeOf(index) == lua.TypeNumber {
		f, _ := l.ToNumber(index)
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, false
		}
		return new(big.Rat).SetFloat64(f), true
	}
	return nil, false
}

// concatText concatenates bridge values as their text, charging the result.
func (r *run) concatText(l *lua.State) int {
	a, aok := text(l, 1)
	b, bok := text(l, 2)
	if !aok || !bok {
		bad := 1
		if aok {
			bad = 2
		}
		lua.Errorf(l, "attempt to concatenate a %s value", lua.TypeNameOf(l, bad))
	}
	r.charge(l, chargeString+int64(len(a)+len(b)))
	l.PushString(a + b)
	return 1
}
