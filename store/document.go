package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/internal/jsonenc"
)

// DefaultMaxDocumentBytes is the default limit on a document's JSON encoding: well inside
// MongoDB's 16 MiB BSON limit after conversion, and far inside Elasticsearch's request limit.
const DefaultMaxDocumentBytes = 8 << 20

// NewDocument returns a Document holding the JSON encoding of v, which must encode as a JSON
// object, with timePointers marking its date-time strings.
func NewDocument(v any, timePointers ...string) (Document, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return Document{}, &Error{Kind: KindInvalid, Err: marshalFailure(err)}
	}
	d := Document{JSON: b, Times: timePointers}
	if err := validateDocument(d, 0); err != nil {
		return Document{}, err
	}
	return d, nil
}

// marshalFailure says why encoding/json could not encode a value, without its messages that
// quote values (json: unsupported value: ...) or pass on a MarshalJSON method's own error
// text; the error itself stays reachable with errors.As.
func marshalFailure(err error) error {
	var ut *json.UnsupportedTypeError
	var uv *json.UnsupportedValueError
	var me *json.MarshalerError
	msg := "the value cannot be encoded as JSON"
	switch {
	case errors.As(err, &ut):
		msg = "the value cannot be encoded as JSON: it holds a " + ut.Type.String()
	case errors.As(err, &uv):
		msg = "the value cannot be encoded as JSON: it holds a value JSON has no form for (NaN, an infinity, a cycle)"
	case errors.As(err, &me):
		msg = "the value cannot be encoded as JSON: a MarshalJSON or MarshalText method of " + me.Type.String() + " failed"
	}
	return &quiet{msg: msg, err: err}
}

// quiet is an error whose text is msg, whatever the text of the error it wraps.
type quiet struct {
	msg string
	err error
}

func (q *quiet) Error() string { return q.msg }
func (q *quiet) Unwrap() error { return q.err }

// validateDocument checks that d is a JSON object of at most limit bytes (no limit when
// limit <= 0), valid UTF-8, and that every time pointer resolves to an RFC 3339 string. It
// returns a *Error without operation or address (opError fills them in). Its texts name byte
// offsets, JSON types and date-time pointers, never document contents.
func validateDocument(d Document, limit int) error {
	invalid := func(msg string) error { return &Error{Kind: KindInvalid, Err: errors.New(msg)} }
	if limit > 0 && len(d.JSON) > limit {
		return &Error{Kind: KindTooLarge, Err: fmt.Errorf("document is %d bytes, more than the limit of %d", len(d.JSON), limit)}
	}
	trimmed := bytes.TrimLeft(d.JSON, " \t\r\n")
	if len(trimmed) == 0 {
		return invalid("document is empty: it must be a JSON object")
	}
	if !json.Valid(d.JSON) {
		return invalid(syntaxFailure(d.JSON))
	}
	if trimmed[0] != '{' {
		return invalid("document is " + jsonTypeOf(trimmed[0]) + ", not an object")
	}
	if !utf8.Valid(d.JSON) {
		return invalid("document is not valid UTF-8: invalid byte sequence at byte " + strconv.Itoa(invalidUTF8At(d.JSON)))
	}
	if len(d.Times) == 0 {
		return nil
	}
	var root any
	dec := json.NewDecoder(bytes.NewReader(d.JSON))
	dec.UseNumber()
	if err := dec.Decode(&root); err != nil {
		return invalid("document could not be decoded to resolve its date-time pointers")
	}
	seen := make(map[string]bool, len(d.Times))
	for _, p := range d.Times {
		if seen[p] {
			return invalid("date-time pointer " + pointerText(p) + " is listed twice")
		}
		seen[p] = true
		v, err := resolvePointer(root, p)
		if err != nil {
			return invalid("date-time pointer " + pointerText(p) + ": " + err.Error())
		}
		s, ok := v.(string)
		if !ok {
			return invalid("date-time pointer " + pointerText(p) + " names " + jsonTypeOfValue(v) + ", not a string")
		}
		if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
			return invalid("date-time pointer " + pointerText(p) + " names a string that is not an RFC 3339 date-time")
		}
	}
	return nil
}

// syntaxFailure says where b stops being JSON: the byte offset, never the bytes there.
func syntaxFailure(b []byte) string {
	var v json.RawMessage
	err := json.Unmarshal(b, &v)
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return "document is not valid JSON"
	}
	if se.Error() == "unexpected end of JSON input" {
		return "document is not valid JSON: it ends early, at byte " + strconv.FormatInt(se.Offset, 10)
	}
	// Offset counts the bytes read, the offending one included.
	return "document is not valid JSON: syntax error at byte " + strconv.FormatInt(max(se.Offset-1, 0), 10)
}

// jsonTypeOf names the type of the JSON value starting with c.
func jsonTypeOf(c byte) string {
	switch c {
	case '{':
		return "a JSON object"
	case '[':
		return "a JSON array"
	case '"':
		return "a JSON string"
	case 't', 'f':
		return "a JSON boolean"
	case 'n':
		return "JSON null"
	}
	return "a JSON number"
}

// jsonTypeOfValue names the type of a decoded JSON value.
func jsonTypeOfValue(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return "a number"
}

// invalidUTF8At returns the offset of the first invalid UTF-8 sequence in b.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// maxPointerText bounds a date-time pointer quoted in an error.
const maxPointerText = 128

// pointerText quotes a date-time pointer for an error, cut short when long.
func pointerText(p string) string {
	if len(p) > maxPointerText {
		cut := maxPointerText
		for cut > 0 && !utf8.RuneStart(p[cut]) {
			cut--
		}
		return strconv.Quote(p[:cut]) + "..."
	}
	return strconv.Quote(p)
}

// resolvePointer follows an RFC 6901 JSON Pointer through a decoded document.
func resolvePointer(root any, pointer string) (any, error) {
	if pointer == "" {
		return nil, errors.New("the empty pointer names the whole document, not a string")
	}
	if pointer[0] != '/' {
		return nil, errors.New("a pointer starts with '/'")
	}
	cur := root
	for _, tok := range strings.Split(pointer[1:], "/") {
		tok = jsonenc.UnescapePointerToken(tok)
		switch node := cur.(type) {
		case map[string]any:
			v, ok := node[tok]
			if !ok {
				return nil, errors.New("no such member")
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(node) || (len(tok) > 1 && tok[0] == '0') {
				return nil, errors.New("no such array element")
			}
			cur = node[i]
		default:
			return nil, errors.New("descends into a scalar")
		}
	}
	return cur, nil
}
