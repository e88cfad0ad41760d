package luamerge

import (
	"strconv"
	"unicode/utf8"

	lua "github.com/Shopify/go-lua"

	"github.com/tributary-dev/tributary/internal/jsonenc"
	"github.com/tributary-dev/tributary/store"
)

// decoder reads one JSON document straight onto the Lua stack: objects and arrays become
// tables (arrays recorded in run.arrays, objects' key order in run.order), strings strings,
// numbers plain or exact numbers, null the run's json.null. It charges the run's memory for
// what it builds and refuses nesting beyond MaxDepth.
type decoder struct {
	r     *run
	l     *lua.State
	data  []byte
	pos   int
	depth int
	what  string // "current document" or "incoming document", for errors
	// lit is the text of the number value() just pushed when it is not the text the encoder
	// would write for that number (1.0, -0.0, 1e3, 1.50), so its table slot can remember it;
	// "" otherwise.
	lit string
}

func (r *run) pushDocument(l *lua.State, data []byte, what string) *ProgramError {
	d := decoder{r: r, l: l, data: data, what: what}
	d.space()
	if d.pos >= len(d.data) || d.data[d.pos] != '{' {
		return invalid(what + " is not a JSON object")
	}
	if err := d.value(); err != nil {
		return err
	}
	if d.space(); d.pos != len(d.data) {
		return invalid(what + " has data after its object")
	}
	return nil
}

func (d *decoder) fail(msg string) *ProgramError {
	return invalid(d.what + " is not valid JSON: " + msg + " at byte " + strconv.Itoa(d.pos))
}

func (d *decoder) space() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// value pushes the value at d.pos.
func (d *decoder) value() *ProgramError {
	d.space()
	if d.pos >= len(d.data) {
		return d.fail("unexpected end")
	}
	l := d.l
	d.lit = ""
	switch c := d.data[d.pos]; {
	case c == '{':
		err := d.object()
		d.lit = ""
		return err
	case c == '[':
		err := d.array()
		d.lit = ""
		return err
	case c == '"':
		s, err := d.str()
		if err != nil {
			return err
		}
		d.r.charge(l, chargeString+int64(len(s)))
		l.PushString(s)
	case c == 't' || c == 'f' || c == 'n':
		for _, lit := range [...]string{"true", "false", "null"} {
			if len(d.data)-d.pos >= len(lit) && string(d.data[d.pos:d.pos+len(lit)]) == lit {
				d.pos += len(lit)
				switch lit {
				case "null":
					d.r.pushNull(l)
				default:
					l.PushBoolean(lit == "true")
				}
				return nil
			}
		}
		return d.fail("invalid literal")
	default:
		start := d.pos
		for d.pos < len(d.data) {
			c := d.data[d.pos]
			if (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
				d.pos++
				continue
			}
			break
		}
		lit := string(d.data[start:d.pos])
		if !validNumberLiteral(lit) {
			return d.fail("invalid number")
		}
		if f, ok := numberValue(lit); ok {
			d.r.charge(l, chargeNumber)
			l.PushNumber(f)
			if !canonicalNumber(lit, f) {
				d.lit = lit
			}
		} else {
			d.r.pushExact(l, lit)
		}
	}
	return nil
}

func (d *decoder) enter() *ProgramError {
	if d.depth++; d.depth > d.r.opts.MaxDepth {
		return &ProgramError{Kind: store.KindInvalid, Limit: limitDepth, Reason: d.what + " is nested deeper than " + strconv.Itoa(d.r.opts.MaxDepth) + " levels"}
	}
	if !d.l.CheckStack(4) {
		return invalid(d.what + " is nested too deeply for the Lua stack")
	}
	return nil
}

func (d *decoder) object() *ProgramError {
	if err := d.enter(); err != nil {
		return err
	}
	l := d.l
	d.pos++ // {
	l.CreateTable(0, 4)
	d.r.charge(l, chargeTable)
	var keys []string
	var seen map[string]struct{} // only for large objects; small ones are scanned
	d.space()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
	} else {
		for {
			d.space()
			if d.pos >= len(d.data) || d.data[d.pos] != '"' {
				return d.fail("expected a member name")
			}
			k, err := d.str()
			if err != nil {
				return err
			}
			d.space()
			if d.pos >= len(d.data) || d.data[d.pos] != ':' {
				return d.fail("expected ':'")
			}
			d.pos++
			if !duplicate(keys, &seen, k) {
				keys = append(keys, k)
			}
			d.r.charge(l, chargeEntry+chargeString+int64(len(k)))
			l.PushString(k)
			if err := d.value(); err != nil {
				return err
			}
			d.r.rememberLiteral(l, -3, numberSlot{name: k}, d.lit)
			l.RawSet(-3) // a repeated name: the last one wins, as in encoding/json
			d.space()
			if d.pos < len(d.data) && d.data[d.pos] == ',' {
				d.pos++
				continue
			}
			if d.pos < len(d.data) && d.data[d.pos] == '}' {
				d.pos++
				break
			}
			return d.fail("expected ',' or '}'")
		}
	}
	d.r.order[l.ToValue(-1)] = keys
	d.depth--
	return nil
}

// duplicate reports whether k is already among keys, keeping a set once there are many.
func duplicate(keys []string, seen *map[string]struct{}, k string) bool {
	if len(keys) < 16 {
		for _, have := range keys {
			if have == k {
				return true
			}
		}
		return false
	}
	if *seen == nil {
		*seen = make(map[string]struct{}, 2*len(keys))
		for _, have := range keys {
			(*seen)[have] = struct{}{}
		}
	}
	if _, ok := (*seen)[k]; ok {
		return true
	}
	(*seen)[k] = struct{}{}
	return false
}

func (d *decoder) array() *ProgramError {
	if err := d.enter(); err != nil {
		return err
	}
	l := d.l
	d.pos++ // [
	l.NewTable()
	d.r.charge(l, chargeTable)
	d.space()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
	} else {
		for i := 1; ; i++ {
			if err := d.value(); err != nil {
				return err
			}
			d.r.charge(l, chargeSlot)
			d.r.rememberLiteral(l, -2, numberSlot{index: i}, d.lit)
			l.RawSetInt(-2, i)
			d.space()
			if d.pos < len(d.data) && d.data[d.pos] == ',' {
				d.pos++
				continue
			}
			if d.pos < len(d.data) && d.data[d.pos] == ']' {
				d.pos++
				break
			}
			return d.fail("expected ',' or ']'")
		}
	}
	d.r.arrays[l.ToValue(-1)] = struct{}{}
	d.depth--
	return nil
}

// str reads a JSON string at d.pos (the opening quote).
func (d *decoder) str() (string, *ProgramError) {
	d.pos++
	start := d.pos
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		if c == '"' {
			s := string(d.data[start:d.pos])
			d.pos++
			if !utf8.ValidString(s) {
				return "", d.fail("invalid UTF-8")
			}
			return s, nil
		}
		if c == '\\' {
			return d.escaped(start)
		}
		if c < 0x20 {
			return "", d.fail("control character in string")
		}
		d.pos++
	}
	return "", d.fail("unterminated string")
}

// escaped finishes a string that contains escapes (jsonenc.Unquote).
func (d *decoder) escaped(start int) (string, *ProgramError) {
	b, n, _, err := jsonenc.Unquote(append([]byte(nil), d.data[start:d.pos]...), d.data[d.pos:])
	d.pos += n
	if err != nil {
		return "", d.fail(err.Error())
	}
	if !utf8.Valid(b) {
		return "", d.fail("invalid UTF-8")
	}
	return string(b), nil
}
