package cdc

import (
	"context"
	"errors"
	"strconv"
)

// Kind is a column's normalized type: what the sink needs to choose a mapping and to
// normalize values, independent of the source's spelling of the type.
type Kind uint8

// Column kinds.
const (
	KindOther     Kind = iota // anything else: values are the source's text form
	KindBool                  // boolean
	KindInt                   // signed integer of Column.Bits bits
	KindUint                  // unsigned integer of Column.Bits bits
	KindFloat                 // binary floating point of Column.Bits bits (32 or 64)
	KindDecimal               // exact decimal, Column.Precision and Column.Scale (0,0 when unbounded)
	KindText                  // character data (Column.Length characters when bounded)
	KindBinary                // byte data
	KindDate                  // calendar date
	KindTime                  // time of day, no zone
	KindDateTime              // date and time without a zone (MySQL DATETIME, PG timestamp)
	KindTimestamp             // an instant (MySQL TIMESTAMP, PG timestamptz)
	KindJSON                  // a JSON document
	KindEnum                  // one label of Column.Labels
	KindSet                   // a subset of Column.Labels
	KindBit                   // a bit string of Column.Bits bits
	KindUUID                  // a UUID
	KindArray                 // a PostgreSQL array of Column.Elem
)

var kindNames = [...]string{"other", "bool", "int", "uint", "float", "decimal", "text", "binary", "date", "time", "datetime", "timestamp", "json", "enum", "set", "bit", "uuid", "array"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Column describes one source column.
type Column struct {
	Name       string // exactly as the source spells it (case and quoting preserved)
	SourceType string // the source's own type text, e.g. "numeric(12,2)", "varchar(64)", "tinyint(3) unsigned"
	Kind       Kind
	Bits       int // integer, float and bit widths
	Precision  int // decimal precision; fractional-second digits for time kinds
	Scale      int // decimal scale
	Length     int // declared character or byte length, 0 when unbounded
	Nullable   bool
	Charset    string   // character set of text columns, when the source has one
	Labels     []string // ENUM and SET labels in declaration order
	Elem       *Column  // array element type
}

// TableSchema is a table's columns and primary key.
type TableSchema struct {
	ID      TableID
	Columns []Column
	// PrimaryKey holds indexes into Columns, in key order; empty for a table without one.
	PrimaryKey []int
	// Relation is the source's identity of the relation the table's name denoted when the
	// change was made, stable across renames and column changes and never reused while the
	// relation exists: PostgreSQL's pg_class OID in decimal; MySQL/MariaDB the version of the
	// DDL (CREATE or RENAME) that gave the name its relation, as far as the stream has seen it.
	// Empty when the source cannot tell (a table older than everything the stream saw, the
	// Debezium path): an empty Relation never counts as a different relation. The sink binds
	// each index to one relation (see package sink, Schema events).
	Relation string
}

// ColumnIndex returns the index of the column named name, or -1.
func (s *TableSchema) ColumnIndex(name string) int {
	for i := range s.Columns {
		if s.Columns[i].Name == name {
			return i
		}
	}
	return -1
}

// ErrTableNotFound is what a SchemaLoader's error wraps when the catalog has no such table
// (dropped, renamed, or never created): reading it again will not help.
var ErrTableNotFound = errors.New("table not found in the catalog")

// SchemaLoader loads a table's schema from the source's catalog. Sources load on demand the
// first time they meet a table, cache the result and reload when DDL or a relation message says
// the table changed.
type SchemaLoader interface {
	LoadSchema(ctx context.Context, id TableID) (*TableSchema, error)
}

// CurrentSchemaLoader is a source that can also load a table's schema as its catalog has it
// now, which may be ahead of the stream's (LoadSchema answers as of the stream's position
// where the source tracks it): what a reindex maps a new index for.
type CurrentSchemaLoader interface {
	LoadCurrentSchema(ctx context.Context, id TableID) (*TableSchema, error)
}
