package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	recordv1 "github.com/tributary-dev/tributary/examples/recordsvc/proto/tributary/record/v1"
	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/driver"
	"github.com/tributary-dev/tributary/store/memstore"
)

// gatedAdapter is a memstore whose writes wait for release, so a test holds a call in flight.
type gatedAdapter struct {
	*memstore.Adapter
	entered chan struct{}
	release chan struct{}
}

func (g *gatedAdapter) Write(ctx context.Context, w []driver.Write, o driver.WriteOptions) ([]driver.WriteResult, error) {
	g.entered <- struct{}{}
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.Adapter.Write(ctx, w, o)
}

// runGated runs run() over one store "main" on a gatedAdapter and returns a client, the
// adapter, a cancel that starts the shutdown, and the channel run's error arrives on.
func runGated(t *testing.T, shutdownTimeout time.Duration) (recordv1.RecordServiceClient, *gatedAdapter, context.CancelFunc, <-chan error) {
	cl, _, g, cancel, done := runGatedWith(t, func(rt *runtime) { rt.cfg.Shutdown.Timeout = shutdownTimeout })
	return cl, g, cancel, done
}

// runGatedWith is runGated with the runtime (and its configuration) edited by edit before run
// starts, and a health client too.
func runGatedWith(t *testing.T, edit func(*runtime)) (recordv1.RecordServiceClient, healthpb.HealthClient, *gatedAdapter, context.CancelFunc, <-chan error) {
	t.Helper()
	cfg, err := parseConfig([]byte("listen: {grpc: 127.0.0.1:0, metrics: 'off'}\nstores: {main: {kind: memory}}"))
	if err != nil {
		t.Fatal(err)
	}
	g := &gatedAdapter{Adapter: memstore.New(), entered: make(chan struct{}, 1), release: make(chan struct{})}
	rt := &runtime{cfg: cfg, mode: modeServer, log: newLogger(io.Discard, "error"), names: []string{"main"},
		raw: map[string]store.Adapter{"main": g}}
	rt.m = newMetrics(rt.names)
	rt.svc, err = store.New(map[string]store.Adapter{"main": g}, &store.Options{Coalesce: store.CoalesceOptions{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	edit(rt)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ready := make(chan listening, 1)
	done := make(chan error, 1)
	go func() { done <- run(ctx, rt, func(l listening) { ready <- l }) }()
	where := <-ready
	conn, err := grpc.NewClient(where.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return recordv1.NewRecordServiceClient(conn), healthpb.NewHealthClient(conn), g, cancel, done
}

// TestEndToEndShutdownDrainDelay: with shutdown.drain_delay, a shutdown first turns health
// NOT_SERVING while the server still answers new calls; only after the delay does it stop.
// The delay is waited out through rt.drainWait, which the test holds open until it has looked,
// so the test does not race a clock; it checks that run waits for the configured delay.
func TestEndToEndShutdownDrainDelay(t *testing.T) {
	const delay = 3 * time.Second
	waiting := make(chan time.Duration, 1)
	over := make(chan struct{})
	cl, health, g, cancel, done := runGatedWith(t, func(rt *runtime) {
		rt.cfg.Shutdown.DrainDelay = delay
		rt.drainWait = func(d time.Duration) {
			waiting <- d
			<-over
		}
	})
	close(g.release)
	stopDraining := make(chan struct{})
	t.Cleanup(func() { close(stopDraining) })
	go func() {
		for {
			select {
			case <-g.entered:
			case <-stopDraining:
				return
			}
		}
	}()
	ctx := testCtx(t)
	if h, err := health.Check(ctx, healthRequest("")); err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health before the shutdown: %v %v, want SERVING", h, err)
	}
	cancel()
	select {
	case d := <-waiting:
		if d != delay {
			t.Fatalf("run waits %v for the drain, want shutdown.drain_delay %v", d, delay)
		}
	case err := <-done:
		t.Fatalf("run returned (%v) without waiting for the drain delay", err)
	case <-ctx.Done():
		t.Fatal("the shutdown never started the drain delay")
	}
	if h, err := health.Check(ctx, healthRequest("")); err != nil || h.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health during the drain delay: %v %v, want NOT_SERVING", h, err)
	}
	// The listener is still open and the service still works during the delay.
	res, err := cl.Write(ctx, &recordv1.WriteRequest{Items: []*recordv1.WriteItem{put(addr("main", "n", "d", "k"), doc(`{}`), nil)}})
	if err != nil || res.Results[0].Outcome != recordv1.Outcome_OUTCOME_CREATED {
		t.Fatalf("a call during the drain delay: %v %v, want it served", res, err)
	}
	select {
	case err := <-done:
		t.Fatalf("run returned (%v) before the drain delay was over", err)
	default:
	}
	close(over)
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
	_, err = cl.Read(ctx, &recordv1.ReadRequest{Addresses: []*recordv1.Address{addr("main", "n", "d", "k")}})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("a call after the shutdown: %v, want Unavailable", err)
	}
}

// TestEndToEndShutdownDrainsInFlight: a call in flight when the shutdown starts completes and
// is answered while new calls are refused; run returns nil.
func TestEndToEndShutdownDrainsInFlight(t *testing.T) {
	cl, g, cancel, done := runGated(t, time.Minute)
	ctx := testCtx(t)
	answer := make(chan error, 1)
	go func() {
		res, err := cl.Write(ctx, &recordv1.WriteRequest{Items: []*recordv1.WriteItem{put(addr("main", "n", "d", "k"), doc(`{}`), nil)}})
		if err == nil && res.Results[0].Outcome != recordv1.Outcome_OUTCOME_CREATED {
			err = status.Error(codes.Unknown, describe(res.Results[0]))
		}
		answer <- err
	}()
	<-g.entered
	cancel()
	// New calls are refused while the one in flight drains. (They read another record: a read
	// of "k" queues behind the write in flight on it, since a Service runs one record's
	// operations in order.)
	eventually(t, ctx, "new calls are refused once the shutdown started", func() bool {
		_, err := cl.Read(ctx, &recordv1.ReadRequest{Addresses: []*recordv1.Address{addr("main", "n", "d", "other")}})
		return status.Code(err) == codes.Unavailable
	})
	select {
	case err := <-done:
		t.Fatalf("run returned (%v) with a call in flight", err)
	default:
	}
	close(g.release)
	if err := <-answer; err != nil {
		t.Errorf("the call in flight during shutdown: %v, want it answered", err)
	}
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
}

// TestEndToEndShutdownTimeoutBounds: a call that never finishes does not hold the process
// beyond shutdown.timeout; the call is cut off and run reports that it gave up.
func TestEndToEndShutdownTimeoutBounds(t *testing.T) {
	cl, g, cancel, done := runGated(t, 200*time.Millisecond)
	ctx := testCtx(t)
	answer := make(chan error, 1)
	go func() {
		_, err := cl.Write(ctx, &recordv1.WriteRequest{Items: []*recordv1.WriteItem{put(addr("main", "n", "d", "k"), doc(`{}`), nil)}})
		answer <- err
	}()
	<-g.entered
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Error("run returned nil though the shutdown abandoned a call")
		}
	case <-ctx.Done():
		t.Fatal("run did not return: shutdown.timeout does not bound the drain")
	}
	if err := <-answer; status.Code(err) != codes.Unavailable && status.Code(err) != codes.Canceled {
		t.Errorf("the abandoned call: %v, want Unavailable or Canceled", err)
	}
}

