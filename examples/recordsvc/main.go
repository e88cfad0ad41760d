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
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	recordv1 "github.com/tributary-dev/tributary/examples/recordsvc/proto/tributary/record/v1"
	"github.com/tributary-dev/tributary/internal/buildinfo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// After the first signal the default handling returns, so a second one ends a
		// shutdown that hangs.
		<-ctx.Done()
		stop()
	}()
	if len(os.Args) == 2 && (os.Args[1] == "--version" || os.Args[1] == "-version" || os.Args[1] == "version") {
		fmt.Println(buildinfo.Summary("recordsvc"))
		return
	}
	err := command(ctx, os.Args[1:], os.Stderr, nil)
	var usage usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.As(err, &usage):
		fmt.Fprintln(os.Stderr, "recordsvc:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "recordsvc:", err)
		os.Exit(1)
	}
}

// usageError is a bad command line or configuration: exit status 2.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// listening tells a caller (the tests) where the listeners are once they accept connections.
// Empty strings mean the listener is off in this mode or configuration.
type listening struct {
	GRPC, Metrics string
}

// command runs recordsvc until ctx ends (then it shuts down and returns nil after a clean
// stop) or a worker fails.
func command(ctx context.Context, args []string, stderr io.Writer, ready func(listening)) error {
	fs := flag.NewFlagSet("recordsvc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "the configuration file (YAML; required; see examples/recordsvc/CONFIG.md)")
	mode := fs.String("mode", "", "server (the gRPC API), worker (applies the stores' queued writes) or all (both); default the configuration's mode:, else server")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: recordsvc --config FILE [--mode server|worker|all]\n       recordsvc --version")
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
	case *mode != "" && *mode != modeServer && *mode != modeWorker && *mode != modeAll:
		return usageError{fmt.Errorf("--mode must be server, worker or all")}
	}
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return usageError{err}
	}
	log := newLogger(stderr, cfg.Log.Level)
	if *mode != "" {
		cfg.Mode = *mode
	}
	if err := cfg.checkMode(); err != nil {
		return usageError{err} // before anything starts or logs
	}
	rt, err := build(ctx, cfg, cfg.Mode, log)
	if err != nil {
		return err
	}
	return run(ctx, rt, ready)
}

func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level)) // validated with the configuration
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}

// run starts the listeners and the workers of rt's mode, waits for ctx or a failing worker,
// and shuts down in order: stop taking requests and drain them (bounded by
// shutdown.timeout), drain the workers, close the Service, then the queues.
func run(ctx context.Context, rt *runtime, ready func(listening)) (err error) {
	cfg := rt.cfg
	deadline := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), cfg.Shutdown.Timeout)
	}
	var where listening

	hc, err := newHealthChecker(rt)
	if err != nil {
		closeCtx, cancel := deadline()
		defer cancel()
		return errors.Join(err, rt.closeParts(closeCtx))
	}
	hc.start()

	var metricsSrv *http.Server
	if cfg.Listen.Metrics != "off" {
		ln, lerr := net.Listen("tcp", cfg.Listen.Metrics)
		if lerr != nil {
			err = fmt.Errorf("listen.metrics: %w", lerr)
		} else {
			mux := http.NewServeMux()
			mux.Handle("/metrics", promhttp.HandlerFor(rt.m.reg, promhttp.HandlerOpts{Registry: rt.m.reg}))
			metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
			go func() { _ = metricsSrv.Serve(ln) }()
			where.Metrics = ln.Addr().String()
		}
	}

	var grpcSrv *grpc.Server
	grpcServing := false
	grpcDone := make(chan error, 1)
	if err == nil && rt.mode != modeWorker {
		ln, lerr := net.Listen("tcp", cfg.Listen.GRPC)
		if lerr != nil {
			err = fmt.Errorf("listen.grpc: %w", lerr)
		} else {
			codec := newRequestCodec()
			grpcSrv = grpc.NewServer(
				grpc.MaxRecvMsgSize(cfg.Limits.MaxRequestBytes),
				grpc.MaxSendMsgSize(cfg.Limits.MaxResponseBytes),
				grpc.ForceServerCodecV2(codec),
				grpc.ChainUnaryInterceptor(codec.refusedUndecodable),
				grpc.StatsHandler(rpcStats{rt.m}),
			)
			recordv1.RegisterRecordServiceServer(grpcSrv, &server{svc: rt.svc, m: rt.m})
			healthpb.RegisterHealthServer(grpcSrv, hc.srv)
			if *cfg.Listen.Reflection {
				// Serves every file the binary links, google/rpc/error_details.proto and the
				// health service's included: grpcurl needs no local proto file.
				reflection.Register(grpcSrv)
			}
			go func() { grpcDone <- grpcSrv.Serve(ln) }()
			grpcServing = true
			where.GRPC = ln.Addr().String()
		}
	}

	var workers *workerSet
	workerFailed := make(chan error, 1)
	if err == nil && rt.mode != modeServer {
		workers, err = startWorkers(ctx, rt, workerFailed)
	}

	if err == nil {
		metricsAt := where.Metrics
		if metricsSrv == nil {
			metricsAt = "off"
		}
		grpcAt := where.GRPC
		if grpcSrv == nil {
			grpcAt = "off"
		}
		rt.log.Info("recordsvc started", slog.String("mode", rt.mode), slog.String("grpc", grpcAt), slog.String("metrics", metricsAt), slog.Int("stores", len(rt.names)))
		if ready != nil {
			ready(where)
		}
		select {
		case <-ctx.Done():
		case err = <-workerFailed:
		case err = <-grpcDone:
			grpcServing = false
			err = fmt.Errorf("gRPC server stopped: %w", err)
		}
	}

	// Shutdown. Health goes NOT_SERVING first, so load balancers stop sending; with a drain
	// delay the listener keeps serving meanwhile, for the clients that have not noticed yet.
	rt.log.Info("recordsvc stopping")
	hc.stop()
	if d := cfg.Shutdown.DrainDelay; d > 0 && grpcServing {
		rt.log.Info("health NOT_SERVING; still serving during shutdown.drain_delay", slog.Duration("drain_delay", d))
		wait := rt.drainWait
		if wait == nil {
			wait = time.Sleep
		}
		wait(d)
	}
	shutdownCtx, cancel := deadline()
	defer cancel()
	if grpcSrv != nil {
		stopped := make(chan struct{})
		go func() {
			grpcSrv.GracefulStop()
			close(stopped)
		}()
		select {
		case <-stopped:
		case <-shutdownCtx.Done():
			rt.log.Warn("shutdown.timeout reached with requests in flight; closing their connections")
			grpcSrv.Stop()
			<-stopped
		}
	}
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	if workers != nil {
		errs = append(errs, workers.stop(shutdownCtx))
	}
	errs = append(errs, rt.closeParts(shutdownCtx))
	if workers != nil {
		workers.close()
	}
	if metricsSrv != nil {
		_ = metricsSrv.Shutdown(shutdownCtx)
	}
	err = errors.Join(errs...)
	if err == nil {
		rt.log.Info("recordsvc stopped")
	}
	return err
}
