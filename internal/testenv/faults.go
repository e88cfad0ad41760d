package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Faults is the gate of the fault tests: tests that stop, restart, kill or pause (SIGSTOP) the
// shared servers. They run in a phase of their own (`make fault`, part of `make check`), one
// package at a time, after every other test, so that no other test sees its server go away;
// `make test-all` leaves the variable unset. Its value is the testenv script that controls the servers.
const Faults = "TRIBUTARY_FAULTS"

// Servers controls the shared test servers through scripts/testenv/testenv.
type Servers struct {
	script string
	t      testing.TB
}

// RequireFaults skips the test unless the fault phase is running (TRIBUTARY_FAULTS set), and
// returns the control of the servers. A fault test's name starts with TestFault.
func RequireFaults(t testing.TB) *Servers {
	t.Helper()
	if !strings.HasPrefix(t.Name(), "TestFault") {
		t.Fatalf("fault test %s: its name must start with TestFault (make fault runs -run '^TestFault')", t.Name())
	}
	v := os.Getenv(Faults)
	if v == "" {
		t.Skipf("fault test skipped: %s is unset (it restarts the shared servers; `make fault` or `make check` runs it)", Faults)
	}
	script := v
	if v == "1" {
		_, file, _, _ := runtime.Caller(0)
		script = filepath.Join(filepath.Dir(file), "..", "..", "scripts", "testenv", "testenv")
	}
	return &Servers{script: script, t: t}
}

// Run runs `testenv ARGS...` (e.g. "restart", "postgres", "--mode", "fast", or "pause",
// "kafka") and fails the test when it fails; it is bounded by ten minutes.
func (s *Servers) Run(args ...string) {
	s.t.Helper()
	if out, err := s.Output(args...); err != nil {
		s.t.Fatalf("testenv %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// Output runs `testenv ARGS...` and returns its combined output.
func (s *Servers) Output(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.script, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%w", err)
	}
	return string(out), nil
}
