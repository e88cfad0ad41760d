package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/tributary-dev/tributary/queue"
	"github.com/tributary-dev/tributary/store/worker"
)

// workerSet is one store/worker.Worker per store with a queue: each consumes its store's
// topic and applies that store's records through the Service (the synchronous path); records
// of any other store on the topic are dead-lettered.
type workerSet struct {
	log     *slog.Logger
	cancel  context.CancelFunc // abandons the fetches in hand when stop runs out of time
	workers map[string]*worker.Worker
	parts   []func() error // consumers and dead-letter publishers, closed after Run returned
	wg      sync.WaitGroup

	mu   sync.Mutex
	errs []error
}

// startWorkers builds and starts the workers. A worker whose Run fails for any reason but a
// stop reports the error on failed, which stops the process: its records are redelivered to
// whoever runs next, from the last commit.
func startWorkers(ctx context.Context, rt *runtime, failed chan<- error) (*workerSet, error) {
	runCtx, cancel := context.WithCancel(context.Background())
	ws := &workerSet{log: rt.log, cancel: cancel, workers: map[string]*worker.Worker{}}
	for _, name := range rt.names {
		q := rt.cfg.Stores[name].Queue
		if q == nil {
			continue
		}
		w, err := ws.add(ctx, rt, name, q)
		if err != nil {
			ws.cancel()
			ws.close()
			return nil, fmt.Errorf("stores.%s.queue: %w", name, err)
		}
		ws.workers[name] = w
	}
	if len(ws.workers) == 0 {
		ws.cancel()
		return nil, errors.New("mode " + rt.mode + " needs at least one store with a queue: there is nothing to consume")
	}
	for name, w := range ws.workers {
		ws.wg.Add(1)
		go func() {
			defer ws.wg.Done()
			err := w.Run(runCtx)
			if err == nil || runCtx.Err() != nil {
				return
			}
			err = fmt.Errorf("worker of store %s: %w", name, err)
			select {
			case failed <- err:
			default: // another worker failed first; stop reports this one
				ws.mu.Lock()
				ws.errs = append(ws.errs, err)
				ws.mu.Unlock()
			}
		}()
	}
	return ws, nil
}

func (ws *workerSet) add(ctx context.Context, rt *runtime, name string, q *queueConfig) (*worker.Worker, error) {
	c, err := rt.newConsumer(ctx, name, q)
	if err != nil {
		return nil, err
	}
	ws.parts = append(ws.parts, c.Close)
	var dlq queue.Publisher
	dlq, err = rt.newPublisher(ctx, name, q, q.DeadLetterTopic)
	if err != nil {
		return nil, fmt.Errorf("dead_letter_topic: %w", err)
	}
	ws.parts = append(ws.parts, dlq.Close)
	wc := q.Worker
	// The worker applies the records of its own store only: a record of another store on
	// this topic is dead-lettered (reason other_store), never applied.
	return worker.New(name, c, rt.svc, dlq, &worker.Options{
		MaxAttempts: wc.MaxAttempts, BackoffBase: wc.BackoffBase, BackoffMax: wc.BackoffMax,
		CommitTimeout: wc.CommitTimeout,
		Observer:      workerObserver{store: name, m: rt.m},
		Logger:        rt.log.With(slog.String("store", name)),
	})
}

// stop lets every worker finish the fetch in hand (applied or dead-lettered, committed) until
// ctx ends; then it abandons what is left, which is redelivered later.
func (ws *workerSet) stop(ctx context.Context) error {
	var wg sync.WaitGroup
	for name, w := range ws.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.Stop(ctx); err != nil {
				ws.log.Warn("worker did not drain in time; its unfinished records will be delivered again", slog.String("store", name))
			}
		}()
	}
	wg.Wait()
	ws.cancel()
	ws.wg.Wait()
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return errors.Join(ws.errs...)
}

// close releases the consumers and dead-letter publishers, after Run returned.
func (ws *workerSet) close() {
	for _, c := range ws.parts {
		if err := c(); err != nil && !errors.Is(err, queue.ErrClosed) {
			ws.log.Warn("closing a queue client", slog.String("error", err.Error()))
		}
	}
}
