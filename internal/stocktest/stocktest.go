// Package stocktest plays a cluster's action.auto_create_index on the shared fake node
// (internal/search/searchtest) as a real cluster keeps it: transient, persistent and default
// levels, GET with include_defaults, PUT of flat keys (null resets), and users refused reading
// or updating the cluster settings. It is what tests of the deployment requirement use when
// no real stock cluster is at hand: a New Settings is a stock cluster (nothing set, the
// default "true").
package stocktest

import (
	"encoding/json"
	"net/http"
	"sync"

	"github.com/tributary-dev/tributary/internal/search/searchtest"
)

// Key is the setting.
const Key = "action.auto_create_index"

// Settings is one cluster's action.auto_create_index. Safe for concurrent use.
type Settings struct {
	mu                    sync.Mutex
	transient, persistent *string
	def                   string
	denyRead, denyUpdate  bool
	down                  bool
	updates               []string
}

// New returns a stock cluster's settings: no transient or persistent value, the default
// "true".
func New() *Settings { return &Settings{def: "true"} }

// Install makes c answer _cluster/settings from s (it takes c's interceptor).
func (s *Settings) Install(c *searchtest.Cluster) {
	c.Intercept(func(r *searchtest.Request) *searchtest.Reply {
		s.mu.Lock()
		down := s.down
		s.mu.Unlock()
		switch {
		case down:
			return &searchtest.Reply{Drop: true}
		case r.Endpoint != "_cluster/settings":
			return nil
		}
		return s.answer(r.Method, r.Body)
	})
}

// Down makes the node drop every request without an answer (true) or serve again (false).
func (s *Settings) Down(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

// Set sets a level ("transient" or "persistent"; nil unsets it) as an administrator would.
func (s *Settings) Set(level string, v *string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if level == "transient" {
		s.transient = v
	} else {
		s.persistent = v
	}
}

// Deny makes reads (a user without the monitor privilege) or updates (a user without the
// privilege to update cluster settings) answer 403.
func (s *Settings) Deny(read, update bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.denyRead, s.denyUpdate = read, update
}

// Effective is the value a claim would read.
func (s *Settings) Effective() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.transient != nil:
		return *s.transient
	case s.persistent != nil:
		return *s.persistent
	}
	return s.def
}

// Updates returns the bodies of the accepted updates, in order.
func (s *Settings) Updates() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.updates...)
}

func (s *Settings) answer(method, body string) *searchtest.Reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch method {
	case http.MethodGet:
		if s.denyRead {
			return searchtest.Status(403, `{"error":{"type":"security_exception","reason":"action [cluster:monitor/settings] is unauthorized"},"status":403}`)
		}
		out := map[string]any{"defaults": level(&s.def)}
		if s.persistent != nil {
			out["persistent"] = level(s.persistent)
		}
		if s.transient != nil {
			out["transient"] = level(s.transient)
		}
		b, _ := json.Marshal(out)
		return searchtest.Status(200, string(b))
	case http.MethodPut:
		if s.denyUpdate {
			return searchtest.Status(403, `{"error":{"type":"security_exception","reason":"action [cluster:admin/settings/update] is unauthorized"},"status":403}`)
		}
		var req map[string]map[string]*string
		if err := json.Unmarshal([]byte(body), &req); err != nil {
			return searchtest.ErrorAnswer(400, "parse_exception")
		}
		for lvl, kv := range req {
			if lvl != "transient" && lvl != "persistent" {
				return searchtest.ErrorAnswer(400, "illegal_argument_exception")
			}
			for k, v := range kv {
				if k != Key {
					return searchtest.ErrorAnswer(400, "illegal_argument_exception")
				}
				if lvl == "transient" {
					s.transient = v
				} else {
					s.persistent = v
				}
			}
		}
		s.updates = append(s.updates, body)
		return searchtest.Status(200, `{"acknowledged":true,"persistent":{},"transient":{}}`)
	}
	return searchtest.ErrorAnswer(405, "method_not_allowed")
}

func level(v *string) map[string]any {
	return map[string]any{"action": map[string]any{"auto_create_index": *v}}
}
