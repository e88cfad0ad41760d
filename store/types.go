package store

import "github.com/tributary-dev/tributary/store/driver"

// The record vocabulary is shared with adapters through package driver; these aliases are the
// names applications use.
type (
	// Key is a record key: string, int64, bytes or MongoDB ObjectID. Keys are comparable.
	Key = driver.Key
	// KeyKind says which type a Key holds.
	KeyKind = driver.KeyKind
	// Address names one record: store, namespace, dataset and key. Addresses are comparable.
	Address = driver.Address
	// Document is a JSON object plus the JSON Pointers of its RFC 3339 date-time strings.
	Document = driver.Document
	// Outcome says what an operation did to its record.
	Outcome = driver.Outcome
	// ErrorKind classifies a failure; the set is closed.
	ErrorKind = driver.ErrorKind
)

// Key constructors and kinds.
var (
	StringKey   = driver.NewStringKey
	Int64Key    = driver.NewInt64Key
	BytesKey    = driver.NewBytesKey
	ObjectIDKey = driver.NewObjectIDKey
)

// Key kinds.
const (
	KindStringKey   = driver.StringKey
	KindInt64Key    = driver.Int64Key
	KindBytesKey    = driver.BytesKey
	KindObjectIDKey = driver.ObjectIDKey
)

// Outcomes.
const (
	Found     = driver.Found
	NotFound  = driver.NotFound
	Created   = driver.Created
	Updated   = driver.Updated
	Deleted   = driver.Deleted
	Unchanged = driver.Unchanged
	Accepted  = driver.Accepted
)

// Error kinds.
const (
	KindInternal       = driver.KindInternal
	KindNotFound       = driver.KindNotFound
	KindAlreadyExists  = driver.KindAlreadyExists
	KindConflict       = driver.KindConflict
	KindInvalid        = driver.KindInvalid
	KindTooLarge       = driver.KindTooLarge
	KindUnavailable    = driver.KindUnavailable
	KindCanceled       = driver.KindCanceled
	KindOutcomeUnknown = driver.KindOutcomeUnknown
)
