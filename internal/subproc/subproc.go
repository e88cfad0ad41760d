// Package subproc runs the current test binary again as a child process, for crash tests: the
// child runs one test (which notices an environment variable and plays its part), prints
// progress lines the parent waits for, and is SIGKILLed at a moment the parent picks. A real
// kill -- no deferred calls, no flushing, no clean close of connections -- is what those tests
// are about; an in-process cancel would be kinder than any crash.
package subproc

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"testing"
)

// Child is one subprocess and the lines it prints on stdout (stderr goes to the parent's).
type Child struct {
	name  string
	cmd   *exec.Cmd
	lines chan string
	done  chan struct{}
}

// Start runs the test binary with -test.run=test and env added to the parent's environment.
// name says what the child is in failure messages ("pipeline", "worker"). The child is killed
// when t ends, so a failed test never leaves one running against a shared server.
func Start(t testing.TB, name, test string, env []string) *Child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run="+test)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &Child{name: name, cmd: cmd, lines: make(chan string, 64), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case c.lines <- sc.Text():
			default: // nobody waits for it any more
			}
		}
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-c.done; _ = cmd.Wait() })
	return c
}

// Await waits for the child to print want; the test fails when the child exits first or ctx
// ends.
func (c *Child) Await(ctx context.Context, t testing.TB, want string) {
	t.Helper()
	for {
		select {
		case l := <-c.lines:
			if l == want {
				return
			}
		case <-c.done:
			t.Fatalf("the %s subprocess exited before it printed %q", c.name, want)
		case <-ctx.Done():
			t.Fatalf("the %s subprocess did not print %q in time", c.name, want)
		}
	}
}

// Done is closed when the child has exited.
func (c *Child) Done() <-chan struct{} { return c.done }

// Kill SIGKILLs the child and reaps it.
func (c *Child) Kill(t testing.TB) {
	t.Helper()
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-c.done
	_ = c.cmd.Wait()
}
