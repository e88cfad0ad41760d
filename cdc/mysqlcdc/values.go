package mysqlcdc

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/tributary-dev/tributary/cdc"
)

// class is how a column's values are normalized; several SQL types share one.
type class uint8

const (
	classOther     class = iota // the server's text form
	classInt                    // int64
	classUint                   // uint64
	classFloat32                // float64 of the shortest decimal that round-trips the float32
	classFloat64                // float64
	classDecimal                // exact string
	classBit                    // uint64
	classString                 // CHAR/VARCHAR: UTF-8 string
	classText                   // TEXT family: cdc.Base64 of the bytes in the column's charset
	classBinary                 // BINARY/VARBINARY/BLOB: cdc.Base64
	classJSON                   // cdc.RawJSON, compacted
	classEnum                   // label
	classSet                    // labels joined by ","
	classTemporal               // DATE, TIME, DATETIME: the server's string form
	classTimestamp              // cdc.EpochMicros
	classUUID                   // MariaDB UUID: its canonical text
	classInet4                  // MariaDB INET4: dotted quad
	classInet6                  // MariaDB INET6: RFC 5952 text, IPv4-mapped as ::ffff:a.b.c.d
)

// colCodec turns a column's binlog and snapshot values into normalized cdc values.
type colCodec struct {
	kind    cdc.Kind
	class   class
	bits    int    // integer width, for reinterpreting the decoder's signed values as unsigned
	padTo   int    // BINARY(n): the binlog strips trailing zero bytes the server pads back on read
	charset string // CHAR/VARCHAR character set
	labels  []string

	// Set by prepare, for the binlog's hot path.
	utf8     bool         // charset needs no conversion
	byteMap  *[256]string // charset is a single-byte one: each byte's UTF-8
	labelVal []cdc.Value  // ENUM labels, already boxed
	setVal   []cdc.Value  // SET values by bit mask, for a few labels
}

// maxCachedSetLabels bounds the SET values prepare renders ahead: 2^n of them.
const maxCachedSetLabels = 6

// prepare derives what decoding a row can then look up instead of computing or allocating
// each time: values are immutable, so one boxed label serves every row.
func (c *colCodec) prepare() {
	c.utf8 = isUTF8(c.charset)
	if c.class == classString && !c.utf8 {
		c.byteMap = singleByteMap(c.charset)
	}
	switch c.class {
	case classEnum:
		c.labelVal = make([]cdc.Value, len(c.labels))
		for i, l := range c.labels {
			c.labelVal[i] = l
		}
	case classSet:
		if len(c.labels) <= maxCachedSetLabels {
			c.setVal = make([]cdc.Value, 1<<len(c.labels))
			for mask := range c.setVal {
				c.setVal[mask], _ = c.joinSet(uint64(mask))
			}
		}
	}
}

