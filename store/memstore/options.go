package memstore

import (
	"strconv"
	"time"

	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/driver"
)

// Backend names the real backend whose refusals a Store copies (Options.Like), so that a unit
// test against the fake fails where production would.
type Backend uint8

// Backends.
const (
	// Strictest refuses what any backend of the specification refuses: each limit at the
	// strictest one's value (the union of MongoDB's and Search's refusals). The default: code
	// that passes its tests on it runs on MongoDB, Elasticsearch and OpenSearch. FerretDB's
	// own refusals (see FerretDB), those of a stand-in for MongoDB, are not among them.
	Strictest Backend = iota
	// MongoDB refuses what mongostore refuses on a MongoDB server: names MongoDB refuses,
	// documents BSON cannot hold (see Options), date-times finer than a millisecond, documents
	// over 16 MiB.
	MongoDB
	// FerretDB refuses what mongostore with Options.FerretDB refuses on FerretDB 1.x:
	// MongoDB's refusals and FerretDB's own (numbers that need Decimal128, -0, member names
	// starting with '$' or holding '.' at any level, arrays directly inside arrays).
	FerretDB
	// Search refuses what searchstore refuses on Elasticsearch and OpenSearch whatever the
	// index mapping: dataset names that are no index name, string keys starting with "~~",
	// a top-level member named _id, repeated member names. What a mapping refuses (a type
	// conflict, the mapping depth or field limits) is not modelled.
	Search
	// Lenient refuses only what the store contract refuses (memstore before it copied
	// backends): any precision, any size the Service allows, any name the contract allows.
	Lenient
)

func (b Backend) String() string {
	switch b {
	case Strictest:
		return "strictest"
	case MongoDB:
		return "mongodb"
	case FerretDB:
		return "ferretdb"
	case Search:
		return "search"
	case Lenient:
		return "lenient"
	}
	return "Backend(" + strconv.Itoa(int(b)) + ")"
}

// Options configure a Store. The zero value (or nil) gives the documented defaults: a Store
// that refuses what every real backend refuses (Strictest).
type Options struct {
	// Like is the backend whose refusals the Store copies. Default Strictest.
	Like Backend
	// MaxDocumentBytes refuses (KindTooLarge) a document whose JSON text is longer. Default:
	// Like's -- 16 MiB for Strictest, MongoDB and FerretDB (MongoDB's limit is on the BSON
	// form, which is about as long as the JSON text for ordinary documents and longer for
	// documents of many short values: the fake is kinder there); none for Search and Lenient.
	// Negative: none.
	MaxDocumentBytes int
	// TimePrecision is the finest date-time the Store keeps: a marked date-time finer than it
	// is refused (KindInvalid, naming its JSON Pointer), and the Store reports it as its
	// driver.TimePrecisioner, so the Service truncates merge context times to it. Default:
	// Like's -- a millisecond for Strictest, MongoDB and FerretDB (BSON datetimes), none for
	// Search and Lenient. Negative: none.
	TimePrecision time.Duration
	// KeyKinds, when not empty, are the only key kinds the Store accepts; others are refused
	// (KindInvalid) before anything is written. Default: all four, which every backend
	// accepts.
	KeyKinds []store.KeyKind
}

// profile is what a Store refuses, resolved from Options.
type profile struct {
	mongo, ferret, search bool // the backends whose refusals apply
	maxDoc                int  // 0: no limit of the Store's own
	timePrec              time.Duration
	keyKinds              map[driver.KeyKind]bool // nil: all
}

// mongoMaxDocument is MongoDB's limit on a document (as BSON).
const mongoMaxDocument = 16 << 20

func (o *Options) profile() profile {
	var c Options
	if o != nil {
		c = *o
	}
	var p profile
	switch c.Like {
	case Strictest:
		p.mongo, p.search = true, true
	case MongoDB:
		p.mongo = true
	case FerretDB:
		p.mongo, p.ferret = true, true
	case Search:
		p.search = true
	}
	if p.mongo {
		p.maxDoc, p.timePrec = mongoMaxDocument, time.Millisecond
	}
	switch {
	case c.MaxDocumentBytes > 0:
		p.maxDoc = c.MaxDocumentBytes
	case c.MaxDocumentBytes < 0:
		p.maxDoc = 0
	}
	switch {
	case c.TimePrecision > 0:
		p.timePrec = c.TimePrecision
	case c.TimePrecision < 0:
		p.timePrec = 0
	}
	if len(c.KeyKinds) > 0 {
		p.keyKinds = make(map[driver.KeyKind]bool, len(c.KeyKinds))
		for _, k := range c.KeyKinds {
			p.keyKinds[driver.KeyKind(k)] = true
		}
	}
	return p
}
