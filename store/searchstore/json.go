package searchstore

import "bytes"

// appendJSONString appends s as a JSON string. Names and ids are valid UTF-8 (the portable
// layer checks), so only quotes, backslashes and control characters need escaping.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

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
