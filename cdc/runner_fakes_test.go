package cdc_test

import (
	"context"
	"errors"
	"strconv"
	"sync"

	"github.com/tributary-dev/tributary/cdc"
)

// pos is a fake position: transaction tx, event seq within it.
type pos struct{ tx, seq int }

func (p pos) Version() int64 { return int64(p.tx)<<16 | int64(p.seq) }
func (p pos) String() string { return strconv.Itoa(p.tx) + "/" + strconv.Itoa(p.seq) }

var table = cdc.TableID{Connector: "fake", Source: "src", Database: "db", Table: "t"}

var schema = &cdc.TableSchema{ID: table, Columns: []cdc.Column{{Name: "id", Kind: cdc.KindInt}, {Name: "name", Kind: cdc.KindText}}, PrimaryKey: []int{0}}

// txEvents returns transaction tx of n inserts; the last carries checkpoint "tx".
func txEvents(tx, n int) []cdc.Event {
	evs := make([]cdc.Event, n)
	for i := range evs {
		evs[i] = cdc.Event{Op: cdc.Insert, Table: table, Schema: schema, After: []cdc.Value{int64(tx*100 + i), "row"},
			Position: pos{tx, i}, TxID: strconv.Itoa(tx)}
	}
	evs[n-1].Checkpoint = cdc.Checkpoint(strconv.Itoa(tx))
	return evs
}

// fakeSource hands out fakeStreams fed by the test through feed.
type fakeSource struct {
	mu      sync.Mutex
	opened  []cdc.Checkpoint
	streams []*fakeStream
	openErr error
	// wrap, when set, is what Open returns around each new stream (a stream with optional
	// interfaces).
	wrap func(*fakeStream) cdc.Stream
}

func (s *fakeSource) Open(ctx context.Context, cp cdc.Checkpoint) (cdc.Stream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.openErr != nil {
		return nil, s.openErr
	}
	s.opened = append(s.opened, cp)
	st := &fakeStream{ch: make(chan cdc.Event), done: make(chan struct{})}
	s.streams = append(s.streams, st)
	if s.wrap != nil {
		return s.wrap(st), nil
	}
	return st, nil
}

// openedAt lists the checkpoints Open was called with.
func (s *fakeSource) openedAt() []cdc.Checkpoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]cdc.Checkpoint{}, s.opened...)
}

func (s *fakeSource) stream(i int) *fakeStream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streams[i]
}

type fakeStream struct {
	ch        chan cdc.Event
	done      chan struct{}
	closeOnce sync.Once
	mu        sync.Mutex
	acks      []string
	err       error
	progress  cdc.SnapshotProgress
}

func (s *fakeStream) Events() <-chan cdc.Event { return s.ch }
func (s *fakeStream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}
func (s *fakeStream) Ack(ctx context.Context, cp cdc.Checkpoint) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acks = append(s.acks, string(cp))
	return nil
}
func (s *fakeStream) Progress() cdc.SnapshotProgress {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.progress
}
func (s *fakeStream) Close() error {
	s.closeOnce.Do(func() { close(s.done) })
	return nil
}
func (s *fakeStream) ackList() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string{}, s.acks...)
}

// send delivers events; false when the stream was closed by the runner.
func (s *fakeStream) send(evs ...cdc.Event) bool {
	for _, ev := range evs {
		select {
		case s.ch <- ev:
		case <-s.done:
			return false
		}
	}
	return true
}

// end closes the event channel with err as the stream's failure.
func (s *fakeStream) end(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
	close(s.ch)
}

// fakeSink records every batch and answers as respond says (nil: success, no dead letters).
type fakeSink struct {
	mu      sync.Mutex
	batches [][]cdc.Event
	respond func(call int, batch []cdc.Event) ([]cdc.DeadLetter, error)
}

func (s *fakeSink) Write(ctx context.Context, batch []cdc.Event) ([]cdc.DeadLetter, error) {
	s.mu.Lock()
	call := len(s.batches)
	s.batches = append(s.batches, batch)
	respond := s.respond
	s.mu.Unlock()
	if respond == nil {
		return nil, nil
	}
	return respond(call, batch)
}

func (s *fakeSink) calls() [][]cdc.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]cdc.Event{}, s.batches...)
}

// memDLQ collects dead letters; onWrite (optional) runs first and may fail the write.
type memDLQ struct {
	mu      sync.Mutex
	records []cdc.DeadLetterRecord
	onWrite func() error
}

func (d *memDLQ) WriteDeadLetters(ctx context.Context, recs []cdc.DeadLetterRecord) error {
	if d.onWrite != nil {
		if err := d.onWrite(); err != nil {
			return err
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.records = append(d.records, recs...)
	return nil
}

func (d *memDLQ) list() []cdc.DeadLetterRecord {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]cdc.DeadLetterRecord{}, d.records...)
}

var errFatal = cdc.Permanent(errors.New("destination conflict"))

// batchTxs renders batches as "tx/seq" lists for comparisons.
func batchTxs(batches [][]cdc.Event) [][]string {
	out := make([][]string, len(batches))
	for i, b := range batches {
		for _, ev := range b {
			out[i] = append(out[i], ev.Position.String())
		}
	}
	return out
}
