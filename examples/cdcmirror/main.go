package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/sink"
	"github.com/tributary-dev/tributary/statestore"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// After the first signal the default handling comes back, so a second one ends a
		// shutdown that hangs.
		<-ctx.Done()
		stop()
	}()
	if code := exitStatus(os.Stderr, command(ctx, os.Args[1:], os.Stderr, nil)); code != 0 {
		os.Exit(code)
	}
}

// exitStatus reports err on w and returns the exit status: 0 for none (or --help), 2 for a
// bad command line or configuration -- a pipeline refused at start because its configuration
// cannot work included, printed one table and fix per line --, 1 for a pipeline that failed.
func exitStatus(w io.Writer, err error) int {
	var usage usageError
	var refused *cdc.StartError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &refused):
		fmt.Fprintf(w, "cdcmirror: refusing to start, the configuration cannot work (%s):\n", refused.Component)
		for _, p := range refused.Problems {
			fmt.Fprintf(w, "  table %s: %s\n", p.Table, p.Problem)
			if p.Fix != "" {
				fmt.Fprintf(w, "    fix: %s\n", p.Fix)
			}
		}
		return 2
	case errors.As(err, &usage):
		fmt.Fprintln(w, "cdcmirror:", err)
		return 2
	default:
		fmt.Fprintln(w, "cdcmirror:", err)
		return 1
	}
}

// usageError is a bad command line or configuration: exit status 2.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// command runs cdcmirror with args until ctx ends (a signal: nil, after a clean stop) or the
// pipeline fails. Logs and the progress bar go to stderr. listening, when set, learns the
// metrics listener's address once it accepts connections.
func command(ctx context.Context, args []string, stderr io.Writer, listening func(net.Addr)) error {
	fs := flag.NewFlagSet("cdcmirror", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "the configuration file (YAML; see examples/cdcmirror/postgres.yaml)")
	metricsAddr := fs.String("metrics-addr", "127.0.0.1:9464", "listen address for /metrics and /healthz (empty: none)")
	progressMode := fs.String("progress", "auto", "snapshot progress on stderr: auto (a bar on a terminal, else plain lines), always (a bar), never")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: cdcmirror --config FILE [--metrics-addr 127.0.0.1:9464] [--progress auto|always|never]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	switch {
	case *configPath == "":
		fs.Usage()
		return usageError{errors.New("--config is required")}
	case fs.NArg() > 0:
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	bar := false
	switch *progressMode {
	case "auto":
		f, ok := stderr.(*os.File)
		bar = ok && isTerminal(f)
	case "always":
		bar = true
	case "never":
	default:
		return usageError{errors.New("--progress must be auto, always or never")}
	}
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return usageError{err}
	}

	con := &console{w: stderr}
	log := slog.New(slog.NewTextHandler(con, nil))
	m, err := newMirror(cfg, log)
	if err != nil {
		return err
	}
	defer m.close()

	if *metricsAddr != "" {
		ln, err := net.Listen("tcp", *metricsAddr)
		if err != nil {
			return fmt.Errorf("metrics listener: %w", err)
		}
		srv := &http.Server{Handler: m.metrics.mux(m.runner), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
		log.Info("serving metrics", "url", "http://"+ln.Addr().String()+"/metrics", "health", "http://"+ln.Addr().String()+"/healthz")
		if listening != nil {
			listening(ln.Addr())
		}
	}

	if *progressMode != "never" {
		interval, every := plainTick, plainInterval
		if bar {
			interval, every = barInterval, 0
		}
		p := &progress{con: con, bar: bar, every: every, now: time.Now,
			read: func() cdc.SnapshotProgress { return m.runner.Progress().Snapshot }}
		tick := time.NewTicker(interval)
		stop, done := make(chan struct{}), make(chan struct{})
		go func() { p.run(stop, tick.C); close(done) }()
		defer func() { tick.Stop(); close(stop); <-done }()
	}

	err = m.runner.Run(ctx)
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		pr := m.runner.Progress()
		log.Info("stopped on signal; the checkpoint stays at the last completed batch",
			"events", pr.Events, "batches", pr.Batches, "dead_letters", pr.DeadLetters)
		return nil
	}
	return err
}

// mirror is one pipeline with everything it owns.
type mirror struct {
	cfg     *config
	state   *statestore.DB
	dlq     *cdc.FileDLQ
	sink    *sink.Sink
	runner  *cdc.Runner
	metrics *metrics
}

// newMirror opens the state and dead-letter files and builds source, sink, runner and
// metrics. Nothing connects to a server yet.
func newMirror(cfg *config, log *slog.Logger) (_ *mirror, err error) {
	m := &mirror{cfg: cfg, metrics: newMetrics(cfg.Pipeline)}
	defer func() {
		if err != nil {
			m.close()
		}
	}()
	if m.state, err = statestore.Open(cfg.State, nil); err != nil {
		return nil, fmt.Errorf("state file: %w", err)
	}
	if m.dlq, err = cdc.OpenFileDLQ(cfg.DLQ, nil); err != nil {
		return nil, fmt.Errorf("dead-letter file: %w", err)
	}
	if m.sink, err = sink.New(cfg.Sink, sink.Options{Pipeline: cfg.Pipeline, State: m.state, Observer: m.metrics}); err != nil {
		return nil, err
	}
	src, err := newSource(&cfg.Source, log.With("source", cfg.Source.Type))
	if err != nil {
		return nil, err
	}
	r := cfg.Runner
	m.runner, err = cdc.NewRunner(src, m.sink, m.state, m.dlq, &cdc.RunnerOptions{
		Pipeline:       cfg.Pipeline,
		BatchMaxEvents: r.BatchMaxEvents,
		BatchMaxBytes:  r.BatchMaxBytes,
		BatchMaxWait:   time.Duration(r.BatchMaxWait),
		BackoffMin:     time.Duration(r.BackoffMin),
		BackoffMax:     time.Duration(r.BackoffMax),
		StallThreshold: time.Duration(r.StallThreshold),
		Logger:         log,
		Observer:       m.metrics,
	})
	if err != nil {
		return nil, err
	}
	m.metrics.watch(m.runner)
	tables := "every published table"
	if len(cfg.Source.Tables) > 0 {
		tables = strings.Join(cfg.Source.Tables, ", ")
	}
	log.Info("pipeline configured", "pipeline", cfg.Pipeline, "source", cfg.Source.Type, "tables", tables,
		"sink", cfg.Sink.ID, "index", cfg.Sink.Index, "state", cfg.State, "dlq", cfg.DLQ)
	return m, nil
}

// close releases what newMirror opened; the runner has closed its stream by then.
func (m *mirror) close() {
	if m.sink != nil {
		_ = m.sink.Close()
	}
	if m.dlq != nil {
		_ = m.dlq.Close()
	}
	if m.state != nil {
		_ = m.state.Close()
	}
}
