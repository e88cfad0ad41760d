package mysqlcdc

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestCompactJSONMatchesEncodingJSON checks appendCompactJSON against encoding/json.Compact:
// the same documents accepted and the same bytes out, on hand-picked documents and on random
// ones, valid and then mutated byte by byte.
func TestCompactJSONMatchesEncodingJSON(t *testing.T) {
	docs := []string{
		`{}`, `[]`, ` { } `, `[ ]`, `0`, `-0`, `-0.5e+10`, `1E5`, `"a"`, `true`, `false`, `null`,
		`{"a" : [1, 2.5, "x"] , "b":null}`, "\t[\n1,\r2 ]\n", `"\u00e9\n\"\\\/"`, `"é☃"`,
		`{"a":{"b":{"c":[[[]]]}}}`, `[1,]`, `{"a":1,}`, `{,}`, `[,1]`, `{"a"}`, `{"a":}`, `{1:2}`,
		`01`, `1.`, `.5`, `-`, `1e`, `1e+`, `+1`, `tru`, `nul`, `truex`, `"abc`, `"\x"`, `"\u12"`,
		`"\u12g4"`, "\"a\x01\"", `[1 2]`, `{"a":1 "b":2}`, `1 2`, ``, ` `, `[`, `]`, `{`, `}`,
		`[1]]`, `{"a":1}}`, `{"a":[1}`, `["a":1]`, `"a" "b"`, `nulll`, `[-]`, `[--1]`, `[1e1.5]`,
		strings.Repeat("[", maxJSONDepth) + strings.Repeat("]", maxJSONDepth),
		strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1),
		strings.Repeat(`{"a":`, 40) + "1" + strings.Repeat("}", 40),
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 3000 {
		var b strings.Builder
		randomJSON(rng, &b, 0)
		docs = append(docs, b.String())
	}
	const alphabet = " \t\n\r{}[],:\"\\-+.eE0123456789tfnu\x01é"
	for _, d := range docs[len(docs)-3000:] {
		for range 3 {
			m := []byte(d)
			k := rng.IntN(len(m) + 1)
			switch c := alphabet[rng.IntN(len(alphabet))]; rng.IntN(3) {
			case 0:
				m = append(m[:k], append([]byte{c}, m[k:]...)...)
			case 1:
				if k < len(m) {
					m = append(m[:k], m[k+1:]...)
				}
			default:
				if k < len(m) {
					m[k] = c
				}
			}
			docs = append(docs, string(m))
		}
	}
	valid := 0
	for _, d := range docs {
		var want bytes.Buffer
		wantErr := json.Compact(&want, []byte(d))
		got, ok := appendCompactJSON(nil, []byte(d))
		if ok != (wantErr == nil) || ok && !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("%.200q: got %.200q (ok %v), encoding/json %.200q (%v)", d, got, ok, want.Bytes(), wantErr)
		}
		if ok {
			valid++
		}
	}
	if valid < len(docs)/4 || valid > len(docs)*3/4 {
		t.Fatalf("%d of %d documents valid: the corpus does not test both outcomes", valid, len(docs))
	}
}

// randomJSON writes a random value with random white space between its tokens.
func randomJSON(rng *rand.Rand, b *strings.Builder, depth int) {
	ws := func() {
		for range rng.IntN(3) {
			b.WriteByte(" \t\n\r"[rng.IntN(4)])
		}
	}
	ws()
	kind := rng.IntN(8)
	if depth > 4 {
		kind = rng.IntN(6)
	}
	switch kind {
	case 0:
		b.WriteString([]string{"true", "false", "null"}[rng.IntN(3)])
	case 1, 2:
		b.WriteString([]string{"0", "-1", "12.5", "-0.25e-3", "1E+9", "7e2", "123456789012345678901234567890"}[rng.IntN(7)])
	case 3, 4, 5:
		b.WriteString([]string{`""`, `"a b"`, `"\"q\""`, `"\u00e9\t"`, `"é☃ \\ /"`, `"\/\b\f\r\n"`}[rng.IntN(6)])
	case 6:
		b.WriteByte('[')
		for k := range rng.IntN(4) {
			if k > 0 {
				b.WriteByte(',')
			}
			randomJSON(rng, b, depth+1)
		}
		ws()
		b.WriteByte(']')
	default:
		b.WriteByte('{')
		for k := range rng.IntN(4) {
			if k > 0 {
				b.WriteByte(',')
			}
			ws()
			b.WriteString([]string{`"k"`, `"a b"`, `"é"`, `""`}[rng.IntN(4)])
			ws()
			b.WriteByte(':')
			randomJSON(rng, b, depth+1)
		}
		ws()
		b.WriteByte('}')
	}
	ws()
}
