package mongostore

import (
	"bytes"
	"encoding/binary"
	"errors"
)

// BSON element types the adapter writes or reads.
const (
	bsonDouble     byte = 0x01
	bsonString     byte = 0x02
	bsonDocument   byte = 0x03
	bsonArray      byte = 0x04
	bsonBinary     byte = 0x05
	bsonUndefined  byte = 0x06
	bsonObjectID   byte = 0x07
	bsonBoolean    byte = 0x08
	bsonDateTime   byte = 0x09
	bsonNull       byte = 0x0A
	bsonRegex      byte = 0x0B
	bsonDBPointer  byte = 0x0C
	bsonJavaScript byte = 0x0D
	bsonSymbol     byte = 0x0E
	bsonCodeScope  byte = 0x0F
	bsonInt32      byte = 0x10
	bsonTimestamp  byte = 0x11
	bsonInt64      byte = 0x12
	bsonDecimal128 byte = 0x13
	bsonMinKey     byte = 0xFF
	bsonMaxKey     byte = 0x7F
)

// maxBSONBytes is MongoDB's limit on one stored document.
const maxBSONBytes = 16 << 20

// element is one decoded element of a BSON document.
type element struct {
	key string
	t   byte
	val []byte
}

func (el element) str() (string, bool) {
	if el.t != bsonString || len(el.val) < 5 {
		return "", false
	}
	return string(el.val[4 : len(el.val)-1]), true
}

func (el element) doc() ([]byte, bool) { return el.val, el.t == bsonDocument }

func (el element) integer() (int64, bool) {
	switch el.t {
	case bsonInt32:
		return int64(int32(binary.LittleEndian.Uint32(el.val))), true
	case bsonInt64:
		return int64(binary.LittleEndian.Uint64(el.val)), true
	}
	return 0, false
}

var errMalformedBSON = errors.New("malformed BSON")

// docElements splits a BSON document into its elements.
func docElements(doc []byte) ([]element, error) {
	var out []element
	err := eachElement(doc, func(key []byte, t byte, val []byte) error {
		out = append(out, element{key: string(key), t: t, val: val})
		return nil
	})
	return out, err
}

// eachElement calls f for every element of the BSON document doc, in order.
func eachElement(doc []byte, f func(key []byte, t byte, val []byte) error) error {
	if len(doc) < 5 || int(binary.LittleEndian.Uint32(doc)) != len(doc) || doc[len(doc)-1] != 0 {
		return errMalformedBSON
	}
	b := doc[4 : len(doc)-1]
	for len(b) > 0 {
		t := b[0]
		nul := bytes.IndexByte(b[1:], 0)
		if nul < 0 {
			return errMalformedBSON
		}
		key := b[1 : 1+nul]
		b = b[2+nul:]
		n, err := valueLen(t, b)
		if err != nil {
			return err
		}
		if err := f(key, t, b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// valueLen returns the length of the BSON value of type t at the start of b.
func valueLen(t byte, b []byte) (int, error) {
	fixed := func(n int) (int, error) {
		if len(b) < n {
			return 0, errMalformedBSON
		}
		return n, nil
	}
	// lenPrefixed: an int32 length, plus extra bytes it does not count; the whole value
	// takes at least 5 bytes (a string's NUL, a document's terminator, a binary's subtype).
	lenPrefixed := func(extra int) (int, error) {
		if len(b) < 4 {
			return 0, errMalformedBSON
		}
		n := int(int32(binary.LittleEndian.Uint32(b))) + extra
		if n < 5 || n > len(b) {
			return 0, errMalformedBSON
		}
		return n, nil
	}
	switch t {
	case bsonDouble, bsonDateTime, bsonTimestamp, bsonInt64:
		return fixed(8)
	case bsonInt32:
		return fixed(4)
	case bsonDecimal128:
		return fixed(16)
	case bsonObjectID:
		return fixed(12)
	case bsonBoolean:
		return fixed(1)
	case bsonNull, bsonUndefined, bsonMinKey, bsonMaxKey:
		return 0, nil
	case bsonString, bsonJavaScript, bsonSymbol:
		return lenPrefixed(4)
	case bsonDocument, bsonArray, bsonCodeScope:
		return lenPrefixed(0)
	case bsonBinary:
		return lenPrefixed(5)
	case bsonDBPointer:
		n, err := lenPrefixed(4)
		if err != nil {
			return 0, err
		}
		return fixed(n + 12)
	case bsonRegex:
		p := bytes.IndexByte(b, 0)
		if p < 0 {
			return 0, errMalformedBSON
		}
		o := bytes.IndexByte(b[p+1:], 0)
		if o < 0 {
			return 0, errMalformedBSON
		}
		return p + o + 2, nil
	}
	return 0, errMalformedBSON
}
