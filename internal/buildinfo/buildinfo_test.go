package buildinfo

import (
	"runtime"
	"strings"
	"testing"
)

func TestSummaryStamped(t *testing.T) {
	old := Version
	t.Cleanup(func() { Version = old })
	Version = "v9.8.7"
	got := Summary("cdcmirror")
	if !strings.HasPrefix(got, "cdcmirror v9.8.7 (") {
		t.Fatalf("Summary = %q, want the stamped version after the program name", got)
	}
	if !strings.Contains(got, runtime.Version()) || !strings.Contains(got, runtime.GOOS+"/"+runtime.GOARCH) {
		t.Fatalf("Summary = %q, want the toolchain and platform", got)
	}
}

func TestSummaryUnstamped(t *testing.T) {
	old := Version
	t.Cleanup(func() { Version = old })
	Version = ""
	if v := Read().Version; v == "" {
		t.Fatal("Read().Version is empty, want a fallback (module version or devel)")
	}
}
