package debezium

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/queue"
)

// ConsumerFactory makes the group consumer a stream reads: one per Open, closed with the
// stream. Every consumer it makes must belong to the same consumer group, whose committed
// offsets are where a stream starts.
type ConsumerFactory func(ctx context.Context) (queue.Consumer, error)

// Options are the Source's optional settings; nil means every default.
type Options struct {
	// Name is the configured source's name: cdc.TableID.Source of every event, so that index
	// names are the same as a native source of that name gives. Default "debezium".
	Name string
	// Logger receives the source's warnings (a commit that failed). Default: none. Lines
	// name topics, partitions and offsets, never values.
	Logger *slog.Logger
	// InferTypes lets a table whose change events lack the source column types (the
	// connector's column.propagate.source.type) be mapped from Kafka Connect's types alone.
	// Those do not tell an unsigned BIGINT from a signed one, a varchar's length, or
	// MariaDB's JSON from LONGTEXT, so the mapping can differ from a native source's.
	// Default: such a table stops the pipeline with an error naming the setting.
	InferTypes bool
	// Versions chooses MySQL/MariaDB versions; see Versions. Default VersionsDefault.
	Versions Versions
	// Catalog reads the source database's tables for records without an embedded schema
	// (JsonConverter with schemas.enable=false): their columns are then the native source's
	// (a pgcdc or mysqlcdc Source for the database the connector reads is one). It is read
	// when a table's first such record arrives and again when a record holds a field it
	// does not know, so it must answer with the catalog as it is now, not a cached copy.
	// Default: such records stop the stream with an error naming the settings.
	Catalog cdc.SchemaLoader
	// DecimalStrings says that records without a schema carry decimals as text (the
	// connector's decimal.handling.mode=string); by default they are Debezium's precise
	// binary form. Records with a schema say which they carry.
	DecimalStrings bool
	// PlainDates assures the source that the database holds no date Debezium cannot carry:
	// no MariaDB zero date (0000-00-00, a zero month or day, year 0: the connector writes
	// them as null, or as 1970-01-01 in a NOT NULL column) and no PostgreSQL BC date in a
	// table the connector snapshots (its snapshot drops the era). Without it such nulls and
	// 1970-01-01 in MariaDB DATE and DATETIME columns (and nulls of nullable TIMESTAMP
	// columns in snapshot reads) are dead-lettered, and a PostgreSQL table with a date column
	// is refused at its first snapshot read. See the package documentation's value table.
	PlainDates bool
	// Buffer is how many decoded events wait for the runner. Default 1024.
	Buffer int
	// Lag, when set, measures how far the consumer group trails its topics, and the source
	// is then a cdc.LagReporter (the runner reports lag in Status and Health): head and
	// position are the sums over the topics' partitions of their end offsets and of the
	// group's committed offsets (kafkaqueue.Monitor's Lag.Head and Lag.Position). Default:
	// none.
	Lag func(ctx context.Context) (head, position int64, err error)
}

func (o *Options) withDefaults() Options {
	var v Options
	if o != nil {
		v = *o
	}
	if v.Name == "" {
		v.Name = "debezium"
	}
	if v.Buffer <= 0 {
		v.Buffer = 1024
	}
	return v
}

// Source reads Debezium change events from Kafka topics as a cdc.Source. See the package
// documentation.
type Source struct {
	consumers ConsumerFactory
	opts      Options
}

var _ cdc.Source = (*Source)(nil)

// New returns a source whose streams consume through consumers; with Options.Lag it is also a
// cdc.LagReporter.
func New(consumers ConsumerFactory, opts *Options) (cdc.Source, error) {
	if consumers == nil {
		return nil, errors.New("debezium: no consumer factory")
	}
	o := opts.withDefaults()
	switch o.Versions {
	case VersionsDefault, VersionsGTID, VersionsFile:
	default:
		return nil, fmt.Errorf("debezium: unknown Versions %d", o.Versions)
	}
	src := &Source{consumers: consumers, opts: o}
	if o.Lag != nil {
		return &lagSource{src}, nil
	}
	return src, nil
}

