package luamerge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/internal/jsonenc"
	"github.com/tributary-dev/tributary/store"
)

// The JSON bridge's fuzz target: documents in, through a program, and back out.
const (
	fuzzIdentity = "return function(c) return c end"
	fuzzIncoming = "return function(c, i) return i end"
	// fuzzTouch changes one member, n, when it is a plain number, and sets another.
	fuzzTouch = `return function(c)
  if type(c.n) == "number" then c.n = c.n + 1 end
  c.touched = true
  return c
end`
)

// Limits of the small engine, low enough for the fuzzer's inputs to reach them.
const (
	smallInput  = 256
	smallOutput = 160
	smallDepth  = 4
)

// FuzzBridge runs arbitrary JSON documents (times: date-time pointers, split at NUL) through
// the identity as current and as incoming, and through fuzzTouch, on an engine with the
// default limits and on one with small ones. It must never panic; it must accept exactly the
// documents encoding/json reads as one object of valid UTF-8 within the limits, and refuse
// every other with a *ProgramError of kind KindInvalid (KindTooLarge past the size limits)
// whose text is one of the bridge's own. What it accepts must come back as the document
// encoding/json reads, byte for byte in the bridge's own writing (member order kept, a
// repeated name in its first place with its last value, strings re-escaped) and with every
// number text the program left in place as it was (1.0, -0.0, 1E2, 12345678901234567890);
// fuzzTouch's result must differ in n and touched alone. Marked date-times must come back
// marked where the result holds them unchanged.
func FuzzBridge(f *testing.F) {
	for _, s := range []string{
		untouchedDoc,
		`{}`, `{"a":[],"b":{},"c":[[],{}],"d":null,"e":true,"f":false}`,
		`{"n":1.0,"touched":false,"x":1e400,"y":-0.0}`, `{"n":9007199254740993,"m":1e300}`, `{"n":"1"}`,
		`{"a":1,"a":2.50,"b":{"c":1,"c":[1.0]}}`,
		`{"s":"naïve 東京 🚀 \u0000\u001f\u2028 \ud83d\ude80 \ud800 \udc00x \"\\\/\b\f\n\r\t"}`,
		` {"a" : [ 1 , 2 ] } `, `[1]`, `{"a":}`, `{"a":01}`, `{"a":1,}`, `{"a":"` + "\xff" + `"}`, `{"a":-}`, `{"a":1}x`,
		strings.Repeat(`{"a":`, 64) + `1` + strings.Repeat(`}`, 64),
		strings.Repeat(`{"a":`, 65) + `1` + strings.Repeat(`}`, 65),
		`{"t":"2026-11-30T09:00:00Z","l":[{"u":"2026-11-30T09:00:00.5+01:00"}],"a/b~":"2026-01-01T00:00:00Z"}`,
	} {
		f.Add([]byte(s), "")
	}
	f.Add([]byte(`{"t":"2026-11-30T09:00:00Z","l":[{"u":"2026-11-30T09:00:00.5+01:00"}],"a/b~":"2026-01-01T00:00:00Z","touched":"2026-01-01T00:00:00Z"}`),
		"/t\x00/l/0/u\x00/a~1b~0\x00/touched")
	engines := []*Engine{newEngine(f, nil), newEngine(f, &Options{MaxInputBytes: smallInput, MaxOutputBytes: smallOutput, MaxDepth: smallDepth})}
	f.Fuzz(func(t *testing.T, doc []byte, times string) {
		var marks []string
		if times != "" {
			marks = strings.Split(times, "\x00")
			// The store validates the date-time pointers of every document it hands to a
			// merge; only such documents carry marks.
			if _, err := store.NewDocument(json.RawMessage(doc), marks...); err != nil {
				marks = nil
			}
		}
		tree, valid := readReference(doc)
		for ei, e := range engines {
			maxDepth, maxIn, maxOut := DefaultMaxDepth, DefaultMaxInputBytes, DefaultMaxOutputBytes
			if ei == 1 {
				maxDepth, maxIn, maxOut = smallDepth, smallInput, smallOutput
			}
			for _, program := range []string{fuzzIdentity, fuzzIncoming, fuzzTouch} {
				call := &store.MergeCall{Program: program, Context: store.MergeContext{Addr: testAddr, Time: testTime, Attempt: 1}}
				d := store.Document{JSON: doc, Times: marks}
				what := "current"
				if program == fuzzIncoming {
					call.Incoming, what = d, "incoming"
				} else {
					call.Current, call.Incoming = &d, store.Document{JSON: []byte(`{}`)}
				}
				res, err := e.Merge(context.Background(), call)
				switch {
				case len(doc) > maxIn:
					wantBridgeError(t, err, store.KindTooLarge, limitInputSize, what)
					continue
				case !valid:
					// A document both malformed and too deep fails at whichever comes first.
					wantBridgeError(t, err, store.KindInvalid, "malformed", what)
					continue
				case depthOf(tree) > maxDepth:
					wantBridgeError(t, err, store.KindInvalid, limitDepth, what)
					continue
				}
				want := tree
				if program == fuzzTouch {
					want = touched(tree)
				}
				wantJSON := writeReference(nil, want)
				if len(wantJSON) > maxOut {
					wantBridgeError(t, err, store.KindTooLarge, limitOutputSize, what)
					continue
				}
				if err != nil {
					t.Fatalf("%s: the merge of a valid document failed: %v", program, err)
				}
				if res.Action != store.MergeWrite || !bytes.Equal(res.Doc.JSON, wantJSON) {
					t.Fatalf("%s: the document came back changed:\n got %s\nwant %s", program, res.Doc.JSON, wantJSON)
				}
				wantTimes := marks
				if program == fuzzTouch {
					wantTimes = slices.DeleteFunc(slices.Clone(marks), func(p string) bool { return p == "/touched" || strings.HasPrefix(p, "/touched/") })
				}
				if !sameSet(res.Doc.Times, wantTimes) {
					t.Fatalf("%s: date-time pointers %q came back as %q", program, wantTimes, res.Doc.Times)
				}
			}
		}
	})
}

