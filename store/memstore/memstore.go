package memstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"sync"

	"github.com/tributary-dev/tributary/store/driver"
)

// Adapter is the in-memory adapter: a store.Adapter (the driver contract a store.Service runs
// on), not a store.Store -- give it to store.New, or use NewService. It is safe for concurrent
// use; each Read or Write call is atomic as a whole (stronger than the contract asks).
type Adapter struct {
	prof    profile // what it refuses (Options)
	like    Backend
	mu      sync.Mutex
	records map[driver.Address]record
	last    uint64 // the last revision handed out
	closed  bool
}

type record struct {
	doc driver.Document
	rev uint64
}

// Store is the old name of Adapter.
//
// Deprecated: use Adapter. The name read like a store.Store, which an Adapter is not; Store
// goes in the release after v0.1.0.
type Store = Adapter

// New returns an empty Adapter with the default Options: it refuses what every real backend
// refuses (Strictest).
func New() *Adapter { return NewWithOptions(nil) }

// NewWithOptions returns an empty Adapter configured by opts (nil: the defaults), for instance
// one that behaves like MongoDB: NewWithOptions(&Options{Like: MongoDB}).
func NewWithOptions(opts *Options) *Adapter {
	var like Backend
	if opts != nil {
		like = opts.Like
	}
	return &Adapter{prof: opts.profile(), like: like, records: make(map[driver.Address]record)}
}

// Like returns the backend whose refusals the Adapter copies (Options.Like).
func (s *Adapter) Like() Backend { return s.like }

// Interfaces the Service looks for.
var (
	_ driver.AddressValidator = (*Adapter)(nil)
	_ driver.TimePrecisioner  = (*Adapter)(nil)
)

var errClosed = driver.NewError(driver.KindInternal, "memstore: closed", nil)

// Read implements driver.Store.
func (s *Adapter) Read(ctx context.Context, addrs []driver.Address) ([]driver.ReadResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	out := make([]driver.ReadResult, len(addrs))
	for i, a := range addrs {
		if r, ok := s.records[a]; ok {
			out[i] = driver.ReadResult{Found: true, Doc: cloneDoc(r.doc), Revision: encodeRev(r.rev)}
		}
	}
	return out, nil
}

// Write implements driver.Store. Visibility needs nothing here: a write is visible to every
// later read once Write returns.
func (s *Adapter) Write(ctx context.Context, writes []driver.Write, _ driver.WriteOptions) ([]driver.WriteResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	out := make([]driver.WriteResult, len(writes))
	for i, w := range writes {
		out[i] = s.apply(w)
	}
	return out, nil
}

func (s *Adapter) apply(w driver.Write) driver.WriteResult {
	if w.Kind == driver.Put {
		if err := s.prof.check(w.Doc); err != nil {
			return driver.WriteResult{Err: err}
		}
	}
	cur, exists := s.records[w.Addr]
	switch w.Cond.Kind {
	case driver.IfAbsent:
		if exists {
			return driver.WriteResult{Err: driver.NewError(driver.KindAlreadyExists, "memstore: the record exists", nil)}
		}
	case driver.IfRevision:
		want, err := decodeRev(w.Cond.Revision)
		if err != nil {
			return driver.WriteResult{Err: err}
		}
		if !exists || cur.rev != want {
			return driver.WriteResult{Err: driver.NewError(driver.KindConflict, "memstore: the record is not at the given revision", nil)}
		}
	}
	switch w.Kind {
	case driver.Put:
		s.last++
		s.records[w.Addr] = record{doc: cloneDoc(w.Doc), rev: s.last}
		outcome := driver.Created
		if exists {
			outcome = driver.Updated
		}
		return driver.WriteResult{Outcome: outcome, Revision: encodeRev(s.last)}
	case driver.Delete:
		if !exists {
			return driver.WriteResult{Outcome: driver.Absent}
		}
		delete(s.records, w.Addr)
		return driver.WriteResult{Outcome: driver.Deleted}
	}
	return driver.WriteResult{Err: driver.NewError(driver.KindInvalid, "memstore: unknown write kind", nil)}
}

// Close implements driver.Store. Later calls fail; the records are dropped.
func (s *Adapter) Close(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.records = nil
	return nil
}

// Count returns the number of records in one dataset of one namespace (in every store name).
func (s *Adapter) Count(namespace, dataset string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for a := range s.records {
		if a.Namespace == namespace && a.Dataset == dataset {
			n++
		}
	}
	return n
}

func cloneDoc(d driver.Document) driver.Document {
	return driver.Document{JSON: bytes.Clone(d.JSON), Times: slices.Clone(d.Times)}
}

// A revision is the store-wide counter value of the write that produced the record, so a
// revision is never reused, not even by a record deleted and created again.
func encodeRev(n uint64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8), n) }

func decodeRev(b []byte) (uint64, error) {
	if len(b) != 8 {
		return 0, driver.NewError(driver.KindInvalid, "memstore: malformed revision", errors.New("want 8 bytes"))
	}
	return binary.BigEndian.Uint64(b), nil
}