// lagSource is a Source whose Options.Lag is set.
type lagSource struct{ *Source }

var _ cdc.LagReporter = (*lagSource)(nil)

// Lag implements cdc.LagReporter on the group's axis (whatever cp names): Head and Applied
// are the sums of the partitions' end offsets and of the group's committed offsets, Bytes
// the records between them (Kafka keeps no byte count), Retained -1 (the topics' retention is
// Kafka's own).
func (s *lagSource) Lag(ctx context.Context, _ cdc.Checkpoint) (cdc.SourceLag, error) {
	head, pos, err := s.opts.Lag(ctx)
	if err != nil {
		return cdc.SourceLag{}, fmt.Errorf("debezium: lag: %w", err)
	}
	return cdc.SourceLag{Head: uint64(max(head, 0)), Applied: uint64(max(pos, 0)), Bytes: max(head-pos, 0), Retained: -1}, nil
}

// checkpointPrefix starts every checkpoint this source makes.
const checkpointPrefix = "debezium1:"

// ErrForeignCheckpoint is what a *ForeignCheckpointError is (errors.Is). It is
// cdc.ErrForeignCheckpoint.
var ErrForeignCheckpoint = cdc.ErrForeignCheckpoint

// ForeignCheckpointError is Open's permanent refusal of a checkpoint that a native source
// wrote ("pgcdc", "mysqlcdc", or "" when unknown): the pipeline last ran with type postgres or
// mysql and was switched by a configuration change alone, which leaves the native slot behind
// and says nothing of where the group's offsets stand. See cdc.ForeignCheckpointError.
type ForeignCheckpointError = cdc.ForeignCheckpointError

// foreignCheckpoint names the writer of a checkpoint this source did not make.
func foreignCheckpoint(cp cdc.Checkpoint) error {
	var keys map[string]json.RawMessage
	switch {
	case json.Unmarshal(cp, &keys) != nil:
		return &ForeignCheckpointError{Reader: "debezium"}
	case keys["lsn"] != nil:
		return &ForeignCheckpointError{Reader: "debezium", Writer: "pgcdc"}
	case keys["file"] != nil || keys["gtid"] != nil || keys["use_gtid"] != nil:
		return &ForeignCheckpointError{Reader: "debezium", Writer: "mysqlcdc"}
	}
	return &ForeignCheckpointError{Reader: "debezium"}
}

