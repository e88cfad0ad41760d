package configtest

import (
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// heading is a Markdown heading: its level and text.
var heading = regexp.MustCompile(`^(#{1,6})\s+(.*)$`)

// backticked finds `code` spans.
var backticked = regexp.MustCompile("`([^`]+)`")

// keyPath is a code span that names a key path: "source", "sinks[].config",
// "stores.<name>.queue", "kafka_tls.ca_file".
var keyPath = regexp.MustCompile(`^[a-z_][a-z0-9_]*(?:\[\]|\.<name>|\.[a-z_][a-z0-9_]*)*$`)

// ReferenceKeys lists the keys a configuration reference (a CONFIG.md) documents: each key
// path in backticks in the first cell of a row of a table whose header's first cell is "key"
// or "field". A row's key is read inside the section its headings name: a heading whose code
// spans are key paths ("## `source`", "### `stores.<name>.queue`", "## `shutdown`, `log`")
// sets the section for what follows until a heading of its level or above; a heading
// without one keeps its parent's. A key that starts with the section's path (or one of them)
// is already whole; otherwise, under a heading naming one path P, it is P.key.
func ReferenceKeys(md string) []string {
	type level struct {
		depth int
		paths []string
	}
	var stack []level
	var out []string
	inTable := false
	for _, line := range strings.Split(md, "\n") {
		line = strings.TrimSpace(line)
		if m := heading.FindStringSubmatch(line); m != nil {
			depth := len(m[1])
			for len(stack) > 0 && stack[len(stack)-1].depth >= depth {
				stack = stack[:len(stack)-1]
			}
			var paths []string
			for _, c := range backticked.FindAllStringSubmatch(m[2], -1) {
				if keyPath.MatchString(c[1]) {
					paths = append(paths, c[1])
				}
			}
			if len(paths) == 0 && len(stack) > 0 {
				paths = stack[len(stack)-1].paths
			}
			stack = append(stack, level{depth, paths})
			inTable = false
			continue
		}
		if !strings.HasPrefix(line, "|") {
			inTable = false
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		first := strings.TrimSpace(cells[0])
		if first == "key" || first == "field" {
			inTable = true
			continue
		}
		if !inTable || strings.HasPrefix(first, "---") || strings.HasPrefix(first, ":--") {
			continue
		}
		var section []string
		if len(stack) > 0 {
			section = stack[len(stack)-1].paths
		}
		for _, c := range backticked.FindAllStringSubmatch(first, -1) {
			k := c[1]
			if !keyPath.MatchString(k) {
				continue
			}
			whole := len(section) != 1
			for _, p := range section {
				if k == p || strings.HasPrefix(k, p+".") || strings.HasPrefix(k, p+"[") {
					whole = true
				}
			}
			if !whole {
				k = section[0] + "." + k
			}
			out = append(out, k)
		}
	}
	return out
}

// CheckReference fails t for every key of accepted (what the parser or the configuration
// types accept: sections and their keys, as paths) that documented does not name -- a
// section counts as documented when its keys are -- and for every documented key that is
// not accepted. name is the reference's file, for the messages.
func CheckReference(t testing.TB, name string, documented, accepted []string) {
	t.Helper()
	doc := map[string]bool{}
	for _, k := range documented {
		doc[k] = true
	}
	ok := map[string]bool{}
	for _, k := range accepted {
		ok[k] = true
	}
	var missing, unknown []string
	for _, k := range accepted {
		if doc[k] {
			continue
		}
		section := slices.ContainsFunc(accepted, func(o string) bool {
			return strings.HasPrefix(o, k+".") || strings.HasPrefix(o, k+"[")
		})
		if !section {
			missing = append(missing, k)
		}
	}
	for k := range doc {
		if !ok[k] {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	if len(missing) > 0 {
		t.Errorf("%s does not document these keys (add a table row for each): %s", name, strings.Join(missing, ", "))
	}
	if len(unknown) > 0 {
		t.Errorf("%s documents keys the configuration does not accept: %s", name, strings.Join(unknown, ", "))
	}
	if len(documented) == 0 {
		t.Errorf("%s documents no key: its tables need a first column headed key or field", name)
	}
}
