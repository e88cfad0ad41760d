// Command mergetest runs a Lua merge program against test cases kept in YAML files, so that
// applications can test their merges in CI before they send them to a store:
//
//	cd examples && go run ./mergetest mergetest/testdata/visits.yaml
//
// A YAML file names a program (a .lua file beside it, or inline source) and lists cases. Each
// case gives the current document (absent: no record), the incoming document, the context
// (store, namespace, dataset, key, key_type, time, attempt) and one expectation: the
// resulting document (compared member by member, numbers by exact value), an action (delete
// or unchanged), or an error whose message contains a text. The program runs in
// luamerge's sandbox with its limits, exactly as a store runs it; a file may lower the limits.
//
// Output is one line per case and a last line "N passed, M failed". The exit status is 0 when
// every case passed, 1 when one failed, 2 when a file could not be read.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/tributary-dev/tributary/internal/buildinfo"
	"github.com/tributary-dev/tributary/luamerge"
)

func main() {
	verbose := flag.Bool("v", false, "print passing cases too")
	version := flag.Bool("version", false, "print the build's version and exit")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: mergetest [-v] cases.yaml...\n       mergetest -version")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *version {
		fmt.Println(buildinfo.Summary("mergetest"))
		return
	}
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	passed, failed, err := run(context.Background(), os.Stdout, *verbose, flag.Args()...)
	fmt.Printf("%d passed, %d failed\n", passed, failed)
	switch {
	case err != nil:
		fmt.Fprintln(os.Stderr, "mergetest:", err)
		os.Exit(2)
	case failed > 0:
		os.Exit(1)
	}
}

// run runs the cases of every file and reports each failure (and with verbose each pass) to
// out.
func run(ctx context.Context, out io.Writer, verbose bool, files ...string) (passed, failed int, err error) {
	for _, file := range files {
		s, source, err := loadSuite(file)
		if err != nil {
			return passed, failed, err
		}
		engine, err := luamerge.New(s.options())
		if err != nil {
			return passed, failed, fmt.Errorf("%s: %w", file, err)
		}
		for i, c := range s.Cases {
			name := c.Name
			if name == "" {
				name = fmt.Sprintf("case %d", i+1)
			}
			call, err := c.call(source)
			if err != nil {
				return passed, failed, fmt.Errorf("%s: %s: %w", file, name, err)
			}
			res, mergeErr := engine.Merge(ctx, call)
			why, err := c.check(res, mergeErr)
			if err != nil {
				return passed, failed, fmt.Errorf("%s: %s: %w", file, name, err)
			}
			if why != "" {
				failed++
				fmt.Fprintf(out, "FAIL %s: %s: %s\n", file, name, why)
				continue
			}
			passed++
			if verbose {
				fmt.Fprintf(out, "ok   %s: %s\n", file, name)
			}
		}
	}
	return passed, failed, nil
}
