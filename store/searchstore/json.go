package searchstore

import (
	"bytes"

	"github.com/tributary-dev/tributary/internal/jsonenc"
)

// appendJSONString appends s as a JSON string. Names and ids are valid UTF-8 (the portable
// layer checks), so only quotes, backslashes and control characters need escaping.
func appendJSONString(b []byte, s string) []byte { return jsonenc.AppendString(b, s) }

// appendSource appends a document for an NDJSON _bulk body, where it must sit on one line.
// A JSON string cannot hold a raw line feed, so every '\n' in valid JSON is whitespace between
// tokens; it becomes a space and the JSON value stays the same. Nothing else is touched.
func appendSource(b, doc []byte) []byte {
	i := bytes.IndexByte(doc, '\n')
	if i < 0 {
		return append(b, doc...)
	}
	start := len(b)
	b = append(b, doc...)
	for j := start + i; j < len(b); j++ {
		if b[j] == '\n' {
			b[j] = ' '
		}
	}
	return b
}
