package search

import (
	"encoding/json"
	"slices"
)

// ErrorInfo is what a failed answer (or a failed bulk item or _mget entry) says about itself:
// the error type, the types of its nested causes and the index it names. The reason texts
// are left out on purpose: mapping errors quote the offending field values.
type ErrorInfo struct {
	// Type is the outermost error type, e.g. "index_not_found_exception"; empty when the
	// answer has no structured error (a bare string, no error member, not JSON).
	Type string
	// CausedBy holds the types of the nested caused_by errors, outermost first (at most 8).
	CausedBy []string
	// Index is the index the error names, if any.
	Index string
}

// maxCauses bounds how deep caused_by chains are followed.
const maxCauses = 8

// Has reports whether t is the type of the error or of one of its causes.
func (e ErrorInfo) Has(t string) bool { return e.Type == t || slices.Contains(e.CausedBy, t) }

// ParseError reads the "error" member of an answer body.
func ParseError(body []byte) ErrorInfo {
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &env) != nil {
		return ErrorInfo{}
	}
	return ParseErrorObject(env.Error)
}

// ParseErrorObject reads one error object ({"type": ..., "caused_by": {...}}); anything else
// (a bare string, nothing) gives the zero ErrorInfo.
func ParseErrorObject(raw json.RawMessage) ErrorInfo {
	type cause struct {
		Type     string          `json:"type"`
		Index    string          `json:"index"`
		CausedBy json.RawMessage `json:"caused_by"`
	}
	var c cause
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &c) != nil {
		return ErrorInfo{}
	}
	e := ErrorInfo{Type: c.Type, Index: c.Index}
	for next := c.CausedBy; len(next) > 0 && len(e.CausedBy) < maxCauses; {
		var n cause
		if json.Unmarshal(next, &n) != nil || n.Type == "" {
			break
		}
		e.CausedBy = append(e.CausedBy, n.Type)
		next = n.CausedBy
	}
	return e
}
