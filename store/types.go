package store

import (
	"github.com/tributary-dev/tributary/store/driver"
)

// The record vocabulary applications use is defined here. Package driver, the adapter
// contract, has its own copy of it (it imports nothing from store); the Service converts at the
// adapter boundary, field by field, without allocating. types_test.go checks that the two
// agree.

// Limits on names and keys, the same on every backend so that an address valid on one is valid
// on all. Elasticsearch caps _id at 512 bytes; the reserved encodings of non-string keys must
// fit too.
const (
	MaxNameBytes      = 255 // store, namespace and dataset names
	MaxStringKeyBytes = 512
	MaxBytesKeyBytes  = 256
)

// KeyKind says which of the four key types a Key holds.
type KeyKind uint8

// The key types a record address may use. The zero KeyKind is no key.
const (
	KindStringKey   KeyKind = iota + 1 // a UTF-8 string
	KindInt64Key                       // a signed 64-bit integer
	KindBytesKey                       // an opaque byte string
	KindObjectIDKey                    // a 12-byte MongoDB ObjectID
)

func (k KeyKind) String() string { return driver.KeyKind(k).String() }

// Key is a record key: a string, an int64, a byte string or a MongoDB ObjectID. Build it with
// StringKey, Int64Key, BytesKey or ObjectIDKey. Keys are comparable values (usable as map
// keys); two keys are equal only when kind and value are. The zero Key is no key: an address
// with it is invalid.
type Key struct {
	k driver.Key
}

// StringKey returns a string key. It must be non-empty valid UTF-8 of at most
// MaxStringKeyBytes bytes to address a record.
func StringKey(s string) Key { return Key{driver.NewStringKey(s)} }

// Int64Key returns an int64 key.
func Int64Key(n int64) Key { return Key{driver.NewInt64Key(n)} }

// BytesKey returns a byte-string key holding a copy of b. It must be non-empty and at most
// MaxBytesKeyBytes bytes to address a record.
func BytesKey(b []byte) Key { return Key{driver.NewBytesKey(b)} }

// ObjectIDKey returns a MongoDB ObjectID key.
func ObjectIDKey(id [12]byte) Key { return Key{driver.NewObjectIDKey(id)} }

// Kind returns the key's type; zero for the zero Key.
func (k Key) Kind() KeyKind { return KeyKind(k.k.Kind()) }

// IsZero reports whether k is the zero Key (no key at all).
func (k Key) IsZero() bool { return k.k.IsZero() }

// StringValue returns the value of a string key, "" for other kinds.
func (k Key) StringValue() string { return k.k.StringValue() }

// Int64Value returns the value of an int64 key, 0 for other kinds.
func (k Key) Int64Value() int64 { return k.k.Int64Value() }

// BytesValue returns a copy of the value of a bytes or ObjectID key, nil for other kinds.
func (k Key) BytesValue() []byte { return k.k.BytesValue() }

// ObjectIDValue returns the value of an ObjectID key, the zero array for other kinds.
func (k Key) ObjectIDValue() [12]byte { return k.k.ObjectIDValue() }

// String renders the key for errors and logs: a quoted string, or the kind and the value
// ("int64:7", bytes in hex).
func (k Key) String() string { return k.k.String() }

// Validate reports why k cannot address a record on every backend, or nil.
func (k Key) Validate() error { return k.k.Validate() }

// Address names one record: the configured store instance, a namespace (MongoDB: the database),
// a dataset (MongoDB: the collection; Elasticsearch and OpenSearch: an existing index or alias)
// and the key. Addresses are comparable.
type Address struct {
	Store     string
	Namespace string
	Dataset   string
	Key       Key
}

// String renders the address for errors and logs: store/namespace/dataset/key. It holds no
// document data.
func (a Address) String() string { return a.driver().String() }

// Validate reports why a cannot address a record on every backend, or nil: every name must be
// non-empty valid UTF-8 of at most MaxNameBytes bytes, and the key valid. An adapter may
// restrict names further; the Service checks that too, before anything is written.
func (a Address) Validate() error { return a.driver().Validate() }

// driver returns a in the adapter contract's vocabulary.
func (a Address) driver() driver.Address {
	return driver.Address{Store: a.Store, Namespace: a.Namespace, Dataset: a.Dataset, Key: a.Key.k}
}

