package sink

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/tributary-dev/tributary/cdc"
)

// Engine is the search engine an index lives on. The two differ in a few field types (see
// GenerateMapping), so the mapping is generated per engine.
type Engine uint8

// Engines.
const (
	Elasticsearch Engine = iota // Elasticsearch 8
	OpenSearch                  // OpenSearch 2
)

func (e Engine) String() string {
	switch e {
	case Elasticsearch:
		return "elasticsearch"
	case OpenSearch:
		return "opensearch"
	}
	return "Engine(" + strconv.Itoa(int(e)) + ")"
}

// DecimalMapping chooses how DECIMAL/NUMERIC columns are mapped.
type DecimalMapping uint8

// Decimal mappings.
const (
	// DecimalScaledFloat (the default) maps a decimal whose declared precision is 1..15 (and
	// 0 <= scale <= precision) to scaled_float with scaling_factor 10^scale, ignore_malformed
	// and a keyword sub-field "exact" holding the original digits: every finite value such a
	// column holds is stored exactly (see the package documentation, "Decimals"). Any other
	// decimal -- unbounded, wider than 15 digits, a negative scale or one above the precision
	// -- maps to keyword with the exact digits plus a double sub-field "approx"
	// (ignore_malformed) for range queries and sorting.
	DecimalScaledFloat DecimalMapping = iota
	// DecimalKeyword maps decimals to keyword only: exact, sortable as text, not numeric.
	DecimalKeyword
	// DecimalDouble maps decimals to double (ignore_malformed) with the keyword sub-field
	// "exact": numeric range queries and aggregations are approximate beyond 15-17
	// significant digits.
	DecimalDouble
)

// JSONMapping chooses how JSON/JSONB columns are mapped.
type JSONMapping uint8

// JSON mappings.
const (
	// JSONStored (the default) maps JSON to an object with "enabled": false: the document is
	// kept in _source exactly but not indexed, so no JSON shape can ever cause a mapping
	// conflict or a mapping explosion.
	JSONStored JSONMapping = iota
	// JSONFlattened indexes every leaf value as a keyword under one field: "flattened" on
	// Elasticsearch, "flat_object" on OpenSearch.
	JSONFlattened
)

// MappingOptions tunes GenerateMapping.
type MappingOptions struct {
	Engine    Engine
	DecimalAs DecimalMapping // default DecimalScaledFloat
	JSONAs    JSONMapping    // default JSONStored
	Uint64As  Uint64Mapping  // default Uint64UnsignedLong
}

// Uint64Mapping chooses how 64-bit unsigned integers (MySQL BIGINT UNSIGNED) are mapped.
type Uint64Mapping uint8

// Uint64 mappings.
const (
	// Uint64UnsignedLong (the default) maps to unsigned_long: exact over the whole range. It
	// is in Elasticsearch 8's default distribution and OpenSearch 2.8+, but not in
	// Elasticsearch's OSS integration-test build (index creation fails there).
	Uint64UnsignedLong Uint64Mapping = iota
	// Uint64Keyword maps to keyword: exact, searchable by term, not numeric.
	Uint64Keyword
)

// keywordIgnoreAbove is the longest string (in characters) a keyword field indexes: Lucene's
// term limit is 32766 bytes and a character takes up to 4 bytes in UTF-8. Longer values stay in
// _source and in the text sub-field; they are not rejected.
const keywordIgnoreAbove = 8191

// maxArrayDepth bounds the recursion through Column.Elem (PostgreSQL arrays do not nest
// types, so one level is what real schemas have).
const maxArrayDepth = 8

// maxScale bounds the scaling_factor: 10^18 is the largest power of ten a long holds.
const maxScale = 18

// maxScaledPrecision is the widest declared precision the default decimal mapping gives a
// scaled_float: 10^15-1 units are below 2^53, and with at most 15 digits the engine's
// arithmetic (parse as double, multiply by 10^scale, round) errs by less than 0.23 units, so
// it always lands on the exact unscaled integer (TestScaledFloatHoldsEveryDeclaredValue).
const maxScaledPrecision = 15

// dateFormats parses every shape a source produces for the date kinds: "2006-01-02" (DATE,
// through strict_date_optional_time), "2006-01-02 15:04:05" with 0 to 6 fractional digits
// (MySQL DATETIME, PostgreSQL timestamp) and epoch_millis with a fraction (TIMESTAMP from epoch
// microseconds). A "S" run in a pattern is a fixed number of digits, so the fraction widths
// are optional sections of one pattern, tried longest first.
const dateFormats = "strict_date_optional_time||yyyy-MM-dd HH:mm:ss[.SSSSSS][.SSSSS][.SSSS][.SSS][.SS][.S]||epoch_millis"

