package mirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/sink"
)

// fakeRunner stops with err when stop is closed, or when ctx ends.
type fakeRunner struct {
	name string
	stop chan struct{}
	err  error
}

func (f *fakeRunner) Run(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-f.stop:
		return f.err
	}
}

func (f *fakeRunner) Status() cdc.Status { return cdc.Status{Pipeline: f.name} }

// syncBuffer is a log shared by goroutines.
type syncBuffer = testenv.LogBuffer

func fakeMirror(log *syncBuffer, runners ...*fakeRunner) *Mirror {
	m := &Mirror{log: slog.New(slog.NewTextHandler(log, nil))}
	for _, r := range runners {
		s := &seat{name: r.name}
		s.cur.Store(&pipeline{name: r.name, runner: r})
		m.seats = append(m.seats, s)
	}
	return m
}

// A pipeline that stops permanently is logged once and the others go on; Run returns nil when
// ctx ends.
func TestRunOthersGoOn(t *testing.T) {
	var log syncBuffer
	refused := cdc.Permanent(errors.New("authentication failed"))
	a := &fakeRunner{name: "a", stop: make(chan struct{}), err: fmt.Errorf("cdc: pipeline %q: opening the source: %w", "a", refused)}
	b := &fakeRunner{name: "b", stop: make(chan struct{})}
	m := fakeMirror(&log, a, b)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	close(a.stop)
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(log.String(), "the other pipelines go on") {
		if time.Now().After(deadline) {
			t.Fatal("the stopped pipeline was not logged")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("Run returned while b runs: %v", err)
	default:
	}
	if got := m.Run(ctx); got == nil || !strings.Contains(got.Error(), "while running") {
		t.Fatalf("a second concurrent Run: %v", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after ctx ended: %v", err)
	}
	if n := strings.Count(log.String(), "pipeline stopped"); n != 1 || !strings.Contains(log.String(), "pipeline=a running=1") {
		t.Fatalf("log:\n%s", log.String())
	}
}

// When every pipeline has stopped, Run returns each one's error, naming its pipeline once.
func TestRunAllStopped(t *testing.T) {
	var log syncBuffer
	a := &fakeRunner{name: "a", stop: make(chan struct{}), err: fmt.Errorf("cdc: pipeline %q: boom", "a")}
	b := &fakeRunner{name: "b", stop: make(chan struct{}), err: errors.New("bang")}
	close(a.stop)
	close(b.stop)
	err := fakeMirror(&log, a, b).Run(context.Background())
	var pe *PipelineError
	if !errors.As(err, &pe) {
		t.Fatalf("Run: %v, want pipeline errors", err)
	}
	if got := err.Error(); got != "cdc: pipeline \"a\": boom\npipeline \"b\": bang" {
		t.Fatalf("Run: %q", got)
	}
	if !errors.Is(err, b.err) {
		t.Fatal("the runner's error is not reachable")
	}
}

// Every runner: setting reaches cdc.RunnerOptions, and the pipeline's name is the one the sink
// gets.
func TestRunnerOptionsMapping(t *testing.T) {
	var r RunnerConfig
	rv := reflect.ValueOf(&r).Elem()
	for i := range rv.NumField() {
		switch f := rv.Field(i); f.Kind() {
		case reflect.Int:
			f.SetInt(int64(i + 1))
		case reflect.Int64:
			f.SetInt(int64(time.Duration(i+1) * time.Second))
		default:
			t.Fatalf("field %s of an unexpected kind", rv.Type().Field(i).Name)
		}
	}
	o := runnerOptions(&PipelineConfig{Name: "p", Runner: r}, nil, nil)
	ov := reflect.ValueOf(o).Elem()
	for i := range rv.NumField() {
		name := rv.Type().Field(i).Name
		if got := ov.FieldByName(name); !got.IsValid() || !got.Equal(rv.Field(i)) {
			t.Errorf("RunnerOptions.%s = %v, want %v", name, got, rv.Field(i))
		}
	}
}

// Open connects to nothing: with servers that do not exist it builds every pipeline, reports
// them not running, hands each pipeline's name to its observers, and closes.
func TestOpenConnectsToNothing(t *testing.T) {
	dir := t.TempDir()
	cfg := &Config{State: filepath.Join(dir, "state"), Pipelines: []PipelineConfig{
		{Name: "pg", DLQ: filepath.Join(dir, "pg.dlq"),
			Source: SourceConfig{Type: "postgres", DSN: "postgres://u:pw@127.0.0.1:1/db", Tables: []string{"public.*"}, Slot: "mir_x", Publication: "mir_x"},
			Sink:   sink.Config{ID: "es", URL: "http://127.0.0.1:1", Index: "mir-{table}", Auth: sink.Auth{Type: sink.AuthNone}}},
		{Name: "my", DLQ: filepath.Join(dir, "my.dlq"),
			Source: SourceConfig{Type: "mysql", DSN: "u:pw@tcp(127.0.0.1:1)/db", Tables: []string{"db.*", "orders"}},
			Sink:   sink.Config{ID: "es", URL: "http://127.0.0.1:1", Index: "mir-my-{table}", Auth: sink.Auth{Type: sink.AuthNone}}},
		{Name: "my8", DLQ: filepath.Join(dir, "my8.dlq"),
			Source: SourceConfig{Type: "mysql", Flavor: "mysql", DSN: "u:pw@tcp(127.0.0.1:1)/db", Tables: []string{"orders"}},
			Sink:   sink.Config{ID: "es", URL: "http://127.0.0.1:1", Index: "mir-my8-{table}", Auth: sink.Auth{Type: sink.AuthNone}}},
	}}
	var observed []string
	m, err := Open(cfg, &Options{Observe: func(p string) (cdc.Observer, sink.Observer) {
		observed = append(observed, p)
		return nil, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Pipelines(); len(got) != 3 || got[0] != "pg" || got[1] != "my" || len(observed) != 3 || observed[1] != "my" {
		t.Fatalf("pipelines %v, observed %v", got, observed)
	}
	for _, s := range m.Status() {
		if s.Health.Healthy || s.Pipeline == "" {
			t.Fatalf("status before Run: %+v", s)
		}
	}
	// Re-snapshot requests: MySQL cannot (MariaDB can), an unknown pipeline is named, and
	// PostgreSQL's and MariaDB's requests need their server (here out of reach: not a refusal
	// of the request).
	ctx := context.Background()
	if _, err := m.Resnapshot(ctx, "my8", cdc.ResnapshotRequest{}); !errors.Is(err, ErrResnapshotUnsupported) {
		t.Errorf("Resnapshot(my8) = %v", err)
	}
	if _, err := m.Resnapshot(ctx, "my", cdc.ResnapshotRequest{Tables: []string{"db.orders"}}); err == nil ||
		errors.Is(err, cdc.ErrResnapshotRefused) || errors.Is(err, ErrResnapshotUnsupported) || strings.Contains(err.Error(), "pw") {
		t.Errorf("Resnapshot(my) with the server out of reach = %v", err)
	}
	if _, err := m.Resnapshot(ctx, "nope", cdc.ResnapshotRequest{}); !errors.Is(err, ErrNoPipeline) {
		t.Errorf("Resnapshot(nope) = %v", err)
	}
	if _, err := m.Resnapshot(ctx, "pg", cdc.ResnapshotRequest{Tables: []string{"public.t"}}); err == nil ||
		errors.Is(err, cdc.ErrResnapshotRefused) || strings.Contains(err.Error(), "pw") {
		t.Errorf("Resnapshot(pg) with the server out of reach = %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal("a second Close:", err)
	}
	if err := m.Run(context.Background()); err == nil {
		t.Fatal("Run after Close succeeded")
	}
	// The state file is free again, and a second Open of the same configuration works.
	m, err = Open(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
}
