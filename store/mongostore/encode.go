package mongostore

import (
	"bytes"
	"encoding/binary"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/internal/jsonenc"
	"github.com/tributary-dev/tributary/store/driver"
)

// maxDepth bounds the nesting of objects and arrays, the top-level object being the first
// level: MongoDB refuses documents nested deeper than 100 levels, and refusing them here keeps one bad document from failing a whole bulk.
const maxDepth = 100

// encoder turns one JSON object into the elements of a BSON document. It writes BSON bytes
// directly (no intermediate tree), keeps member order, converts exactly the marked date-time
// pointers, and refuses what it cannot store without changing it.
type encoder struct {
	src   []byte
	pos   int
	out   []byte
	times map[string]bool // marked pointers, nil when there are none
	path  []byte          // RFC 6901 pointer of the value being encoded (only kept when times or hints != nil)
	found int             // marked pointers met so far
	depth int
	meta  string // the metadata field name, reserved at the top level
	// ferret refuses the values FerretDB 1.x cannot store (see Options.FerretDB).
	ferret bool
	// hints are the BSON types a read found at pointers where the JSON text alone does not
	// give that type back (see typeHints); nil when the write has none.
	hints typeHints
	// applied are the hints the document's values took (a value whose type a hint kept).
	applied typeHints
}

func invalid(msg string) error { return driver.NewError(driver.KindInvalid, "mongostore: "+msg, nil) }

var errSyntax = invalid("document is not valid JSON")

// encodeBody returns the BSON elements (no length prefix or terminator) of the JSON object
// doc.JSON. Member names and values never appear in its errors.
func encodeBody(doc driver.Document, meta string, ferret bool, dst []byte) ([]byte, error) {
	out, _, err := encodeBodyHinted(doc, meta, ferret, nil, dst)
	return out, err
}

// encodeBodyHinted is encodeBody with the type hints of the read the write is conditioned on;
// it also returns the hints the document's values took, which hold for the record it writes.
func encodeBodyHinted(doc driver.Document, meta string, ferret bool, hints typeHints, dst []byte) ([]byte, typeHints, error) {
	if !utf8.Valid(doc.JSON) {
		return nil, nil, invalid("document is not valid UTF-8")
	}
	e := encoder{src: doc.JSON, out: dst, meta: meta, ferret: ferret, depth: 1, hints: hints}
	if len(doc.Times) > 0 {
		e.times = make(map[string]bool, len(doc.Times))
		for _, p := range doc.Times {
			if p == "" || p[0] != '/' {
				return nil, nil, invalid("date-time pointer " + strconv.Quote(p) + " is not a JSON Pointer to a member")
			}
			e.times[p] = true
		}
	}
	if len(e.hints) == 0 {
		e.hints = nil
	}
	e.skipSpace()
	if e.pos >= len(e.src) || e.src[e.pos] != '{' {
		return nil, nil, invalid("document is not a JSON object")
	}
	e.pos++
	if _, err := e.members(true); err != nil {
		return nil, nil, err
	}
	e.skipSpace()
	if e.pos != len(e.src) {
		return nil, nil, errSyntax
	}
	if e.found != len(e.times) {
		return nil, nil, invalid("a date-time pointer names no value in the document")
	}
	return e.out, e.applied, nil
}

func (e *encoder) skipSpace() {
	for e.pos < len(e.src) {
		switch e.src[e.pos] {
		case ' ', '\t', '\r', '\n':
			e.pos++
		default:
			return
		}
	}
}

// objectInfo describes an object just encoded, enough to recognise an extended-JSON wrapper.
type objectInfo struct {
	count      int
	dollarOnly bool // every member name starts with '$'
}

