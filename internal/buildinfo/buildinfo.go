// Package buildinfo tells which build of a Tributary binary is running: the version `make
// release` stamps into it (-ldflags -X), else what the Go toolchain recorded (module version,
// VCS revision), else "devel".
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is set by `make release`:
//
//	-ldflags "-X github.com/tributary-dev/tributary/internal/buildinfo.Version=v0.2.0"
//
// Empty in a plain `go build`; Summary then falls back to the build's own record.
var Version string

// Commit is the VCS commit `make release` stamps beside Version (the toolchain's own record,
// when present, is used otherwise).
var Commit string

// Info describes one build.
type Info struct {
	Version  string // a release version (v0.2.0), a module pseudo-version, or "devel"
	Revision string // the VCS commit, when the toolchain recorded it ("" otherwise)
	Modified bool   // the work tree had uncommitted changes at build time
	Go       string // the toolchain, e.g. go1.26.0
	Platform string // GOOS/GOARCH
}

// Read returns this binary's build information.
func Read() Info {
	in := Info{Version: Version, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if in.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			in.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				in.Revision = s.Value
			case "vcs.modified":
				in.Modified = s.Value == "true"
			}
		}
	}
	if Commit != "" {
		in.Revision, in.Modified = Commit, false
	}
	if in.Version == "" {
		in.Version = "devel"
	}
	return in
}

// Summary is the line a binary's --version prints: "cdcmirror v0.2.0 (commit 1a2b3c4d5e6f,
// go1.26.0, linux/amd64)".
func Summary(program string) string {
	in := Read()
	commit := "commit unknown"
	if in.Revision != "" {
		rev := in.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		commit = "commit " + rev
		if in.Modified {
			commit += "+modified"
		}
	}
	return fmt.Sprintf("%s %s (%s, %s, %s)", program, in.Version, commit, in.Go, in.Platform)
}
