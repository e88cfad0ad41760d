package mongostore

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"github.com/tributary-dev/tributary/internal/jsonenc"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/store/driver"
)

// decoder renders a stored BSON document as the JSON object the store layer returns: member
// order kept, the _id and the metadata field left out, datetimes as RFC 3339 strings whose
// pointers are collected, and the BSON types JSON lacks as MongoDB Extended JSON v2 objects
// (which writes turn back into those types).
type decoder struct {
	out   []byte
	path  []byte
	times []string
	meta  string
	depth int
	hints typeHints // the values whose BSON type their JSON text does not give back
}

// bsonTypeNames names the types a read refuses, for the error message.
var bsonTypeNames = map[byte]string{
	bsonUndefined: "undefined", bsonDBPointer: "DBPointer", bsonJavaScript: "JavaScript code",
	bsonSymbol: "symbol", bsonCodeScope: "JavaScript code with scope",
}

// decodeDocument renders the stored document raw (including _id and metadata) as JSON.
func decodeDocument(raw []byte, meta string) (driver.Document, error) {
	doc, _, err := decodeDocumentHints(raw, meta)
	return doc, err
}

// decodeDocumentHints is decodeDocument that also returns the type hints of the document: the
// pointers of the values whose JSON text the encoder would store as another BSON type (see
// typeHints); nil when there are none, as for every document this adapter wrote.
func decodeDocumentHints(raw []byte, meta string) (driver.Document, typeHints, error) {
	d := decoder{out: make([]byte, 0, len(raw)+len(raw)/4), meta: meta}
	if err := d.document(raw, true); err != nil {
		return driver.Document{}, nil, err
	}
	return driver.Document{JSON: d.out, Times: d.times}, d.hints, nil
}

// hint records that the value at the current path has BSON type t, which its JSON text does
// not give back.
func (d *decoder) hint(t byte) {
	if d.hints == nil {
		d.hints = make(typeHints)
	}
	d.hints[string(d.path)] = t
}

func (d *decoder) document(doc []byte, top bool) error {
	d.depth++
	if d.depth > 2*maxDepth {
		return driver.NewError(driver.KindInternal, "mongostore: stored document nests too deeply", nil)
	}
	d.out = append(d.out, '{')
	first := true
	err := eachElement(doc, func(key []byte, t byte, val []byte) error {
		if top && (string(key) == "_id" || string(key) == d.meta) {
			return nil
		}
		if !first {
			d.out = append(d.out, ',')
		}
		first = false
		if err := d.appendString(key); err != nil {
			return err
		}
		d.out = append(d.out, ':')
		mark := len(d.path)
		d.path = append(d.path, '/')
		d.path = jsonenc.AppendPointerToken(d.path, key)
		err := d.value(t, val)
		d.path = d.path[:mark]
		return err
	})
	if err != nil {
		return d.fail(err)
	}
	d.out = append(d.out, '}')
	d.depth--
	return nil
}

func (d *decoder) array(doc []byte) error {
	d.depth++
	if d.depth > 2*maxDepth {
		return driver.NewError(driver.KindInternal, "mongostore: stored document nests too deeply", nil)
	}
	d.out = append(d.out, '[')
	i := 0
	err := eachElement(doc, func(_ []byte, t byte, val []byte) error {
		if i > 0 {
			d.out = append(d.out, ',')
		}
		mark := len(d.path)
		d.path = append(d.path, '/')
		d.path = strconv.AppendInt(d.path, int64(i), 10)
		i++
		err := d.value(t, val)
		d.path = d.path[:mark]
		return err
	})
	if err != nil {
		return d.fail(err)
	}
	d.out = append(d.out, ']')
	d.depth--
	return nil
}

func (d *decoder) fail(err error) error {
	if err == errMalformedBSON {
		return driver.NewError(driver.KindInternal, "mongostore: the server returned malformed BSON", nil)
	}
	return err
}

func unrepresentable(what string) error {
	return driver.NewError(driver.KindInvalid, "mongostore: the stored record holds "+what+", which has no JSON form", nil)
}

