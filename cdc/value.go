package cdc

import (
	"encoding/json"
	"strconv"
)

// Value is one column value in the normalized shapes every source produces, from the stream
// and from a snapshot alike, so that the same row yields the same values on both paths:
//
//	nil                  SQL NULL
//	bool                 boolean (PostgreSQL boolean; MySQL has none: TINYINT(1) stays int64)
//	int64                signed integers
//	uint64               unsigned integers (MySQL UNSIGNED), also BIT(n) as its integer value
//	float64              REAL, DOUBLE, FLOAT
//	string               character data (decoded to UTF-8), DECIMAL/NUMERIC (exact digits, never
//	                     a float), DATE ("2006-01-02"), TIME ("15:04:05[.ffffff]"), DATETIME and
//	                     PostgreSQL timestamp without time zone ("2006-01-02 15:04:05[.ffffff]"),
//	                     ENUM labels, SET labels joined by ",", UUID, intervals and other types as
//	                     their source text form
//	Base64               binary data (BLOB, BINARY, bytea), and TEXT columns as the MySQL binlog
//	                     delivers them before the sink decodes character sets: {"_base64": "..."}
//	EpochMicros          MySQL TIMESTAMP and PostgreSQL timestamp with time zone: an instant
//	RawJSON              JSON and JSONB documents, unchanged
//	[]Value              PostgreSQL arrays
//	Unchanged            only in the After image of an Update: the source did not send this
//	                     value because the change left it as it was (a PostgreSQL TOASTed
//	                     value under REPLICA IDENTITY DEFAULT); a consumer takes it from the
//	                     row's current state (see Unchanged)
type Value = any

// Base64 holds binary column data, standard base64 with padding. It marshals as
// {"_base64": "..."}.
type Base64 string

// MarshalJSON renders {"_base64": "..."}.
func (b Base64) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]string{"_base64": string(b)})
}

// EpochMicros is an instant as microseconds since 1970-01-01T00:00:00Z.
type EpochMicros int64

// MarshalJSON renders the number.
func (e EpochMicros) MarshalJSON() ([]byte, error) {
	return strconv.AppendInt(nil, int64(e), 10), nil
}

// RawJSON is a JSON document from a JSON or JSONB column, unchanged.
type RawJSON = json.RawMessage

// Unchanged stands for a value the source did not send because the change left it as it was:
// PostgreSQL does not resend an unchanged TOASTed value (text, jsonb, bytea and the like over
// about 2 KB, stored out of line) unless the table has REPLICA IDENTITY FULL. It occurs only in
// the After image of an Update, never as a key column of the new row, never in Before, and
// never in a snapshot row. A consumer that keeps the row's current state takes the value from
// there; one that cannot must not write the marker as if it were the value (the sink fills it
// from the index or dead-letters the row, see package sink). It marshals as
// {"_unchanged": true}, so a dead-letter record shows which values the source left out.
type Unchanged struct{}

// MarshalJSON renders {"_unchanged":true}.
func (Unchanged) MarshalJSON() ([]byte, error) { return []byte(`{"_unchanged":true}`), nil }

// HasUnchanged reports whether row holds an Unchanged value.
func HasUnchanged(row []Value) bool {
	for _, v := range row {
		if _, ok := v.(Unchanged); ok {
			return true
		}
	}
	return false
}
