package config

import (
	"errors"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tributary-dev/tributary/internal/yamlenv"
)

// Parse reads a YAML document and expands the ${NAME} references in its values
// ([yamlenv.ExpandNode]). It returns the document node; decode parts of it with [Decode].
func Parse(b []byte) (*yaml.Node, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, ScrubYAMLError(err)
	}
	if err := yamlenv.ExpandNode(&root); err != nil {
		return nil, err
	}
	return &root, nil
}

// Decode decodes n into v refusing keys v has no field for, so that a misspelt option is an
// error naming it and its line instead of being ignored. It is [DecodeAt] at the top level.
func Decode(n *yaml.Node, v any) error { return DecodeAt(n, v, "") }

// DecodeAt decodes n, the node of section (a key path such as "config" or "sinks[0].config";
// "" for a whole document), into v. Every unknown key ([CheckKeys]) is reported first, with
// its line, section, known keys and suggestion; then n is decoded as it is -- lines stay
// those of the file n was read from -- and each value of the wrong type is reported with its
// line and key path ("must be a whole number"). The error is [Problems] and quotes no value.
func DecodeAt(n *yaml.Node, v any, section string) error {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer {
		return errors.New("config: DecodeAt needs a pointer")
	}
	if ps := CheckKeys(n, t.Elem(), section); len(ps) > 0 {
		return ps
	}
	return DecodeValues(n, v, section)
}

// DecodeValues is [DecodeAt] without the check of keys (a caller that reported unknown keys
// itself and goes on to report the values too): keys v has no field for are ignored, and
// each value of the wrong type is a [Problem] with its line and key path. A value that fails
// is left at its zero value; the others are decoded.
func DecodeValues(n *yaml.Node, v any, section string) error {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer {
		return errors.New("config: DecodeValues needs a pointer")
	}
	err := n.Decode(v)
	if err == nil {
		return nil
	}
	return valueProblems(n, t.Elem(), section, err)
}

// KeyLines maps the path of every key of n ("listen.grpc", "stores.main.urls") and of every
// list element ("stores.main.urls[1]") to its line, so that a problem found after decoding,
// named by its path, can be given its line ([LineOf]).
func KeyLines(n *yaml.Node) map[string]int {
	out := map[string]int{}
	var walk func(n *yaml.Node, path string, depth int)
	walk = func(n *yaml.Node, path string, depth int) {
		if n == nil || depth > 100 {
			return
		}
		for n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path, depth+1)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := JoinKey(path, n.Content[i].Value)
				if _, dup := out[k]; !dup {
					out[k] = n.Content[i].Line
				}
				walk(n.Content[i+1], k, depth+1)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				k := path + "[" + strconv.Itoa(i) + "]"
				out[k] = c.Line
				walk(c, k, depth+1)
			}
		}
	}
	walk(n, "", 0)
	return out
}

// LineOf is the line of key in lines ([KeyLines]), or of its nearest enclosing key; 0 when
// none is in the file.
func LineOf(lines map[string]int, key string) int {
	for k := key; k != ""; {
		if l, ok := lines[k]; ok {
			return l
		}
		i := strings.LastIndexAny(k, ".[")
		if i < 0 {
			break
		}
		k = k[:i]
	}
	return 0
}

// valueAt is a value node the walker met: its line, its key path and the Go type it decodes
// into.
type valueAt struct {
	line int
	path string
	typ  reflect.Type
	node *yaml.Node
}

// values lists the value nodes of n with their key paths and types, in document order.
func values(n *yaml.Node, t reflect.Type, path string, out *[]valueAt, depth int) {
	typedWalker{value: func(n *yaml.Node, t reflect.Type, path string) {
		*out = append(*out, valueAt{n.Line, path, t, n})
	}}.walk(n, t, path, depth)
}

// ExpandAt is [yamlenv.ExpandNode] for the node of section that decodes into the Go type t:
// every ${NAME} in a value is expanded in place, and every reference that cannot be (an unset
// variable, a malformed reference) is a problem naming its line and key path, all at once.
func ExpandAt(n *yaml.Node, t reflect.Type, section string) Problems {
	var at []valueAt
	values(n, t, section, &at, 0)
	paths := make(map[*yaml.Node]string, len(at))
	for _, a := range at {
		paths[a.node] = a.path
	}
	var ps Problems
	var walk func(n *yaml.Node, depth int)
	walk = func(n *yaml.Node, depth int) {
		if depth > 100 {
			return
		}
		switch n.Kind {
		case yaml.ScalarNode:
			if err := yamlenv.ExpandNode(n); err != nil {
				key, ok := paths[n]
				if !ok {
					key = section
				}
				ps = append(ps, Problem{Line: n.Line, Key: key,
					Message: strings.TrimPrefix(err.Error(), "line "+strconv.Itoa(n.Line)+": ")})
			}
		case yaml.MappingNode:
			for i := 1; i < len(n.Content); i += 2 {
				walk(n.Content[i], depth+1)
			}
		default:
			for _, c := range n.Content {
				walk(c, depth+1)
			}
		}
	}
	walk(n, 0)
	return ps
}

// explicitTag finds the tag of yaml's messages about a value its explicit tag does not fit:
// "cannot decode !!str `x` as a !!float", "!!binary value contains invalid base64 data".
var explicitTag = regexp.MustCompile(`(?:as a (!![a-z]+)$|^(?:yaml: )?(!![a-z]+) value )`)

// lineMessage is yaml's "line N: message", from a type error or an Unmarshaler.
var lineMessage = regexp.MustCompile(`(?s)^(?:yaml: )?line (\d+): (.*)$`)

