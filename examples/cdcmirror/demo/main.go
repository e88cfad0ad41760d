package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	opts := options{}
	flag.StringVar(&opts.mirror, "mirror", ".testenv/demo/cdcmirror", "the cdcmirror binary")
	flag.StringVar(&opts.configs, "configs", "examples/cdcmirror", "the directory holding postgres.yaml and mysql.yaml (and their -opensearch variants)")
	flag.StringVar(&opts.dir, "dir", ".testenv/demo", "working directory of the mirror (its state and dead-letter files)")
	flag.IntVar(&opts.rows, "rows", 20000, "rows in the table before the mirror starts (its snapshot)")
	flag.DurationVar(&opts.timeout, "timeout", 2*time.Minute, "how long each pipeline may take to converge")
	flag.StringVar(&opts.only, "only", "", "run one pipeline: postgres or mysql (default both)")
	flag.StringVar(&opts.engine, "engine", "elasticsearch", "the search engine to mirror into: elasticsearch or opensearch")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		stop()
		os.Exit(1)
	}
}

type options struct {
	mirror, configs, dir, only, engine string
	rows                               int
	timeout                            time.Duration
}

func run(ctx context.Context, o options) error {
	eng, ok := engines[o.engine]
	if !ok {
		return errors.New("-engine must be elasticsearch or opensearch")
	}
	esURL := strings.TrimSuffix(os.Getenv(eng.urlVar), "/")
	if esURL == "" {
		return fmt.Errorf("%s is unset: run `make demo` (it starts the servers and loads .testenv/env)", eng.urlVar)
	}
	mirror, err := filepath.Abs(o.mirror)
	if err != nil {
		return err
	}
	if _, err := os.Stat(mirror); err != nil {
		return fmt.Errorf("the cdcmirror binary: %w (build it with go -C examples build -o ../%s ./cdcmirror)", err, o.mirror)
	}
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return err
	}
	es := &search{url: esURL}
	restore, err := es.enforceFencing()
	if err != nil {
		return err
	}
	defer restore()

	var sources []source
	if o.only == "" || o.only == "postgres" {
		sources = append(sources, &postgres{dsn: os.Getenv("TRIBUTARY_PG_DSN")})
	}
	if o.only == "" || o.only == "mysql" {
		sources = append(sources, &mysql{dsnText: os.Getenv("TRIBUTARY_MYSQL_DSN")})
	}
	if len(sources) == 0 {
		return fmt.Errorf("--only must be postgres or mysql")
	}
	for _, src := range sources {
		if err := demo(ctx, o, eng, mirror, es, src); err != nil {
			return fmt.Errorf("%s: %w", src.kind(), err)
		}
	}
	fmt.Println("\ndemo: every pipeline converged")
	return nil
}

// engine is a search engine the demo can mirror into.
type engine struct {
	title  string // for the output
	urlVar string // the environment variable .testenv/env sets to the node's URL
	// configSuffix follows the source's kind in the configuration file's name: the files
	// differ in the URL and in the mapping options each engine's test server supports.
	configSuffix string
}

var engines = map[string]engine{
	"elasticsearch": {title: "Elasticsearch", urlVar: "TRIBUTARY_ES_URL", configSuffix: ".yaml"},
	"opensearch":    {title: "OpenSearch", urlVar: "TRIBUTARY_OPENSEARCH_URL", configSuffix: "-opensearch.yaml"},
}

// demo runs one pipeline: table, snapshot, changes, convergence, stop, cleanup.
func demo(ctx context.Context, o options, eng engine, mirror string, es *search, src source) (err error) {
	cfgPath, err := filepath.Abs(filepath.Join(o.configs, src.kind()+eng.configSuffix))
	if err != nil {
		return err
	}
	cfg, err := readDemoConfig(cfgPath)
	if err != nil {
		return err
	}
	fmt.Printf("\n=== %s -> %s (%s) ===\n", src.title(), eng.title, cfgPath)
	if err := src.connect(ctx, cfg); err != nil {
		return err
	}
	defer src.close()
	index, err := src.index(ctx, cfg)
	if err != nil {
		return err
	}
	files := []string{filepath.Join(o.dir, cfg.State), filepath.Join(o.dir, cfg.DLQ)}
	clean := func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := src.drop(cctx); err != nil {
			fmt.Fprintf(os.Stderr, "demo: cleaning up the %s table: %v\n", src.kind(), err)
		}
		if err := es.deleteIndex(cctx, index); err != nil {
			fmt.Fprintf(os.Stderr, "demo: deleting index %s: %v\n", index, err)
		}
		for _, f := range files {
			_ = os.Remove(f)
		}
	}
	// Leftovers of an interrupted run would be refused: the new state file is another owner.
	clean()
	defer clean()

	fmt.Printf("creating table %s and inserting %d rows\n", cfg.table, o.rows)
	if err := src.create(ctx, o.rows); err != nil {
		return err
	}

	addr, err := freeAddr()
	if err != nil {
		return err
	}
	cmd := exec.Command(mirror, "--config", cfgPath, "--metrics-addr", addr)
	cmd.Dir, cmd.Stdout, cmd.Stderr = o.dir, os.Stderr, os.Stderr
	fmt.Printf("starting: cdcmirror --config %s --metrics-addr %s\n", filepath.Base(cfgPath), addr)
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	defer func() {
		if !stopped {
			_ = cmd.Process.Kill()
			<-exited
		}
	}()

	fmt.Println("waiting for the snapshot to reach the index")
	cctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	w := &watcher{es: es, src: src, index: index, exited: exited}
	if err := w.waitCount(cctx, "snapshot"); err != nil {
		return err
	}

	fmt.Println("changing the table: 3 updates, 2 deletes, 2 inserts")
	touched, err := src.change(ctx, o.rows)
	if err != nil {
		return err
	}
	if err := w.waitCount(cctx, "stream"); err != nil {
		return err
	}
	if err := w.waitDocs(cctx, touched); err != nil {
		return err
	}
	fmt.Printf("converged: %s holds the table's rows, document for document\n", index)
	showMetrics(ctx, addr)

	fmt.Println("stopping the mirror (SIGINT): its checkpoint stays at the last completed batch")
	_ = cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			return fmt.Errorf("cdcmirror exited with %v", err)
		}
	case <-time.After(30 * time.Second):
		return errors.New("cdcmirror did not stop within 30s of SIGINT")
	}
	return nil
}

// freeAddr finds a loopback port for the metrics listener.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