// Document is a JSON object and the JSON Pointers (RFC 6901) of the RFC 3339 date-time strings
// in it. Adapters that have a native date-time type (MongoDB) convert exactly the marked values
// and return them marked; others store the strings as they are. NewDocument builds one from a
// Go value.
type Document struct {
	JSON  []byte
	Times []string
}

// Outcome says what an operation did to its record. The zero Outcome means the operation
// failed (see the error).
type Outcome uint8

// Outcomes.
const (
	Found   Outcome = iota + 1 // read: the record exists
	Absent                     // read or delete: there is no such record (not an error)
	Created                    // put or merge: the record did not exist and now does
	Updated                    // put or merge: the record existed and was replaced
	Deleted                    // delete or merge: the record existed and is gone
	// Unchanged: merge: the program left the record as it was.
	Unchanged
	// Accepted: accepted mode: a durable queue holds the mutation.
	Accepted
)

// NotFound is the old name of Absent.
//
// Deprecated: use Absent. NotFound reads like ErrNotFound, which is a missing dataset, an
// error; a missing record is the outcome Absent with a nil error. NotFound goes in the next
// release.
const NotFound = Absent

func (o Outcome) String() string { return driver.Outcome(o).String() }

// ErrorKind classifies a failure. The set is closed: every error of this package carries one
// (see the sentinels for errors.Is).
type ErrorKind uint8

// Error kinds.
const (
	// KindInternal is a permanent failure that fits no other kind (an answer that cannot be
	// parsed, a server certificate that does not verify). Not retryable.
	KindInternal ErrorKind = iota
	// KindDatasetNotFound: the dataset (index, collection) does not exist. A missing record is
	// no error: it is the outcome Absent.
	KindDatasetNotFound
	// KindAlreadyExists: an IfAbsent operation found a record.
	KindAlreadyExists
	// KindConflict: an IfRevision operation found the record at another revision, or absent;
	// or a merge gave up on a record that kept changing.
	KindConflict
	// KindInvalid: the operation can never succeed as it is (a bad name, a document the
	// dataset's mapping refuses, a malformed revision, a failing merge program).
	KindInvalid
	// KindTooLarge: a document or request exceeds a limit.
	KindTooLarge
	// KindUnavailable: retryable; reported only when the operation cannot have taken effect.
	KindUnavailable
	// KindCanceled: the caller's context ended first.
	KindCanceled
	// KindOutcomeUnknown: retryable, but the operation may have taken effect -- it was sent and
	// no answer came within its bound -- and may still take effect later: a retry may apply it
	// twice.
	KindOutcomeUnknown
	// KindPermissionDenied: the backend refused the credentials (authentication failed) or
	// found them lacking a privilege the operation needs (the message names the action and the
	// privileges when the backend does); nothing was applied. Not retryable: the credentials or
	// the role must change. Per item: a dataset the role does not cover fails only its own
	// operations.
	KindPermissionDenied
	// KindNoQueue: an accepted-mode write (ReturnAccepted) to a store that has no durable
	// queue (Options.Queues); that operation fails on its own and the request's other
	// operations run. Nothing was applied or enqueued. Retryable, as the record-sink
	// specification asks: a retry cannot apply it twice, and succeeds once the store has a
	// queue (another instance of the service, a corrected configuration) or in a synchronous
	// completion mode. A kind of its own so that a caller tells a store without a queue from
	// a queue that is down (KindUnavailable, KindOutcomeUnknown).
	KindNoQueue
)

// KindNotFound is the old name of KindDatasetNotFound.
//
// Deprecated: use KindDatasetNotFound; it goes in the next release.
const KindNotFound = KindDatasetNotFound

func (k ErrorKind) String() string { return driver.ErrorKind(k).String() }

// Retryable reports whether an operation that failed with this kind may be sent again as it is
// and then succeed: true for KindUnavailable (it had no effect, so a retry cannot apply it
// twice), for KindOutcomeUnknown (it may have taken effect, so a retry may apply it twice)
// and for KindNoQueue (it had no effect; it succeeds once the store has a queue). A caller
// that must never apply an operation twice retries only KindUnavailable and KindNoQueue.
func (k ErrorKind) Retryable() bool { return driver.ErrorKind(k).Retryable() }