// members encodes the members of an object whose '{' was consumed, up to and including '}'.
func (e *encoder) members(top bool) (objectInfo, error) {
	info := objectInfo{dollarOnly: true}
	var keys [][2]int // offsets in e.out of the member names, for the duplicate check
	var seen map[string]bool
	e.skipSpace()
	if e.pos < len(e.src) && e.src[e.pos] == '}' {
		e.pos++
		info.dollarOnly = false
		return info, nil
	}
	for {
		e.skipSpace()
		if e.pos >= len(e.src) || e.src[e.pos] != '"' {
			return info, errSyntax
		}
		e.pos++
		typePos := len(e.out)
		e.out = append(e.out, 0)
		keyStart := len(e.out)
		if err := e.appendString(); err != nil {
			return info, err
		}
		key := e.out[keyStart:]
		if bytes.IndexByte(key, 0) >= 0 {
			return info, invalid("a member name contains U+0000, which BSON cannot store")
		}
		if top {
			switch {
			case string(key) == "_id":
				return info, invalid("the document has a top-level _id member; the record key is the _id")
			case string(key) == e.meta:
				return info, invalid("the document has a top-level member named like the metadata field " + strconv.Quote(e.meta))
			case len(key) > 0 && key[0] == '$':
				return info, invalid("a top-level member name starts with '$'")
			}
		}
		if len(key) == 0 || key[0] != '$' {
			info.dollarOnly = false
		}
		// Duplicate names: JSON parsers disagree on which one wins, and BSON would keep both.
		if len(keys) < 16 {
			for _, k := range keys {
				if bytes.Equal(e.out[k[0]:k[1]], key) {
					return info, invalid("the document repeats a member name")
				}
			}
		} else {
			if seen == nil {
				seen = make(map[string]bool, 2*len(keys))
				for _, k := range keys {
					seen[string(e.out[k[0]:k[1]])] = true
				}
			}
			if seen[string(key)] {
				return info, invalid("the document repeats a member name")
			}
			seen[string(key)] = true
		}
		keys = append(keys, [2]int{keyStart, len(e.out)})
		e.out = append(e.out, 0)
		info.count++

		e.skipSpace()
		if e.pos >= len(e.src) || e.src[e.pos] != ':' {
			return info, errSyntax
		}
		e.pos++
		mark := len(e.path)
		if e.times != nil || e.hints != nil {
			e.path = append(e.path, '/')
			e.path = jsonenc.AppendPointerToken(e.path, e.out[keyStart:keyStart+len(key)])
		}
		if err := e.value(typePos); err != nil {
			return info, err
		}
		e.path = e.path[:mark]

		e.skipSpace()
		if e.pos >= len(e.src) {
			return info, errSyntax
		}
		switch e.src[e.pos] {
		case ',':
			e.pos++
		case '}':
			e.pos++
			return info, nil
		default:
			return info, errSyntax
		}
	}
}

func (e *encoder) elements() error {
	e.skipSpace()
	if e.pos < len(e.src) && e.src[e.pos] == ']' {
		e.pos++
		return nil
	}
	for i := 0; ; i++ {
		typePos := len(e.out)
		e.out = append(e.out, 0)
		e.out = strconv.AppendInt(e.out, int64(i), 10)
		e.out = append(e.out, 0)
		mark := len(e.path)
		if e.times != nil || e.hints != nil {
			e.path = append(e.path, '/')
			e.path = strconv.AppendInt(e.path, int64(i), 10)
		}
		if err := e.value(typePos); err != nil {
			return err
		}
		e.path = e.path[:mark]
		e.skipSpace()
		if e.pos >= len(e.src) {
			return errSyntax
		}
		switch e.src[e.pos] {
		case ',':
			e.pos++
		case ']':
			e.pos++
			return nil
		default:
			return errSyntax
		}
	}
}

