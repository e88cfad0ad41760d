package luamerge

import (
	lua "github.com/Shopify/go-lua"
)

// pushJSONLib pushes the json library: the values Lua has no type for, and the marks that tell
// an empty array from an empty object.
func (r *run) pushJSONLib(l *lua.State) {
	l.CreateTable(0, 8)
	r.pushNull(l)
	l.SetField(-2, "null")
	l.PushGoFunction(func(l *lua.State) int { // json.array([t]): t (or a new table) as an array
		r.markTable(l, true)
		return 1
	})
	l.SetField(-2, "array")
	l.PushGoFunction(func(l *lua.State) int { // json.object([t]): t (or a new table) as an object
		r.markTable(l, false)
		return 1
	})
	l.SetField(-2, "object")
	l.PushGoFunction(func(l *lua.State) int {
		_, ok := r.arrays[l.ToValue(1)]
		l.PushBoolean(ok && l.TypeOf(1) == lua.TypeTable)
		return 1
	})
	l.SetField(-2, "isarray")
	l.PushGoFunction(func(l *lua.State) int {
		_, ok := l.ToUserData(1).(nullValue)
		l.PushBoolean(ok)
		return 1
	})
	l.SetField(-2, "isnull")
	l.PushGoFunction(func(l *lua.State) int { // json.number("12345678901234567890")
		s := lua.CheckString(l, 1)
		if !validNumberLiteral(s) {
			lua.ArgumentError(l, 1, "not a JSON number")
		}
		if f, ok := numberValue(s); ok {
			l.PushNumber(f)
		} else {
			r.pushExact(l, s)
		}
		return 1
	})
	l.SetField(-2, "number")
	l.PushGoFunction(func(l *lua.State) int { // json.datetime("2026-11-30T09:00:00Z")
		s := lua.CheckString(l, 1)
		if !validDateTime(s) {
			lua.ArgumentError(l, 1, "not an RFC 3339 date-time")
		}
		r.pushDateTime(l, s)
		return 1
	})
	l.SetField(-2, "datetime")
}

// markTable marks the table argument (or a new one) as an array or an object and returns it.
func (r *run) markTable(l *lua.State, array bool) {
	if l.IsNoneOrNil(1) {
		r.charge(l, chargeTable)
		l.NewTable()
	} else {
		lua.CheckType(l, 1, lua.TypeTable)
		l.PushValue(1)
	}
	t := l.ToValue(-1)
	if array {
		r.arrays[t] = struct{}{}
		delete(r.order, t)
	} else {
		delete(r.arrays, t)
		if _, ok := r.order[t]; !ok {
			r.order[t] = nil
		}
	}
}

// pushMergeLib pushes the merge library: the results that are not documents.
func (r *run) pushMergeLib(l *lua.State) {
	l.CreateTable(0, 2)
	r.pushMark(l, regDelete, "merge.DELETE")
	l.SetField(-2, "DELETE")
	r.pushMark(l, regUnchanged, "merge.UNCHANGED")
	l.SetField(-2, "UNCHANGED")
}

// validNumberLiteral reports whether s is a JSON number.
func validNumberLiteral(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == start {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == start {
			return false
		}
	}
	return i == len(s)
}
