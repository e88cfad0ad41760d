package config

import (
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Problem is one thing wrong with a configuration document, at one line of the file. Every
// configuration error of the project's binaries is written from it, so that they all read
// alike:
//
//	line 7: unknown key "publicaton" in source: did you mean "publication"? (known: type, dsn, ...)
//	line 12: sinks[0].config.batch.max_docs: must be a whole number
//
// It never holds a value of the document: values may be secrets.
type Problem struct {
	// Line is the line in the file (0: unknown, or the whole document).
	Line int
	// Key is where the problem is: the path of the key ("sinks[0].config.batch.max_docs",
	// "stores.main.queue.kind"); for an unknown key, the section that holds it ("" the top
	// level).
	Key string
	// Message says what is wrong ("must be a whole number"); empty for an unknown key, whose
	// sentence [Problem.Sentence] writes from Unknown, Known and Suggestion.
	Message string
	// Unknown is the key the section has no field for, "" for other problems.
	Unknown string
	// Known are the keys the section accepts, in the order its type declares them.
	Known []string
	// Suggestion is the known key Unknown is likely a misspelling of ([Suggest]), or "".
	Suggestion string
}

// Sentence is the problem without its line and, but for an unknown key, without its key:
// `unknown key "x" in source: did you mean "y"? (known: a, b)` or "must be a whole number".
func (p Problem) Sentence() string {
	if p.Unknown == "" {
		return p.Message
	}
	return UnknownKeySentence(p.Unknown, p.Key, p.Known, p.Suggestion)
}

// Text is the problem without its line: `unknown key ...` or "key: message".
func (p Problem) Text() string {
	if p.Unknown != "" || p.Key == "" {
		return p.Sentence()
	}
	return p.Key + ": " + p.Message
}

// String is "line N: " and Text (no line prefix when Line is 0).
func (p Problem) String() string {
	if p.Line > 0 {
		return "line " + strconv.Itoa(p.Line) + ": " + p.Text()
	}
	return p.Text()
}

// In moves the problem into a section: its Key gets prefix ("sinks[0]") in front, for a
// document read as part of a larger one.
func (p Problem) In(prefix string) Problem {
	p.Key = JoinKey(prefix, p.Key)
	return p
}

// JoinKey writes the path of key inside section: "source" + "slot" is "source.slot",
// "sinks" + "[0]" is "sinks[0]"; an empty part is left out.
func JoinKey(section, key string) string {
	switch {
	case section == "":
		return key
	case key == "":
		return section
	case strings.HasPrefix(key, "["):
		return section + key
	}
	return section + "." + key
}

// UnknownKeySentence is the one wording of an unknown key: `unknown key "x" in section: did
// you mean "y"? (known: a, b, c)`, "at the top level:" for section "". The key is quoted (it
// is the document's structure, not a value); suggestion may be "".
func UnknownKeySentence(key, section string, known []string, suggestion string) string {
	var b strings.Builder
	b.WriteString("unknown key " + strconv.Quote(key))
	if section == "" {
		b.WriteString(" at the top level:")
	} else {
		b.WriteString(" in " + section + ":")
	}
	if suggestion != "" {
		b.WriteString(" did you mean " + strconv.Quote(suggestion) + "?")
	}
	b.WriteString(" (known: " + strings.Join(known, ", ") + ")")
	return b.String()
}

// Problems is every problem of a document; as an error it writes them in line order, joined
// by "; ".
type Problems []Problem

func (ps Problems) Error() string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return strings.Join(out, "; ")
}

// Suggest returns the known key that key is most likely a misspelling of, or "": one that
// differs only in case or in '-' for '_', else the nearest by edit distance (letters
// inserted, deleted, replaced or two neighbours swapped) when it is close -- at most 1 for
// keys up to 4 letters, 2 up to 8, 3 beyond -- and no other known key is as close.
func Suggest(key string, known []string) string {
	norm := func(s string) string { return strings.ReplaceAll(strings.ToLower(s), "-", "_") }
	nk := norm(key)
	for _, k := range known {
		if norm(k) == nk {
			return k
		}
	}
	limit := 3
	switch n := len([]rune(nk)); {
	case n <= 4:
		limit = 1
	case n <= 8:
		limit = 2
	}
	best, bestD, tie := "", limit+1, false
	for _, k := range known {
		d := editDistance(nk, norm(k))
		switch {
		case d < bestD:
			best, bestD, tie = k, d, false
		case d == bestD:
			tie = true
		}
	}
	if best == "" || tie {
		return ""
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// UnknownKeyProblem builds the problem of an unknown key k (its node, for the line) in
// section, whose known keys are known.
func UnknownKeyProblem(k *yaml.Node, section string, known []string) Problem {
	return Problem{Line: k.Line, Key: section, Unknown: k.Value, Known: known, Suggestion: Suggest(k.Value, known)}
}

var (
	nodeType        = reflect.TypeOf(yaml.Node{})
	unmarshalerType = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()
)

// opaque reports whether t reads its YAML itself (a yaml.Node, a yaml.Unmarshaler, an
// interface): the walker does not look inside it.
func opaque(t reflect.Type) bool {
	return t == nodeType || t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) ||
		t.Kind() == reflect.Interface
}

// keyField is one key of a struct: its name in YAML and the type of its value.
type keyField struct {
	name string
	typ  reflect.Type
}

// structKeys lists the keys of struct type t from its yaml tags (a field without one is its
// lower-cased name, as yaml reads it; "-" is left out; ",inline" structs give their own
// keys). anyKey is true when an inline map takes every other key.
func structKeys(t reflect.Type) (keys []keyField, anyKey bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.PkgPath != "" && !f.Anonymous {
			continue // unexported: yaml ignores it
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		inline := false
		for _, o := range strings.Split(opts, ",") {
			if o == "inline" {
				inline = true
			}
		}
		if inline {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch ft.Kind() {
			case reflect.Struct:
				sub, any := structKeys(ft)
				keys = append(keys, sub...)
				anyKey = anyKey || any
			case reflect.Map:
				anyKey = true
			}
			continue
		}
		if f.PkgPath != "" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		keys = append(keys, keyField{name, f.Type})
	}
	return keys, anyKey
}

// CheckKeys reports every key of n that the Go type t -- what n is decoded into -- has no
// field for, each with its line, its section (section joined with the path inside n), the
// known keys and a suggestion ([Suggest]). It follows structs (inline ones included),
// pointers, slices and arrays, and maps with string keys; it does not look into a yaml.Node,
// a type that unmarshals itself, or an interface. A node of the wrong kind for its type is
// left to the decoder. Aliases are followed; "<<" merge keys are checked as part of the
// mapping they merge into.
func CheckKeys(n *yaml.Node, t reflect.Type, section string) Problems {
	var ps Problems
	checkKeys(n, t, section, &ps, 0)
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].Line < ps[j].Line })
	return ps
}