// value encodes one JSON value and sets the element type at e.out[typePos].
func (e *encoder) value(typePos int) error {
	e.skipSpace()
	if e.pos >= len(e.src) {
		return errSyntax
	}
	marked := false
	if e.times != nil && e.times[string(e.path)] {
		marked = true
		e.found++
	}
	c := e.src[e.pos]
	if marked && c != '"' {
		return invalid("a date-time pointer names a value that is not a string")
	}
	switch {
	case c == '{' || c == '[':
		e.depth++
		if e.depth > maxDepth {
			return invalid("the document nests objects and arrays more than " + strconv.Itoa(maxDepth) + " levels deep")
		}
		e.pos++
		start := len(e.out)
		e.out = append(e.out, 0, 0, 0, 0)
		var info objectInfo
		var err error
		if c == '{' {
			e.out[typePos] = bsonDocument
			info, err = e.members(false)
		} else {
			e.out[typePos] = bsonArray
			err = e.elements()
		}
		if err != nil {
			return err
		}
		e.out = append(e.out, 0)
		binary.LittleEndian.PutUint32(e.out[start:], uint32(len(e.out)-start))
		e.depth--
		if c == '{' && info.dollarOnly {
			return e.unwrapExtended(typePos, start)
		}
		return nil
	case c == '"':
		e.pos++
		if marked {
			return e.dateTime(typePos)
		}
		e.out[typePos] = bsonString
		start := len(e.out)
		e.out = append(e.out, 0, 0, 0, 0)
		if err := e.appendString(); err != nil {
			return err
		}
		e.out = append(e.out, 0)
		binary.LittleEndian.PutUint32(e.out[start:], uint32(len(e.out)-start-4))
		return nil
	case c == 't':
		return e.literal("true", typePos, bsonBoolean, 1)
	case c == 'f':
		return e.literal("false", typePos, bsonBoolean, 0)
	case c == 'n':
		return e.literal("null", typePos, bsonNull, -1)
	case c == '-' || (c >= '0' && c <= '9'):
		return e.number(typePos)
	}
	return errSyntax
}

func (e *encoder) literal(word string, typePos int, t byte, b int) error {
	if !bytes.HasPrefix(e.src[e.pos:], []byte(word)) {
		return errSyntax
	}
	e.pos += len(word)
	e.out[typePos] = t
	if b >= 0 {
		e.out = append(e.out, byte(b))
	}
	return nil
}

// appendString decodes the JSON string after its opening quote onto e.out, through the
// closing quote. Lone UTF-16 surrogates are refused: they have no UTF-8 form, and replacing
// them would change the text silently.
func (e *encoder) appendString() error {
	src := e.src[e.pos:]
	out, n, lone, err := jsonenc.Unquote(e.out, src)
	e.out = out
	e.pos += n
	switch {
	case err != nil && (!lone || highBeforeBadEscape(src, n, err)):
		return errSyntax
	case lone:
		return invalid("a string holds a lone UTF-16 surrogate")
	}
	return nil
}

// highBeforeBadEscape says whether Unquote's refusal err at n, with a lone surrogate met,
// is of a high surrogate escape followed by a malformed \u escape, with no lone surrogate
// before it: a malformed string (errSyntax), not a lone surrogate. Unquote replaces the lone
// surrogate and goes on; it is then refused at the \u right after it.
func highBeforeBadEscape(src []byte, n int, err error) bool {
	if err != jsonenc.ErrUnicodeEscape || n < 8 {
		return false
	}
	esc := src[n-8 : n-2] // the 6 bytes before the malformed \u
	if esc[0] != '\\' || esc[1] != 'u' {
		return false
	}
	r, perr := strconv.ParseUint(string(esc[2:]), 16, 16)
	if perr != nil || r < 0xD800 || r >= 0xDC00 {
		return false
	}
	// Was a lone surrogate met before it? (When esc is not an escape but text after an
	// escaped backslash, the lone surrogate was met before it, and this says so.)
	_, _, before, _ := jsonenc.Unquote(nil, src[:n-8])
	return !before
}

// dateTime encodes a marked string as a BSON datetime. BSON keeps milliseconds since the
// epoch and no offset: finer precision is refused, offsets are folded into UTC.
func (e *encoder) dateTime(typePos int) error {
	start := len(e.out)
	if err := e.appendString(); err != nil {
		return err
	}
	t, err := time.Parse(time.RFC3339Nano, string(e.out[start:]))
	e.out = e.out[:start]
	if err != nil {
		return invalid("a date-time pointer names a string that is not an RFC 3339 date-time")
	}
	if t.Nanosecond()%int(time.Millisecond) != 0 {
		// The field by its JSON Pointer (a marked pointer the caller gave), never the value.
		return invalid("at " + strconv.Quote(string(e.path)) + ": a date-time is finer than the millisecond precision of BSON datetimes")
	}
	e.out[typePos] = bsonDateTime
	e.out = binary.LittleEndian.AppendUint64(e.out, uint64(t.UnixMilli()))
	return nil
}

