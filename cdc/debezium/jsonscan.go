package debezium

import (
	"encoding/json"
	"errors"
)

// A record is mostly its embedded schema (kilobytes beside a payload of a few hundred bytes),
// and the schema is the same for every record of a table until its DDL changes: the decoder
// finds the envelope's members without validating or copying what it skips (encoding/json
// would scan the whole schema of every record), and walks row images member by member.

var errBadJSON = errors.New("malformed JSON")

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at b[i] == '"', and whether it
// holds an escape.
func skipString(b []byte, i int) (int, bool, error) {
	escaped := false
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			return j + 1, escaped, nil
		}
	}
	return 0, false, errBadJSON
}

// skipValue returns the index just past the value starting at b[i] (after spaces). Nested
// objects and arrays are matched by their brackets, strings by their quotes; the contents
// are not validated (the parts the decoder uses are parsed by encoding/json or the
// converters, which do validate).
func skipValue(b []byte, i int) (int, error) {
	i = skipSpace(b, i)
	if i >= len(b) {
		return 0, errBadJSON
	}
	switch b[i] {
	case '"':
		end, _, err := skipString(b, i)
		return end, err
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, _, err := skipString(b, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errBadJSON
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && !isSpace(b[j]) {
		j++
	}
	if j == i {
		return 0, errBadJSON
	}
	return j, nil
}

// eachMember calls fn with each member of the JSON object b: its key (unquoted; nil quoting
// aside, a key with escapes is decoded) and its raw value. It stops at fn's first error.
func eachMember(b []byte, fn func(key, value []byte) error) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return errBadJSON
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return errBadJSON
		}
		end, escaped, err := skipString(b, i)
		if err != nil {
			return err
		}
		key := b[i+1 : end-1]
		if escaped {
			var k string
			if err := json.Unmarshal(b[i:end], &k); err != nil {
				return errBadJSON
			}
			key = []byte(k)
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return errBadJSON
		}
		start := skipSpace(b, i+1)
		stop, err := skipValue(b, start)
		if err != nil {
			return err
		}
		if err := fn(key, b[start:stop]); err != nil {
			return err
		}
		i = skipSpace(b, stop)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
			continue
		}
		if i < len(b) && b[i] == '}' {
			if skipSpace(b, i+1) != len(b) {
				return errBadJSON
			}
			return nil
		}
		return errBadJSON
	}
}
