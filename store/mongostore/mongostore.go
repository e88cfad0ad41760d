package mongostore

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"github.com/tributary-dev/tributary/store/driver"
)

// DefaultMetadataField is the top-level field that holds the adapter's metadata by default.
const DefaultMetadataField = "_tributary"

// Options configure a Store. The zero value (or nil) gives the documented defaults.
type Options struct {
	// MetadataField names the top-level field that holds the revision of every record written
	// through the adapter. Documents written may not have a top-level member of that name, and
	// reads leave it out. It must be a plain field name: not empty, not "_id", no '.', not
	// starting with '$'. Default DefaultMetadataField ("_tributary").
	MetadataField string
	// MaxConcurrency bounds the requests one Read or Write call has in flight at once
	// (queries, bulk writes, individual conditional writes). Default 32.
	MaxConcurrency int
	// DisconnectOnClose makes Close disconnect the client. Default false: whoever created the
	// client disconnects it.
	DisconnectOnClose bool
	// Rand is the source of the random revision tokens. Default crypto/rand.Reader.
	Rand io.Reader
	// FerretDB declares that the server is FerretDB 1.x. The adapter then sends unconditional
	// puts as individual upserts instead of one bulk (FerretDB's bulk update replies lose the
	// outcomes when a statement fails, and FerretDB 1.24 deadlocks on an update of more than
	// about 100 statements), and refuses as Invalid, before sending, documents needing values
	// FerretDB cannot store (Decimal128, non-finite doubles, MinKey, MaxKey; some of them make
	// it drop the connection). See the package documentation. Default false (MongoDB).
	FerretDB bool
	// Timeout bounds every Read and Write call on top of the caller's context: the call ends
	// by the earlier of the two. (The client's own timeout, options.Client().SetTimeout, is
	// ignored by the driver whenever the context has a deadline.) A read that times out is
	// KindUnavailable, a write KindOutcomeUnknown unless it was certainly not sent. Default 0:
	// only the context and the client's timeout bound a call.
	Timeout time.Duration
}

// Store is the MongoDB adapter: a driver.Store (and driver.AddressValidator) over one
// *mongo.Client. It is safe for concurrent use.
type Store struct {
	client *mongo.Client
	opts   Options

	closed atomic.Bool
	randMu sync.Mutex
	hints  hintCache // the BSON types of recent reads' values their JSON text does not give back
}

var (
	_ driver.Store            = (*Store)(nil)
	_ driver.AddressValidator = (*Store)(nil)
	_ driver.TimePrecisioner  = (*Store)(nil)
)

// TimePrecision implements driver.TimePrecisioner: BSON datetimes keep milliseconds, so the
// portable layer truncates merge context times to the millisecond and a program's
// json.datetime(context.time) is stored exactly.
func (s *Store) TimePrecision() time.Duration { return time.Millisecond }

// New returns a Store over client, which the caller has connected (mongo.Connect) and keeps
// owning unless Options.DisconnectOnClose is set.
func New(client *mongo.Client, opts *Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("mongostore: New needs a client")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MetadataField == "" {
		o.MetadataField = DefaultMetadataField
	}
	if f := o.MetadataField; f == "_id" || strings.ContainsAny(f, ".\x00") || f[0] == '$' {
		return nil, errors.New("mongostore: MetadataField must be a plain top-level field name other than _id")
	}
	if o.MaxConcurrency <= 0 {
		o.MaxConcurrency = 32
	}
	if o.Rand == nil {
		o.Rand = rand.Reader
	}
	if o.Timeout < 0 {
		return nil, errors.New("mongostore: negative Timeout")
	}
	return &Store{client: client, opts: o}, nil
}

// errTimeout is the cancellation cause when Options.Timeout, not the caller, ends a call.
var errTimeout = errors.New("mongostore: the call timed out (Options.Timeout)")

// bound returns ctx bounded by Options.Timeout.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.opts.Timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, s.opts.Timeout, errTimeout)
}

// collection returns the handle for a namespace and dataset. Reads go to the primary whatever
// the client's default: a read that precedes a conditional write must see the latest write.
func (s *Store) collection(ns, ds string) *mongo.Collection {
	return s.client.Database(ns).Collection(ds, options.Collection().SetReadPreference(readpref.Primary()))
}

