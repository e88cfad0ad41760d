package search

import (
	"encoding/json"
	"net/http"
	"strings"
	"unicode/utf8"
)

// AuthError is a 401 or 403 answer: the cluster refused the credentials, or the user they
// name lacks a privilege. It keeps what the server's reason names (the action, the
// indices, the user, the privileges that would grant the action), each bounded in length,
// and nothing else: the reasons of security exceptions carry no document values, but
// only these parts are needed to say what to fix. Sending the request again gets the same
// answer until an administrator acts: callers never retry it.
type AuthError struct {
	// Status is 401 or 403.
	Status int
	// Credentials is what the refused request carried (401 only): one of the Credentials*
	// constants ("basic", "api key", "client certificate", "none"), possibly with " and
	// client certificate"; empty when the answer did not come through a client of
	// [NewClient].
	Credentials string
	// Action is the action the server refused (403), e.g. "indices:data/write/bulk[s]";
	// Actions holds every one OpenSearch names when it names several.
	Action  string
	Actions []string
	// Indices are the indices the refusal names (Elasticsearch, index actions).
	Indices []string
	// User is the user the server authenticated, when it names it.
	User string
	// Privileges are the privileges the server says grant the action (Elasticsearch);
	// PrivilegeKind is "cluster" or "index".
	Privileges    []string
	PrivilegeKind string
	// Block is set instead of the above when the 403 is an index or cluster block
	// (cluster_block_exception, e.g. "FORBIDDEN/8/index write (api)"), not a privilege.
	Block string
}

func (e *AuthError) Error() string {
	var b strings.Builder
	switch {
	case e.Status == http.StatusUnauthorized:
		b.WriteString("authentication failed: the cluster refused the credentials")
		if e.Credentials != "" {
			b.WriteString(" (" + e.Credentials + ")")
		}
		return b.String()
	case e.Block != "":
		b.WriteString("refused by a block: " + e.Block)
		if len(e.Indices) > 0 {
			b.WriteString(" on index " + strings.Join(e.Indices, ", "))
		}
		return b.String()
	}
	b.WriteString("permission denied")
	switch {
	case len(e.Actions) > 1:
		b.WriteString(": actions " + strings.Join(e.Actions, ", "))
	case e.Action != "":
		b.WriteString(": action " + e.Action)
	default:
		b.WriteString(" (the server named no action)")
	}
	if len(e.Indices) > 0 {
		b.WriteString(" on indices " + strings.Join(e.Indices, ", "))
	}
	if e.User != "" {
		b.WriteString(" for user " + e.User)
	}
	if len(e.Privileges) > 0 {
		b.WriteString(" (granted by the ")
		if e.PrivilegeKind != "" {
			b.WriteString(e.PrivilegeKind + " ")
		}
		b.WriteString("privileges " + strings.Join(e.Privileges, ", ") + ")")
	}
	return b.String()
}

// AnswerError is the error of a 401 or 403 answer, an *AuthError read from its header and
// body; nil for every other status (what they mean is the caller's to judge).
func AnswerError(status int, header http.Header, body []byte) error {
	if status != http.StatusUnauthorized && status != http.StatusForbidden {
		return nil
	}
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	_ = json.Unmarshal(body, &env) // OpenSearch's 401 is plain text
	e := authError(status, env.Error)
	if status == http.StatusUnauthorized {
		e.Credentials = header.Get(credentialsHeader)
	}
	return e
}

// Err is [AnswerError] of the answer.
func (a *Answer) Err() error { return AnswerError(a.Status, a.Header, a.Body) }

// ItemError is the error of one failed item of a _bulk or _mget answer whose status is
// 401 or 403 (raw is the item's "error" member), an *AuthError; nil for any other status.
func ItemError(status int, raw json.RawMessage) error {
	if status != http.StatusUnauthorized && status != http.StatusForbidden {
		return nil
	}
	return authError(status, raw)
}

// Bounds of what an AuthError keeps.
const (
	maxAuthText  = 200
	maxAuthItems = 16
)

