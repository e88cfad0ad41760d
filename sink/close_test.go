package sink

import (
	"testing"
	"time"

	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/statestore"
)

// Close closes the client a sink built from its configuration, once: a second Close is nil.
func TestCloseReleasesOwnedClient(t *testing.T) {
	k, err := New(Config{ID: "close", URL: "http://127.0.0.1:1", Index: "close", Auth: Auth{Type: AuthNone}}, "p", statestore.NewMemory(), &Options{Engine: estest.Ptr(Elasticsearch)})

	if err != nil {
		t.Fatal(err)
	}
	if k.owned == nil {
		t.Fatal("a sink without Options.Transport built no client of its own")
	}
	if err := k.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := k.owned.Close(t.Context()); err == nil {
		t.Fatal("the sink's client is still open after Close")
	}
	if err := k.Close(); err != nil {
		t.Fatalf("second Close: %v, want nil", err)
	}
}

// New refuses a sink without its pipeline's name or state store, and takes nil options as
// every default.
func TestNewRequiredArgumentsAndNilOptions(t *testing.T) {
	cfg := Config{ID: "nil", URL: "http://127.0.0.1:1", Index: "nil", Auth: Auth{Type: AuthNone}}
	if _, err := New(cfg, "", statestore.NewMemory(), nil); err == nil {
		t.Fatal("New without a pipeline name = nil error")
	}
	if _, err := New(cfg, "p", nil, nil); err == nil {
		t.Fatal("New without a state store = nil error")
	}
	k, err := New(cfg, "p", statestore.NewMemory(), nil)
	if err != nil {
		t.Fatalf("New with nil options: %v", err)
	}
	defer k.Close()
	if k.opts.ItemRetryBackoff != 100*time.Millisecond || k.pipeline != "p" {
		t.Fatalf("nil options: backoff %v pipeline %q, want the default 100ms and p", k.opts.ItemRetryBackoff, k.pipeline)
	}
}
