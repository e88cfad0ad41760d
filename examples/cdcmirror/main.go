package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/buildinfo"
	"github.com/tributary-dev/tributary/mirror"
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
	if code := exitStatus(os.Stderr, command(ctx, os.Args[1:], os.Stdout, os.Stderr, nil)); code != 0 {
		os.Exit(code)
	}
}

// exitStatus reports err on w and returns the exit status: 0 for none (or --help), 2 for a
// bad command line or configuration -- pipelines refused at start because their configuration
// cannot work included, printed one table and fix per line, and pipelines whose cluster does
// not enforce the deployment requirement, printed with the request that fixes it --, 1 for
// anything else.
func exitStatus(w io.Writer, err error) int {
	var usage usageError
	var invalid *mirror.ConfigError
	switch refused := refusals(err); {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case len(refused) > 0:
		for _, r := range refused {
			fmt.Fprintf(w, "cdcmirror: refusing to start, the configuration cannot work (%s):\n", r.Component)
			for _, p := range r.Problems {
				fmt.Fprintf(w, "  table %s: %s\n", p.Table, p.Problem)
				if p.Fix != "" {
					fmt.Fprintf(w, "    fix: %s\n", p.Fix)
				}
			}
		}
		return 2
	case unenforced(w, err):
		return 2
	case errors.As(err, &usage), errors.As(err, &invalid):
		fmt.Fprintln(w, "cdcmirror:", err)
		return 2
	default:
		fmt.Fprintln(w, "cdcmirror:", err)
		return 1
	}
}

// refusals finds every start refusal in err, also among the joined errors of several
// pipelines.
func refusals(err error) []*cdc.StartError {
	switch e := err.(type) {
	case nil:
		return nil
	case *cdc.StartError:
		return []*cdc.StartError{e}
	case interface{ Unwrap() []error }:
		var out []*cdc.StartError
		for _, x := range e.Unwrap() {
			out = append(out, refusals(x)...)
		}
		return out
	}
	return refusals(errors.Unwrap(err))
}

// isVersionFlag reports whether arg asks for the build's version (what `make release` stamped).
func isVersionFlag(arg string) bool {
	return arg == "--version" || arg == "-version" || arg == "version"
}

// usageError is a bad command line or configuration: exit status 2.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

const usage = `usage:
  cdcmirror --version
  cdcmirror [run] --config FILE [--metrics-addr 127.0.0.1:9464] [--progress auto|always|never]
  cdcmirror status --config FILE [--pipeline NAME] [--metrics-addr 127.0.0.1:9464]
  cdcmirror drop --config FILE [--pipeline NAME] [--indices]
  cdcmirror resnapshot --config FILE [--pipeline NAME] [--table T]... [--where COND] [--metrics-addr 127.0.0.1:9464]
  cdcmirror reindex --config FILE [--pipeline NAME] --table T [--metrics-addr 127.0.0.1:9464]
  cdcmirror prepare-cluster --config FILE [--dry-run]
  cdcmirror switch --config FILE --from OLDFILE [--pipeline NAME] [--prepare] [--keep]`