func authError(status int, raw json.RawMessage) *AuthError {
	e := &AuthError{Status: status}
	if status != http.StatusForbidden {
		return e
	}
	var obj struct {
		Type      string `json:"type"`
		Reason    string `json:"reason"`
		RootCause []struct {
			Type   string `json:"type"`
			Reason string `json:"reason"`
		} `json:"root_cause"`
	}
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &obj) != nil {
		return e
	}
	typ, reason := obj.Type, obj.Reason
	if reason == "" && len(obj.RootCause) > 0 {
		typ, reason = obj.RootCause[0].Type, obj.RootCause[0].Reason
	}
	if typ == "cluster_block_exception" {
		parseBlock(e, reason)
		return e
	}
	parseDenial(e, reason)
	return e
}

// parseDenial reads the two engines' refusals:
//
//	Elasticsearch: action [A] is unauthorized for user [U] with effective roles [R] on indices [I],
//	               this action is granted by the index privileges [P1,P2]
//	               (also "for API key id [K] of user [U]", "run as [V]", "restricted indices [I]",
//	               "cluster privileges")
//	OpenSearch:    no permissions for [A1, A2] and User [name=U, backend_roles=[], requestedTenant=null]
func parseDenial(e *AuthError, reason string) {
	if rest, ok := strings.CutPrefix(reason, "no permissions for "); ok {
		if inner, after, ok := bracketed(rest); ok {
			e.Actions = splitList(inner, ",")
			if len(e.Actions) > 0 {
				e.Action = e.Actions[0]
			}
			if len(e.Actions) < 2 {
				e.Actions = nil
			}
			if i := strings.Index(after, "User [name="); i >= 0 {
				u := after[i+len("User [name="):]
				if j := strings.IndexAny(u, ",]"); j >= 0 {
					e.User = bound(strings.TrimSpace(u[:j]))
				}
			}
		}
		return
	}
	if i := strings.Index(reason, "action "); i >= 0 {
		if inner, _, ok := bracketed(reason[i+len("action "):]); ok {
			e.Action = bound(inner)
		}
	}
	if i := strings.Index(reason, "user ["); i >= 0 {
		if inner, _, ok := bracketed(reason[i+len("user "):]); ok {
			e.User = bound(inner)
		}
	}
	for _, p := range []string{" on indices ", " restricted indices "} {
		if i := strings.Index(reason, p); i >= 0 {
			if inner, _, ok := bracketed(reason[i+len(p):]); ok {
				e.Indices = append(e.Indices, splitList(inner, ",")...)
			}
		}
	}
	if len(e.Indices) > maxAuthItems {
		e.Indices = e.Indices[:maxAuthItems]
	}
	for _, kind := range []string{"cluster", "index"} {
		p := "this action is granted by the " + kind + " privileges "
		if i := strings.Index(reason, p); i >= 0 {
			if inner, _, ok := bracketed(reason[i+len(p):]); ok {
				e.Privileges, e.PrivilegeKind = splitList(inner, ","), kind
			}
			break
		}
	}
}

// parseBlock reads "index [I] blocked by: [FORBIDDEN/8/index write (api)];" or
// "blocked by: [FORBIDDEN/12/index read-only / allow delete (api)];".
func parseBlock(e *AuthError, reason string) {
	e.Block = "a block"
	if strings.HasPrefix(reason, "index ") {
		if inner, _, ok := bracketed(reason[len("index "):]); ok {
			e.Indices = []string{bound(inner)}
		}
	}
	if i := strings.Index(reason, "blocked by: "); i >= 0 {
		if inner, _, ok := bracketed(reason[i+len("blocked by: "):]); ok && inner != "" {
			e.Block = bound(inner)
		}
	}
}

// bracketed reads "[inner]rest" where inner may hold balanced brackets
// ("indices:data/write/bulk[s]").
func bracketed(s string) (inner, rest string, ok bool) {
	if !strings.HasPrefix(s, "[") {
		return "", s, false
	}
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			depth++
		case ']':
			depth--
			if depth == 0 {
				return s[1:i], s[i+1:], true
			}
		}
	}
	return "", s, false
}

func splitList(s, sep string) []string {
	var out []string
	for _, p := range strings.Split(s, sep) {
		if p = strings.TrimSpace(p); p != "" {
			if len(out) == maxAuthItems {
				break
			}
			out = append(out, bound(p))
		}
	}
	return out
}

// bound cuts s to maxAuthText bytes at a rune boundary.
func bound(s string) string {
	if len(s) <= maxAuthText {
		return s
	}
	cut := maxAuthText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