// bridgeErrorText matches the Reason of the bridge's refusals of a document.
var bridgeErrorText = regexp.MustCompile(`^(?:the (?:current|incoming) document is \d+ bytes, more than the limit of \d+|` +
	`(?:current|incoming) document (?:is not a JSON object|has data after its object|is nested deeper than \d+ levels|is nested too deeply for the Lua stack|` +
	`is not valid JSON: (?:unexpected end|invalid literal|invalid number|expected a member name|expected ':'|expected ',' or '[}\]]'|` +
	`invalid UTF-8|control character in string|unterminated string|invalid \\u escape|invalid escape) at byte \d+)|` +
	`the result is larger than \d+ bytes)$`)

// wantBridgeError requires err to be a refusal of kind and limit ("" for none; "malformed":
// none or the nesting depth) of the document named what ("current", "incoming"; the result
// for the output limit).
func wantBridgeError(t *testing.T, err error, kind store.ErrorKind, limit, what string) {
	t.Helper()
	var de *store.Error
	var pe *ProgramError
	if !errors.As(err, &de) || error(de) != err || !errors.As(err, &pe) || de.Err != error(pe) {
		t.Fatalf("failed with %v (%T), want a *store.Error around a *ProgramError", err, err)
	}
	wantLimit := pe.Limit == limit || limit == "malformed" && (pe.Limit == "" || pe.Limit == limitDepth)
	if de.Kind != kind || pe.Kind != kind || !wantLimit || pe.Line != 0 || pe.Addr != testAddr {
		t.Fatalf("failed with kind %v, limit %q, line %d: %v; want kind %v, limit %q", pe.Kind, pe.Limit, pe.Line, err, kind, limit)
	}
	if !bridgeErrorText.MatchString(pe.Reason) || (limit != limitOutputSize && !strings.Contains(pe.Reason, what)) {
		t.Fatalf("failed with a message that is not one of the bridge's own: %q", pe.Reason)
	}
}

