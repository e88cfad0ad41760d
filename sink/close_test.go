package sink

import (
	"testing"

	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/statestore"
)

// Close closes the client a sink built from its configuration, once: a second Close is nil.
func TestCloseReleasesOwnedClient(t *testing.T) {
	k, err := New(Config{ID: "close", URL: "http://127.0.0.1:1", Index: "close", Auth: Auth{Type: AuthNone}}, &Options{Pipeline: "p", State: statestore.NewMemory(), Engine: estest.Ptr(Elasticsearch)})

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

// New refuses nil options: Pipeline and State have no default.
func TestNewNilOptions(t *testing.T) {
	if _, err := New(Config{ID: "nil", URL: "http://127.0.0.1:1", Index: "nil", Auth: Auth{Type: AuthNone}}, nil); err == nil {
		t.Fatal("New(cfg, nil) = nil error, want Options required")
	}
}
