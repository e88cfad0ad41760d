package mysqlcdc

import (
	"errors"

	"github.com/tributary-dev/tributary/cdc"
)

// compactJSON validates a JSON document and drops its insignificant white space, byte for byte
// as encoding/json.Compact does (nothing else is rewritten), in one pass and one allocation:
// json.Compact's scanner calls a function per byte and grows its buffer as it goes.
func compactJSON(b []byte) (cdc.Value, error) {
	if len(b) == 0 {
		return cdc.RawJSON("null"), nil // MySQL's empty JSON document, see go-mysql's decoder
	}
	out, ok := appendCompactJSON(make([]byte, 0, len(b)), b)
	if !ok {
		// Which byte is wrong is row data; it stays out of the error.
		return nil, errors.New("mysqlcdc: JSON column holds invalid JSON")
	}
	return cdc.RawJSON(out), nil
}

// maxJSONDepth is encoding/json's nesting limit, so that the same documents are refused.
const maxJSONDepth = 10000

// Parser states of appendCompactJSON: what may come next.
const (
	jsonValue = iota // a value
	jsonKey          // an object's key, or its end right after "{"
	jsonColon        // the ":" after a key
	jsonAfter        // "," or the end of the enclosing container, or the end of input
)

// appendCompactJSON appends src without its white space outside strings, if src is one valid
// JSON value. The text between white space is copied in runs, not token by token.
func appendCompactJSON(out, src []byte) ([]byte, bool) {
	var stackBuf [32]byte // open containers: '{' or '['
	stack := stackBuf[:0]
	run := 0 // start of the text not yet copied
	state := jsonValue
	emptyOK := false // right after "{" or "[": the container may end at once
	i, n := 0, len(src)
	for {
		// White space ends a run of copied text.
		if i < n && isJSONSpace(src[i]) {
			out = append(out, src[run:i]...)
			for i < n && isJSONSpace(src[i]) {
				i++
			}
			run = i
		}
		if i == n {
			if state == jsonAfter && len(stack) == 0 {
				return append(out, src[run:i]...), true
			}
			return out, false
		}
		c := src[i]
		switch state {
		case jsonValue, jsonKey:
			if emptyOK && (c == '}' && state == jsonKey || c == ']' && state == jsonValue) {
				stack = stack[:len(stack)-1]
				i++
				state, emptyOK = jsonAfter, false
				continue
			}
			emptyOK = false
			if state == jsonKey {
				if c != '"' {
					return out, false
				}
				if i = scanJSONString(src, i); i < 0 {
					return out, false
				}
				state = jsonColon
				continue
			}
			switch {
			case c == '{' || c == '[':
				if len(stack) == maxJSONDepth {
					return out, false
				}
				stack = append(stack, c)
				i++
				state, emptyOK = jsonValue, true
				if c == '{' {
					state = jsonKey
				}
				continue
			case c == '"':
				i = scanJSONString(src, i)
			case c == '-' || c >= '0' && c <= '9':
				i = scanJSONNumber(src, i)
			case c == 't':
				i = scanJSONLiteral(src, i, "true")
			case c == 'f':
				i = scanJSONLiteral(src, i, "false")
			case c == 'n':
				i = scanJSONLiteral(src, i, "null")
			default:
				return out, false
			}
			if i < 0 {
				return out, false
			}
			state = jsonAfter
		case jsonColon:
			if c != ':' {
				return out, false
			}
			i++
			state = jsonValue
		case jsonAfter:
			if len(stack) == 0 {
				return out, false // text after the value
			}
			top := stack[len(stack)-1]
			switch {
			case c == ',':
				i++
				state = jsonValue
				if top == '{' {
					state = jsonKey
				}
			case c == '}' && top == '{', c == ']' && top == '[':
				stack = stack[:len(stack)-1]
				i++
			default:
				return out, false
			}
		}
	}
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// scanJSONString returns the position after the string literal at i, or -1: no control
// characters, only JSON's escapes.
func scanJSONString(s []byte, i int) int {
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == '"':
			return j + 1
		case c == '\\':
			j++
			if j >= len(s) {
				return -1
			}
			switch s[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(s) {
					return -1
				}
				for _, h := range s[j+1 : j+5] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return -1
					}
				}
				j += 4
			default:
				return -1
			}
		case c < 0x20:
			return -1
		}
	}
	return -1
}

// scanJSONNumber returns the position after -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
// at i, or -1.
func scanJSONNumber(s []byte, i int) int {
	digits := func() bool {
		k := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i > k
	}
	if s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case !digits():
		return -1
	}
	if i < len(s) && s[i] == '.' {
		i++
		if !digits() {
			return -1
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if !digits() {
			return -1
		}
	}
	return i
}

func scanJSONLiteral(s []byte, i int, word string) int {
	if len(s)-i < len(word) || string(s[i:i+len(word)]) != word {
		return -1
	}
	return i + len(word)
}
