package mongostore

import (
	"encoding/binary"
	"errors"
	"math"

	"github.com/tributary-dev/tributary/store/driver"
)

// A revision is one format byte and its data:
//
//	0x00                  legacy: the record has no metadata field (never written through the adapter)
//	0x01 + 16-byte token  the random token the adapter's last write stored in the metadata field
//
// Every write stores a fresh random token, so a record deleted and created again never returns
// to an earlier revision (a counter would restart and let a stale writer through).
const (
	revLegacy   byte = 0x00
	revToken    byte = 0x01
	tokenLength      = 16
)

// The metadata field is a document; its "rev" member holds the token as generic binary.
const metaRevName = "rev"

var legacyRevision = []byte{revLegacy}

type revision struct {
	legacy bool
	token  []byte
}

func parseRevision(b []byte) (revision, error) {
	switch {
	case len(b) == 1 && b[0] == revLegacy:
		return revision{legacy: true}, nil
	case len(b) == 1+tokenLength && b[0] == revToken:
		return revision{token: b[1:]}, nil
	}
	return revision{}, driver.NewError(driver.KindInvalid, "mongostore: malformed revision", nil)
}

func tokenRevision(token []byte) []byte {
	return append([]byte{revToken}, token...)
}

// revisionOf returns the revision of a stored document from its metadata field.
func revisionOf(raw []byte, meta string) ([]byte, error) {
	var rev []byte
	var bad bool
	err := eachElement(raw, func(key []byte, t byte, val []byte) error {
		if string(key) != meta {
			return nil
		}
		bad = true
		if t != bsonDocument {
			return nil
		}
		return eachElement(val, func(k []byte, t byte, v []byte) error {
			if string(k) == metaRevName && t == bsonBinary && len(v) == 5+tokenLength && v[4] == 0 {
				rev, bad = tokenRevision(v[5:]), false
			}
			return nil
		})
	})
	switch {
	case err != nil:
		return nil, driver.NewError(driver.KindInternal, "mongostore: the server returned malformed BSON", nil)
	case bad:
		return nil, driver.NewError(driver.KindInternal, "mongostore: the record's metadata field "+meta+" holds no revision this adapter wrote", nil)
	case rev == nil:
		return legacyRevision, nil
	}
	return rev, nil
}

// appendMeta appends the metadata element holding token.
func appendMeta(dst []byte, meta string, token []byte) []byte {
	dst = appendKey(dst, bsonDocument, meta)
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = appendKey(dst, bsonBinary, metaRevName)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(token)))
	dst = append(dst, 0)
	dst = append(dst, token...)
	dst = append(dst, 0)
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start))
	return dst
}

func appendKey(dst []byte, t byte, key string) []byte {
	dst = append(dst, t)
	dst = append(dst, key...)
	return append(dst, 0)
}

// appendID appends the element "_id" holding the record key: string, int64, generic binary
// or ObjectID.
func appendID(dst []byte, k driver.Key) []byte {
	return appendKeyValue(dst, "_id", k)
}

func appendKeyValue(dst []byte, name string, k driver.Key) []byte {
	switch k.Kind() {
	case driver.StringKey:
		s := k.StringValue()
		dst = appendKey(dst, bsonString, name)
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(s)+1))
		dst = append(dst, s...)
		return append(dst, 0)
	case driver.Int64Key:
		dst = appendKey(dst, bsonInt64, name)
		return binary.LittleEndian.AppendUint64(dst, uint64(k.Int64Value()))
	case driver.BytesKey:
		b := k.BytesValue()
		dst = appendKey(dst, bsonBinary, name)
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(b)))
		dst = append(dst, 0)
		return append(dst, b...)
	case driver.ObjectIDKey:
		id := k.ObjectIDValue()
		dst = appendKey(dst, bsonObjectID, name)
		return append(dst, id[:]...)
	}
	panic("mongostore: key without a kind") // the portable layer validates every address
}

// keyOf maps a stored _id back to a key. Numbers compare by value in MongoDB, so an $in on
// an int64 also finds int32 and integral double ids; they map to the same int64 key.
func keyOf(t byte, v []byte) (driver.Key, bool) {
	switch t {
	case bsonString:
		return driver.NewStringKey(string(v[4 : len(v)-1])), true
	case bsonInt64:
		return driver.NewInt64Key(int64(binary.LittleEndian.Uint64(v))), true
	case bsonInt32:
		return driver.NewInt64Key(int64(int32(binary.LittleEndian.Uint32(v)))), true
	case bsonDouble:
		f := math.Float64frombits(binary.LittleEndian.Uint64(v))
		if f == math.Trunc(f) && f >= math.MinInt64 && f < math.MaxInt64 {
			return driver.NewInt64Key(int64(f)), true
		}
	case bsonBinary:
		if v[4] == 0 {
			return driver.NewBytesKey(v[5:]), true
		}
	case bsonObjectID:
		var id [12]byte
		copy(id[:], v)
		return driver.NewObjectIDKey(id), true
	}
	return driver.Key{}, false
}

// idOf returns the key of a stored document's _id.
func idOf(raw []byte) (driver.Key, bool) {
	var k driver.Key
	var ok bool
	_ = eachElement(raw, func(key []byte, t byte, val []byte) error {
		if string(key) == "_id" {
			k, ok = keyOf(t, val)
			return errStop
		}
		return nil
	})
	return k, ok
}

var errStop = errors.New("stop") // ends an eachElement walk early

// document wraps elements in a BSON document.
func document(parts ...[]byte) []byte {
	n := 5
	for _, p := range parts {
		n += len(p)
	}
	out := make([]byte, 4, n)
	binary.LittleEndian.PutUint32(out, uint32(n))
	for _, p := range parts {
		out = append(out, p...)
	}
	return append(out, 0)
}

// filterFor returns the filter that matches the record k only at revision rev (nil: at any).
func filterFor(k driver.Key, meta string, rev *revision) []byte {
	elems := appendID(nil, k)
	switch {
	case rev == nil:
	case rev.legacy:
		// {meta: {$exists: false}}
		inner := appendKey(nil, bsonBoolean, "$exists")
		inner = append(inner, 0)
		elems = appendKey(elems, bsonDocument, meta)
		elems = append(elems, document(inner)...)
	default:
		elems = appendKey(elems, bsonBinary, meta+"."+metaRevName)
		elems = binary.LittleEndian.AppendUint32(elems, uint32(len(rev.token)))
		elems = append(elems, 0)
		elems = append(elems, rev.token...)
	}
	return document(elems)
}