// refValue is a JSON value as encoding/json reads it: objects keep their members' first
// places, with the last value of a repeated name; numbers keep their text.
type refValue struct {
	kind    byte // '{', '[', '"', 'n' (number), 't' (boolean), '0' (null)
	s       string
	b       bool
	names   []string
	members []*refValue
}

// readReference reads doc with encoding/json; ok is false unless doc is one JSON object of
// valid UTF-8 (encoding/json would replace invalid bytes; the bridge refuses them).
func readReference(doc []byte) (*refValue, bool) {
	if !json.Valid(doc) || !utf8.Valid(doc) || !bytes.HasPrefix(bytes.TrimLeft(doc, " \t\r\n"), []byte("{")) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var read func() *refValue
	read = func() *refValue {
		tok, _ := dec.Token()
		switch tok := tok.(type) {
		case json.Delim:
			v := &refValue{kind: byte(tok)}
			for dec.More() {
				if tok == '[' {
					v.members = append(v.members, read())
					continue
				}
				name, _ := dec.Token()
				m := read()
				if i := slices.Index(v.names, name.(string)); i >= 0 {
					v.members[i] = m
				} else {
					v.names, v.members = append(v.names, name.(string)), append(v.members, m)
				}
			}
			_, _ = dec.Token()
			return v
		case string:
			return &refValue{kind: '"', s: tok}
		case json.Number:
			return &refValue{kind: 'n', s: string(tok)}
		case bool:
			return &refValue{kind: 't', b: tok}
		}
		return &refValue{kind: '0'}
	}
	v := read()
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return v, true
}

func depthOf(v *refValue) int {
	if v.kind != '{' && v.kind != '[' {
		return 0
	}
	d := 0
	for _, m := range v.members {
		d = max(d, depthOf(m))
	}
	return d + 1
}

// writeReference writes v as the bridge does: no whitespace, strings escaped by jsonenc,
// numbers with their own text.
func writeReference(dst []byte, v *refValue) []byte {
	switch v.kind {
	case '{', '[':
		dst = append(dst, v.kind)
		for i, m := range v.members {
			if i > 0 {
				dst = append(dst, ',')
			}
			if v.kind == '{' {
				dst = append(jsonenc.AppendString(dst, v.names[i]), ':')
			}
			dst = writeReference(dst, m)
		}
		return append(dst, v.kind+2) // '}' and ']' follow '{' and '[' by two
	case '"':
		return jsonenc.AppendString(dst, v.s)
	case 'n':
		return append(dst, v.s...)
	case 't':
		if v.b {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	}
	return append(dst, "null"...)
}

// touched is fuzzTouch's result for the document v: n plus one when it is a plain number
// (written in shortest form, unless the sum is the same float64 and the text stays), and
// touched set to true, in its place or after the other members.
func touched(v *refValue) *refValue {
	out := &refValue{kind: '{', names: slices.Clone(v.names), members: slices.Clone(v.members)}
	if i := slices.Index(out.names, "n"); i >= 0 && out.members[i].kind == 'n' {
		if f, plain := numberValue(out.members[i].s); plain {
			if sum := f + 1; math.Float64bits(sum) != math.Float64bits(f) {
				out.members[i] = &refValue{kind: 'n', s: string(appendNumber(nil, sum))}
			}
		}
	}
	yes := &refValue{kind: 't', b: true}
	if i := slices.Index(out.names, "touched"); i >= 0 {
		out.members[i] = yes
	} else {
		out.names, out.members = append(out.names, "touched"), append(out.members, yes)
	}
	return out
}

func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}
