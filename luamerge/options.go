package luamerge

import (
	"fmt"
	"time"
)

// Defaults of Options. Each limit is per run of a program (one Merge call).
const (
	DefaultMaxInstructions   = 10_000_000
	DefaultTimeout           = 2 * time.Second
	DefaultMaxInputBytes     = 8 << 20
	DefaultMaxOutputBytes    = 8 << 20
	DefaultMaxDepth          = 64
	DefaultMaxMemoryBytes    = 64 << 20
	DefaultMaxCallDepth      = 200
	DefaultMaxProgramBytes   = 256 << 10
	DefaultMaxCachedPrograms = 256
)

// Options configure an Engine. The zero value (or nil) gives the documented defaults; a
// negative limit is refused by New rather than read as "unlimited", because an unbounded merge
// program is a way to take a store process down.
type Options struct {
	// MaxInstructions bounds the Lua VM instructions of one run, counted exactly by the count
	// hook; library functions that loop (table.concat, table.insert, table.sort, string.rep, ...)
	// count their work against it too. Default DefaultMaxInstructions (10 million).
	MaxInstructions int64
	// Timeout bounds the wall-clock time of one run, on top of the caller's context.
	// Default DefaultTimeout (2s).
	Timeout time.Duration
	// MaxInputBytes limits the JSON size of Current and of Incoming, each.
	// Default DefaultMaxInputBytes (8 MiB, the store's default document limit).
	MaxInputBytes int
	// MaxOutputBytes limits the JSON size of the document a program returns.
	// Default DefaultMaxOutputBytes (8 MiB).
	MaxOutputBytes int
	// MaxDepth limits the nesting of objects and arrays in input and output documents (a
	// document's top-level object is depth 1). Default DefaultMaxDepth (64).
	MaxDepth int
	// MaxMemoryBytes bounds the memory a run may hold: every string, table slot, closure and
	// stack slot reachable from its VM, in the accounting described in the package
	// documentation (Memory). Default DefaultMaxMemoryBytes (64 MiB).
	MaxMemoryBytes int64
	// MaxCallDepth bounds nested Lua calls. Default DefaultMaxCallDepth (200).
	MaxCallDepth int
	// MaxProgramBytes limits the source size of a program. Default DefaultMaxProgramBytes
	// (256 KiB).
	MaxProgramBytes int
	// MaxCachedPrograms bounds the cache of compiled programs (least recently used ones go
	// first). Default DefaultMaxCachedPrograms (256).
	MaxCachedPrograms int
}

func (o *Options) withDefaults() (Options, error) {
	var c Options
	if o != nil {
		c = *o
	}
	if c.MaxInstructions < 0 || c.Timeout < 0 || c.MaxInputBytes < 0 || c.MaxOutputBytes < 0 ||
		c.MaxDepth < 0 || c.MaxMemoryBytes < 0 || c.MaxCallDepth < 0 || c.MaxProgramBytes < 0 || c.MaxCachedPrograms < 0 {
		return c, fmt.Errorf("luamerge: negative limit in Options; zero means the default")
	}
	if c.MaxInstructions == 0 {
		c.MaxInstructions = DefaultMaxInstructions
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxInputBytes == 0 {
		c.MaxInputBytes = DefaultMaxInputBytes
	}
	if c.MaxOutputBytes == 0 {
		c.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if c.MaxDepth == 0 {
		c.MaxDepth = DefaultMaxDepth
	}
	if c.MaxMemoryBytes == 0 {
		c.MaxMemoryBytes = DefaultMaxMemoryBytes
	}
	if c.MaxCallDepth == 0 {
		c.MaxCallDepth = DefaultMaxCallDepth
	}
	if c.MaxProgramBytes == 0 {
		c.MaxProgramBytes = DefaultMaxProgramBytes
	}
	if c.MaxCachedPrograms == 0 {
		c.MaxCachedPrograms = DefaultMaxCachedPrograms
	}
	return c, nil
}
