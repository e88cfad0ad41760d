package sink

// A _bulk answer with errors is read item by item by a small scanner instead of
// encoding/json: judge needs three values per item (status, error type, caused-by type), and
// decoding a thousand items into structs costs a string allocation per error type and most of
// a microsecond per item. The scanner walks the bytes once, allocates nothing, and hands out
// the error types as slices of the answer. It accepts any JSON layout (whitespace, key order,
// extra fields); an answer it cannot read is decoded by encoding/json instead (judge's
// fallback), so a scanner limitation costs speed, never a wrong outcome.

// itemView is one item of an answer; the slices point into the answer.
type itemView struct {
	status   int
	errType  []byte // nil: no error object
	causedBy []byte
}

// itemScanner reads the "items" array of an answer.
type itemScanner struct {
	b []byte
	i int
}

// maxSkipDepth bounds the nesting the scanner skips through; deeper answers go to the fallback.
const maxSkipDepth = 32

// newItemScanner positions a scanner at the first item of the answer's top-level "items".
func newItemScanner(ans []byte) (itemScanner, bool) {
	s := itemScanner{b: ans}
	if !s.consume('{') {
		return s, false
	}
	for {
		key, ok := s.key()
		if !ok {
			return s, false
		}
		if string(key) == "items" {
			return s, s.consume('[')
		}
		if !s.skipValue(0) {
			return s, false
		}
		if !s.consume(',') {
			return s, false // the object ended without items
		}
	}
}

// next reads the next item. more is false after the last one; ok is false on anything the
// scanner does not understand.
func (s *itemScanner) next(first bool) (it itemView, more, ok bool) {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return it, false, true
	}
	if !first && !s.consume(',') {
		return it, false, false
	}
	// {"<action>": {...}}
	if !s.consume('{') {
		return it, false, false
	}
	if _, ok := s.key(); !ok {
		return it, false, false
	}
	if !s.consume('{') {
		return it, false, false
	}
	it.status = -1
	if !s.fields(func(k []byte) bool {
		switch string(k) {
		case "status":
			n, ok := s.int()
			it.status = n
			return ok
		case "error":
			if s.peek() != '{' {
				// Not an object (some endpoints answer a bare string): an error of no known type.
				it.errType = []byte{}
				return s.skipValue(0)
			}
			s.i++
			it.errType = []byte{} // an error object, whatever it holds
			return s.fields(func(k []byte) bool {
				switch string(k) {
				case "type":
					v, ok := s.str()
					it.errType = v
					return ok
				case "caused_by":
					if s.peek() != '{' {
						return s.skipValue(0)
					}
					s.i++
					return s.fields(func(k []byte) bool {
						if string(k) == "type" {
							v, ok := s.str()
							it.causedBy = v
							return ok
						}
						return s.skipValue(0)
					})
				}
				return s.skipValue(0)
			})
		}
		return s.skipValue(0)
	}) {
		return it, false, false
	}
	if it.errType != nil && len(it.errType) == 0 {
		it.errType = []byte("error")
	}
	if it.status < 0 || !s.consume('}') {
		return it, false, false
	}
	return it, true, true
}

// fields reads the members of an object whose '{' was consumed, up to its '}', calling value
// for each key with the scanner at the value; value must consume it.
func (s *itemScanner) fields(value func(key []byte) bool) bool {
	s.ws()
	if s.peek() == '}' {
		s.i++
		return true
	}
	for {
		k, ok := s.key()
		if !ok || !value(k) {
			return false
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

func (s *itemScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *itemScanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *itemScanner) consume(c byte) bool {
	if s.peek() != c {
		return false
	}
	s.i++
	return true
}

// key reads a member name and its colon.
func (s *itemScanner) key() ([]byte, bool) {
	k, ok := s.str()
	return k, ok && s.consume(':')
}

// str reads a string and returns its raw content (escapes left as they are: the names and
// types the sink compares never contain any).
func (s *itemScanner) str() ([]byte, bool) {
	if !s.consume('"') {
		return nil, false
	}
	start := s.i
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '\\':
			s.i += 2
		case '"':
			v := s.b[start:s.i]
			s.i++
			return v, true
		default:
			s.i++
		}
	}
	return nil, false
}

// int reads a non-negative integer of at most 9 digits (a status).
func (s *itemScanner) int() (int, bool) {
	s.ws()
	n, digits := 0, 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		n = n*10 + int(s.b[s.i]-'0')
		s.i++
		digits++
	}
	if digits == 0 || digits > 9 {
		return 0, false
	}
	switch s.peek() {
	case ',', '}':
		return n, true
	}
	return 0, false // a fraction or exponent: not a status
}

// skipValue passes over one value of any kind.
func (s *itemScanner) skipValue(depth int) bool {
	if depth > maxSkipDepth {
		return false
	}
	switch c := s.peek(); {
	case c == '"':
		_, ok := s.str()
		return ok
	case c == '{':
		s.i++
		return s.fields(func([]byte) bool { return s.skipValue(depth + 1) })
	case c == '[':
		s.i++
		if s.peek() == ']' {
			s.i++
			return true
		}
		for {
			if !s.skipValue(depth + 1) {
				return false
			}
			switch s.peek() {
			case ',':
				s.i++
			case ']':
				s.i++
				return true
			default:
				return false
			}
		}
	case c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' || c == 'n':
		// A number or a literal: everything up to the next delimiter.
		start := s.i
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return s.i > start
			}
			s.i++
		}
		return false
	}
	return false
}
