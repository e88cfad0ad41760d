package sink

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/esfence"
	"github.com/tributary-dev/tributary/internal/faultproxy"
	"github.com/tributary-dev/tributary/statestore"
)

func isBulk(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/_bulk") }

// itemsAnswer is a _bulk answer whose n items all carry status.
func itemsAnswer(n, status int) []byte {
	var b strings.Builder
	b.WriteString(`{"took":1,"errors":true,"items":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"index":{"_index":"x","_id":"` + strconv.Itoa(i) + `","status":` + strconv.Itoa(status) +
			`,"error":{"type":"es_rejected_execution_exception","reason":"injected"}}}`)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// TestSinkBackpressure breaks the path to the cluster in every way the fault proxy can and
// checks that each failure is backpressure (never a dead letter or a fatal error), that the
// runner's replay of the identical batch then succeeds, and that nothing is lost.
func TestSinkBackpressure(t *testing.T) {
	engines(t, func(t *testing.T, s *server) {
		p, err := faultproxy.NewHTTP(s.URL, faultproxy.HTTPOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		cfg := s.config("bp")
		cfg.URL = p.URL()
		cfg.RequestTimeout = Duration(time.Second)
		cfg.ItemRetries = 2
		k := s.sink(t, cfg, statestore.NewMemory(), nil)
		sch := ordersSchema("orders")
		idx := indexOf(t, k, "orders")
		next := int64(0)
		batch := func() []cdc.Event {
			var b []cdc.Event
			for i := 0; i < 3; i++ {
				next++
				b = append(b, ev(cdc.Insert, sch, next, nil, row(next, "n"+strconv.FormatInt(next, 10), next)))
			}
			return b
		}
		// Creates the index directly. The 1s request timeout (for the black hole below) can
		// pass on a loaded machine: backpressure here is offered again, as the runner would.
		first := batch()
		for attempt := 1; ; attempt++ {
			_, err := k.Write(t.Context(), first)
			var bp *cdc.BackpressureError
			if err == nil {
				break
			} else if !errors.As(err, &bp) || attempt == 20 {
				t.Fatalf("first Write (attempt %d): %v", attempt, err)
			}
		}

		for _, c := range []struct {
			name      string
			rule      faultproxy.Rule
			immediate bool // the sink absorbs it within one Write
		}{
			{"429 after applying", faultproxy.Rule{Action: faultproxy.ForwardThenRespond, Times: 1, Response: faultproxy.TooManyRequests(time.Second)}, false},
			{"503", faultproxy.Rule{Action: faultproxy.Respond, Times: 1, Response: faultproxy.Response{Status: http.StatusServiceUnavailable}}, false},
			{"reset before", faultproxy.Rule{Action: faultproxy.Drop, Times: 1}, false},
			{"reset after applying", faultproxy.Rule{Action: faultproxy.ForwardThenDrop, Times: 1}, false},
			{"black hole past the timeout", faultproxy.Rule{Action: faultproxy.Forward, Delay: 3 * time.Second, Times: 1}, false},
			{"per-item 429 then success", faultproxy.Rule{Action: faultproxy.Respond, Times: 2, Response: faultproxy.Response{Status: 200, Body: itemsAnswer(3, 429)}}, true},
			{"per-item 429 beyond the retries", faultproxy.Rule{Action: faultproxy.Respond, Times: 3, Response: faultproxy.Response{Status: 200, Body: itemsAnswer(3, 429)}}, false},
		} {
			b := batch()
			c.rule.Match = isBulk
			c.rule.Name = c.name
			if _, err := p.AddRule(c.rule); err != nil {
				t.Fatal(err)
			}
			dead, err := k.Write(context.Background(), b)
			var bp *cdc.BackpressureError
			switch {
			case c.immediate && (err != nil || len(dead) != 0):
				t.Fatalf("%s: %v, dead %v; want success within the Write", c.name, err, dead)
			case !c.immediate && (!errors.As(err, &bp) || len(dead) != 0):
				t.Fatalf("%s: %v, dead %v; want backpressure", c.name, err, dead)
			}
			if c.name == "429 after applying" && bp.RetryAfter != time.Second {
				t.Fatalf("Retry-After not passed on: %v", bp.RetryAfter)
			}
			p.ClearRules()
			if !c.immediate {
				write(t, k, b) // the runner's replay of the identical batch
			}
		}
		var ids []string
		for i := int64(1); i <= next; i++ {
			ids = append(ids, strconv.FormatInt(i, 10))
		}
		docs, vers := s.docs(t, idx, ids)
		for i := int64(1); i <= next; i++ {
			id := strconv.FormatInt(i, 10)
			if docs[id] == nil || vers[id] != i {
				t.Fatalf("row %d lost or wrong: %v version %d", i, docs[id], vers[id])
			}
		}
		// A connection loss made the sink claim the index again before writing on.
		claim := k.claims[idx]
		if g := claim.Fence(); strings.HasPrefix(g, "1-") {
			t.Fatalf("fence %s: want a later generation after the reconnects", g)
		}
		// The cluster itself unreachable: backpressure, not fatal.
		p.Close()
		if _, err := k.Write(context.Background(), batch()); !errors.As(err, new(*cdc.BackpressureError)) || esfence.ClassOf(err) != "" {
			t.Fatalf("unreachable cluster: %v, want backpressure", err)
		}
	})
}
