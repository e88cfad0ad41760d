package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/mirror"
	"github.com/tributary-dev/tributary/mirror/mirrorprom"
)

// runFlags are the run command's flags.
type runFlags struct {
	metricsAddr, progress *string
	bar                   bool // the progress is a bar (else plain lines)
}

func (f *runFlags) check(stderr io.Writer) error {
	switch *f.progress {
	case "auto":
		out, ok := stderr.(*os.File)
		f.bar = ok && isTerminal(out)
	case "always":
		f.bar = true
	case "never":
	default:
		return usageError{errors.New("--progress must be auto, always or never")}
	}
	return nil
}

// runMirror runs every pipeline of cfg until ctx ends or all of them stopped.
func runMirror(ctx context.Context, cfg *mirror.Config, f runFlags, stderr io.Writer, listening func(net.Addr)) error {
	con := &console{w: stderr}
	log := slog.New(slog.NewTextHandler(con, nil))
	metrics := mirrorprom.New(&mirrorprom.Options{Namespace: "cdcmirror"})
	m, err := mirror.Open(cfg, &mirror.Options{Logger: log, Observe: metrics.Observe})
	if err != nil {
		return err
	}
	defer m.Close()
	metrics.Watch(m)

	if *f.metricsAddr != "" {
		reg := prometheus.NewRegistry() // the exporter's own, never the process-wide default
		reg.MustRegister(metrics, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		ln, err := net.Listen("tcp", *f.metricsAddr)
		if err != nil {
			return fmt.Errorf("metrics listener: %w", err)
		}
		rx, hist := newReindexes(ctx), newLagHistory(lagSampleKeep)
		hctx, stopHist := context.WithCancel(ctx)
		defer stopHist()
		go hist.run(hctx, m, lagSampleEvery)
		mux := newMux(reg, m, rx)
		addStatusPage(mux, m, rx, hist)
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
		base := "http://" + ln.Addr().String()
		log.Info("serving metrics", "url", base+"/metrics", "health", base+"/healthz", "status", base+"/status", "page", base+"/")
		if listening != nil {
			listening(ln.Addr())
		}
	}

	if *f.progress != "never" {
		stop := showProgress(con, m, f.bar)
		defer stop()
	}

	err = m.Run(ctx)
	if ctx.Err() != nil {
		for _, s := range m.Status() {
			log.Info("stopped on signal; the checkpoint stays at the last completed batch", "pipeline", s.Pipeline,
				"events", s.Progress.Events, "batches", s.Progress.Batches, "dead_letters", s.Progress.DeadLetters)
		}
		return nil
	}
	return err
}

// showProgress reports every pipeline's snapshot on the console until the returned stop is
// called: a bar redrawn in place for a single pipeline on a terminal, else plain lines (one
// bar cannot show several pipelines), prefixed with the pipeline's name when there are
// several.
func showProgress(con *console, m *mirror.Mirror, bar bool) (stop func()) {
	names := m.Pipelines()
	if len(names) > 1 {
		bar = false
	}
	interval, every := plainTick, plainInterval
	if bar {
		interval, every = barInterval, 0
	}
	var ps []*progress
	for i, name := range names {
		p := &progress{con: con, bar: bar, every: every, now: time.Now,
			read: func() cdc.SnapshotProgress { return current(m.Status()[i].Progress) }}
		if len(names) > 1 {
			p.name = name
		}
		ps = append(ps, p)
	}
	tick := time.NewTicker(interval)
	done, finished := make(chan struct{}), make(chan struct{})
	go func() { runProgress(ps, done, tick.C); close(finished) }()
	return func() { tick.Stop(); close(done); <-finished }
}
