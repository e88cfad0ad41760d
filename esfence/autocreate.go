package esfence

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/elastic/go-elasticsearch/v8/esapi"
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

// AutoCreate is a cluster's effective action.auto_create_index and what the fence makes of it
// ([Fence.ReadAutoCreate]). It carries rules and names only, never credentials.
type AutoCreate struct {
	// ClusterUUID names the cluster (set by ReadAutoCreate).
	ClusterUUID string
	// Value is the effective value and Level where it is set: "transient", "persistent" or
	// "default" (the nodes' configuration file, or the built-in "true"). Both are "" when the
	// cluster settings show none, or a value that is not a string.
	Value, Level string
	// Enforced reports the proof every claim makes: no index named df-w-* can be auto-created
	// ("false" forbids every auto-creation, so it is enforced too).
	Enforced bool
	// Why says, when not Enforced, what lets a df-w-* name through.
	Why string
	// Rule is, when not Enforced, the value that enforces it while keeping every other name's
	// outcome: "-df-w-*," followed by the current rules ("+logs-*,-*" becomes
	// "-df-w-*,+logs-*,-*"), or [StandardRule] when the value is true, absent or invalid.
	Rule string
}

// StandardRule is the action.auto_create_index the deployment requirement names: never
// auto-create a df-w-* index, auto-create everything else as by default.
const StandardRule = "-" + internalPrefix + "*,+*"

// Request is the request that makes Rule the effective value, on one line as a console takes
// it, e.g.
//
//	PUT _cluster/settings {"persistent":{"action.auto_create_index":"-df-w-*,+*"}}
//
// A transient value, which would override the persistent one, is reset in the same request
// (its rules are kept in Rule). Empty when Enforced.
func (a AutoCreate) Request() string {
	if a.Enforced {
		return ""
	}
	return "PUT _cluster/settings " + string(a.body())
}

// body is Request's JSON body.
func (a AutoCreate) body() []byte {
	b := map[string]any{"persistent": map[string]any{autoCreateKey: a.Rule}}
	if a.Level == "transient" {
		b["transient"] = map[string]any{autoCreateKey: nil}
	}
	out, _ := json.Marshal(b) // strings and nil only: encoding/json orders the keys
	return out
}

const autoCreateKey = "action.auto_create_index"

// judgeAutoCreate proves value (found at level) and proposes the rule that would enforce it.
func judgeAutoCreate(value, level string, found bool) AutoCreate {
	a := AutoCreate{Value: value, Level: level}
	if !found {
		a.Value, a.Level = "", ""
		a.Why, a.Rule = "the cluster settings do not show action.auto_create_index", StandardRule
		return a
	}
	why := autoCreateVerdict(value)
	if why == nil {
		a.Enforced = true
		return a
	}
	a.Why = why.Error()
	if level == "default" && value == "true" {
		a.Why = "action.auto_create_index is true (its default: no persistent or transient value is set): every index name can be auto-created, including " + internalPrefix + "*"
	}
	all, _, err := parseAutoCreate(value)
	if err != nil || all != nil {
		a.Rule = StandardRule // true allows everything; an invalid value has no rules to keep
	} else {
		a.Rule = "-" + internalPrefix + "*," + value // the first match decides: df-w-* first
	}
	return a
}

// refusal is the fencing_unenforced detail of a: what is wrong and the request that fixes it.
func (a AutoCreate) refusal() string {
	return a.Why + "; to enforce the rule, send " + a.Request()
}

// readAutoCreate reads the effective action.auto_create_index -- transient, then persistent,
// then the defaults (which hold the node's configuration file value, or the built-in "true")
// -- and judges it.
func (f *Fence) readAutoCreate(ctx context.Context) (AutoCreate, error) {
	const what = "reading action.auto_create_index"
	a, err := f.do(ctx, what, esapi.ClusterGetSettingsRequest{
		IncludeDefaults: ptr(true),
		FilterPath: []string{
			"transient.action.auto_create_index",
			"persistent.action.auto_create_index",
			"defaults.action.auto_create_index",
		},
	})
	if err != nil {
		return AutoCreate{}, err
	}
	if !a.ok() {
		return AutoCreate{}, a.serverError(what)
	}
	type level struct {
		Action struct {
			AutoCreateIndex json.RawMessage `json:"auto_create_index"`
		} `json:"action"`
	}
	var s struct {
		Transient, Persistent, Defaults level
	}
	if err := json.Unmarshal(a.body, &s); err != nil {
		return AutoCreate{}, errors.New("esfence: " + what + ": the answer is not JSON")
	}
	for i, l := range []level{s.Transient, s.Persistent, s.Defaults} {
		if raw := l.Action.AutoCreateIndex; len(raw) > 0 {
			var v string
			if json.Unmarshal(raw, &v) != nil {
				break // not a string: nothing we can reason about
			}
			return judgeAutoCreate(v, [...]string{"transient", "persistent", "default"}[i], true), nil
		}
	}
	return judgeAutoCreate("", "", false), nil
}