// Open joins the consumer group. cp is not where it starts: the group's committed offsets
// are (a checkpoint names a stream and an event within it, so that Ack can commit what
// came before). A checkpoint another kind of source made (a pipeline switched from a native
// source without the switch procedure) is refused, permanently (*ForeignCheckpointError).
func (s *Source) Open(ctx context.Context, cp cdc.Checkpoint) (cdc.Stream, error) {
	if len(cp) > 0 && !strings.HasPrefix(string(cp), checkpointPrefix) {
		return nil, cdc.Permanent(foreignCheckpoint(cp))
	}
	cons, err := s.consumers(ctx)
	if err != nil {
		return nil, classifyQueue(err)
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	ctx, cancel := context.WithCancel(context.Background())
	opts := s.opts
	catalog := newCatalogCache()
	st := &stream{
		cons: cons,
		newDecoder: func() *decoder {
			dec := newDecoder(opts.Name, opts.InferTypes, opts.Versions)
			dec.catalog, dec.decimalString, dec.catalogShapes = opts.Catalog, opts.DecimalStrings, catalog
			dec.edge.plainDates = opts.PlainDates
			if log := opts.Logger; log != nil {
				dec.warn = log.Warn
			}
			return dec
		},
		decoders: map[partitionKey]*decoder{},
		events:   make(chan cdc.Event, s.opts.Buffer),
		session:  hex.EncodeToString(id[:]),
		cancel:   cancel,
		done:     make(chan struct{}),
		log:      s.opts.Logger,
	}
	go st.run(ctx)
	return st, nil
}

// classifyQueue turns a queue failure into the runner's classes: retryable ones (a broker
// out of reach, a topic not created yet) are retried; a refused configuration or
// authentication is permanent.
func classifyQueue(err error) error {
	switch queue.KindOf(err) {
	case queue.Invalid, queue.Denied:
		return cdc.Permanent(fmt.Errorf("debezium: %w", err))
	}
	return fmt.Errorf("debezium: %w", err)
}

// stream is one group membership's events.
type stream struct {
	cons       queue.Consumer
	newDecoder func() *decoder
	decoders   map[partitionKey]*decoder // one per partition, used by one goroutine at a time
	events     chan cdc.Event
	session    string
	cancel     context.CancelFunc
	done       chan struct{}
	log        *slog.Logger

	err error // why events was closed; written before close(done)

	mu        sync.Mutex
	seq       uint64
	pending   []pendingEvent // handed out, not yet acknowledged, in order
	closed    bool
	closeOnce sync.Once
}

// pendingEvent is an event handed to the runner and the records whose offsets its
// acknowledgement lets the consumer commit: its own and the records before it that carried
// no event (tombstones, transaction metadata).
type pendingEvent struct {
	seq  uint64
	msgs []queue.Message // Topic, Partition and Offset only
}

func (st *stream) Events() <-chan cdc.Event { return st.events }

func (st *stream) Err() error {
	select {
	case <-st.done:
		return st.err
	default:
		return nil
	}
}

func (st *stream) Progress() cdc.SnapshotProgress { return cdc.SnapshotProgress{} }

// Close stops consuming and closes the consumer (without committing: what was acknowledged
// is committed already); it returns the consumer's close error, and nil when called again.
func (st *stream) Close() error {
	var err error
	st.closeOnce.Do(func() {
		st.cancel()
		<-st.done
		st.mu.Lock()
		st.closed = true
		st.mu.Unlock()
		if err = st.cons.Close(); err != nil {
			err = fmt.Errorf("debezium: closing the consumer: %w", err)
		}
	})
	return err
}

func (st *stream) checkpoint(seq uint64) cdc.Checkpoint {
	b := make([]byte, 0, len(checkpointPrefix)+len(st.session)+1+20)
	b = append(b, checkpointPrefix...)
	b = append(b, st.session...)
	b = append(b, ':')
	return strconv.AppendUint(b, seq, 10)
}

// Ack finishes every record up to the event that carried cp and commits the consumer's
// finished prefixes: the group's offsets move only past events the sink applied. A
// checkpoint of another stream (an earlier group membership) is ignored.
func (st *stream) Ack(ctx context.Context, cp cdc.Checkpoint) error {
	rest, ok := strings.CutPrefix(string(cp), checkpointPrefix)
	if !ok {
		return nil
	}
	session, seqText, ok := strings.Cut(rest, ":")
	if !ok || session != st.session {
		return nil
	}
	seq, err := strconv.ParseUint(seqText, 10, 64)
	if err != nil {
		return nil
	}
	st.mu.Lock()
	if st.closed {
		st.mu.Unlock()
		return cdc.ErrSourceClosed
	}
	n := 0
	for n < len(st.pending) && st.pending[n].seq <= seq {
		n++
	}
	var msgs []queue.Message
	for _, p := range st.pending[:n] {
		msgs = append(msgs, p.msgs...)
	}
	st.pending = st.pending[n:]
	st.mu.Unlock()
	if len(msgs) == 0 {
		return nil
	}
	st.cons.Finish(msgs...)
	if err := st.cons.Commit(ctx); err != nil {
		return fmt.Errorf("debezium: commit: %w", err)
	}
	return nil
}

// run fetches, decodes and hands events over until ctx ends or consuming fails.
func (st *stream) run(ctx context.Context) {
	defer func() {
		close(st.done)
		close(st.events)
	}()
	st.err = st.consume(ctx)
	if ctx.Err() != nil {
		st.err = nil // closed
	}
}

func (st *stream) consume(ctx context.Context) error {
	var loose []queue.Message // records without an event since the last event
	for {
		msgs, err := st.cons.Fetch(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return classifyQueue(err)
		}
		out := st.decodeFetch(ctx, msgs)
		for i := range msgs {
			m, d := &msgs[i], &out[i]
			if errors.Is(d.err, errCatalog) {
				return fmt.Errorf("debezium: %w", d.err) // retried: the database may be back
			}
			var refused *cdc.StartError
			if errors.As(d.err, &refused) {
				return refused // permanent, and names the component itself
			}
			if d.err != nil {
				return cdc.Permanent(fmt.Errorf("debezium: %w", d.err))
			}
			ref := queue.Message{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset}
			if d.skip != keep {
				loose = append(loose, ref)
				continue
			}
			st.mu.Lock()
			st.seq++
			seq := st.seq
			st.pending = append(st.pending, pendingEvent{seq: seq, msgs: append(loose, ref)})
			st.mu.Unlock()
			loose = nil
			ev := d.ev
			ev.Checkpoint = st.checkpoint(seq)
			select {
			case st.events <- ev:
			case <-ctx.Done():
				return nil
			}
		}
		if len(loose) > 0 {
			loose = st.settleLoose(ctx, loose)
		}
	}
}

// partitionKey names a topic's partition.
type partitionKey struct {
	topic     string
	partition int32
}

// decoded is one record's decoding.
type decoded struct {
	ev   cdc.Event
	skip skipReason
	err  error
}

// parallelFetch is the fetch size from which partitions are decoded in parallel.
const parallelFetch = 64

// decodeFetch decodes a fetch's records into their positions in it: the records of each
// partition in order by that partition's decoder, partitions in parallel (up to GOMAXPROCS
// goroutines) when the fetch is large enough to pay for it. Events then leave in fetch order,
// so each partition's (each key's) order is kept.
func (st *stream) decodeFetch(ctx context.Context, msgs []queue.Message) []decoded {
	out := make([]decoded, len(msgs))
	groups := map[partitionKey][]int{}
	var order []partitionKey
	for i := range msgs {
		k := partitionKey{msgs[i].Topic, msgs[i].Partition}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
			if st.decoders[k] == nil {
				st.decoders[k] = st.newDecoder()
			}
		}
		groups[k] = append(groups[k], i)
	}
	run := func(k partitionKey) {
		dec := st.decoders[k]
		for _, i := range groups[k] {
			m := &msgs[i]
			rec := Record{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: m.Value}
			for _, h := range m.Headers {
				if strings.HasPrefix(h.Key, "__debezium.") {
					rec.Headers = append(rec.Headers, Header{Key: h.Key, Value: h.Value})
				}
			}
			d := &out[i]
			d.ev, d.skip, d.err = dec.decodeCtx(ctx, &rec)
			if d.err != nil {
				return // the rest of this partition is not reached: the stream stops here
			}
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(order))
	if len(msgs) < parallelFetch || workers < 2 {
		for _, k := range order {
			run(k)
		}
		return out
	}
	next := make(chan partitionKey, len(order))
	for _, k := range order {
		next <- k
	}
	close(next)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for k := range next {
				run(k)
			}
		})
	}
	wg.Wait()
	return out
}

// settleLoose disposes of records without an event at the end of a fetch: with events
// still unacknowledged, they are finished with the last of them (they carry nothing to
// apply); with none, they are finished and committed now, so that a topic whose last
// records are tombstones or transaction metadata shows no lag.
func (st *stream) settleLoose(ctx context.Context, loose []queue.Message) []queue.Message {
	st.mu.Lock()
	if n := len(st.pending); n > 0 {
		st.pending[n-1].msgs = append(st.pending[n-1].msgs, loose...)
		st.mu.Unlock()
		return nil
	}
	st.mu.Unlock()
	st.cons.Finish(loose...)
	if err := st.cons.Commit(ctx); err != nil && ctx.Err() == nil && st.log != nil {
		st.log.Warn("debezium: commit of records without events failed; they are read again later", "err", err)
	}
	return nil
}
