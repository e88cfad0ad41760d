package store

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// coalescer gathers one store's concurrent one-operation calls into batches: a batch opens with
// the first waiting call, stays open for the window or until it is full, and then runs like an
// explicit request. At most MaxInFlight batches run at once; while they do, calls wait in a
// bounded queue, and a call finding the queue full fails at once with ErrUnavailable -- so a
// slow store pushes back on its own callers and never on another store's.
type coalescer struct {
	s    *Service
	in   *instance
	reqs chan *pending
	sem  chan struct{}
	wg   sync.WaitGroup // the collector and running batches
}

type pending struct {
	it   *item
	res  Result // the batch writes here; submit copies it out only once done
	item item   // it's storage: one allocation per call
	call call
}

func newCoalescer(s *Service, in *instance) *coalescer {
	c := &coalescer{
		s:    s,
		in:   in,
		reqs: make(chan *pending, s.opts.Coalesce.QueueLimit),
		sem:  make(chan struct{}, s.opts.Coalesce.MaxInFlight),
	}
	c.wg.Add(1)
	go c.collect()
	return c
}

// submit queues one operation and waits for its result, which it stores in *res, or for ctx.
// When ctx ends first the operation may still run: the caller gets ctx's error and does not
// learn the outcome.
func (c *coalescer) submit(ctx context.Context, op Op, now time.Time, visible bool, res *Result) error {
	p := &pending{}
	p.item = item{op: op, ctx: ctx, now: now, visible: visible, res: &p.res, call: &p.call}
	p.call.init(1)
	it := &p.item
	p.it = it
	select {
	case c.reqs <- p:
	default:
		if obs := c.s.opts.Observer; obs != nil {
			obs.QueueFull(c.in.name)
		}
		c.s.opts.Logger.Debug("store: batch queue full, call refused", slog.String("store", c.in.name))
		*res = Result{Err: newOpError(KindUnavailable, it.op.Kind, it.op.Addr, "store "+c.in.name+" is busy: its batch queue is full")}
		return nil
	}
	select {
	case <-it.call.done:
		*res = p.res
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// collect forms batches. It takes a batch slot before gathering, so while every slot is busy
// the calls pile up in the queue and the next batch takes them all at once: under load batches
// grow without anyone waiting for a window. The window only holds a batch open that is still
// small when its slot is free, to give calls arriving together a chance to share it.
func (c *coalescer) collect() {
	defer c.wg.Done()
	window := c.s.opts.Coalesce.Window
	limit := c.s.opts.Coalesce.MaxBatch
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		first, ok := <-c.reqs
		if !ok {
			return
		}
		c.sem <- struct{}{}
		batch := []*pending{first}
		open := true
	drain:
		for open && len(batch) < limit {
			select {
			case p, more := <-c.reqs:
				if !more {
					open = false
					break drain
				}
				batch = append(batch, p)
			default:
				break drain
			}
		}
		if open && len(batch) < limit && window > 0 {
			timer.Reset(window)
		gather:
			for len(batch) < limit {
				select {
				case p, more := <-c.reqs:
					if !more {
						break gather
					}
					batch = append(batch, p)
				case <-timer.C:
					break gather
				}
			}
			timer.Stop()
		}
		if obs := c.s.opts.Observer; obs != nil {
			obs.CoalescedBatch(CoalescedBatch{Store: c.in.name, Size: len(batch), Waiting: len(c.reqs)})
		}
		c.wg.Add(1)
		go c.runBatch(batch)
	}
}

func (c *coalescer) runBatch(batch []*pending) {
	defer c.wg.Done()
	defer func() { <-c.sem }()
	// The batch holds its slot until every call settled, also those queued behind
	// another executor's operations on the same record: the slots bound the work in flight.
	all := newCall(len(batch))
	items := make([]*item, len(batch))
	for i, p := range batch {
		p.it.call.parent = all
		items[i] = p.it
	}
	c.s.execute(c.in, items)
	<-all.done
}

// close stops the collector after the queued calls have run and waits for every batch.
// The Service calls it only once no call can submit any more.
func (c *coalescer) close() {
	close(c.reqs)
	c.wg.Wait()
}
