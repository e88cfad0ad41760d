package cdc

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/internal/jsonenc"
)

// lineEncoder writes DeadLetterLines without reflection: a keyless table's rows are all
// dead-lettered, a quarter of pgbench's TPC-B changes, and encoding/json over the line struct
// cost about as much CPU as indexing a row. Its output decodes to exactly what encoding/json
// writes for NewDeadLetterLine (TestDeadLetterLineMatchesEncodingJSON). It caches each
// schema's encoded column list; not safe for concurrent use.
type lineEncoder struct {
	columns map[*TableSchema][]byte
	scratch bytes.Buffer
}

// appendLine appends rec's line and its newline to b.
func (e *lineEncoder) appendLine(b []byte, rec *DeadLetterRecord) []byte {
	ev := &rec.Event
	b = append(b, `{"time":`...)
	b = appendLineTime(b, rec.Time)
	b = append(b, `,"pipeline":`...)
	b = appendLineString(b, rec.Pipeline)
	b = append(b, `,"table":{"connector":`...)
	b = appendLineString(b, ev.Table.Connector)
	b = append(b, `,"source":`...)
	b = appendLineString(b, ev.Table.Source)
	b = append(b, `,"database":`...)
	b = appendLineString(b, ev.Table.Database)
	if ev.Table.Schema != "" {
		b = append(b, `,"schema":`...)
		b = appendLineString(b, ev.Table.Schema)
	}
	b = append(b, `,"table":`...)
	b = appendLineString(b, ev.Table.Table)
	b = append(b, `},"op":`...)
	b = appendLineString(b, ev.Op.String())
	if ev.Position != nil {
		if p := ev.Position.String(); p != "" {
			b = append(b, `,"position":`...)
			b = appendLineString(b, p)
		}
		if v := ev.Position.Version(); v != 0 {
			b = append(b, `,"version":`...)
			b = strconv.AppendInt(b, v, 10)
		}
	}
	if ev.TxID != "" {
		b = append(b, `,"tx":`...)
		b = appendLineString(b, ev.TxID)
	}
	if !ev.CommitTime.IsZero() {
		b = append(b, `,"commit_time":`...)
		b = appendLineTime(b, ev.CommitTime)
	}
	b = append(b, `,"reason":`...)
	b = appendLineString(b, rec.Reason)
	if ev.Schema != nil && len(ev.Schema.Columns) > 0 {
		b = append(b, e.columnList(ev.Schema)...)
	}
	b = append(b, `,"before":`...)
	b = e.appendRow(b, ev.Before)
	b = append(b, `,"after":`...)
	b = e.appendRow(b, ev.After)
	return append(b, "}\n"...)
}

// columnList is `,"columns":[...]` for s, encoded once per schema.
func (e *lineEncoder) columnList(s *TableSchema) []byte {
	if c, ok := e.columns[s]; ok {
		return c
	}
	c := []byte(`,"columns":[`)
	for i, col := range s.Columns {
		if i > 0 {
			c = append(c, ',')
		}
		c = append(c, `{"name":`...)
		c = appendLineString(c, col.Name)
		c = append(c, `,"kind":`...)
		c = appendLineString(c, col.Kind.String())
		c = append(c, '}')
	}
	c = append(c, ']')
	if e.columns == nil || len(e.columns) >= 256 { // schemas change: keep the recent ones
		e.columns = map[*TableSchema][]byte{}
	}
	e.columns[s] = c
	return c
}

func (e *lineEncoder) appendRow(b []byte, row []Value) []byte {
	if row == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, v := range row {
		if i > 0 {
			b = append(b, ',')
		}
		b = e.appendValue(b, v)
	}
	return append(b, ']')
}

// appendValue writes the common scalar shapes directly and everything else as encodeValue
// does, compacted (a JSON column's document may hold newlines: a line must not).
func (e *lineEncoder) appendValue(b []byte, v Value) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		return strconv.AppendBool(b, v)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case int32:
		return strconv.AppendInt(b, int64(v), 10)
	case int:
		return strconv.AppendInt(b, int64(v), 10)
	case uint64:
		return strconv.AppendUint(b, v, 10)
	case EpochMicros:
		return strconv.AppendInt(b, int64(v), 10)
	case string:
		return appendLineString(b, v)
	}
	enc := encodeValue(v)
	e.scratch.Reset()
	if err := json.Compact(&e.scratch, enc); err != nil {
		// encodeValue always returns valid JSON; a failure here is a bug, never row data.
		return append(b, `{"_unencodable":"compact"}`...)
	}
	return append(b, e.scratch.Bytes()...)
}

// appendLineString writes s as encoding/json does, except that <, > and & stay as they are
// (the FileDLQ's encoder never escaped HTML): invalid UTF-8 becomes U+FFFD.
func appendLineString(b []byte, s string) []byte {
	if utf8.ValidString(s) {
		return jsonenc.AppendString(b, s)
	}
	enc, _ := json.Marshal(s) // replaces invalid bytes, as encoding/json does for the line
	return append(b, enc...)
}

// appendLineTime writes t in UTC as time.Time's MarshalJSON does (RFC 3339 with nanoseconds);
// a year outside 0-9999, which MarshalJSON refuses, is written as null rather than failing
// the pipeline on its dead letter.
func appendLineTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}