func (d *decoder) value(t byte, v []byte) error {
	switch t {
	case bsonDouble:
		f := math.Float64frombits(binary.LittleEndian.Uint64(v))
		switch {
		case math.IsNaN(f):
			d.out = append(d.out, `{"$numberDouble":"NaN"}`...)
		case math.IsInf(f, 1):
			d.out = append(d.out, `{"$numberDouble":"Infinity"}`...)
		case math.IsInf(f, -1):
			d.out = append(d.out, `{"$numberDouble":"-Infinity"}`...)
		default:
			d.out = appendDouble(d.out, f)
		}
	case bsonString:
		if v[len(v)-1] != 0 {
			return errMalformedBSON // BSON strings end in NUL
		}
		return d.appendString(v[4 : len(v)-1])
	case bsonDocument:
		return d.document(v, false)
	case bsonArray:
		return d.array(v)
	case bsonBinary:
		d.out = append(d.out, `{"$binary":{"base64":"`...)
		d.out = base64.StdEncoding.AppendEncode(d.out, v[5:])
		d.out = append(d.out, `","subType":"`...)
		d.out = hex.AppendEncode(d.out, v[4:5])
		d.out = append(d.out, `"}}`...)
	case bsonObjectID:
		d.out = append(d.out, `{"$oid":"`...)
		d.out = hex.AppendEncode(d.out, v)
		d.out = append(d.out, `"}`...)
	case bsonBoolean:
		if v[0] > 1 {
			return errMalformedBSON // 0 or 1 only: another byte has no value to keep
		}
		d.out = strconv.AppendBool(d.out, v[0] != 0)
	case bsonDateTime:
		t := time.UnixMilli(int64(binary.LittleEndian.Uint64(v))).UTC()
		if t.Year() < 0 || t.Year() > 9999 {
			return unrepresentable("a datetime outside the years 0000-9999 of RFC 3339")
		}
		d.out = append(d.out, '"')
		d.out = t.AppendFormat(d.out, time.RFC3339Nano)
		d.out = append(d.out, '"')
		d.times = append(d.times, string(d.path))
	case bsonNull:
		d.out = append(d.out, "null"...)
	case bsonRegex:
		p := 0
		for v[p] != 0 {
			p++
		}
		d.out = append(d.out, `{"$regularExpression":{"pattern":`...)
		if err := d.appendString(v[:p]); err != nil {
			return err
		}
		d.out = append(d.out, `,"options":`...)
		if err := d.appendString(v[p+1 : len(v)-1]); err != nil {
			return err
		}
		d.out = append(d.out, "}}"...)
	case bsonInt32:
		d.out = strconv.AppendInt(d.out, int64(int32(binary.LittleEndian.Uint32(v))), 10)
	case bsonTimestamp:
		d.out = append(d.out, `{"$timestamp":{"t":`...)
		d.out = strconv.AppendUint(d.out, uint64(binary.LittleEndian.Uint32(v[4:])), 10)
		d.out = append(d.out, `,"i":`...)
		d.out = strconv.AppendUint(d.out, uint64(binary.LittleEndian.Uint32(v)), 10)
		d.out = append(d.out, "}}"...)
	case bsonInt64:
		n := int64(binary.LittleEndian.Uint64(v))
		d.out = strconv.AppendInt(d.out, n, 10)
		if n >= math.MinInt32 && n <= math.MaxInt32 {
			d.hint(bsonInt64) // its text is an int32's
		}
	case bsonDecimal128:
		lo, hi := binary.LittleEndian.Uint64(v), binary.LittleEndian.Uint64(v[8:])
		if s, ok := decimalJSON(hi, lo); ok {
			d.out = append(d.out, s...)
			if !decimalTextKeepsType(s, hi, lo) {
				d.hint(bsonDecimal128)
			}
			break
		}
		switch {
		case hi&0x7C00000000000000 == 0x7C00000000000000:
			d.out = append(d.out, `{"$numberDecimal":"NaN"}`...)
		case hi&0x7800000000000000 == 0x7800000000000000 && hi>>63 == 1:
			d.out = append(d.out, `{"$numberDecimal":"-Infinity"}`...)
		case hi&0x7800000000000000 == 0x7800000000000000:
			d.out = append(d.out, `{"$numberDecimal":"Infinity"}`...)
		default:
			return driver.NewError(driver.KindInternal, "mongostore: a stored Decimal128 has no JSON number form", nil)
		}
	case bsonMinKey:
		d.out = append(d.out, `{"$minKey":1}`...)
	case bsonMaxKey:
		d.out = append(d.out, `{"$maxKey":1}`...)
	default:
		name, ok := bsonTypeNames[t]
		if !ok {
			name = "BSON type 0x" + strconv.FormatUint(uint64(t), 16)
		}
		return unrepresentable("a value of BSON type " + name)
	}
	return nil
}

// appendString appends s as a JSON string. BSON strings from other writers may hold invalid
// UTF-8, which JSON cannot carry; replacing it would change the record silently.
func (d *decoder) appendString(s []byte) error {
	if !utf8.Valid(s) {
		return unrepresentable("a string that is not valid UTF-8")
	}
	d.out = appendJSONString(d.out, s)
	return nil
}

func appendJSONString(dst, s []byte) []byte { return jsonenc.AppendString(dst, s) }