// TestEndToEndBinarySIGTERM builds the binary, runs it on a memory configuration, makes a
// call, and stops it with SIGTERM: it exits 0 after logging a clean stop.
func TestEndToEndBinarySIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "recordsvc")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cfgPath := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(cfgPath, []byte("listen: {grpc: 127.0.0.1:0, metrics: 127.0.0.1:0}\nstores: {main: {kind: memory}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", cfgPath)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	started := regexp.MustCompile(`msg="recordsvc started".* grpc=(\S+)`)
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	ctx := testCtx(t)
	var grpcAddr string
	var log []string
	for grpcAddr == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("recordsvc exited before starting:\n%s", strings.Join(log, "\n"))
			}
			log = append(log, l)
			if m := started.FindStringSubmatch(l); m != nil {
				grpcAddr = m[1]
			}
		case <-ctx.Done():
			t.Fatalf("recordsvc did not start:\n%s", strings.Join(log, "\n"))
		}
	}
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	res, err := recordv1.NewRecordServiceClient(conn).Write(ctx, &recordv1.WriteRequest{Items: []*recordv1.WriteItem{put(addr("main", "n", "d", "k"), doc(`{"a":1}`), nil)}})
	if err != nil || res.Results[0].Outcome != recordv1.Outcome_OUTCOME_CREATED {
		t.Fatalf("write: %v %v", res, err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for l := range lines {
		log = append(log, l)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("recordsvc after SIGTERM: %v, want exit status 0\n%s", err, strings.Join(log, "\n"))
	}
	if !strings.Contains(strings.Join(log, "\n"), `msg="recordsvc stopped"`) {
		t.Errorf("no clean-stop line in the log:\n%s", strings.Join(log, "\n"))
	}
}
