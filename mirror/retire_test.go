package mirror_test

import (
	"context"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/mirror"
)

// shortRetire is the Options.RetireInterval of tests that wait for a retired generation's
// deletion: Run looks often, so the wait is short.
const shortRetire = 200 * time.Millisecond

// startWith is start with Open's options.
func startWith(t *testing.T, cfg *mirror.Config, opts *mirror.Options) *running {
	t.Helper()
	m, err := mirror.Open(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{t: t, m: m, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- m.Run(ctx) }()
	t.Cleanup(func() { r.stop(); _ = m.Close() })
	return r
}
