// Package configtest holds what the configuration decoders' fuzz targets share: seeds with a
// marker planted in their values, and the oracle that no error text quotes a value.
//
// A value of a configuration may be a credential (a password, a DSN with its password, an API
// key), so no decoder may repeat one back in an error. [Plant] writes [Marker] into the scalar
// values of a seed document (directly, and through a ${NAME} reference to [SecretEnv]), and
// [CheckNoValue] fails a test whose error text holds the marker, unless the input put it where
// errors may quote: a key, an anchor or tag name, the name inside ${...}.
package configtest

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// Marker is planted into values; it is short because yaml quotes only the first seven bytes
// of a long value.
const Marker = "Qz7"

// SecretEnv is the environment variable the planted ${NAME} references read; Setenv sets it
// to a value starting with Marker.
const SecretEnv = "TRIBUTARY_FUZZ_CONFIG_SECRET"

// ExampleEnv are the variables the repository's example configurations reference, with
// values that make them valid; the credentials among them hold Marker, so an error quoting a
// DSN or a password is caught too.
var ExampleEnv = map[string]string{
	"TRIBUTARY_PG_DSN":         "postgres://tributary:" + Marker + "pw@127.0.0.1:35432/tributary?sslmode=disable",
	"TRIBUTARY_MYSQL_DSN":      "tributary:" + Marker + "pw@tcp(127.0.0.1:33306)/tributary",
	"TRIBUTARY_ES_URL":         "http://127.0.0.1:39200",
	"TRIBUTARY_OPENSEARCH_URL": "http://127.0.0.1:39201",
	"ES_PASSWORD":              Marker + "-es-password",
	"ES_API_KEY":               Marker + "-es-api-key",
	"OS_PASSWORD":              Marker + "-os-password",
	"KAFKA_PASSWORD":           Marker + "-kafka-password",
	"CRM_MONGO_URI":            "mongodb://crm:" + Marker + "pw@127.0.0.1:37017/crm",
}

// Setenv sets SecretEnv and ExampleEnv for the test or fuzz target.
func Setenv(tb interface{ Setenv(k, v string) }) {
	tb.Setenv(SecretEnv, Marker+"-env-secret")
	for k, v := range ExampleEnv {
		tb.Setenv(k, v)
	}
}

// Files reads the named files (relative to the test's package directory); a file that cannot
// be read fails the test, so a moved example is noticed.
func Files(tb testing.TB, paths ...string) []string {
	tb.Helper()
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

var yamlBlock = regexp.MustCompile("(?ms)^```ya?ml\\n(.*?)^```")

// MarkdownYAML returns the ```yaml blocks of a Markdown text.
func MarkdownYAML(md string) []string {
	var out []string
	for _, m := range yamlBlock.FindAllStringSubmatch(md, -1) {
		out = append(out, m[1])
	}
	return out
}

// Plant returns doc and variants of it: every scalar value prefixed with Marker, and each
// scalar value in turn replaced by Marker text, by a ${SecretEnv} reference, and by Marker
// prefixed to it (so one error at a time reaches the validators). Keys are left alone. A doc
// that is not YAML is returned alone.
func Plant(doc string) []string {
	out := []string{doc}
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(doc), &root); err != nil || root.Kind == 0 {
		return out
	}
	var values []*yaml.Node
	collectValues(&root, &values)
	render := func() {
		b, err := yaml.Marshal(&root)
		if err == nil {
			out = append(out, string(b))
		}
	}
	for _, v := range values {
		v.Value = Marker + v.Value
	}
	render()
	for _, v := range values {
		v.Value = strings.TrimPrefix(v.Value, Marker)
	}
	for _, v := range values {
		orig, tag, style := v.Value, v.Tag, v.Style
		for _, alt := range []struct{ value, tag string }{
			{Marker + "-secret-value", "!!str"},
			{"${" + SecretEnv + "}", ""},
			{Marker + orig, "!!str"},
		} {
			v.Value, v.Tag, v.Style = alt.value, alt.tag, 0
			render()
		}
		v.Value, v.Tag, v.Style = orig, tag, style
	}
	return out
}

func collectValues(n *yaml.Node, dst *[]*yaml.Node) {
	switch n.Kind {
	case yaml.ScalarNode:
		*dst = append(*dst, n)
	case yaml.MappingNode:
		for i := 1; i < len(n.Content); i += 2 {
			collectValues(n.Content[i], dst)
		}
	default:
		for _, c := range n.Content {
			collectValues(c, dst)
		}
	}
}

var (
	// envName: a ${NAME} with the marker in its name; an unset variable is named.
	envName = regexp.MustCompile(`\$\{[^}]*` + Marker)
	// nameLike: the marker in an anchor, alias or tag name, which parse errors may name.
	nameLike = regexp.MustCompile(`[*&!][^\s,\[\]{}]*` + Marker)
)

// MayQuote reports whether doc puts Marker where an error may legitimately show it: in a
// mapping key (or anything inside a non-scalar key), an anchor, alias or tag name, or the
// name of a ${...} reference.
func MayQuote(doc []byte) bool {
	if !bytes.Contains(doc, []byte(Marker)) {
		return false
	}
	if envName.Match(doc) || nameLike.Match(doc) {
		return true
	}
	var root yaml.Node
	if err := yaml.Unmarshal(doc, &root); err != nil {
		// The scanner's and parser's messages quote nothing of the text; a key the marker
		// may be in is unknown, so the check is kept.
		return false
	}
	return inKey(&root, false)
}

func inKey(n *yaml.Node, key bool) bool {
	if key && strings.Contains(n.Value, Marker) {
		return true
	}
	if strings.Contains(n.Anchor, Marker) || strings.Contains(n.Tag, Marker) {
		return true
	}
	if n.Kind == yaml.MappingNode {
		for i, c := range n.Content {
			if inKey(c, key || i%2 == 0) {
				return true
			}
		}
		return false
	}
	for _, c := range n.Content {
		if inKey(c, key) {
			return true
		}
	}
	return false
}

// CheckNoValue fails t when err's text holds Marker although doc put it only in values.
func CheckNoValue(t testing.TB, doc []byte, err error) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), Marker) || MayQuote(doc) {
		return
	}
	t.Fatalf("the error quotes a value of the configuration: %v", err)
}
