package doccheck

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// A command the documentation shows: where it was read, the directory it runs in (relative to
// the root), the package it names (go run / go build) and the file paths among its arguments.
type docCommand struct {
	where string
	dir   string
	pkg   string
	files []string
}

var (
	// goCmdRE: [cd DIR &&] go [-C DIR] run|build ARGS
	goCmdRE = regexp.MustCompile(`(?:\bcd\s+(\S+)\s*&&\s*)?\bgo\s+(?:-C\s+(\S+)\s+)?(run|build)\b(.*)`)
	// binCmdRE: cdcmirror|recordsvc [SUBCOMMAND] ... --config PATH, a built binary run from the root.
	binCmdRE = regexp.MustCompile(`(?:^|[\s/])(?:cdcmirror|recordsvc|mergetest)\b[^|;&]*?--config\s+(\S+)`)
	// placeholderRE: an argument that stands for something (FILE, $PWD/..., ${X}, <file>, ...).
	placeholderRE = regexp.MustCompile(`[$<>{}*%]|^[A-Z][A-Z_]*$|\.\.\.`)
)

// commandLines returns the lines of the repository's documentation in which commands are
// shown: every line of the Markdown pages, the comment lines of the YAML files and of the Go
// files (doc comments; not tests, not generated code), each with its "path:line".
func commandLines(t *testing.T) (where, text []string) {
	t.Helper()
	skipDir := map[string]bool{".git": true, "bin": true, "dist": true, "node_modules": true, ".testenv": true, "vendor": true}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (skipDir[d.Name()] || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		name := d.Name()
		var comment string
		switch {
		case strings.HasSuffix(name, ".md"):
		case strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml"):
			comment = "#"
		case strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") && !strings.HasSuffix(name, ".pb.go"):
			comment = "//"
		default:
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for n, l := range strings.Split(string(b), "\n") {
			if comment != "" {
				l = strings.TrimSpace(l)
				if !strings.HasPrefix(l, comment) {
					continue
				}
				l = strings.TrimPrefix(l, comment)
			}
			if strings.Contains(l, "go ") || strings.Contains(l, "--config") || strings.Contains(l, "make ") {
				where = append(where, rel+":"+strconv.Itoa(n+1))
				text = append(text, l)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return where, text
}

// cleanArg strips the punctuation prose puts around an argument.
func cleanArg(a string) string {
	return strings.Trim(a, "`'\",;:()[]")
}

// argsOf cuts a command's tail at the end of the shell command (a comment, a pipe, another
// command, the end of a parenthesis in prose) and splits it into arguments.
func argsOf(tail string) []string {
	for _, stop := range []string{" #", "&&", "||", ";", "|", ")", "  "} {
		if i := strings.Index(tail, stop); i >= 0 {
			tail = tail[:i]
		}
	}
	return strings.Fields(tail)
}

// isPath reports whether a program argument names a file of the tree (a relative path with
// a directory or a file extension the repository uses), as opposed to a flag, an address or a
// placeholder.
func isPath(a string) bool {
	if a == "" || strings.HasPrefix(a, "-") || strings.HasPrefix(a, "/") || placeholderRE.MatchString(a) {
		return false
	}
	if strings.Contains(a, "://") || strings.Count(a, ":") > 0 && !strings.Contains(a, "/") {
		return false // a URL or host:port
	}
	for _, ext := range []string{".yaml", ".yml", ".lua", ".json", ".md", ".go"} {
		if strings.HasSuffix(a, ext) {
			return true
		}
	}
	return false
}

// docCommands extracts the go run / go build commands and the --config paths the
// documentation shows.
func docCommands(t *testing.T) []docCommand {
	t.Helper()
	where, text := commandLines(t)
	var out []docCommand
	for i, l := range text {
		out = append(out, extractFrom(where[i], l)...)
	}
	return out
}

// extractFrom returns the commands of one line of documentation.
func extractFrom(where, l string) []docCommand {
	var out []docCommand
	// In prose a command sits between backticks; a code block's line is one command.
	for _, seg := range strings.Split(l, "`") {
		if m := goCmdRE.FindStringSubmatch(seg); m != nil {
			dir := "."
			if m[1] != "" {
				dir = cleanArg(m[1])
			}
			if m[2] != "" {
				dir = filepath.Join(dir, cleanArg(m[2]))
			}
			args := argsOf(m[4])
			c := docCommand{where: where, dir: dir}
			for j := 0; j < len(args); j++ {
				a := cleanArg(args[j])
				if c.pkg == "" {
					if a == "-o" || a == "-C" || a == "-tags" || a == "-ldflags" {
						j++ // the flag's value
						continue
					}
					if strings.HasPrefix(a, "-") {
						continue
					}
					if !strings.HasPrefix(a, ".") && !strings.HasSuffix(a, ".go") {
						break // prose ("go build it"), not a package
					}
					c.pkg = a
					continue
				}
				if isPath(a) {
					c.files = append(c.files, a)
				}
			}
			if c.pkg != "" {
				out = append(out, c)
			}
			continue
		}
		for _, m := range binCmdRE.FindAllStringSubmatch(seg, -1) {
			if a := cleanArg(m[1]); isPath(a) && strings.Contains(a, "/") {
				out = append(out, docCommand{where: where, dir: ".", files: []string{a}})
			}
		}
	}
	return out
}

// TestDocCommandsRun: every `go run` / `go build` the documentation shows (Markdown, YAML
// comments, Go doc comments) names a package that resolves from the directory the text runs
// it in (examples/ is a module of its own: `go run ./examples/recordsvc` from the root does not
// run), and every file it passes (a --config file, a test-case file) exists there; every
// `cdcmirror|recordsvc ... --config PATH` names a file that exists from the root.
func TestDocCommandsRun(t *testing.T) {
	cmds := docCommands(t)
	if len(cmds) < 5 {
		t.Fatalf("found only %d commands in the documentation: the extraction is broken", len(cmds))
	}
	t.Logf("%d commands checked", len(cmds))
	byDir := map[string]map[string][]string{} // dir -> package -> where
	for _, c := range cmds {
		if _, err := os.Stat(filepath.Join(root, c.dir)); err != nil {
			t.Errorf("%s: runs in %s, which does not exist", c.where, c.dir)
			continue
		}
		for _, f := range c.files {
			if _, err := os.Stat(filepath.Join(root, c.dir, f)); err != nil {
				t.Errorf("%s: %s (relative to %s) does not exist", c.where, f, c.dir)
			}
		}
		if c.pkg != "" {
			if byDir[c.dir] == nil {
				byDir[c.dir] = map[string][]string{}
			}
			byDir[c.dir][c.pkg] = append(byDir[c.dir][c.pkg], c.where)
		}
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("no go command on PATH: package paths cannot be checked (install Go or put its bin directory on PATH)")
	}
	for dir, pkgs := range byDir {
		for pkg, wheres := range pkgs {
			// -find: resolve the path in the module of dir without loading dependencies.
			cmd := exec.Command(gobin, "list", "-find", pkg)
			cmd.Dir = filepath.Join(root, dir)
			cmd.Env = append(os.Environ(), "GOWORK=off")
			if out, err := cmd.CombinedOutput(); err != nil {
				sort.Strings(wheres)
				t.Errorf("%s: go run/build %s in %s: %v: %s", strings.Join(wheres, ", "), pkg, dir, err, strings.TrimSpace(string(out)))
			}
		}
	}
}

// TestDocCommandsExtraction: the extraction sees the forms the documentation uses.
func TestDocCommandsExtraction(t *testing.T) {
	for _, tc := range []struct {
		line, dir, pkg string
		files          []string
	}{
		{"#   go -C examples run ./recordsvc --config recordsvc/memory.yaml", "examples", "./recordsvc", []string{"recordsvc/memory.yaml"}},
		{"cd examples && go run ./recordsvc --config recordsvc/memory.yaml   # no servers", "examples", "./recordsvc", []string{"recordsvc/memory.yaml"}},
		{"make quickstart   (or: cd examples && go run ./quickstart)", "examples", "./quickstart", nil},
		{`go -C examples build -o "$PWD/bin/cdcmirror" ./cdcmirror   # or a release binary`, "examples", "./cdcmirror", nil},
		{"run with: go run ./examples/mergetest examples/mergetest/testdata/visits.yaml", ".", "./examples/mergetest", []string{"examples/mergetest/testdata/visits.yaml"}},
		{"cdcmirror --config examples/cdcmirror/postgres.yaml", ".", "", []string{"examples/cdcmirror/postgres.yaml"}},
	} {
		var got *docCommand
		cs := extractFrom("x:1", tc.line)
		if len(cs) == 1 {
			got = &cs[0]
		}
		if got == nil || got.dir != tc.dir || got.pkg != tc.pkg || strings.Join(got.files, ",") != strings.Join(tc.files, ",") {
			t.Errorf("%q: got %+v, want dir %q pkg %q files %v", tc.line, cs, tc.dir, tc.pkg, tc.files)
		}
	}
}

var (
	// makeRE: `make TARGET` at the start of a command (a code line, a backticked command).
	makeRE       = regexp.MustCompile("(?:^\\s*|`|\\(or: |&&\\s*)make ([a-z][a-z0-9-]*)")
	makeTargetRE = regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):`)
)

// TestDocMakeTargets: every `make TARGET` the documentation shows is a target of the Makefile.
func TestDocMakeTargets(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range makeTargetRE.FindAllStringSubmatch(string(b), -1) {
		targets[m[1]] = true
	}
	where, text := commandLines(t)
	n := 0
	for i, l := range text {
		for _, m := range makeRE.FindAllStringSubmatch(l, -1) {
			n++
			if !targets[m[1]] {
				t.Errorf("%s: make %s: the Makefile has no such target", where[i], m[1])
			}
		}
	}
	if n < 5 {
		t.Fatalf("found only %d make commands: the extraction is broken", n)
	}
	t.Logf("%d make commands checked", n)
}