type collName struct{ ns, ds string }

// Read implements driver.Store: one $in query per collection, the collections queried
// concurrently.
func (s *Store) Read(ctx context.Context, addrs []driver.Address) ([]driver.ReadResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.closed.Load() {
		return nil, errClosed
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	out := make([]driver.ReadResult, len(addrs))
	groups := make(map[collName][]int)
	var order []collName
	for i, a := range addrs {
		c := collName{a.Namespace, a.Dataset}
		if _, seen := groups[c]; !seen {
			order = append(order, c)
		}
		groups[c] = append(groups[c], i)
	}
	s.parallel(ctx, len(order), func(g int) {
		c := order[g]
		s.readCollection(ctx, c, groups[c], addrs, out)
	})
	return out, nil
}

func (s *Store) readCollection(ctx context.Context, c collName, idx []int, addrs []driver.Address, out []driver.ReadResult) {
	fail := func(err error) {
		for _, i := range idx {
			if !out[i].Found && out[i].Err == nil {
				out[i] = driver.ReadResult{Err: err}
			}
		}
	}
	byKey := make(map[driver.Key]int, len(idx))
	var ids []byte
	for n, i := range idx {
		byKey[addrs[i].Key] = i
		ids = appendKeyValue(ids, strconv.Itoa(n), addrs[i].Key)
	}
	filter := inFilter(ids)
	if len(idx) == 1 {
		// The same query as a one-element $in, which MongoDB runs as an equality anyway; FerretDB
		// 1.x pushes an _id equality down to its SQL backend but scans the collection for $in.
		filter = document(appendID(nil, addrs[idx[0]].Key))
	}
	// One round trip: a first batch with room for one more than can match lets the server
	// close the cursor at once (an exactly full batch, or the default of 101, costs a getMore).
	cur, err := s.collection(c.ns, c.ds).Find(ctx, bson.Raw(filter), options.Find().SetBatchSize(int32(len(idx)+1)))
	if err != nil {
		fail(newBackendError(callErrKind(ctx, err, false), "find", err))
		return
	}
	defer cur.Close(context.WithoutCancel(ctx))
	for cur.Next(ctx) {
		raw := []byte(cur.Current)
		k, ok := idOf(raw)
		if !ok {
			continue
		}
		i, ok := byKey[k]
		if !ok {
			continue
		}
		rev, err := revisionOf(raw, s.opts.MetadataField)
		if err != nil {
			out[i] = driver.ReadResult{Err: err}
			continue
		}
		doc, hints, err := decodeDocumentHints(raw, s.opts.MetadataField)
		if err != nil {
			out[i] = driver.ReadResult{Err: err}
			continue
		}
		s.hints.record(c.ns, c.ds, k, rev, hints)
		out[i] = driver.ReadResult{Found: true, Doc: doc, Revision: rev}
	}
	if err := cur.Err(); err != nil {
		fail(newBackendError(callErrKind(ctx, err, false), "find", err))
	}
}

// inFilter returns {_id: {$in: ids}} for the array elements ids.
func inFilter(ids []byte) []byte {
	arr := document(ids)
	in := appendKey(nil, bsonArray, "$in")
	in = append(in, arr...)
	outer := appendKey(nil, bsonDocument, "_id")
	outer = append(outer, document(in)...)
	return document(outer)
}

// parallel runs f(0..n-1), at most MaxConcurrency at once, and waits for all of them.
func (s *Store) parallel(ctx context.Context, n int, f func(int)) {
	if n == 1 {
		f(0)
		return
	}
	limit := make(chan struct{}, s.opts.MaxConcurrency)
	var wg sync.WaitGroup
	for i := range n {
		limit <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() {
				<-limit
				wg.Done()
			}()
			f(i)
		}()
	}
	wg.Wait()
}

// Close implements driver.Store: later calls fail; calls in flight finish on their own (the
// portable layer waits for them). It disconnects the client only when
// Options.DisconnectOnClose is set.
func (s *Store) Close(ctx context.Context) error {
	if s.closed.Swap(true) || !s.opts.DisconnectOnClose {
		return nil
	}
	return s.client.Disconnect(ctx)
}
