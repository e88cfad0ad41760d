package store

import "github.com/tributary-dev/tributary/store/driver"

// The record vocabulary is shared with adapters through package driver; these aliases are the
// names applications use (no application needs to import driver).
type (
	// Adapter is a backend adapter (memstore, searchstore, mongostore), the contract of
	// package driver; New takes one per store name.
	Adapter = driver.Store
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
	Found = driver.Found
	// Absent: there is no record at the address (a read of a missing record, a delete or a
	// merge that found none). It is an outcome, not an error; a missing dataset is the error
	// ErrDatasetNotFound.
	Absent = driver.NotFound
	// Deprecated: NotFound is Absent, renamed so that it is not confused with
	// ErrDatasetNotFound.
	NotFound  = driver.NotFound
	Created   = driver.Created
	Updated   = driver.Updated
	Deleted   = driver.Deleted
	Unchanged = driver.Unchanged
	Accepted  = driver.Accepted
)

// Error kinds.
const (
	KindInternal = driver.KindInternal
	// KindDatasetNotFound: the dataset (index, collection) does not exist. A missing record is
	// not an error but the outcome Absent.
	KindDatasetNotFound = driver.KindNotFound
	// Deprecated: KindNotFound is KindDatasetNotFound.
	KindNotFound       = driver.KindNotFound
	KindAlreadyExists  = driver.KindAlreadyExists
	KindConflict       = driver.KindConflict
	KindInvalid        = driver.KindInvalid
	KindTooLarge       = driver.KindTooLarge
	KindUnavailable    = driver.KindUnavailable
	KindCanceled       = driver.KindCanceled
	KindOutcomeUnknown = driver.KindOutcomeUnknown
)
