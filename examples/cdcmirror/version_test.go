package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestVersionFlag(t *testing.T) {
	for _, arg := range []string{"--version", "-version", "version"} {
		var out, errOut bytes.Buffer
		if err := command(context.Background(), []string{arg}, &out, &errOut, nil); err != nil {
			t.Fatalf("cdcmirror %s: %v", arg, err)
		}
		if got := out.String(); !strings.HasPrefix(got, "cdcmirror ") || !strings.Contains(got, "go1.") {
			t.Errorf("cdcmirror %s printed %q, want \"cdcmirror <version> (commit …, go…, os/arch)\"", arg, got)
		}
	}
}