// GenerateMapping returns the mapping body {"properties":{...}} for a table: one field per
// column, named exactly as the column and in column order (esfence adds _meta). Per kind:
//
//   - bool: boolean.
//   - Signed integers by width: byte (8), short (16), integer (24, 32), long (64 or unknown).
//     Unsigned integers take the narrowest signed type holding their range: short (8),
//     integer (16, 24), long (32); 64-bit (and unknown width) unsigned_long, exact up to
//     2^64-1 (Uint64Keyword maps them to keyword instead).
//   - float: float (32 bits) or double, with ignore_malformed: NaN and the infinities arrive as
//     the strings "NaN", "Infinity", "-Infinity" (see AppendDocument), which the document keeps
//     in _source while the numeric field leaves them out.
//   - decimal: by declared precision and scale, so that every value the column can hold is
//     kept (the package documentation, "Decimals", states the rule and why it is exact). With
//     a precision of 1..15 and 0 <= scale <= precision: scaled_float with scaling_factor
//     10^scale, ignore_malformed (a PostgreSQL numeric(p,s) can hold NaN) and a keyword
//     sub-field "exact" holding the digits. Otherwise (unbounded, wider, a negative scale or
//     one above the precision): keyword holding the exact digits, with a double sub-field
//     "approx" (ignore_malformed) for range queries and sorting, approximate beyond about 15
//     significant digits. The document carries the digits as a JSON string, so _source is
//     exact either way. DecimalKeyword (keyword only) and DecimalDouble (double with
//     ignore_malformed plus "exact") are the opt-outs.
//   - text: keyword (ignore_above 8191, the longest string whose UTF-8 always fits Lucene's
//     32766-byte term) with a "text" sub-field for full-text search. Mirrored columns are
//     mostly filtered, sorted and aggregated on; longer values stay in _source and in "text".
//   - binary: binary (base64 in the document, not searchable).
//   - date, datetime, timestamp: date with the format list in dateFormats, millisecond
//     resolution in the index (the document keeps the source's digits), and ignore_malformed:
//     a value no date format parses (PostgreSQL infinity, BC dates, years past 9999) is kept
//     in _source and left out of the date field.
//   - time: keyword ("15:04:05.5"; MySQL's TIME is a duration up to 838:59:59 and negative,
//     which no date format holds).
//   - json: a disabled object (JSONStored): kept exactly in _source, any JSON value accepted,
//     not searchable, never a mapping conflict or explosion. JSONFlattened opts into flattened
//     (Elasticsearch) or flat_object (OpenSearch): leaves searchable as keywords, but top-level
//     scalars and arrays of scalars are refused by the engine per document.
//   - enum, set (an array of labels), uuid, bit (a "0101" string), other: keyword.
//   - array: the element's mapping (every field is multi-valued).
//
// Column names containing "." (an object path to the engine, colliding with a column named
// like the prefix), empty names and metadata field names (_id, _source, ...) are refused
// with an error naming the column: renaming silently would make queries guess. Other names
// starting with "_" are ordinary fields on both engines.
//
// The mapping is generated for any engine; whether the cluster accepts it is decided at index
// creation: Elasticsearch's OSS integration-test build has neither scaled_float nor
// unsigned_long and answers 400 mapper_parsing_exception "The mapper type [scaled_float]
// declared on field [price] does not exist. ..." (TestMappingServerMissingTypes pins it).
func GenerateMapping(s *cdc.TableSchema, o MappingOptions) (json.RawMessage, error) {
	if s == nil {
		return nil, fmt.Errorf("sink: mapping: nil schema")
	}
	if o.Engine > OpenSearch {
		return nil, fmt.Errorf("sink: mapping: unknown engine %d", o.Engine)
	}
	b := make([]byte, 0, 64+96*len(s.Columns))
	b = append(b, `{"properties":{`...)
	for i := range s.Columns {
		c := &s.Columns[i]
		if reason := checkFieldName(c.Name); reason != "" {
			return nil, fmt.Errorf("sink: mapping: column %q: %s", c.Name, reason)
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, c.Name)
		b = append(b, ':')
		var err error
		if b, err = appendFieldMapping(b, c, o, 0); err != nil {
			return nil, fmt.Errorf("sink: mapping: column %q: %w", c.Name, err)
		}
	}
	b = append(b, "}}"...)
	return json.RawMessage(b), nil
}

const keywordMapping = `{"type":"keyword","ignore_above":8191}`

