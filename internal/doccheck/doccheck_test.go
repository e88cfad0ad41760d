package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/tributary-dev/tributary/mirror"
)

// root is the repository root, relative to this package's directory.
const root = "../.."

// markdownFiles are the pages whose links are checked (paths from the root; globs allowed).
var markdownFiles = []string{"README.md", "CHANGELOG.md", "DESIGN.md", "docs/*.md",
	"examples/cdcmirror/CONFIG.md", "examples/recordsvc/CONFIG.md"}

func pages(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, g := range markdownFiles {
		m, err := filepath.Glob(filepath.Join(root, g))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m...)
	}
	if len(out) < 4 {
		t.Fatalf("found only %v", out)
	}
	return out
}

// prose returns the page's lines outside fenced code blocks (nil for the lines inside), so
// that links and headings in examples are not taken for the page's own.
func prose(text string) []string {
	lines := strings.Split(text, "\n")
	in := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			in = !in
			lines[i] = ""
			continue
		}
		if in {
			lines[i] = ""
		}
	}
	return lines
}

var (
	linkRE    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	codeRE    = regexp.MustCompile("`[^`]*`")
	headingRE = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
)

// slug is GitHub's anchor for a heading: lower case, punctuation other than '-' and '_'
// dropped, spaces turned into '-'.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the anchors of a page's headings (duplicates numbered as GitHub does).
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range prose(text) {
		m := headingRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// TestMarkdownLinks: every relative link resolves to a file of the tree, and an anchor to a
// heading of the page it names.
func TestMarkdownLinks(t *testing.T) {
	for _, page := range pages(t) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, page)
		for n, l := range prose(string(b)) {
			l = codeRE.ReplaceAllString(l, "")
			for _, m := range linkRE.FindAllStringSubmatch(l, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				file := page
				if path != "" {
					file = filepath.Join(filepath.Dir(page), filepath.FromSlash(path))
					if _, err := os.Stat(file); err != nil {
						t.Errorf("%s:%d: link %q: no such file", rel, n+1, target)
						continue
					}
				}
				if anchor == "" || !strings.HasSuffix(file, ".md") {
					continue
				}
				tb, err := os.ReadFile(file)
				if err != nil {
					t.Errorf("%s:%d: link %q: %v", rel, n+1, target, err)
					continue
				}
				if !anchors(string(tb))[anchor] {
					t.Errorf("%s:%d: link %q: no heading with that anchor", rel, n+1, target)
				}
			}
		}
	}
}

var envRE = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// TestProductionGuideConfigs: the cdcmirror configurations docs/production.md shows are
// accepted by cdcmirror's parser.
func TestProductionGuideConfigs(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "docs/production.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	var cur []string
	in := false
	for _, l := range strings.Split(string(b), "\n") {
		switch {
		case !in && strings.TrimSpace(l) == "```yaml":
			in, cur = true, nil
		case in && strings.TrimSpace(l) == "```":
			in = false
			if len(cur) > 0 && strings.HasPrefix(cur[0], "# cdcmirror") {
				blocks = append(blocks, strings.Join(cur, "\n"))
			}
		case in:
			cur = append(cur, l)
		}
	}
	if len(blocks) < 2 {
		t.Fatalf("docs/production.md: %d cdcmirror configurations found, want at least 2", len(blocks))
	}
	for i, blk := range blocks {
		for _, m := range envRE.FindAllStringSubmatch(blk, -1) {
			t.Setenv(m[1], "doccheck-"+strings.ToLower(m[1]))
		}
		cfg, err := mirror.ParseConfig([]byte(blk))
		if err != nil {
			t.Errorf("docs/production.md, configuration %d (%s): %v", i+1, strings.SplitN(blk, "\n", 2)[0], err)
			continue
		}
		if len(cfg.Names()) == 0 {
			t.Errorf("docs/production.md, configuration %d: no pipeline", i+1)
		}
	}
}

var guideAnchorRE = regexp.MustCompile(`docs/production\.md#([A-Za-z0-9_-]+)`)

// TestGuideAnchorsNamedElsewhere: every docs/production.md#anchor that a file outside the
// Markdown pages names (alert rules' runbook links, dashboards, units) is a heading of the guide.
func TestGuideAnchorsNamedElsewhere(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "docs/production.md"))
	if err != nil {
		t.Fatal(err)
	}
	have := anchors(string(b))
	n := 0
	for _, dir := range []string{"observability", "packaging", "examples"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) {
					return filepath.SkipDir
				}
				return err
			}
			if d.IsDir() || strings.HasSuffix(path, ".md") {
				return nil
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			for _, m := range guideAnchorRE.FindAllStringSubmatch(string(data), -1) {
				n++
				if !have[m[1]] {
					t.Errorf("%s names docs/production.md#%s: no heading with that anchor", rel, m[1])
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d references checked", n)
}

var (
	metricSpanRE = regexp.MustCompile(`^(cdcmirror|recordsvc)_([a-z_]+?)(\*|\{.*\})?$`)
	quotedRE     = regexp.MustCompile(`"([a-z][a-z0-9_]*)"`)
)

// exported returns the metric names the collectors' sources define: cdcmirror's are
// mirrorprom's names under the namespace cdcmirror sets, recordsvc's its metrics.go's.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, f := range []struct{ prefix, path string }{
		{"cdcmirror_", "mirror/mirrorprom/mirrorprom.go"},
		{"recordsvc_", "examples/recordsvc/metrics.go"},
	} {
		b, err := os.ReadFile(filepath.Join(root, f.path))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range quotedRE.FindAllStringSubmatch(string(b), -1) {
			out[f.prefix+strings.TrimPrefix(m[1], f.prefix)] = true
		}
	}
	return out
}

// TestGuideMetricNames: every metric name docs/production.md shows in `code` (a name, a name
// with labels, or a prefix ending in _*) is one the binaries export.
func TestGuideMetricNames(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "docs/production.md"))
	if err != nil {
		t.Fatal(err)
	}
	have := exported(t)
	n := 0
	for _, span := range codeRE.FindAllString(string(b), -1) {
		m := metricSpanRE.FindStringSubmatch(strings.Trim(span, "`"))
		if m == nil || m[2] == "" {
			continue
		}
		name := m[1] + "_" + m[2]
		n++
		if m[3] == "*" {
			found := false
			for h := range have {
				found = found || strings.HasPrefix(h, name)
			}
			if !found {
				t.Errorf("docs/production.md: no metric starts with %s", name)
			}
			continue
		}
		if !have[name] {
			t.Errorf("docs/production.md: metric %s is not exported (mirror/mirrorprom, examples/recordsvc/metrics.go)", name)
		}
	}
	if n < 10 {
		t.Fatalf("docs/production.md: only %d metric names found", n)
	}
	t.Logf("%d metric names checked", n)
}