// valueProblems turns a decoding error of n into Problems: each message's line finds the
// value's key path (on a line holding several values, the one whose Go type the message
// names), and the message says what the value must be, never what it was.
func valueProblems(n *yaml.Node, t reflect.Type, section string, err error) error {
	var msgs []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	var at []valueAt
	values(n, t, section, &at, 0)
	var ps Problems
	for _, m := range msgs {
		sm := lineMessage.FindStringSubmatch(m)
		if sm == nil {
			// A value whose explicit tag it does not fit ("!!float hunter2") is named
			// without a line: the first value carrying that tag is the one.
			p := Problem{Key: section, Message: scrub(strings.TrimPrefix(m, "yaml: "))}
			if tm := explicitTag.FindStringSubmatch(m); tm != nil {
				tag := tm[1] + tm[2]
				if tm[1] != "" {
					p.Message = "does not fit its explicit tag " + tag
				}
				for _, a := range at {
					if a.node.Kind == yaml.ScalarNode && a.node.Tag == tag && a.node.Style&yaml.TaggedStyle != 0 {
						p.Line, p.Key = a.line, a.path
						break
					}
				}
			}
			ps = append(ps, p)
			continue
		}
		line, _ := strconv.Atoi(sm[1])
		msg := sm[2]
		goType := ""
		if cu := cannotUnmarshal.FindStringSubmatch("line " + sm[1] + ": " + msg); cu != nil {
			goType = cu[3]
		}
		var cands []valueAt
		for _, a := range at {
			if a.line == line {
				cands = append(cands, a)
			}
		}
		pick := valueAt{line: line, path: section}
		switch {
		case len(cands) == 1:
			pick = cands[0]
		case len(cands) > 1:
			// The innermost value of the type the message names; without a type (an
			// Unmarshaler's own message), the innermost that unmarshals itself.
			pick = cands[len(cands)-1]
			for i := len(cands) - 1; i >= 0; i-- {
				c := cands[i]
				if (goType != "" && c.typ.String() == goType) || (goType == "" && opaque(c.typ) && c.typ.Kind() != reflect.Interface) {
					pick = c
					break
				}
			}
		}
		p := Problem{Line: line, Key: pick.path}
		if goType != "" {
			p.Message = "must be " + TypeWord(pick.typ)
			if strings.Contains(msg, "!!int") && isNumber(pick.typ) {
				p.Message = "must be a whole number within the range of " + goType
			}
		} else {
			p.Message = scrub(msg)
		}
		ps = append(ps, p)
	}
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].Line < ps[j].Line })
	return ps
}

// scrub cuts what a message of yaml quotes of a value.
func scrub(m string) string { return quoted.ReplaceAllString(ScrubYAMLMessage(m), "") }

func isNumber(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// TypeWord says in words what a value of Go type t is written as: "a whole number", "true or
// false", "a duration such as \"30s\"", "a list", "a mapping", "text".
func TypeWord(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeOf(Duration(0)) || t == reflect.TypeOf(time.Duration(0)):
		return `a duration such as "30s"`
	case isNumber(t):
		return "a whole number"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Struct, reflect.Map:
		return "a mapping"
	}
	return "text"
}

// ScrubYAMLError keeps yaml's messages (line numbers, field names, the Go type a value
// should have had) but cuts what they quote of the document's values: yaml writes the first
// characters of the scalar that failed to decode ("cannot unmarshal !!str `hunter2` into
// int"), and of a composite map key ("invalid map key: ..."); after ${NAME} expansion such
// a value may be a secret. Key names stay: they are the document's structure.
func ScrubYAMLError(err error) error {
	if err == nil {
		return nil
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		m := err.Error()
		if i := strings.Index(m, "invalid map key"); i >= 0 {
			return errors.New(m[:i] + "invalid map key (a key must be text, not a list or a mapping)")
		}
		if strings.Contains(m, "`") {
			// "cannot decode !!str `hunter2` as a !!float": an explicit tag the value does
			// not fit.
			return errors.New(quoted.ReplaceAllString(m, ""))
		}
		return err
	}
	out := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		out[i] = ScrubYAMLMessage(m)
	}
	return errors.New(strings.Join(out, "; "))
}

// cannotUnmarshal is yaml's type error: the line, the node's tag, the quoted (truncated)
// value, and the Go type. The value may hold anything, "` into " included, but the Go type
// never holds a backtick, so the last "` into " ends the value.
var cannotUnmarshal = regexp.MustCompile("(?s)^(line \\d+: )?cannot unmarshal (\\S+)(?: `.*`)? into ([^`]+)$")

// quoted is a value yaml quotes in backticks.
var quoted = regexp.MustCompile("(?s) ?`.*`")

// yamlTag is a tag yaml resolves by itself (!!str, !!int, ...); a tag the author wrote
// (!mine) is named only as such.
var yamlTag = regexp.MustCompile(`^!![a-z]+$`)

// ScrubYAMLMessage is [ScrubYAMLError] for one message of a yaml.TypeError.
func ScrubYAMLMessage(m string) string {
	sm := cannotUnmarshal.FindStringSubmatch(m)
	if sm == nil {
		if i := strings.Index(m, "cannot unmarshal"); i >= 0 {
			return m[:i] + "cannot unmarshal a value of the wrong type"
		}
		return m
	}
	tag := sm[2]
	if !yamlTag.MatchString(tag) {
		tag = "a tagged value"
	}
	return sm[1] + "cannot unmarshal " + tag + " into " + sm[3]
}