// appendFieldMapping appends one field's mapping object.
func appendFieldMapping(b []byte, c *cdc.Column, o MappingOptions, depth int) ([]byte, error) {
	switch c.Kind {
	case cdc.KindBool:
		return append(b, `{"type":"boolean"}`...), nil
	case cdc.KindInt:
		return append(b, `{"type":"`+signedType(c.Bits)+`"}`...), nil
	case cdc.KindUint:
		t := unsignedType(c.Bits)
		if t == "unsigned_long" && o.Uint64As == Uint64Keyword {
			t = "keyword"
		}
		return append(b, `{"type":"`+t+`"}`...), nil
	case cdc.KindFloat:
		if c.Bits == 32 {
			return append(b, `{"type":"float","ignore_malformed":true}`...), nil
		}
		return append(b, `{"type":"double","ignore_malformed":true}`...), nil
	case cdc.KindDecimal:
		return appendDecimalMapping(b, c, o), nil
	case cdc.KindText:
		// keyword first: a mirrored column is mostly filtered, sorted and aggregated on;
		// full-text search goes to the "text" sub-field.
		return append(b, `{"type":"keyword","ignore_above":8191,"fields":{"text":{"type":"text"}}}`...), nil
	case cdc.KindBinary:
		return append(b, `{"type":"binary"}`...), nil
	case cdc.KindDate, cdc.KindDateTime, cdc.KindTimestamp:
		return append(b, `{"type":"date","format":"`+dateFormats+`","ignore_malformed":true}`...), nil
	case cdc.KindTime:
		// Neither engine has a time-of-day type; the canonical "15:04:05[.ffffff]" text sorts
		// correctly for the non-negative times of one width.
		return append(b, keywordMapping...), nil
	case cdc.KindJSON:
		if o.JSONAs == JSONFlattened {
			if o.Engine == OpenSearch {
				return append(b, `{"type":"flat_object"}`...), nil
			}
			return append(b, `{"type":"flattened"}`...), nil
		}
		return append(b, `{"type":"object","enabled":false}`...), nil
	case cdc.KindEnum, cdc.KindSet, cdc.KindUUID, cdc.KindBit, cdc.KindOther:
		return append(b, keywordMapping...), nil
	case cdc.KindArray:
		// Every field is multi-valued: an array maps as its element type.
		if c.Elem == nil || depth > maxArrayDepth {
			return append(b, keywordMapping...), nil
		}
		return appendFieldMapping(b, c.Elem, o, depth+1)
	}
	return nil, fmt.Errorf("unknown column kind %s", c.Kind)
}

func signedType(bits int) string {
	switch {
	case bits > 0 && bits <= 8:
		return "byte"
	case bits > 0 && bits <= 16:
		return "short"
	case bits > 0 && bits <= 32:
		return "integer"
	}
	return "long"
}

// unsignedType picks the narrowest signed type that holds every value; 64-bit (and unknown
// width) unsigned integers use unsigned_long, which Elasticsearch 8 and OpenSearch 2.8+ have.
func unsignedType(bits int) string {
	switch {
	case bits > 0 && bits <= 7:
		return "byte"
	case bits > 0 && bits <= 15:
		return "short"
	case bits > 0 && bits <= 31:
		return "integer"
	case bits > 0 && bits <= 63:
		return "long"
	}
	return "unsigned_long"
}

// decimalScaled reports whether a decimal column is mapped to scaled_float under o: only when
// every value its declared precision and scale allow is stored exactly.
func decimalScaled(c *cdc.Column, o MappingOptions) bool {
	return o.DecimalAs == DecimalScaledFloat && c.Precision >= 1 && c.Precision <= maxScaledPrecision &&
		c.Scale >= 0 && c.Scale <= c.Precision
}

func appendDecimalMapping(b []byte, c *cdc.Column, o MappingOptions) []byte {
	switch {
	case o.DecimalAs == DecimalKeyword:
		return append(b, keywordMapping...)
	case o.DecimalAs == DecimalDouble:
		return append(b, `{"type":"double","ignore_malformed":true,"fields":{"exact":`+keywordMapping+`}}`...)
	case decimalScaled(c, o):
		b = append(b, `{"type":"scaled_float","scaling_factor":1`...)
		for range c.Scale {
			b = append(b, '0')
		}
		return append(b, `,"ignore_malformed":true,"fields":{"exact":`+keywordMapping+`}}`...)
	}
	// Wider than scaled_float holds exactly: the digits are the field, a double beside them
	// serves ranges and sorting. Digits beyond ignore_above (8191) stay in _source only.
	return append(b, `{"type":"keyword","ignore_above":8191,"fields":{"approx":{"type":"double","ignore_malformed":true}}}`...)
}

// metadataFields are the names Elasticsearch and OpenSearch reserve for metadata; a document
// field with one of these names is rejected.
var metadataFields = map[string]bool{
	"_id": true, "_index": true, "_source": true, "_routing": true, "_version": true,
	"_seq_no": true, "_primary_term": true, "_field_names": true, "_ignored": true,
	"_doc_count": true, "_tier": true, "_data_stream_timestamp": true, "_nested_path": true,
	"_type": true, "_uid": true, "_parent": true, "_feature": true, "_size": true,
	"_ignored_source": true, "_meta": true,
}

// checkFieldName says why a column name cannot be one top-level field, or "" when it can.
// A "." in a field name is an object path to both engines ("a.b" becomes field b of object a,
// which can collide with a column named "a"), and metadata names are refused; renaming
// silently would make queries guess, so such tables fail at mapping instead.
func checkFieldName(name string) string {
	if name == "" {
		return "empty column name"
	}
	for i := 0; i < len(name); i++ {
		if name[i] == '.' {
			return `a "." in a column name is an object path in Elasticsearch`
		}
	}
	if name[0] == '_' && metadataFields[name] {
		return "the name of an Elasticsearch metadata field"
	}
	return ""
}