// describeColumn maps an INFORMATION_SCHEMA.COLUMNS row to a cdc.Column and its codec.
func describeColumn(name, dataType, colType, charset string, length, precision, scale, fsp int64) (cdc.Column, colCodec) {
	col := cdc.Column{Name: name, SourceType: colType, Charset: charset}
	c := colCodec{class: classOther, kind: cdc.KindOther}
	unsigned := strings.Contains(strings.ToLower(colType), "unsigned")
	intBits := map[string]int{"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "integer": 32, "bigint": 64}
	switch dataType {
	case "tinyint", "smallint", "mediumint", "int", "integer", "bigint":
		c.bits = intBits[dataType]
		col.Bits = c.bits
		if unsigned {
			c.kind, c.class = cdc.KindUint, classUint
		} else {
			c.kind, c.class = cdc.KindInt, classInt
		}
	case "year":
		c.kind, c.class, col.Bits = cdc.KindInt, classInt, 16
	case "decimal", "numeric":
		c.kind, c.class = cdc.KindDecimal, classDecimal
		col.Precision, col.Scale = int(precision), int(scale)
	case "float":
		c.kind, c.class, col.Bits = cdc.KindFloat, classFloat32, 32
	case "double", "real", "double precision":
		c.kind, c.class, col.Bits = cdc.KindFloat, classFloat64, 64
	case "bit":
		c.kind, c.class, col.Bits = cdc.KindBit, classBit, int(precision)
	case "char", "varchar":
		c.kind, c.class, c.charset = cdc.KindText, classString, charset
		col.Length = int(length)
	case "tinytext", "text", "mediumtext", "longtext":
		c.kind, c.class = cdc.KindText, classText
		col.Length = int(length)
	case "binary":
		c.kind, c.class, c.padTo = cdc.KindBinary, classBinary, int(length)
		col.Length = int(length)
	case "varbinary", "tinyblob", "blob", "mediumblob", "longblob":
		c.kind, c.class = cdc.KindBinary, classBinary
		col.Length = int(length)
	case "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon", "geometrycollection":
		// The server's internal form (SRID, then WKB), in the binlog and the text protocol alike.
		c.kind, c.class = cdc.KindBinary, classBinary
	case "json":
		c.kind, c.class = cdc.KindJSON, classJSON
	case "enum":
		c.kind, c.class, c.labels = cdc.KindEnum, classEnum, parseLabels(colType)
		col.Labels = c.labels
	case "set":
		c.kind, c.class, c.labels = cdc.KindSet, classSet, parseLabels(colType)
		col.Labels = c.labels
	case "date":
		c.kind, c.class = cdc.KindDate, classTemporal
	case "time":
		c.kind, c.class, col.Precision = cdc.KindTime, classTemporal, int(fsp)
	case "datetime":
		c.kind, c.class, col.Precision = cdc.KindDateTime, classTemporal, int(fsp)
	case "timestamp":
		c.kind, c.class, col.Precision = cdc.KindTimestamp, classTimestamp, int(fsp)
	case "uuid":
		c.kind, c.class = cdc.KindUUID, classUUID
	case "inet4":
		c.class = classInet4
	case "inet6":
		c.class = classInet6
	}
	col.Kind = c.kind
	c.prepare()
	return col, c
}

// selectExpr is the snapshot's SELECT expression for a column: chosen so that the text protocol
// carries exactly the information the binlog does.
func (c *colCodec) selectExpr(name string) string {
	q := quoteIdent(name)
	switch c.class {
	case classFloat32:
		return "CAST(" + q + " AS DOUBLE)" // FLOAT's text form rounds to 6 digits; DOUBLE's is exact
	case classEnum, classSet:
		return q + "+0" // the index or bit mask, as the binlog has it
	case classTimestamp:
		return "UNIX_TIMESTAMP(" + q + ")" // the stored instant, independent of time zones
	}
	return q
}

// fromBinlog normalizes a value as go-mysql's row decoder returns it (ParseTime off, decimals
// as strings, TIMESTAMP strings in UTC). Strings and byte slices from the decoder alias the
// event buffer, so everything kept is copied.
func (c *colCodec) fromBinlog(v any) (cdc.Value, error) {
	if v == nil {
		return nil, nil
	}
	switch c.class {
	case classInt:
		n, ok := binlogInt(v)
		if !ok {
			break
		}
		return n, nil
	case classUint:
		n, ok := binlogInt(v)
		if !ok {
			break
		}
		u := uint64(n)
		if c.bits < 64 {
			u &= 1<<c.bits - 1
		}
		return u, nil
	case classFloat32:
		if f, ok := v.(float32); ok {
			if !finite(float64(f)) {
				return nil, errNotFinite
			}
			return shortestFloat32(f), nil
		}
	case classFloat64:
		if f, ok := v.(float64); ok {
			if !finite(f) {
				return nil, errNotFinite
			}
			return f, nil
		}
	case classDecimal, classTemporal:
		if s, ok := v.(string); ok {
			return strings.Clone(s), nil
		}
	case classBit:
		if n, ok := v.(int64); ok {
			return uint64(n), nil
		}
	case classString:
		if b, ok := binlogBytes(v); ok {
			return decodeText(c.charset, b)
		}
	case classText:
		if b, ok := binlogBytes(v); ok {
			return cdc.Base64(base64.StdEncoding.EncodeToString(b)), nil
		}
	case classBinary:
		if b, ok := binlogBytes(v); ok {
			if len(b) < c.padTo {
				b = append(append([]byte(nil), b...), make([]byte, c.padTo-len(b))...)
			}
			return cdc.Base64(base64.StdEncoding.EncodeToString(b)), nil
		}
	case classJSON:
		if b, ok := binlogBytes(v); ok {
			return compactJSON(b)
		}
	case classEnum:
		if n, ok := binlogInt(v); ok {
			return c.enumLabel(uint64(n))
		}
	case classSet:
		if n, ok := binlogInt(v); ok {
			return c.setLabels(uint64(n))
		}
	case classTimestamp:
		if s, ok := v.(string); ok {
			return timestampMicros(s)
		}
	case classUUID, classInet4, classInet6:
		// The binlog has the 16 or 4 bytes of a BINARY column; the snapshot the server's text.
		if b, ok := v.(string); ok {
			return c.addressText(b)
		}
	default:
		switch x := v.(type) {
		case string:
			return strings.Clone(x), nil
		case []byte:
			return string(x), nil
		default:
			return fmt.Sprint(x), nil
		}
	}
	return nil, fmt.Errorf("mysqlcdc: binlog value of type %T for a %v column", v, c.kind)
}

// fromText normalizes a snapshot value read with the text protocol from selectExpr.
func (c *colCodec) fromText(fv *mysql.FieldValue) (cdc.Value, error) {
	if fv.Type == mysql.FieldValueTypeNull {
		return nil, nil
	}
	switch c.class {
	case classInt:
		if fv.Type == mysql.FieldValueTypeSigned || fv.Type == mysql.FieldValueTypeUnsigned {
			return fv.AsInt64(), nil
		}
	case classUint:
		if fv.Type == mysql.FieldValueTypeSigned || fv.Type == mysql.FieldValueTypeUnsigned {
			return fv.AsUint64(), nil
		}
	case classFloat32:
		if fv.Type == mysql.FieldValueTypeFloat {
			return shortestFloat32(float32(fv.AsFloat64())), nil
		}
	case classFloat64:
		if fv.Type == mysql.FieldValueTypeFloat {
			return fv.AsFloat64(), nil
		}
	case classDecimal, classTemporal, classOther, classUUID, classInet4, classInet6:
		return textOf(fv), nil
	case classBit:
		if fv.Type == mysql.FieldValueTypeString {
			b := fv.AsString()
			if len(b) > 8 {
				break
			}
			var buf [8]byte
			copy(buf[8-len(b):], b)
			return binary.BigEndian.Uint64(buf[:]), nil
		}
	case classString:
		if fv.Type == mysql.FieldValueTypeString {
			return decodeText(c.charset, fv.AsString())
		}
	case classText, classBinary:
		if fv.Type == mysql.FieldValueTypeString {
			return cdc.Base64(base64.StdEncoding.EncodeToString(fv.AsString())), nil
		}
	case classJSON:
		if fv.Type == mysql.FieldValueTypeString {
			return compactJSON(fv.AsString())
		}
	case classEnum, classSet:
		n, err := strconv.ParseUint(textOf(fv), 10, 64)
		if err != nil {
			break
		}
		if c.class == classEnum {
			return c.enumLabel(n)
		}
		return c.setLabels(n)
	case classTimestamp:
		return unixTimestampMicros(textOf(fv))
	}
	return nil, fmt.Errorf("mysqlcdc: snapshot value of type %d for a %v column", fv.Type, c.kind)
}

// addressText renders the binary form of UUID, INET4 and INET6 as the server prints them.
func (c *colCodec) addressText(b string) (cdc.Value, error) {
	// Like BINARY(n), the binlog drops trailing zero bytes.
	size := 16
	if c.class == classInet4 {
		size = 4
	}
	if len(b) < size {
		b += strings.Repeat("\x00", size-len(b))
	}
	switch {
	case c.class == classUUID && len(b) == 16:
		h := hex.EncodeToString([]byte(b))
		return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], nil
	case c.class == classInet4 && len(b) == 4:
		return netip.AddrFrom4([4]byte([]byte(b))).String(), nil
	case c.class == classInet6 && len(b) == 16:
		return netip.AddrFrom16([16]byte([]byte(b))).String(), nil
	}
	return nil, fmt.Errorf("mysqlcdc: binlog value of %d bytes for a UUID or INET column", len(b))
}

