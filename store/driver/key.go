package driver

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// KeyKind says which of the four key types a Key holds.
type KeyKind uint8

// The key types a record address may use. The zero KeyKind is no key.
const (
	StringKey   KeyKind = iota + 1 // a UTF-8 string
	Int64Key                       // a signed 64-bit integer
	BytesKey                       // an opaque byte string
	ObjectIDKey                    // a 12-byte MongoDB ObjectID
)

func (k KeyKind) String() string {
	switch k {
	case StringKey:
		return "string"
	case Int64Key:
		return "int64"
	case BytesKey:
		return "bytes"
	case ObjectIDKey:
		return "objectid"
	}
	return "KeyKind(" + strconv.Itoa(int(k)) + ")"
}

// Limits on keys, the same on every backend so that a key valid on one is valid on all.
// Elasticsearch caps _id at 512 bytes; the reserved encodings of non-string keys must fit too.
const (
	MaxStringKeyBytes = 512
	MaxBytesKeyBytes  = 256
)

// Key is a record key: a string, an int64, a byte string or a MongoDB ObjectID. Keys are
// comparable values (usable as map keys); two keys are equal only when kind and value are.
type Key struct {
	kind KeyKind
	str  string // StringKey value, or the raw bytes of BytesKey and ObjectIDKey
	num  int64
}

// NewStringKey returns a string key.
func NewStringKey(s string) Key { return Key{kind: StringKey, str: s} }

// NewInt64Key returns an int64 key.
func NewInt64Key(n int64) Key { return Key{kind: Int64Key, num: n} }

// NewBytesKey returns a byte-string key holding a copy of b.
func NewBytesKey(b []byte) Key { return Key{kind: BytesKey, str: string(b)} }

// NewObjectIDKey returns a MongoDB ObjectID key.
func NewObjectIDKey(id [12]byte) Key { return Key{kind: ObjectIDKey, str: string(id[:])} }

// Kind returns the key's type; zero for the zero Key.
func (k Key) Kind() KeyKind { return k.kind }

// IsZero reports whether k is the zero Key (no key at all).
func (k Key) IsZero() bool { return k.kind == 0 }

// StringValue returns the value of a StringKey, "" for other kinds.
func (k Key) StringValue() string {
	if k.kind != StringKey {
		return ""
	}
	return k.str
}

// Int64Value returns the value of an Int64Key, 0 for other kinds.
func (k Key) Int64Value() int64 { return k.num }

// BytesValue returns a copy of the value of a BytesKey or ObjectIDKey, nil for other kinds.
func (k Key) BytesValue() []byte {
	if k.kind != BytesKey && k.kind != ObjectIDKey {
		return nil
	}
	return []byte(k.str)
}

// ObjectIDValue returns the value of an ObjectIDKey, the zero array for other kinds.
func (k Key) ObjectIDValue() (id [12]byte) {
	if k.kind == ObjectIDKey {
		copy(id[:], k.str)
	}
	return id
}

// String renders the key for errors and logs: kind and value, bytes in hex.
func (k Key) String() string {
	switch k.kind {
	case StringKey:
		return strconv.Quote(k.str)
	case Int64Key:
		return "int64:" + strconv.FormatInt(k.num, 10)
	case BytesKey:
		return "bytes:" + hex.EncodeToString([]byte(k.str))
	case ObjectIDKey:
		return "objectid:" + hex.EncodeToString([]byte(k.str))
	}
	return "<no key>"
}

// Validate reports why k cannot address a record on every backend, or nil.
func (k Key) Validate() error {
	switch k.kind {
	case StringKey:
		if k.str == "" {
			return fmt.Errorf("string key is empty")
		}
		if len(k.str) > MaxStringKeyBytes {
			return fmt.Errorf("string key is %d bytes, more than %d", len(k.str), MaxStringKeyBytes)
		}
		if !utf8.ValidString(k.str) {
			return fmt.Errorf("string key is not valid UTF-8")
		}
	case Int64Key, ObjectIDKey:
	case BytesKey:
		if k.str == "" {
			return fmt.Errorf("bytes key is empty")
		}
		if len(k.str) > MaxBytesKeyBytes {
			return fmt.Errorf("bytes key is %d bytes, more than %d", len(k.str), MaxBytesKeyBytes)
		}
	default:
		return fmt.Errorf("key is missing")
	}
	return nil
}
