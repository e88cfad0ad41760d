package buildinfo

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestReleaseScript runs `make release`'s script for one small program on this platform and
// checks what it promises: a static binary whose --version names the stamped version and
// commit, and a SHA256SUMS beside it.
func TestReleaseScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary: not in -short")
	}
	if runtime.GOOS != "linux" {
		t.Skip("scripts/release targets linux")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dist := t.TempDir()
	cmd := exec.Command(filepath.Join(root, "scripts", "release"))
	cmd.Env = append(os.Environ(), "VERSION=v0.0.0-releasetest", "PROGRAMS=mergetest",
		"PLATFORMS=linux/"+runtime.GOARCH, "DIST="+dist)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/release: %v\n%s", err, out)
	}
	bin := filepath.Join(dist, "mergetest_v0.0.0-releasetest_linux_"+runtime.GOARCH)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("open the released binary: %v", err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s has a program interpreter: not a static binary", bin)
		}
	}
	f.Close()
	out, err := exec.Command(bin, "-version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s -version: %v\n%s", bin, err, out)
	}
	got := strings.TrimSpace(string(out))
	if !strings.HasPrefix(got, "mergetest v0.0.0-releasetest (commit ") || strings.Contains(got, "commit unknown") {
		t.Errorf("-version printed %q, want the stamped version and commit", got)
	}
	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	if err != nil || !strings.Contains(string(sums), filepath.Base(bin)) {
		t.Errorf("SHA256SUMS does not list %s (err %v):\n%s", filepath.Base(bin), err, sums)
	}
}
