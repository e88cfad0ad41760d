package driver

import (
	"context"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// MaxNameBytes bounds store, namespace and dataset names.
const MaxNameBytes = 255

// Address names one record: the configured store instance, a namespace (MongoDB: the database),
// a dataset (MongoDB: the collection; Elasticsearch and OpenSearch: an existing index or alias)
// and the key. Addresses are comparable.
type Address struct {
	Store     string
	Namespace string
	Dataset   string
	Key       Key
}

// String renders the address for errors and logs. It holds no document data.
func (a Address) String() string {
	return a.Store + "/" + a.Namespace + "/" + a.Dataset + "/" + a.Key.String()
}

// Validate reports why a cannot address a record on every backend, or nil.
func (a Address) Validate() error {
	for _, f := range [...]struct{ name, v string }{{"store", a.Store}, {"namespace", a.Namespace}, {"dataset", a.Dataset}} {
		switch {
		case f.v == "":
			return fmt.Errorf("%s name is empty", f.name)
		case len(f.v) > MaxNameBytes:
			return fmt.Errorf("%s name is %d bytes, more than %d", f.name, len(f.v), MaxNameBytes)
		case !utf8.ValidString(f.v):
			return fmt.Errorf("%s name is not valid UTF-8", f.name)
		}
	}
	if err := a.Key.Validate(); err != nil {
		return err
	}
	return nil
}

// Document is a JSON object and the JSON Pointers (RFC 6901) of the RFC 3339 date-time strings in
// it. Adapters that have a native date-time type convert exactly the marked values and return
// them marked; others store the strings as they are.
type Document struct {
	JSON  []byte
	Times []string
}

// Outcome says what an operation did to its record.
type Outcome uint8

// Outcomes. The zero Outcome means the operation failed (see the result's error).
const (
	Found     Outcome = iota + 1 // read: the record exists
	Absent                       // read or delete: there is no such record (store.Absent)
	Created                      // put or merge: the record did not exist and now does
	Updated                      // put or merge: the record existed and was replaced
	Deleted                      // delete or merge: the record existed and is gone
	Unchanged                    // merge: the program left the record as it was
	Accepted                     // accepted mode: a durable queue holds the mutation
)

// NotFound is the old name of Absent.
//
// Deprecated: use Absent, the name store uses (a missing record is no error; KindNotFound is a
// missing dataset). NotFound goes in the release after v0.1.0.
const NotFound = Absent

var outcomeNames = [...]string{"", "found", "absent", "created", "updated", "deleted", "unchanged", "accepted"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) && o != 0 {
		return outcomeNames[o]
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// ConditionKind says what a write requires of the record before it applies.
type ConditionKind uint8

// Conditions.
const (
	Unconditional ConditionKind = iota // apply whatever the record's state
	IfRevision                         // apply only while the record is at Condition.Revision
	IfAbsent                           // apply only while there is no record
)

// Condition is a write's precondition. Revision is the adapter's own encoding, as it returned it.
type Condition struct {
	Kind     ConditionKind
	Revision []byte
}

// WriteKind says whether a write stores a document or deletes the record.
type WriteKind uint8

// Writes.
const (
	Put WriteKind = iota + 1
	Delete
)

// Write is one mutation of one record.
type Write struct {
	Kind WriteKind
	Addr Address
	Doc  Document // Put only: the complete new document
	Cond Condition
}

// WriteOptions apply to every write of one call.
type WriteOptions struct {
	// Visible asks the adapter to return only once subsequent searches observe the writes
	// (refresh=wait_for on Elasticsearch and OpenSearch).
	Visible bool
}

// ReadResult is the state of one record. Err set means nothing else is meaningful.
type ReadResult struct {
	Found    bool
	Doc      Document
	Revision []byte
	Err      error
}

// WriteResult is what one write did: Outcome Created, Updated, Deleted or Absent (a delete of an
// absent record), the record's new Revision (empty after a delete), or Err.
type WriteResult struct {
	Outcome  Outcome
	Revision []byte
	Err      error
}

// Store is the narrow contract every backend implements. The portable store package owns
// validation, routing, ordering, merges, retries and coalescing; an adapter makes one attempt at
// what it is given and classifies each failure with an ErrorKind.
//
// The portable layer guarantees that the addresses of one Read or Write call are distinct and
// valid, that every document is a valid JSON object within the configured size limit, and that
// writes carrying IfRevision hold a revision this adapter returned earlier (or bytes it must
// reject as Invalid).
//
// Results are in the order of the request and as long as it. A non-nil error returned beside
// the results applies to every item (for example the backend could not be reached); the results
// are then ignored.
type Store interface {
	Read(ctx context.Context, addrs []Address) ([]ReadResult, error)
	Write(ctx context.Context, writes []Write, opts WriteOptions) ([]WriteResult, error)
	Close(ctx context.Context) error
}

// AddressValidator is optionally implemented by adapters whose backend restricts names or keys
// further (a MongoDB database name cannot contain '.', an index name must be lowercase). The
// portable layer calls it for every address of a request before anything is written.
type AddressValidator interface {
	ValidateAddress(Address) error
}

// TimePrecisioner is optionally implemented by adapters whose native date-time type keeps less
// than nanoseconds (BSON datetimes keep milliseconds). The portable layer truncates the times it
// hands to merge programs for this store (MergeContext.Time) to that precision, so a program
// that stamps a record with its context time writes a value the backend keeps exactly.
//
// A wrapper around an adapter hides its optional interfaces (AddressValidator,
// TimePrecisioner) unless it forwards them.
type TimePrecisioner interface {
	TimePrecision() time.Duration
}