// enumLabel maps a 1-based ENUM index to its label; 0 is the empty string MySQL stores for an
// invalid value in non-strict mode.
func (c *colCodec) enumLabel(n uint64) (cdc.Value, error) {
	if n == 0 {
		return "", nil
	}
	if n > uint64(len(c.labels)) {
		return nil, fmt.Errorf("mysqlcdc: ENUM index %d beyond the %d labels of the schema", n, len(c.labels))
	}
	if c.labelVal != nil {
		return c.labelVal[n-1], nil
	}
	return c.labels[n-1], nil
}

// setLabels maps a SET bit mask to its labels in declaration order, joined by ",".
func (c *colCodec) setLabels(mask uint64) (cdc.Value, error) {
	if mask < uint64(len(c.setVal)) {
		return c.setVal[mask], nil
	}
	return c.joinSet(mask)
}

func (c *colCodec) joinSet(mask uint64) (cdc.Value, error) {
	var parts []string
	for i := range c.labels {
		if mask&(1<<i) != 0 {
			parts = append(parts, c.labels[i])
			mask &^= 1 << i
		}
	}
	if mask != 0 {
		return nil, fmt.Errorf("mysqlcdc: SET value has bits beyond the %d labels of the schema", len(c.labels))
	}
	return strings.Join(parts, ","), nil
}

func binlogInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case int:
		return int64(x), true
	case uint64:
		return int64(x), true
	}
	return 0, false
}

// binlogBytes returns a copy of a string or byte-slice value.
func binlogBytes(v any) ([]byte, bool) {
	switch x := v.(type) {
	case string:
		return []byte(x), true
	case []byte:
		return bytes.Clone(x), true
	}
	return nil, false
}

func textOf(fv *mysql.FieldValue) string {
	switch fv.Type {
	case mysql.FieldValueTypeString:
		return string(fv.AsString())
	case mysql.FieldValueTypeSigned:
		return strconv.FormatInt(fv.AsInt64(), 10)
	case mysql.FieldValueTypeUnsigned:
		return strconv.FormatUint(fv.AsUint64(), 10)
	case mysql.FieldValueTypeFloat:
		return strconv.FormatFloat(fv.AsFloat64(), 'g', -1, 64)
	}
	return ""
}

// shortestFloat32 widens a FLOAT to the float64 of its shortest round-tripping decimal, so 0.1
// stays 0.1 rather than becoming 0.10000000149011612.
func shortestFloat32(f float32) float64 {
	var buf [32]byte
	b := strconv.AppendFloat(buf[:0], float64(f), 'g', -1, 32)
	d, _ := strconv.ParseFloat(unsafe.String(unsafe.SliceData(b), len(b)), 64) // not kept
	return d
}

// timestampMicros parses the decoder's TIMESTAMP string (UTC); MySQL's zero timestamp, stored as
// 0, becomes the epoch.
func timestampMicros(s string) (cdc.Value, error) {
	if strings.HasPrefix(s, "0000-00-00") {
		return cdc.EpochMicros(0), nil
	}
	t, err := time.ParseInLocation("2006-01-02 15:04:05", s, time.UTC)
	if err != nil {
		return nil, fmt.Errorf("mysqlcdc: TIMESTAMP value is not a date-time: %w", err)
	}
	return cdc.EpochMicros(t.UnixMicro()), nil
}

// unixTimestampMicros parses UNIX_TIMESTAMP()'s "seconds[.fraction]".
func unixTimestampMicros(s string) (cdc.Value, error) {
	sec, frac, _ := strings.Cut(s, ".")
	n, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("mysqlcdc: UNIX_TIMESTAMP result is not a number: %w", err)
	}
	var us int64
	if frac != "" {
		if len(frac) > 6 {
			frac = frac[:6]
		}
		frac += strings.Repeat("0", 6-len(frac))
		if us, err = strconv.ParseInt(frac, 10, 64); err != nil {
			return nil, fmt.Errorf("mysqlcdc: UNIX_TIMESTAMP fraction is not a number: %w", err)
		}
	}
	return cdc.EpochMicros(n*1_000_000 + us), nil
}