// proveAutoCreate is a claim's first step after the cluster's identity: nil when the
// effective setting forbids every df-w-* name, the fencing_unenforced refusal of d when it
// does not or cannot be read for lack of a privilege, or the error that kept it from being
// read (the caller may retry).
func (f *Fence) proveAutoCreate(ctx context.Context, d Destination) error {
	a, err := f.readAutoCreate(ctx)
	return f.autoCreateRefusal(d, a, err)
}

// autoCreateRefusal is the verdict on a readAutoCreate's result (a, err), for d: see
// proveAutoCreate. Claims that read the setting beside other requests judge it with this.
func (f *Fence) autoCreateRefusal(d Destination, a AutoCreate, err error) error {
	if err != nil {
		var se *ServerError
		if errors.As(err, &se) && se.Status == http.StatusForbidden {
			ce := f.refuse(d, FencingUnenforced, "action.auto_create_index cannot be read (the sink's user needs the monitor cluster privilege)")
			if se.Auth != nil {
				ce.Detail = "action.auto_create_index cannot be read: " + se.Auth.Error() + " (the sink's user needs the monitor cluster privilege)"
				ce.Err = se.Auth
			}
			return ce
		}
		return err // a 401 too: the credentials are refused, whatever the setting
	}
	if !a.Enforced {
		return f.refuse(d, FencingUnenforced, a.refusal())
	}
	return nil
}

// CheckAutoCreate makes the proof every claim makes, before any claim: nil when the cluster
// refuses to auto-create every df-w-* index; a *ConflictError of class fencing_unenforced that
// names no index when it does not (its detail quotes the request that fixes it) or when the
// setting cannot be read for lack of the monitor privilege; otherwise the error that kept the
// setting from being read (a transport error or a *ServerError: the caller may retry). It
// creates nothing and writes nothing.
func (f *Fence) CheckAutoCreate(ctx context.Context) error {
	return f.proveAutoCreate(ctx, Destination{})
}

// ReadAutoCreate reads the cluster's identity and its effective action.auto_create_index,
// judged as every claim judges it. A failed request is the request's error (a *ServerError
// for an answer, e.g. 403 without the monitor privilege).
func (f *Fence) ReadAutoCreate(ctx context.Context) (AutoCreate, error) {
	uuid, err := f.clusterUUID(ctx)
	if err != nil {
		return AutoCreate{}, err
	}
	a, err := f.readAutoCreate(ctx)
	a.ClusterUUID = uuid
	return a, err
}

// EnforceAutoCreate sends a.Request() -- the persistent a.Rule, resetting a transient value --
// and reads the setting again, returning what the cluster now says (Enforced, unless another
// level overrides it). An a already Enforced is returned as it is, nothing sent. A refused
// request is its *ServerError: 403 when the user may not update cluster settings (the manage
// cluster privilege of Elasticsearch, cluster:admin/settings/update of OpenSearch).
func (f *Fence) EnforceAutoCreate(ctx context.Context, a AutoCreate) (AutoCreate, error) {
	if a.Enforced {
		return a, nil
	}
	if a.Rule == "" {
		return a, errors.New("esfence: EnforceAutoCreate needs an AutoCreate that ReadAutoCreate returned")
	}
	const what = "updating action.auto_create_index"
	ans, err := f.do(ctx, what, esapi.ClusterPutSettingsRequest{Body: bytes.NewReader(a.body())})
	if err != nil {
		return a, err
	}
	if !ans.ok() {
		return a, ans.serverError(what)
	}
	return f.ReadAutoCreate(ctx)
}