// command runs one cdcmirror command with args. run (the default) runs until ctx ends (a
// signal: nil, after a clean stop) or every pipeline stopped. Reports go to stdout, logs and
// the progress bar to stderr. listening, when set, learns the metrics listener's address
// once it accepts connections.
func command(ctx context.Context, args []string, stdout, stderr io.Writer, listening func(net.Addr)) error {
	if len(args) == 1 && isVersionFlag(args[0]) {
		_, err := fmt.Fprintln(stdout, buildinfo.Summary("cdcmirror"))
		return err
	}
	name := "run"
	if len(args) > 0 && (args[0] == "run" || args[0] == "status" || args[0] == "drop" || args[0] == "resnapshot" || args[0] == "reindex" || args[0] == "prepare-cluster" || args[0] == "switch") {
		name, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("cdcmirror "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), usage)
		fs.PrintDefaults()
	}
	configPath := fs.String("config", "", "the configuration file (YAML; every key: examples/cdcmirror/CONFIG.md; examples: postgres.yaml, pipelines.yaml)")
	var run runFlags
	var pipeline *string
	var indices *bool
	var rs resnapFlags
	var reindexTable *string
	var dryRun *bool
	var sw switchFlags
	switch name {
	case "run":
		run.metricsAddr = fs.String("metrics-addr", "127.0.0.1:9464", "listen address for /metrics, /healthz and /status (empty: none)")
		run.progress = fs.String("progress", "auto", "snapshot progress on stderr: auto (a bar on a terminal, else plain lines), always (a bar), never")
	case "status":
		pipeline = fs.String("pipeline", "", "report on this pipeline only")
		run.metricsAddr = fs.String("metrics-addr", "127.0.0.1:9464", "where a running cdcmirror serves /status (empty: do not ask)")
	case "drop":
		pipeline = fs.String("pipeline", "", "the pipeline to delete (required when the file has several)")
		indices = fs.Bool("indices", false, "delete the pipeline's indices too (without it they stay, and a restarted pipeline is refused them)")
	case "resnapshot":
		pipeline = fs.String("pipeline", "", "the pipeline (required when the file has several)")
		fs.Var(&rs.tables, "table", "a table to read again, as source.tables spells it (repeatable; none: every captured table)")
		rs.where = fs.String("where", "", "an SQL condition on each table's rows (a key range, a filter)")
		run.metricsAddr = fs.String("metrics-addr", "127.0.0.1:9464", "where the running cdcmirror serves /admin/resnapshot")
	case "reindex":
		pipeline = fs.String("pipeline", "", "the pipeline (required when the file has several)")
		reindexTable = fs.String("table", "", "the table whose index is rebuilt, as source.tables spells it")
		run.metricsAddr = fs.String("metrics-addr", "127.0.0.1:9464", "where the running cdcmirror serves /admin/reindex")
	case "switch":
		pipeline = fs.String("pipeline", "", "the pipeline (required when the file has several)")
		sw.from = fs.String("from", "", "the configuration the pipeline ran with (the other path: native or debezium); --config is the one it will run with")
		sw.prepare = fs.Bool("prepare", false, "switching to a native source: create its slot (PostgreSQL) or record the binlog position (MySQL/MariaDB) while the Debezium pipeline still runs")
		sw.keep = fs.Bool("keep", false, "leave the old path's slot and publication, or consumer group, in place")
	case "prepare-cluster":
		dryRun = fs.Bool("dry-run", false, "read every cluster's setting and print the request that would enforce the rule, sending nothing")
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
	if name == "run" {
		if err := run.check(stderr); err != nil {
			return err
		}
	}
	cfg, err := mirror.LoadConfig(*configPath)
	if err != nil {
		return usageError{err}
	}
	switch name {
	case "status":
		names, err := selected(cfg, *pipeline, true)
		if err != nil {
			return err
		}
		return status(ctx, stdout, cfg, names, *run.metricsAddr)
	case "drop":
		names, err := selected(cfg, *pipeline, false)
		if err != nil {
			return err
		}
		return drop(ctx, stdout, cfg, names[0], *indices)
	case "resnapshot":
		names, err := selected(cfg, *pipeline, false)
		if err != nil {
			return err
		}
		return requestResnapshot(ctx, stdout, *run.metricsAddr, resnapshotBody{Pipeline: names[0], Tables: rs.tables, Where: *rs.where})
	case "reindex":
		names, err := selected(cfg, *pipeline, false)
		if err != nil {
			return err
		}
		return requestReindex(ctx, stdout, *run.metricsAddr, reindexBody{Pipeline: names[0], Table: *reindexTable})
	case "prepare-cluster":
		return prepareCluster(ctx, stdout, cfg, *dryRun)
	case "switch":
		names, err := selected(cfg, *pipeline, false)
		if err != nil {
			return err
		}
		if *sw.from == "" {
			return usageError{errors.New("--from is required: the configuration the pipeline ran with")}
		}
		from, err := mirror.LoadConfig(*sw.from)
		if err != nil {
			return usageError{fmt.Errorf("--from: %w", err)}
		}
		return switchPipeline(ctx, stdout, *configPath, cfg, from, names[0], sw)
	}
	return runMirror(ctx, cfg, run, stderr, listening)
}

// selected is the pipelines a command works on: the one --pipeline names, or every one (all
// allowed) or the only one.
func selected(cfg *mirror.Config, name string, all bool) ([]string, error) {
	names := cfg.Names()
	switch {
	case name != "":
		if cfg.Pipeline(name) == nil {
			return nil, usageError{fmt.Errorf("--pipeline: the configuration has no pipeline %q (it has %v)", name, names)}
		}
		return []string{name}, nil
	case all || len(names) == 1:
		return names, nil
	}
	return nil, usageError{fmt.Errorf("--pipeline is required: the configuration has %d pipelines %v", len(names), names)}
}