// number encodes a JSON number with a BSON type that holds its value exactly: int32 or int64
// for integers in range, double when the shortest form of the nearest double is the same
// decimal value, Decimal128 otherwise (up to 34 significant digits); anything else is refused.
func (e *encoder) number(typePos int) error {
	start := e.pos
	if e.src[e.pos] == '-' {
		e.pos++
	}
	digits := func() int {
		n := 0
		for e.pos < len(e.src) && e.src[e.pos] >= '0' && e.src[e.pos] <= '9' {
			e.pos++
			n++
		}
		return n
	}
	intStart := e.pos
	if n := digits(); n == 0 || (n > 1 && e.src[intStart] == '0') {
		return errSyntax
	}
	integer := true
	if e.pos < len(e.src) && e.src[e.pos] == '.' {
		e.pos++
		integer = false
		if digits() == 0 {
			return errSyntax
		}
	}
	if e.pos < len(e.src) && (e.src[e.pos] == 'e' || e.src[e.pos] == 'E') {
		e.pos++
		integer = false
		if e.pos < len(e.src) && (e.src[e.pos] == '+' || e.src[e.pos] == '-') {
			e.pos++
		}
		if digits() == 0 {
			return errSyntax
		}
	}
	lit := string(e.src[start:e.pos])
	if e.hints != nil {
		if t, ok := e.hints[string(e.path)]; ok {
			if out, ok := appendHinted(e.out, typePos, t, lit, integer); ok {
				e.out = out
				if e.applied == nil {
					e.applied = make(typeHints, len(e.hints))
				}
				e.applied[string(e.path)] = t
				return nil
			}
		}
	}
	valStart := len(e.out)
	var err error
	e.out, err = appendNumber(e.out, typePos, lit, integer)
	if err == nil && e.ferret {
		switch {
		case e.out[typePos] == bsonDecimal128:
			return errFerretDecimal
		case e.out[typePos] == bsonDouble && binary.LittleEndian.Uint64(e.out[valStart:]) == negativeZero:
			return errFerretNegativeZero
		}
	}
	return err
}

var (
	errFerretDecimal      = invalid("a number needs Decimal128 to be stored exactly, and FerretDB 1.x has no Decimal128")
	errFerretNegativeZero = invalid("a number is -0 (the double -0.0), and FerretDB 1.x stores it as 0.0")
)

// negativeZero is the bit pattern of the double -0.0.
const negativeZero = 1 << 63

// appendNumber appends the BSON value of the JSON number lit and sets its type at out[typePos].
func appendNumber(out []byte, typePos int, lit string, integer bool) ([]byte, error) {
	if integer && lit != "-0" {
		if n, err := strconv.ParseInt(lit, 10, 64); err == nil {
			if n >= math.MinInt32 && n <= math.MaxInt32 {
				out[typePos] = bsonInt32
				return binary.LittleEndian.AppendUint32(out, uint32(int32(n))), nil
			}
			out[typePos] = bsonInt64
			return binary.LittleEndian.AppendUint64(out, uint64(n)), nil
		}
	} else if f, err := strconv.ParseFloat(lit, 64); err == nil && sameDecimal(lit, strconv.FormatFloat(f, 'e', -1, 64)) {
		// "-0" is kept as the double -0 so that its sign survives.
		out[typePos] = bsonDouble
		return binary.LittleEndian.AppendUint64(out, math.Float64bits(f)), nil
	}
	hi, lo, ok := decimal128Of(lit)
	if !ok {
		return out, invalid("a number has more than 34 significant digits or an exponent out of range: no BSON type holds it exactly")
	}
	out[typePos] = bsonDecimal128
	out = binary.LittleEndian.AppendUint64(out, lo)
	return binary.LittleEndian.AppendUint64(out, hi), nil
}
