package store

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"sync"
	"time"
)

// coalescer gathers one store's concurrent one-operation calls into batches: a batch opens with
// the first waiting call, takes the calls that arrive while it yields to the goroutines ready
// to run (a lone call waits up to the window), closes when none arrive or it is full, and then
// runs like an explicit request on one of at most MaxInFlight long-lived runners. At most
// MaxInFlight batches run at once; while they do, calls wait in a bounded queue, and a call
// finding the queue full fails at once with ErrUnavailable -- so a slow store pushes back on
// its own callers and never on another store's.
type coalescer struct {
	s    *Service
	in   *instance
	reqs chan *pending
	sem  chan struct{} // one token per batch running
	// batches hands formed batches to idle runners; runners is how many exist (collector only)
	batches chan []*pending
	runners int
	wg      sync.WaitGroup // the collector and the runners
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

		batches: make(chan []*pending),
	}
	c.wg.Add(1)
	go c.collect()
	return c
}

// submit queues one operation and waits for its result, which it stores in *res, or for ctx.
// When ctx ends first the operation may still run: the caller gets ctx's error and does not
// learn the outcome.
func (c *coalescer) submit(ctx context.Context, op Op, now, by time.Time, visible bool, res *Result) error {
	p := &pending{}
	p.item = item{op: op, ctx: ctx, now: now, visible: visible, res: &p.res, call: &p.call, cutAt: by}
	p.call.init(1)
	if !by.IsZero() {
		p.call.s = c.s
	}
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
	done := ctx.Done()
	if done == nil { // a context that never ends: a plain receive, cheaper than a select
		<-it.call.done
		*res = p.res
		return nil
	}
	if by.IsZero() {
		select {
		case <-it.call.done:
			*res = p.res
			return nil
		case <-done:
			return ctx.Err()
		}
	}
	// A call with a deadline, also one queued behind batches that hang, answers by it.
	cut, err := wait(ctx, &p.call, by)
	switch {
	case err != nil:
		return err
	case !cut:
		*res = p.res
		return nil
	}
	*res = it.cut()
	if errors.As(res.Err, new(deadlineError)) {
		c.s.reportCut(c.in.name, 1)
	}
	return nil
}

// collect forms batches. It takes a batch slot before gathering, so while every slot is busy
// the calls pile up in the queue and the next batch takes them all at once: under load batches
// grow without anyone waiting for a window. Once it has a slot it gathers what is queued and
// yields the processor, round after round, until a round brings no new call: the callers a
// finished batch woke all at once, already running or ready to run, rejoin one batch instead
// of trickling into several small ones -- without a timer, whose wake-up can come much later
// than asked on a busy or virtualized machine. Only a batch that is still a lone call then
// waits up to the window for company.
func (c *coalescer) collect() {
	defer c.wg.Done()
	defer close(c.batches) // the runners stop once the last batch is handed over
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
		batch := make([]*pending, 1, min(limit, 1+len(c.reqs)+32))
		batch[0] = first
		batch, open := c.gather(batch, limit)
		if open && len(batch) == 1 && len(batch) < limit && window > 0 {
			timer.Reset(window)
		wait:
			for len(batch) < limit {
				select {
				case p, more := <-c.reqs:
					if !more {
						break wait
					}
					batch = append(batch, p)
				case <-timer.C:
					break wait
				}
			}
			timer.Stop()
		}
		if obs := c.s.opts.Observer; obs != nil {
			obs.CoalescedBatch(CoalescedBatch{Store: c.in.name, Size: len(batch), Waiting: len(c.reqs)})
		}
		c.dispatch(batch)
	}
}

// gather adds the queued calls to batch, up to limit, without blocking: it takes what is
// queued, yields the processor to the goroutines ready to run, and repeats until a round after
// a yield brings nothing. open is false once the queue is closed.
func (c *coalescer) gather(batch []*pending, limit int) (_ []*pending, open bool) {
	for yielded := false; ; yielded = true {
		before := len(batch)
	drain:
		for len(batch) < limit {
			select {
			case p, more := <-c.reqs:
				if !more {
					return batch, false
				}
				batch = append(batch, p)
			default:
				break drain
			}
		}
		if len(batch) >= limit || (yielded && len(batch) == before) {
			return batch, true
		}
		runtime.Gosched()
	}
}

// dispatch hands the batch to an idle runner, starting one when none is idle and fewer than
// MaxInFlight exist. The runners live as long as the collector: a batch does not pay for a
// goroutine and the growth of its stack through the executor.
func (c *coalescer) dispatch(batch []*pending) {
	if c.runners < cap(c.sem) {
		select {
		case c.batches <- batch:
		default:
			c.runners++
			c.wg.Add(1)
			go c.run(batch)
		}
		return
	}
	c.batches <- batch // the slot the collector holds is one a runner is releasing
}

// run runs batches, the first given, until the collector stops.
func (c *coalescer) run(batch []*pending) {
	defer c.wg.Done()
	for {
		c.runBatch(batch)
		var ok bool
		if batch, ok = <-c.batches; !ok {
			return
		}
	}
}

func (c *coalescer) runBatch(batch []*pending) {
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
