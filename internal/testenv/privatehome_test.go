package testenv

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// A private TRIBUTARY_TESTENV_HOME (scripts/bench-peers) writes its env under that home and
// leaves the checkout's .testenv (env file and run link, which everything else sources) alone.
// The real testenv and lib.sh run in a copy of the scripts directory whose servers are fakes.
func TestPrivateHomeLeavesCheckoutAlone(t *testing.T) {
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("flock (util-linux) is not installed")
	}
	_, file, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "testenv")
	repo := t.TempDir()
	home := t.TempDir()
	dir := filepath.Join(repo, "scripts", "testenv")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	main, err := os.ReadFile(filepath.Join(src, "testenv"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"testenv", "lib.sh"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	all := regexp.MustCompile(`(?m)^ALL=\(([^)]*)\)`).FindSubmatch(main)
	if all == nil {
		t.Fatal("no ALL=(...) in scripts/testenv/testenv")
	}
	for _, name := range strings.Fields(string(all[1])) {
		v := "FAKE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		fake := "#!/usr/bin/env bash\ncase $1 in\n" +
			"  status) echo \"" + name + ": running\" ;;\n" +
			"  env) echo \"export " + v + "=x\" ;;\n" +
			"  modes) echo graceful ;;\n" +
			"esac\n"
		if err := os.WriteFile(filepath.Join(dir, name+".sh"), []byte(fake), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, filepath.Join(dir, "testenv"), args...)
		cmd.Env = append(os.Environ(), "TRIBUTARY_TESTENV_HOME="+home)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("testenv %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	out := run("up")
	envFile := filepath.Join(home, "env")
	if !strings.Contains(out, "wrote "+envFile) {
		t.Errorf("up does not say where it wrote the env (want %s):\n%s", envFile, out)
	}
	b, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "export FAKE_ESCLUSTER=x") || !strings.Contains(string(b), "export FAKE_ELASTICSEARCH=x") {
		t.Errorf("%s lacks the servers' settings:\n%s", envFile, b)
	}
	run("start", "postgres")
	if _, err := os.Lstat(filepath.Join(repo, ".testenv")); !os.IsNotExist(err) {
		t.Fatalf("a private home touched the checkout's .testenv (err %v)", err)
	}
}
