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
)

// DefaultMaxDocumentBytes is the default limit on a document's JSON encoding: well inside
// MongoDB's 16 MiB BSON limit after conversion, and far inside Elasticsearch's request limit.
const DefaultMaxDocumentBytes = 8 << 20

// NewDocument returns a Document holding the JSON encoding of v, which must encode as a JSON
// object, with timePointers marking its date-time strings.
func NewDocument(v any, timePointers ...string) (Document, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return Document{}, &Error{Kind: KindInvalid, Err: err}
	}
	d := Document{JSON: b, Times: timePointers}
	if err := validateDocument(d, 0); err != nil {
		return Document{}, err
	}
	return d, nil
}

// validateDocument checks that d is a JSON object of at most limit bytes (no limit when
// limit <= 0) and that every time pointer resolves to an RFC 3339 string. Errors never quote
// document contents.
func validateDocument(d Document, limit int) error {
	if limit > 0 && len(d.JSON) > limit {
		return &Error{Kind: KindTooLarge, Err: fmt.Errorf("document is %d bytes, more than the limit of %d", len(d.JSON), limit)}
	}
	trimmed := bytes.TrimLeft(d.JSON, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' || !json.Valid(d.JSON) {
		return &Error{Kind: KindInvalid, Err: errors.New("document is not a JSON object")}
	}
	if !utf8.Valid(d.JSON) {
		return &Error{Kind: KindInvalid, Err: errors.New("document is not valid UTF-8")}
	}
	if len(d.Times) == 0 {
		return nil
	}
	var root any
	dec := json.NewDecoder(bytes.NewReader(d.JSON))
	dec.UseNumber()
	if err := dec.Decode(&root); err != nil {
		return &Error{Kind: KindInvalid, Err: errors.New("document is not a JSON object")}
	}
	seen := make(map[string]bool, len(d.Times))
	for _, p := range d.Times {
		if seen[p] {
			return &Error{Kind: KindInvalid, Err: fmt.Errorf("date-time pointer %q is listed twice", p)}
		}
		seen[p] = true
		v, err := resolvePointer(root, p)
		if err != nil {
			return &Error{Kind: KindInvalid, Err: fmt.Errorf("date-time pointer %q: %w", p, err)}
		}
		s, ok := v.(string)
		if !ok {
			return &Error{Kind: KindInvalid, Err: fmt.Errorf("date-time pointer %q does not name a string", p)}
		}
		if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
			return &Error{Kind: KindInvalid, Err: fmt.Errorf("date-time pointer %q does not name an RFC 3339 date-time", p)}
		}
	}
	return nil
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
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
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