func checkKeys(n *yaml.Node, t reflect.Type, path string, ps *Problems, depth int) {
	typedWalker{unknown: func(k *yaml.Node, path string, known []string) {
		*ps = append(*ps, UnknownKeyProblem(k, path, known))
	}}.walk(n, t, path, depth)
}

// typedWalker walks a YAML node beside the Go type it decodes into: value (when set) sees
// every node with its type and key path, in document order; unknown (when set) every key of a
// struct's mapping that the struct has no field for, with the known keys. It follows aliases,
// structs (inline ones included; "<<" merge keys as part of the mapping they merge into),
// pointers, slices and arrays (not []byte), and maps with string keys; it does not look into
// a yaml.Node, a type that unmarshals itself, or an interface, nor into a node of the wrong
// kind for its type (left to the decoder).
type typedWalker struct {
	value   func(n *yaml.Node, t reflect.Type, path string)
	unknown func(k *yaml.Node, path string, known []string)
}

func (w typedWalker) walk(n *yaml.Node, t reflect.Type, path string, depth int) {
	if n == nil || depth > 100 {
		return
	}
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 1 {
			w.walk(n.Content[0], t, path, depth+1)
		}
		return
	}
	if w.value != nil {
		w.value(n, t, path)
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if opaque(t) {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return
		}
		keys, anyKey := structKeys(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind == yaml.ScalarNode && k.Value == "<<" && k.Tag == "!!merge" {
				w.walk(v, t, path, depth+1)
				if v.Kind == yaml.SequenceNode {
					for _, e := range v.Content {
						w.walk(e, t, path, depth+1)
					}
				}
				continue
			}
			j := slices.IndexFunc(keys, func(f keyField) bool { return f.name == k.Value })
			if j >= 0 {
				w.walk(v, keys[j].typ, JoinKey(path, k.Value), depth+1)
			} else if !anyKey && w.unknown != nil {
				known := make([]string, len(keys))
				for i, k := range keys {
					known[i] = k.name
				}
				w.unknown(k, path, known)
			}
		}
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode || t.Elem().Kind() == reflect.Uint8 {
			return
		}
		for i, e := range n.Content {
			w.walk(e, t.Elem(), path+"["+strconv.Itoa(i)+"]", depth+1)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode || t.Key().Kind() != reflect.String {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			w.walk(n.Content[i+1], t.Elem(), JoinKey(path, n.Content[i].Value), depth+1)
		}
	}
}

// MapKey stands for the name of an entry of a string-keyed map in the paths [Keys] lists:
// "stores.<name>.kind".
const MapKey = "<name>"

// Keys lists every key path the Go type t accepts, sections and their keys alike, in the
// order the types declare them: "batch", "batch.max_docs", "pipelines[].name",
// "stores.<name>.kind" ([MapKey]). It is what a configuration reference must document; a test
// compares the two.
func Keys(t reflect.Type) []string {
	var out []string
	listKeys(t, "", &out, map[reflect.Type]bool{})
	return out
}

func listKeys(t reflect.Type, path string, out *[]string, seen map[reflect.Type]bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if opaque(t) || seen[t] {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		seen[t] = true
		defer delete(seen, t)
		keys, _ := structKeys(t)
		for _, k := range keys {
			p := JoinKey(path, k.name)
			*out = append(*out, p)
			listKeys(k.typ, p, out, seen)
		}
	case reflect.Slice, reflect.Array:
		listKeys(t.Elem(), path+"[]", out, seen)
	case reflect.Map:
		if t.Key().Kind() == reflect.String {
			listKeys(t.Elem(), JoinKey(path, MapKey), out, seen)
		}
	}
}

// LeafKeys is [Keys] without the sections: the paths whose value is not itself a mapping
// of known keys (a list of such mappings, a map of them).
func LeafKeys(t reflect.Type) []string {
	all := Keys(t)
	var out []string
	for i, k := range all {
		if i+1 < len(all) && (strings.HasPrefix(all[i+1], k+".") || strings.HasPrefix(all[i+1], k+"[]")) {
			continue
		}
		out = append(out, k)
	}
	return out
}
