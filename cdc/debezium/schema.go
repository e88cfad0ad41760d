package debezium

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/tributary-dev/tributary/cdc"
)

// connectSchema is a Kafka Connect schema as JsonConverter writes it beside a payload.
type connectSchema struct {
	Type       string            `json:"type"`
	Optional   bool              `json:"optional"`
	Name       string            `json:"name"`
	Field      string            `json:"field"`
	Fields     []connectSchema   `json:"fields"`
	Items      *connectSchema    `json:"items"`
	Parameters map[string]string `json:"parameters"`
}

// field returns the struct field named name, or nil.
func (s *connectSchema) field(name string) *connectSchema {
	for i := range s.Fields {
		if s.Fields[i].Field == name {
			return &s.Fields[i]
		}
	}
	return nil
}

// The parameters column.propagate.source.type (and datatype.propagate.source.type) add to a
// column's schema.
const (
	paramSourceType   = "__debezium.source.column.type"
	paramSourceLength = "__debezium.source.column.length"
	paramSourceScale  = "__debezium.source.column.scale"
)

// Debezium's and Kafka Connect's logical type names.
const (
	logicalDecimal         = "org.apache.kafka.connect.data.Decimal"
	logicalConnectDate     = "org.apache.kafka.connect.data.Date"
	logicalConnectTime     = "org.apache.kafka.connect.data.Time"
	logicalConnectTS       = "org.apache.kafka.connect.data.Timestamp"
	logicalVariableDecimal = "io.debezium.data.VariableScaleDecimal"
	logicalDate            = "io.debezium.time.Date"
	logicalTime            = "io.debezium.time.Time"
	logicalMicroTime       = "io.debezium.time.MicroTime"
	logicalNanoTime        = "io.debezium.time.NanoTime"
	logicalTimestamp       = "io.debezium.time.Timestamp"
	logicalMicroTimestamp  = "io.debezium.time.MicroTimestamp"
	logicalNanoTimestamp   = "io.debezium.time.NanoTimestamp"
	logicalZonedTimestamp  = "io.debezium.time.ZonedTimestamp"
	logicalZonedTime       = "io.debezium.time.ZonedTime"
	logicalMicroDuration   = "io.debezium.time.MicroDuration"
	logicalInterval        = "io.debezium.time.Interval"
	logicalYear            = "io.debezium.time.Year"
	logicalJSON            = "io.debezium.data.Json"
	logicalUUID            = "io.debezium.data.Uuid"
	logicalEnum            = "io.debezium.data.Enum"
	logicalEnumSet         = "io.debezium.data.EnumSet"
	logicalBits            = "io.debezium.data.Bits"
	logicalXML             = "io.debezium.data.Xml"
	logicalGeometry        = "io.debezium.data.geometry.Geometry"
	logicalGeography       = "io.debezium.data.geometry.Geography"
	logicalPoint           = "io.debezium.data.geometry.Point"
)

// errNoSourceTypes is wrapped by the failure of a table whose envelopes carry neither the
// source column types nor a catalog to read them from.
var errNoSourceTypes = errors.New("the change events carry no source column types")

// column is one column of a table as the decoder reads it: the cdc.Column a native source
// would report and the conversion of Debezium's representation into cdc's value shapes.
type column struct {
	col   cdc.Column
	conv  converter
	rules columnRules // checks of its values beyond the conversion (edges.go)
}

// buildColumn derives a column from its Connect field schema. connector is the envelope's
// source.connector ("postgresql", "mysql", "mariadb"). With the propagated source type the
// column is the one the native source reports; without it, infer must be set and the column
// is inferred from the Connect type alone.
func buildColumn(connector string, f *connectSchema, infer bool) (column, error) {
	col := cdc.Column{Name: f.Field, Nullable: f.Optional}
	st, hasType := f.Parameters[paramSourceType]
	if hasType {
		col.SourceType = st
		length := paramInt(f.Parameters, paramSourceLength)
		scale := paramInt(f.Parameters, paramSourceScale)
		known := false
		if connector == "postgresql" {
			known = pgColumn(&col, st, length, scale)
		} else {
			known = mysqlColumn(&col, st, length, scale)
		}
		if !known {
			// A PostgreSQL enum, domain or composite type, or a type this package does not
			// know: the Connect type says what it holds (a domain decodes as its base type).
			elem := col.Elem
			inferColumn(&col, f)
			if col.Kind == cdc.KindArray && elem != nil && col.Elem == nil {
				col.Elem = elem
			}
		}
	} else if !infer {
		return column{}, fmt.Errorf("column %q: %w", f.Field, errNoSourceTypes)
	} else {
		inferColumn(&col, f)
	}
	if labels, ok := f.Parameters["allowed"]; ok && (col.Kind == cdc.KindEnum || col.Kind == cdc.KindSet) {
		col.Labels = splitLabels(labels)
	}
	conv, err := converterFor(connector, &col, f)
	if err != nil {
		return column{}, fmt.Errorf("column %q: %w", f.Field, err)
	}
	return column{col: col, conv: conv}, nil
}

