package mysqlcdc

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"

	"github.com/tributary-dev/tributary/cdc"
)

// stream is a running Source: one goroutine reads the snapshot, then the binlog, and sends.
type stream struct {
	src    *Source
	events chan cdc.Event
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	err    error
	closed bool
	acked  cdc.Checkpoint
	// ackedAt and deliveredAt are the binlog positions (seq<<32|pos) of the last acknowledged
	// and the last delivered checkpoint: equal, every delivered change is stored (Lag).
	ackedAt, deliveredAt uint64
	// passedAt is the latest position the reader passed outside a captured transaction while
	// a delivered change was not yet acknowledged, and passedNeeds the position of the last
	// checkpoint delivered before it (0: none waits). Once the acknowledgements reach
	// passedNeeds, the pipeline has passed passedAt too: Ack credits it to caughtUp.
	passedAt, passedNeeds uint64
	// caughtUp is the latest position the pipeline has passed as far as the reader knows:
	// the end of a transaction of other tables (or of the events a rotation adds) that the
	// reader went past with every change delivered before it acknowledged -- then or later.
	// Lag takes it when it lies beyond the checkpoint, though nothing captured moved the
	// checkpoint. Only grows.
	caughtUp atomic.Uint64
	// passedMax is the latest position the reader passed outside a captured transaction
	// (where it started included); sent is the last checkpoint handed out, snapshot ones
	// included, and sentAcked whether Ack got it: then everything delivered is acknowledged
	// and the pipeline has passed passedMax too (passedAcked: a pipeline whose snapshot found
	// nothing, or ended on a snapshot checkpoint, is not behind on an idle server).
	passedMax uint64
	sent      cdc.Checkpoint
	sentAcked bool
	progress  cdc.SnapshotProgress
	tables    []*cdc.TableSchema // the captured tables as of Open, set before the goroutine starts
	// rs is the reader's resnapper once it has one, for Progress.
	rs atomic.Pointer[resnapper]
}

func newStream(src *Source) *stream {
	return &stream{src: src, events: make(chan cdc.Event, src.opts.Buffer), done: make(chan struct{})}
}

// start runs body in the stream's goroutine; its error (unless the stream was closed),
// classified, becomes Err, and Events is closed when it returns. The failure is only logged
// at Debug: whoever reads Err (a cdc.Runner) reports it, once.
func (s *stream) start(body func(ctx context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() {
		defer close(s.done)
		defer close(s.events)
		defer s.src.current.CompareAndSwap(s, nil)
		err := body(ctx)
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.closed && err != nil {
			s.err = s.src.classify(err)
			s.src.log.Debug("mysqlcdc: stream ended", "source", s.src.opts.SourceName, "error", s.err,
				"permanent", cdc.IsPermanent(s.err))
		}
	}()
}

// send delivers ev unless ctx ends first.
func (s *stream) send(ctx context.Context, ev cdc.Event) error {
	if ev.Checkpoint != nil {
		s.mu.Lock()
		s.sent, s.sentAcked = ev.Checkpoint, false
		s.mu.Unlock()
	}
	select {
	case s.events <- ev: // the common case, without the cost of a two-way select
		return nil
	default:
	}
	select {
	case s.events <- ev:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *stream) Events() <-chan cdc.Event { return s.events }

func (s *stream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Ack records the acknowledged checkpoint. The binlog has no server-side retention tied to a
// reader (unlike a replication slot), so there is nothing to report to the server.
func (s *stream) Ack(ctx context.Context, cp cdc.Checkpoint) error {
	c, err := decodeCheckpoint(cp)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return cdc.ErrSourceClosed
	}
	s.acked = append(s.acked[:0], cp...)
	if bytes.Equal(cp, s.sent) {
		s.sentAcked = true
	}
	if c.Snapshot == nil {
		s.ackedAt = axis(c.File, c.Pos)
		if s.passedNeeds != 0 && s.ackedAt >= s.passedNeeds {
			s.creditLocked(s.passedAt)
			s.passedAt, s.passedNeeds = 0, 0
		}
	}
	return nil
}

// delivered records the position of a checkpoint handed to the reader of Events.
func (s *stream) delivered(file string, pos uint32) {
	s.mu.Lock()
	s.deliveredAt = axis(file, pos)
	s.mu.Unlock()
}

// passed records that the reader went past (file, pos), the end of a transaction of other
// tables or of an event outside any transaction: the pipeline has passed that position too
// once every change delivered before it is acknowledged -- at once when it is, else when Ack
// reaches the last delivered checkpoint (issue 31: a transaction of other tables passed while
// a large captured one was still being written, then silence, must not read as a growing lag).
func (s *stream) passed(file string, pos uint32) {
	at := axis(file, pos)
	if at == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.passedMax = max(s.passedMax, at)
	if s.ackedAt >= s.deliveredAt {
		s.creditLocked(at)
		return
	}
	// A later pass replaces an earlier one: it waits for the same or a later checkpoint, whose
	// acknowledgement lies beyond the earlier pass when it came after it.
	s.passedAt, s.passedNeeds = at, s.deliveredAt
}

// passedAcked returns the latest position the reader passed when every checkpoint handed out
// is acknowledged (ok false otherwise).
func (s *stream) passedAcked() (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sent != nil && !s.sentAcked {
		return 0, false
	}
	return s.passedMax, true
}

// creditLocked moves caughtUp forward to at.
func (s *stream) creditLocked(at uint64) {
	if at > s.caughtUp.Load() {
		s.caughtUp.Store(at)
	}
}

// axis is a binlog position on Lag's axis, seq<<32|pos (0 for a file name without a sequence).
func axis(file string, pos uint32) uint64 {
	n, err := binlogIndex(file)
	if err != nil {
		return 0
	}
	return n<<32 | uint64(pos)
}

// Progress reports the initial snapshot's progress while it is read; otherwise a
// re-snapshot's, once one was requested (Resnapshot set), else the initial snapshot's figures.
func (s *stream) Progress() cdc.SnapshotProgress {
	s.mu.Lock()
	p := s.progress
	s.mu.Unlock()
	if !p.Active {
		if rs := s.rs.Load(); rs != nil {
			if rp := rs.progress(); rp.Resnapshot != "" {
				return rp
			}
		}
	}
	return p
}

func (s *stream) setProgress(f func(p *cdc.SnapshotProgress)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.progress)
}

// Close ends the stream and returns once its goroutine has: every blocking step it may be in
// ends when its socket is closed, so Close does not wait for a hung server.
func (s *stream) Close() error {
	s.mu.Lock()
	already := s.closed
	s.closed = true
	s.mu.Unlock()
	if already {
		return nil
	}
	s.cancel()
	<-s.done
	return nil
}
