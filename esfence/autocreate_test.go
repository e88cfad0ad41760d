package esfence

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func TestSimpleMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, name string
		want          bool
	}{
		{"*", "", true},
		{"*", "df-w-x", true},
		{"df-w-*", "df-w-", true},
		{"df-w-*", "df-w", false},
		{"d*w*", "df-w-1", true},
		{"*-1", "df-w-1", true},
		{"*-1", "df-w-12", false},
		{"df-w-*x", "df-w-abc", false},
		{"DF-W-*", "df-w-a", false}, // case-sensitive, as Regex.simpleMatch
		{"df-w-a", "df-w-a", true},
		{"a**b", "ab", true},
		{"", "", true},
		{"", "a", false},
	} {
		if got := simpleMatch(c.pattern, c.name); got != c.want {
			t.Errorf("simpleMatch(%q, %q) = %v, want %v", c.pattern, c.name, got, c.want)
		}
	}
}

func TestAutoCreateVerdict(t *testing.T) {
	for _, c := range []struct {
		value  string
		proven bool
	}{
		{"true", false},
		{"false", true},
		{"True", true}, // not a boolean to Elasticsearch but a rule allowing only the name "True"
		{"-df-w-*,+*", true},
		{" -df-w-* , +* ", true},
		{"-df-w-*", true},
		{"-*", true},
		{"-d*,+*", true},
		{"-df*w*,+*", true},
		{"-*-w-*,+*", true},
		{"-df-w-a*,-df-w-*,+*", true},
		{"+logs-*,-df-*", true},
		{"logs-*", true}, // no rule matches df-w-*: forbidden
		{"+*", false},
		{"*", false},
		{"-df-w-a*,+*", false},
		{"+df-w-x,-df-w-*", false},
		{"-df-w-*x,+*", false},
		{"-df-w-?,+*", false},
		{"-DF-W-*,+*", false},
		{"+df-*-*,-*", false},
		{"-df-w-*,", false},  // invalid: empty rule
		{",-df-w-*", false},  // invalid
		{"-,-df-w-*", false}, // invalid: bare -
		{"-df-w-*,+", false}, // invalid: bare +
		{"", false},          // invalid
		{"-df-w-1*,-df-w-2*,-df-w-3*,-df-w-4*,-df-w-5*,-df-w-6*,-df-w-7*,-df-w-8*,-df-w-9*,-df-w-0*,-df-w-a*,-df-w-b*,-df-w-c*,-df-w-d*,-df-w-e*,-df-w-f*,+*", false},
	} {
		err := autoCreateVerdict(c.value)
		if (err == nil) != c.proven {
			t.Errorf("%q: verdict %v, want proven=%v", c.value, err, c.proven)
		}
	}
}

// The exact proof agrees with brute force: for random rule lists over a small alphabet, a
// df-w- name of up to a few extra characters that the rules let through exists exactly when
// the proof fails with a witness, and the witness really gets through.
func TestProofAgreesWithBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("dfw-ab*")
	randomPattern := func() string {
		var b strings.Builder
		if r.IntN(2) == 0 {
			b.WriteString("df-w-"[:r.IntN(6)])
		}
		for n := r.IntN(4); n > 0; n-- {
			b.WriteByte(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	firstAllows := func(rules []autoCreateRule, name string) bool {
		for _, ru := range rules {
			if simpleMatch(ru.pattern, name) {
				return ru.allow
			}
		}
		return false
	}
	var names []string
	var grow func(s string, depth int)
	grow = func(s string, depth int) {
		names = append(names, s)
		if depth == 0 {
			return
		}
		for _, c := range "dfw-abz" {
			grow(s+string(c), depth-1)
		}
	}
	grow("df-w-", 4)
	for i := 0; i < 400; i++ {
		var rules []autoCreateRule
		for n := 1 + r.IntN(4); n > 0; n-- {
			rules = append(rules, autoCreateRule{pattern: randomPattern(), allow: r.IntN(2) == 0})
		}
		proven, witness, rule := proveForbidden(rules, internalPrefix)
		brute := false
		for _, n := range names {
			if firstAllows(rules, n) {
				brute = true
				break
			}
		}
		if proven && brute {
			t.Fatalf("rules %+v: proven, but brute force finds an allowed name", rules)
		}
		if !proven {
			w := strings.ReplaceAll(witness, "·", "z")
			if rule == 0 || !firstAllows(rules, w) || !strings.HasPrefix(w, internalPrefix) {
				t.Fatalf("rules %+v: witness %q (rule %d) is not allowed", rules, witness, rule)
			}
		}
	}
}

func TestParseWriteAlias(t *testing.T) {
	inst := strings.Repeat("ab", 16)
	alias := writeAlias(inst, "12-0123456789abcdef")
	if i, f, ok := parseWriteAlias(alias); !ok || i != inst || f != "12-0123456789abcdef" {
		t.Fatalf("parseWriteAlias(%q) = %q %q %v", alias, i, f, ok)
	}
	for _, bad := range []string{"df-w-", "df-w-" + inst, "df-w-" + inst + "-1", "df-w-" + inst + "-0-0123456789abcdef",
		"df-w-" + strings.ToUpper(inst) + "-1-0123456789abcdef", "x-" + alias} {
		if _, _, ok := parseWriteAlias(bad); ok {
			t.Errorf("parseWriteAlias(%q) accepted", bad)
		}
	}
}