func paramInt(p map[string]string, key string) int {
	n, err := strconv.Atoi(p[key])
	if err != nil {
		return -1
	}
	return n
}

// splitLabels splits the "allowed" parameter of Enum and EnumSet schemas. Debezium joins
// the labels with commas without escaping, so a label holding a comma cannot be told apart.
func splitLabels(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// pgColumn fills kind, bits, precision, scale and length as pgcdc does for the type name.
// Debezium names PostgreSQL types as pg_type does (int4, varchar, _int4 for arrays, the
// enum's or domain's own name); length and scale are its column length and scale.
func pgColumn(c *cdc.Column, typ string, length, scale int) bool {
	t := strings.ToLower(typ)
	if strings.HasPrefix(t, "_") { // an array: its element type without the underscore
		elem := cdc.Column{Name: c.Name}
		if !pgColumn(&elem, t[1:], length, scale) {
			return false
		}
		c.Kind, c.Elem = cdc.KindArray, &elem
		return true
	}
	frac := func() int {
		if length >= 0 && scale >= 0 && scale <= 6 {
			return scale
		}
		return 6
	}
	switch t {
	case "bool", "boolean":
		c.Kind = cdc.KindBool
	case "int2", "smallint", "smallserial":
		c.Kind, c.Bits = cdc.KindInt, 16
	case "int4", "integer", "int", "serial":
		c.Kind, c.Bits = cdc.KindInt, 32
	case "int8", "bigint", "bigserial":
		c.Kind, c.Bits = cdc.KindInt, 64
	case "oid", "xid", "cid":
		c.Kind, c.Bits = cdc.KindUint, 32
	case "float4", "real":
		c.Kind, c.Bits = cdc.KindFloat, 32
	case "float8", "double precision":
		c.Kind, c.Bits = cdc.KindFloat, 64
	case "numeric", "decimal":
		c.Kind = cdc.KindDecimal
		// An unconstrained numeric reports PostgreSQL's maximum precision (131089) and no
		// scale; pgcdc reports 0, 0 for it.
		if length > 0 && length <= 1000 {
			c.Precision, c.Scale = length, max(scale, 0)
		}
	case "text", "name", "char":
		c.Kind = cdc.KindText
	case "varchar", "bpchar", "character varying", "character":
		c.Kind = cdc.KindText
		if length > 0 && length < 1<<30 {
			c.Length = length
		}
	case "bytea":
		c.Kind = cdc.KindBinary
	case "date":
		c.Kind = cdc.KindDate
	case "time":
		c.Kind, c.Precision = cdc.KindTime, frac()
	case "timestamp":
		c.Kind, c.Precision = cdc.KindDateTime, frac()
	case "timestamptz":
		c.Kind, c.Precision = cdc.KindTimestamp, frac()
	case "json", "jsonb":
		c.Kind = cdc.KindJSON
	case "uuid":
		c.Kind = cdc.KindUUID
	case "bit", "varbit":
		c.Kind = cdc.KindBit
		if length > 0 && length < 1<<30 {
			c.Bits = length
		}
	case "timetz", "interval", "inet", "cidr", "macaddr", "macaddr8", "xml", "point", "tsvector", "tsquery",
		"int2vector", "oidvector", "money", "line", "lseg", "box", "path", "polygon", "circle", "pg_lsn", "txid_snapshot":
		// Types pgcdc keeps as their text form.
		c.Kind = cdc.KindOther
	default:
		return false
	}
	return true
}

// mysqlColumn fills the column as mysqlcdc does for the type name Debezium propagates
// (INT, INT UNSIGNED, VARCHAR, DECIMAL, ENUM, ...); length is the declared length or
// precision, scale the decimal scale or the fractional-second digits.
func mysqlColumn(c *cdc.Column, typ string, length, scale int) bool {
	t := strings.ToLower(typ)
	unsigned := strings.Contains(t, "unsigned")
	if i := strings.IndexByte(t, ' '); i > 0 {
		t = t[:i]
	}
	intBits := map[string]int{"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "integer": 32, "bigint": 64}
	switch t {
	case "tinyint", "smallint", "mediumint", "int", "integer", "bigint":
		c.Bits = intBits[t]
		if unsigned {
			c.Kind = cdc.KindUint
		} else {
			c.Kind = cdc.KindInt
		}
	case "year":
		c.Kind, c.Bits = cdc.KindInt, 16
	case "decimal", "numeric", "dec", "fixed":
		c.Kind = cdc.KindDecimal
		c.Precision, c.Scale = max(length, 0), max(scale, 0)
	case "float":
		c.Kind, c.Bits = cdc.KindFloat, 32
	case "double", "real":
		c.Kind, c.Bits = cdc.KindFloat, 64
	case "bit":
		c.Kind, c.Bits = cdc.KindBit, max(length, 1)
	case "char", "varchar", "tinytext", "text", "mediumtext", "longtext":
		c.Kind, c.Length = cdc.KindText, max(length, 0)
	case "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob":
		c.Kind, c.Length = cdc.KindBinary, max(length, 0)
	case "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon", "geometrycollection", "geomcollection":
		c.Kind = cdc.KindBinary
	case "json":
		c.Kind = cdc.KindJSON
	case "enum":
		c.Kind = cdc.KindEnum
	case "set":
		c.Kind = cdc.KindSet
	case "date":
		c.Kind = cdc.KindDate
	case "time": // the length Debezium propagates for temporal types is their fsp
		c.Kind, c.Precision = cdc.KindTime, max(length, 0)
	case "datetime":
		c.Kind, c.Precision = cdc.KindDateTime, max(length, 0)
	case "timestamp":
		c.Kind, c.Precision = cdc.KindTimestamp, max(length, 0)
	case "uuid":
		c.Kind = cdc.KindUUID
	case "inet4", "inet6":
		c.Kind = cdc.KindOther
	default:
		return false
	}
	return true
}

// inferColumn derives a column from the Connect type alone (Options.InferTypes): right for
// kinds, not always for widths, and blind to what Connect types do not carry (an unsigned
// BIGINT, a varchar's length, a JSON column MariaDB declares as LONGTEXT).
func inferColumn(c *cdc.Column, f *connectSchema) {
	switch f.Name {
	case logicalDecimal:
		c.Kind = cdc.KindDecimal
		c.Precision = paramInt(f.Parameters, "connect.decimal.precision")
		c.Scale = paramInt(f.Parameters, "scale")
		if c.Precision < 0 || c.Scale < 0 {
			c.Precision, c.Scale = 0, 0
		}
		return
	case logicalVariableDecimal:
		c.Kind = cdc.KindDecimal
		return
	case logicalDate, logicalConnectDate:
		c.Kind = cdc.KindDate
		return
	case logicalTime, logicalConnectTime:
		c.Kind, c.Precision = cdc.KindTime, 3
		return
	case logicalMicroTime, logicalNanoTime:
		c.Kind, c.Precision = cdc.KindTime, 6
		return
	case logicalTimestamp, logicalConnectTS:
		c.Kind, c.Precision = cdc.KindDateTime, 3
		return
	case logicalMicroTimestamp, logicalNanoTimestamp:
		c.Kind, c.Precision = cdc.KindDateTime, 6
		return
	case logicalZonedTimestamp:
		c.Kind, c.Precision = cdc.KindTimestamp, 6
		return
	case logicalYear:
		c.Kind, c.Bits = cdc.KindInt, 16
		return
	case logicalJSON:
		c.Kind = cdc.KindJSON
		return
	case logicalUUID:
		c.Kind = cdc.KindUUID
		return
	case logicalEnum:
		c.Kind = cdc.KindEnum
		return
	case logicalEnumSet:
		c.Kind = cdc.KindSet
		return
	case logicalBits:
		c.Kind, c.Bits = cdc.KindBit, paramInt(f.Parameters, "length")
		if c.Bits < 0 {
			c.Bits = 0
		}
		return
	case logicalGeometry, logicalGeography:
		c.Kind = cdc.KindBinary
		return
	case logicalXML, logicalZonedTime, logicalMicroDuration, logicalInterval, logicalPoint:
		c.Kind = cdc.KindOther
		return
	}
	switch f.Type {
	case "int8":
		c.Kind, c.Bits = cdc.KindInt, 8
	case "int16":
		c.Kind, c.Bits = cdc.KindInt, 16
	case "int32":
		c.Kind, c.Bits = cdc.KindInt, 32
	case "int64":
		c.Kind, c.Bits = cdc.KindInt, 64
	case "float", "float32":
		c.Kind, c.Bits = cdc.KindFloat, 32
	case "double", "float64":
		c.Kind, c.Bits = cdc.KindFloat, 64
	case "boolean":
		c.Kind = cdc.KindBool
	case "string":
		c.Kind = cdc.KindText
	case "bytes":
		c.Kind = cdc.KindBinary
	case "array":
		c.Kind = cdc.KindArray
		if f.Items != nil {
			elem := cdc.Column{Name: c.Name}
			inferColumn(&elem, f.Items)
			c.Elem = &elem
		}
	default:
		c.Kind = cdc.KindOther
	}
}

// tableShape is what the decoder knows of a table from one pair of key and value schemas.
type tableShape struct {
	schema  *cdc.TableSchema
	columns []column
	byName  map[string]int
	// corrupt are the columns whose streamed values the connector is known to corrupt.
	corrupt []int
	// snapshotProblem and snapshotFix, when set, refuse the table's snapshot reads: their
	// values of some column cannot be told apart (PostgreSQL's BC dates, edges.go).
	snapshotProblem, snapshotFix string
}

// add appends a column (its schema's column is the caller's).
func (sh *tableShape) add(connector string, c column) {
	if connector == "mariadb" && c.col.Kind == cdc.KindUUID {
		// debezium-connector-mariadb 3.5.0 reads a UUID from the binlog one byte off: a zero
		// byte first, the last byte lost (its snapshot reads them right).
		sh.corrupt = append(sh.corrupt, len(sh.columns))
	}
	sh.byName[c.col.Name] = len(sh.columns)
	sh.columns = append(sh.columns, c)
}

// buildShape derives a table's schema from the value schema's "after" (or "before") struct
// and the key schema's fields (the primary key, in key order). key may be nil: a table
// without a primary key, whose records have no key.
func buildShape(id cdc.TableID, connector string, row *connectSchema, key *connectSchema, infer bool, o edgeOptions) (*tableShape, error) {
	if row == nil || row.Type != "struct" {
		return nil, errors.New("the envelope's schema has no row struct")
	}
	sh := &tableShape{
		schema:  &cdc.TableSchema{ID: id, Columns: make([]cdc.Column, 0, len(row.Fields))},
		columns: make([]column, 0, len(row.Fields)),
		byName:  make(map[string]int, len(row.Fields)),
	}
	var missing []string
	var refused []cdc.StartProblem
	for i := range row.Fields {
		f := &row.Fields[i]
		c, err := buildColumn(connector, f, infer)
		if errors.Is(err, errNoSourceTypes) {
			missing = append(missing, f.Field)
			continue
		}
		if err != nil {
			return nil, err
		}
		if problem, fix := refusal(connector, &c.col, f, o); problem != "" {
			refused = append(refused, cdc.StartProblem{Table: id, Problem: problem, Fix: fix})
			continue
		}
		c.rules = rulesFor(connector, &c.col, f.Name == logicalDecimal || f.Name == logicalVariableDecimal, o)
		sh.add(connector, c)
		sh.schema.Columns = append(sh.schema.Columns, c.col)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w for %d of %d columns (fix: set column.propagate.source.type=.* on the connector, or let the source infer types from Kafka Connect's)", errNoSourceTypes, len(missing), len(row.Fields))
	}
	if len(refused) > 0 {
		return nil, &cdc.StartError{Component: "debezium", Problems: refused}
	}
	if connector == "postgresql" && !o.plainDates {
		sh.snapshotProblem, sh.snapshotFix = snapshotDateProblem(sh.schema)
	}
	if key != nil {
		for _, kf := range key.Fields {
			i, ok := sh.byName[kf.Field]
			if !ok {
				return nil, fmt.Errorf("key field %q is not a column of the row", kf.Field)
			}
			sh.schema.PrimaryKey = append(sh.schema.PrimaryKey, i)
		}
	}
	return sh, nil
}

// decodeSchema parses a JsonConverter schema.
func decodeSchema(raw []byte) (*connectSchema, error) {
	var s connectSchema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	return &s, nil
}
