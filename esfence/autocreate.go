package esfence

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// The auto-create proof. Fencing of delete actions rests on the cluster refusing to auto-create
// an index named df-w-*: a delete through a removed alias otherwise creates an index of that
// name and "succeeds". So every claim proves from the effective action.auto_create_index that
// no name starting with df-w- can be auto-created, evaluating the value the way Elasticsearch's
// AutoCreateIndex does (OpenSearch inherited the same code):
//
//   - "true" and "false" (exactly, lower case) are booleans: true allows every name, false
//     forbids every name;
//   - anything else is a comma-separated list of rules; each is trimmed; an empty rule, or a
//     bare "+" or "-", makes the whole value invalid; "-p" forbids, "+p" and "p" allow;
//   - rules are tried in order and the first whose pattern matches the name decides; a name no
//     rule matches is forbidden;
//   - patterns match like Regex.simpleMatch: '*' stands for any run of characters (including
//     none), every other character matches itself, case-sensitively.
//
// Proving "every df-w-* name is forbidden" is a question about infinitely many names, so it is
// answered on automata: each pattern is a small nondeterministic automaton, and a search over
// the reachable combinations of their states (after reading "df-w-") looks for a name whose
// first matching rule allows. The search is exact, not a heuristic: "-df-w-a*,-df-w-*" is
// proven, "+df-w-x,-df-w-*" is not, "-d*" and "-*" are proven, "-df-w-*x" is not.

// internalPrefix starts every write alias name.
const internalPrefix = "df-w-"

// autoCreateRule is one parsed rule of action.auto_create_index.
type autoCreateRule struct {
	pattern string
	allow   bool
}

// errAutoCreateInvalid: the value is not one Elasticsearch would accept.
var errAutoCreateInvalid = errors.New("invalid action.auto_create_index value")

// parseAutoCreate parses a value of action.auto_create_index. all is set for the boolean
// forms: (true, nil) for "true", (false, nil) for "false".
func parseAutoCreate(value string) (all *bool, rules []autoCreateRule, err error) {
	switch value {
	case "true", "false":
		b := value == "true"
		return &b, nil, nil
	}
	for _, p := range strings.Split(value, ",") {
		p = strings.TrimSpace(p)
		switch {
		case p == "", p == "-", p == "+":
			return nil, nil, errAutoCreateInvalid
		case p[0] == '-':
			rules = append(rules, autoCreateRule{pattern: p[1:], allow: false})
		case p[0] == '+':
			rules = append(rules, autoCreateRule{pattern: p[1:], allow: true})
		default:
			rules = append(rules, autoCreateRule{pattern: p, allow: true})
		}
	}
	return nil, rules, nil
}

// simpleMatch reports whether name matches pattern, '*' being the only wildcard. It is the
// direct matcher; the proof uses the automata below, and tests check they agree.
func simpleMatch(pattern, name string) bool {
	return acceptsFrom(globStart(pattern), pattern, name)
}

func acceptsFrom(states []int, pattern, s string) bool {
	for i := 0; i < len(s); i++ {
		states = globStep(pattern, states, s[i])
	}
	return globAccepts(pattern, states)
}

// A glob automaton state is the number of pattern bytes consumed; a set of them is kept sorted
// and closed under skipping a '*' (which may match nothing).
func globClose(pattern string, states []int) []int {
	seen := map[int]bool{}
	var out []int
	var add func(int)
	add = func(i int) {
		if seen[i] {
			return
		}
		seen[i] = true
		out = append(out, i)
		if i < len(pattern) && pattern[i] == '*' {
			add(i + 1)
		}
	}
	for _, s := range states {
		add(s)
	}
	sort.Ints(out)
	return out
}

func globStart(pattern string) []int { return globClose(pattern, []int{0}) }

func globStep(pattern string, states []int, c byte) []int {
	var next []int
	for _, i := range states {
		if i >= len(pattern) {
			continue
		}
		switch pattern[i] {
		case '*':
			next = append(next, i) // the star swallows c and may swallow more
		case c:
			next = append(next, i+1)
		}
	}
	return globClose(pattern, next)
}

func globAccepts(pattern string, states []int) bool {
	for _, i := range states {
		if i == len(pattern) {
			return true
		}
	}
	return false
}

// maxProofStates bounds the search; real settings have a handful of short rules and need a few
// dozen states. Hitting the bound means "not proven", which refuses -- never "proven".
const maxProofStates = 100000

// proveForbidden reports whether rules forbid auto-creating every index whose name starts with
// prefix. When they do not, witness is a name that would be auto-created (a '·' standing for
// any character no pattern mentions) and rule the 1-based position of the rule allowing it.
func proveForbidden(rules []autoCreateRule, prefix string) (proven bool, witness string, rule int) {
	// The alphabet that matters: every byte a pattern names, plus one byte standing for all
	// others (all of which every automaton treats alike).
	const other = 0
	alpha := map[byte]bool{other: true}
	for _, r := range rules {
		for i := 0; i < len(r.pattern); i++ {
			if r.pattern[i] != '*' {
				alpha[r.pattern[i]] = true
			}
		}
	}
	// A pattern containing byte 0 cannot come from a cluster setting; refuse to reason about it.
	for _, r := range rules {
		if strings.IndexByte(r.pattern, other) >= 0 {
			return false, "", 0
		}
	}
	letters := make([]byte, 0, len(alpha))
	for c := range alpha {
		letters = append(letters, c)
	}
	sort.Slice(letters, func(i, j int) bool { return letters[i] < letters[j] })

	type node struct {
		states [][]int
		name   string
	}
	key := func(st [][]int) string { return fmt.Sprint(st) }

	start := make([][]int, len(rules))
	for i, r := range rules {
		s := globStart(r.pattern)
		for j := 0; j < len(prefix); j++ {
			s = globStep(r.pattern, s, prefix[j])
		}
		start[i] = s
	}
	queue := []node{{states: start, name: prefix}}
	seen := map[string]bool{key(start): true}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for i, r := range rules {
			if globAccepts(r.pattern, n.states[i]) {
				if r.allow {
					return false, n.name, i + 1
				}
				break // the first match forbids this name
			}
		}
		for _, c := range letters {
			next := make([][]int, len(rules))
			for i, r := range rules {
				next[i] = globStep(r.pattern, n.states[i], c)
			}
			k := key(next)
			if seen[k] {
				continue
			}
			if len(seen) >= maxProofStates {
				return false, "", 0
			}
			seen[k] = true
			ch := string(rune(c))
			if c == other {
				ch = "·"
			}
			queue = append(queue, node{states: next, name: n.name + ch})
		}
	}
	return true, "", 0
}

// autoCreateVerdict evaluates the effective value of action.auto_create_index; a nil error
// means every df-w-* name is proven forbidden. The error is a description for the refusal.
func autoCreateVerdict(value string) error {
	all, rules, err := parseAutoCreate(value)
	if err != nil {
		return fmt.Errorf("action.auto_create_index is not a valid value")
	}
	if all != nil {
		if *all {
			return fmt.Errorf("action.auto_create_index is true: every index name can be auto-created, including %s*", internalPrefix)
		}
		return nil
	}
	proven, witness, rule := proveForbidden(rules, internalPrefix)
	if proven {
		return nil
	}
	if rule == 0 {
		return fmt.Errorf("action.auto_create_index has rules too complex to prove that %s* is forbidden", internalPrefix)
	}
	r := rules[rule-1]
	return fmt.Errorf("action.auto_create_index rule %d (+%s) allows auto-creating %q, so %s* is not forbidden",
		rule, r.pattern, witness, internalPrefix)
}
