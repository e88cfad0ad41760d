package mirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/sink"
)

// plainSource cannot re-snapshot.
type plainSource struct{}

func (plainSource) Open(context.Context, cdc.Checkpoint) (cdc.Stream, error) {
	return nil, errors.New("not used")
}

// resnapSource answers Resnapshot with errs in turn, then success.
type resnapSource struct {
	plainSource
	mu   sync.Mutex
	errs []error
	reqs []cdc.ResnapshotRequest
}

func (s *resnapSource) Resnapshot(_ context.Context, req cdc.ResnapshotRequest) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, req)
	if len(s.errs) > 0 {
		err := s.errs[0]
		s.errs = s.errs[1:]
		return "", err
	}
	return fmt.Sprintf("rs-%d", len(s.reqs)), nil
}

func (s *resnapSource) requests() []cdc.ResnapshotRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]cdc.ResnapshotRequest(nil), s.reqs...)
}

var enteredTable = cdc.TableID{Connector: "postgres", Source: "pg", Database: "shop", Schema: "public", Table: "orders"}

// An ENTERED table is re-snapshotted: the request names the table as the source spells it and
// is retried after failures that may pass; nothing is left in the status.
func TestEnteredResnapshots(t *testing.T) {
	src := &resnapSource{errs: []error{errors.New("server out of reach"), errors.New("server out of reach")}}
	var logs syncBuffer
	h := newEnteredHook("p1", slog.New(slog.NewTextHandler(&logs, nil)), func() cdc.Source { return src })
	h.backoff = time.Millisecond
	var done []sink.TableEntered
	h.handled = func(_ context.Context, e sink.TableEntered) error { done = append(done, e); return nil }
	defer h.close()
	h.entered(sink.TableEntered{Table: enteredTable, Index: "cdc-orders", Cause: sink.EnteredReplaced})
	h.wg.Wait()
	reqs := src.requests()
	if len(reqs) != 3 || len(reqs[2].Tables) != 1 || reqs[2].Tables[0] != "public.orders" {
		t.Fatalf("requests %+v", reqs)
	}
	if st := h.status(cdc.Status{Health: cdc.Health{Healthy: true}}); len(st.Incomplete) != 0 || !st.Health.Healthy {
		t.Fatalf("status %+v", st)
	}
	if !strings.Contains(logs.String(), "re-snapshot requested") || len(done) != 1 {
		t.Fatalf("handled %d, logs: %s", len(done), logs.String())
	}
}

// A source that cannot re-snapshot, and a request refused for good: an Error line and a status
// entry naming the table and the fix; a later successful request clears it.
func TestEnteredCannotResnapshot(t *testing.T) {
	var logs syncBuffer
	h := newEnteredHook("p1", slog.New(slog.NewTextHandler(&logs, nil)), func() cdc.Source { return plainSource{} })
	defer h.close()
	h.entered(sink.TableEntered{Table: enteredTable, Index: "cdc-orders", Cause: sink.EnteredRenamed,
		From: cdc.TableID{Connector: "postgres", Source: "pg", Database: "shop", Schema: "public", Table: "old"}})
	h.wg.Wait()
	st := h.status(cdc.Status{Health: cdc.Health{Healthy: true, Class: cdc.HealthOK}})
	if len(st.Incomplete) != 1 || st.Incomplete[0].Table != enteredTable || st.Health.Healthy ||
		st.Health.Class != cdc.HealthTableIncomplete || !strings.Contains(st.Health.Reason, "fix:") {
		t.Fatalf("status %+v", st)
	}
	if l := logs.String(); !strings.Contains(l, "level=ERROR") || !strings.Contains(l, "public.orders") || !strings.Contains(l, "incremental snapshot") {
		t.Fatalf("logs: %s", l)
	}
	// A worse health reason stays.
	if st := h.status(cdc.Status{Health: cdc.Health{Class: cdc.HealthStopped, Reason: "stopped"}}); st.Health.Class != cdc.HealthStopped || len(st.Incomplete) != 1 {
		t.Fatalf("status %+v", st)
	}

	src := &resnapSource{errs: []error{fmt.Errorf("no key: %w", cdc.ErrResnapshotRefused)}}
	h2 := newEnteredHook("p2", slog.New(slog.DiscardHandler), func() cdc.Source { return src })
	defer h2.close()
	h2.entered(sink.TableEntered{Table: enteredTable, Index: "cdc-orders", Cause: sink.EnteredNew})
	h2.wg.Wait()
	st = h2.status(cdc.Status{Health: cdc.Health{Healthy: true}})
	if len(src.requests()) != 1 || len(st.Incomplete) != 1 || !strings.Contains(st.Incomplete[0].Reason, "cdcmirror resnapshot --pipeline p2 --table public.orders") {
		t.Fatalf("refused: %d requests, status %+v", len(src.requests()), st)
	}
	h2.entered(sink.TableEntered{Table: enteredTable, Index: "cdc-orders", Cause: sink.EnteredNew})
	h2.wg.Wait()
	if st := h2.status(cdc.Status{Health: cdc.Health{Healthy: true}}); len(st.Incomplete) != 0 || !st.Health.Healthy {
		t.Fatalf("after a successful request: %+v", st)
	}
}

// A table renamed or dropped before its re-snapshot (the source refuses the request: no such
// table) is no incomplete table: its name denotes no relation now. A Warn line says its index
// keeps only what was streamed; the report is handled, once, without retries.
func TestEnteredTableGoneFirst(t *testing.T) {
	src := &resnapSource{errs: []error{fmt.Errorf("pgcdc: %w: public.orders does not exist (%w)", cdc.ErrResnapshotRefused, cdc.ErrTableNotFound)}}
	var logs syncBuffer
	h := newEnteredHook("p1", slog.New(slog.NewTextHandler(&logs, nil)), func() cdc.Source { return src })
	var done []sink.TableEntered
	h.handled = func(_ context.Context, e sink.TableEntered) error { done = append(done, e); return nil }
	defer h.close()
	h.entered(sink.TableEntered{Table: enteredTable, Index: "cdc-orders", Cause: sink.EnteredRenamed})
	h.wg.Wait()
	if st := h.status(cdc.Status{Health: cdc.Health{Healthy: true}}); len(st.Incomplete) != 0 || !st.Health.Healthy {
		t.Fatalf("status %+v", st)
	}
	if len(src.requests()) != 1 || len(done) != 1 || !strings.Contains(logs.String(), "level=WARN") || strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("%d requests, %d handled, logs: %s", len(src.requests()), len(done), logs.String())
	}
}
