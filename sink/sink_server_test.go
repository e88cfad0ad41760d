package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/esfence"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/statestore"
)

func TestSinkEndToEnd(t *testing.T) {
	engines(t, func(t *testing.T, s *server) {
		k := s.sink(t, s.config("e2e"), nil, nil)
		sch := ordersSchema("orders")
		idx := indexOf(t, k, "orders")
		dead := write(t, k, []cdc.Event{
			ev(cdc.Read, sch, 1, nil, row(1, "one", 1)),
			ev(cdc.Read, sch, 2, nil, row(2, "two", 2)),
			ev(cdc.Insert, sch, 10, nil, row(3, "three", 3)),
			ev(cdc.Update, sch, 11, nil, row(1, "one v2", 11)),
			ev(cdc.Update, sch, 12, nil, row(1, "one v3", 12)), // coalesced with the one above
			ev(cdc.Delete, sch, 13, row(2, "two", 2), nil),
			// The key of 3 changes to 4: the old document goes.
			ev(cdc.Update, sch, 14, row(3, "three", 3), row(4, "four", 14)),
		})
		if len(dead) != 0 {
			t.Fatalf("dead letters: %+v", dead)
		}
		docs, vers := s.docs(t, idx, []string{"1", "2", "3", "4"})
		if len(docs) != 2 || docs["1"]["name"] != "one v3" || docs["4"]["name"] != "four" {
			t.Fatalf("documents: %v", docs)
		}
		if vers["1"] != 12 || vers["4"] != 14 {
			t.Fatalf("versions %v, want the events' versions", vers)
		}
		if got := fmt.Sprint(docs["1"]["qty"]); got != "12" || docs["1"]["ok"] != true {
			t.Fatalf("document 1: %v", docs["1"])
		}
		// A replay of an older batch is superseded (409 is success), deletes included.
		if dead := write(t, k, []cdc.Event{ev(cdc.Insert, sch, 10, nil, row(3, "three", 3)), ev(cdc.Read, sch, 2, nil, row(2, "two", 2))}); len(dead) != 0 {
			t.Fatalf("dead letters on replay: %+v", dead)
		}
		if docs, _ := s.docs(t, idx, []string{"2", "3"}); len(docs) != 0 {
			t.Fatalf("replayed rows resurrected deleted documents: %v", docs)
		}
		// The index was created through the fence with the generated mapping, the marker,
		// the write alias and the delete retention.
		var got map[string]struct {
			Mappings struct {
				Meta       map[string]json.RawMessage `json:"_meta"`
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"mappings"`
			Aliases  map[string]any `json:"aliases"`
			Settings struct {
				Index struct {
					GCDeletes string `json:"gc_deletes"`
				} `json:"index"`
			} `json:"settings"`
		}
		if err := json.Unmarshal(s.OK(t, esapi.IndicesGetRequest{Index: []string{idx}}).Body, &got); err != nil {
			t.Fatal(err)
		}
		g := got[idx]
		if _, ok := g.Mappings.Meta[esfence.MarkerKey]; !ok || len(g.Mappings.Properties) < 4 || len(g.Aliases) != 1 {
			t.Fatalf("index: meta %v properties %v aliases %v", g.Mappings.Meta, g.Mappings.Properties, g.Aliases)
		}
		if g.Settings.Index.GCDeletes != "86400s" {
			t.Fatalf("gc_deletes %q, want the default retention 86400s", g.Settings.Index.GCDeletes)
		}
	})
}

func TestSinkDeadLetters(t *testing.T) {
	engines(t, func(t *testing.T, s *server) {
		cfg := s.config("dlq")
		cfg.Keyless = KeylessDeadLetter // the table without a key is dead-lettered row by row
		k := s.sink(t, cfg, nil, nil)
		sch := ordersSchema("orders")
		idx := indexOf(t, k, "orders")
		write(t, k, []cdc.Event{ev(cdc.Insert, sch, 1, nil, row(1, "one", 1))})
		// DDL changed qty to text: the index keeps "long", so a non-numeric value is a
		// mapping conflict for that row only.
		sch2 := ordersSchema("orders")
		sch2.Columns[2] = cdc.Column{Name: "qty", Kind: cdc.KindText, SourceType: "text", Nullable: true}
		noPK := ordersSchema("nopk")
		noPK.PrimaryKey = nil
		const secret = "row-secret-value"
		dead := write(t, k, []cdc.Event{
			ev(cdc.Insert, sch2, 2, nil, []cdc.Value{int64(2), "two", "7", true}),
			ev(cdc.Insert, sch2, 3, nil, []cdc.Value{int64(3), "three", secret, false}),
			ev(cdc.Insert, noPK, 4, nil, row(9, "nine", 9)),
			ev(cdc.Insert, sch, 5, nil, row(4, "four", 4)),
		})
		if len(dead) != 2 || dead[0].Index != 2 || dead[1].Index != 1 {
			t.Fatalf("dead letters %+v, want rows 2 (no key) and 1 (mapping conflict)", dead)
		}
		if !strings.Contains(dead[0].Reason, "no primary key") || !strings.Contains(dead[1].Reason, "rejected by the cluster: status 400") {
			t.Fatalf("reasons: %+v", dead)
		}
		for _, d := range dead {
			if strings.Contains(d.Reason, secret) || strings.Contains(d.Reason, "three") {
				t.Fatalf("a dead-letter reason carries row data: %q", d.Reason)
			}
		}
		docs, _ := s.docs(t, idx, []string{"1", "2", "3", "4"})
		if len(docs) != 3 || docs["3"] != nil {
			t.Fatalf("documents %v: every other row must be applied", docs)
		}
		if s.IndexExists(t, indexOf(t, k, "nopk")) {
			t.Fatal("a table without key got an index: the sink must not auto-generate ids")
		}
	})
}

func TestSinkFencedStop(t *testing.T) {
	engines(t, func(t *testing.T, s *server) {
		st := statestore.NewMemory()
		a := s.sink(t, s.config("fence"), st, nil)
		sch := ordersSchema("orders")
		write(t, a, []cdc.Event{ev(cdc.Insert, sch, 1, nil, row(1, "one", 1))})
		// A copy of the deployment (same state store) claims the index: a is fenced.
		b := s.sink(t, s.config("fence"), st, nil)
		write(t, b, []cdc.Event{ev(cdc.Insert, sch, 2, nil, row(2, "two", 2))})
		for _, op := range []cdc.Event{
			ev(cdc.Insert, sch, 3, nil, row(3, "three", 3)),
			ev(cdc.Delete, sch, 4, row(1, "one", 1), nil),
		} {
			dead, err := a.Write(context.Background(), []cdc.Event{op})
			if len(dead) != 0 || !errors.Is(err, esfence.Fenced) || !errors.Is(err, esfence.ErrDestinationConflict) {
				t.Fatalf("%s through the old claim: dead %v, err %v; want a fenced refusal", op.Op, dead, err)
			}
			// Permanent for the runner's supervision: reopening the stream cannot cure it.
			wantFailure(t, op.Op.String()+" through the old claim", err, true)
		}
		idx := indexOf(t, a, "orders")
		if docs, _ := s.docs(t, idx, []string{"1", "3"}); docs["1"] == nil || docs["3"] != nil {
			t.Fatalf("the fenced writer changed the index: %v", docs)
		}
		// A sink of the same deployment whose _ids would differ is refused the index.
		other := s.config("fence")
		other.IDSeparator = ":"
		c := s.sink(t, other, st, nil)
		_, err := c.Write(context.Background(), []cdc.Event{ev(cdc.Insert, sch, 5, nil, row(5, "five", 5))})
		if !errors.Is(err, esfence.EncodingMismatch) {
			t.Fatalf("a different id_separator: %v, want encoding_mismatch", err)
		}
		wantFailure(t, "a different id_separator", err, true)
		// The index is deleted: destination_missing, never recreated.
		s.OK(t, esapi.IndicesDeleteRequest{Index: []string{idx}})
		_, err = b.Write(context.Background(), []cdc.Event{ev(cdc.Insert, sch, 5, nil, row(5, "five", 5))})
		if !errors.Is(err, esfence.DestinationMissing) {
			t.Fatalf("write to a deleted index: %v, want destination_missing", err)
		}
		wantFailure(t, "write to a deleted index", err, true)
		c = s.sink(t, s.config("fence"), st, nil)
		if _, err := c.Write(context.Background(), []cdc.Event{ev(cdc.Insert, sch, 6, nil, row(6, "six", 6))}); !errors.Is(err, esfence.DestinationMissing) {
			t.Fatalf("a new session on a deleted index: %v, want destination_missing", err)
		}
		if s.IndexExists(t, idx) {
			t.Fatal("the deleted index was recreated")
		}
	})
}

func TestSinkAutoCreateIndexFalse(t *testing.T) {
	engines(t, func(t *testing.T, s *server) {
		cfg := s.config("noauto")
		cfg.AutoCreateIndex = estest.Ptr(false)
		k := s.sink(t, cfg, nil, nil)
		sch := ordersSchema("orders")
		write(t, k, []cdc.Event{ev(cdc.Insert, sch, 1, nil, row(1, "one", 1))})
		var got map[string]struct {
			Mappings struct {
				Meta       map[string]json.RawMessage `json:"_meta"`
				Properties map[string]struct {
					Type string `json:"type"`
				} `json:"properties"`
			} `json:"mappings"`
		}
		idx := indexOf(t, k, "orders")
		if err := json.Unmarshal(s.OK(t, esapi.IndicesGetMappingRequest{Index: []string{idx}}).Body, &got); err != nil {
			t.Fatal(err)
		}
		m := got[idx].Mappings
		if _, ok := m.Meta[esfence.MarkerKey]; !ok || m.Properties["name"].Type != "text" {
			t.Fatalf("want a fenced index with dynamic mapping, got %+v", m)
		}
		// An index someone else created is refused, not adopted.
		other := indexOf(t, k, "precreated")
		s.OK(t, esapi.IndicesCreateRequest{Index: other})
		_, err := k.Write(context.Background(), []cdc.Event{ev(cdc.Insert, ordersSchema("precreated"), 1, nil, row(1, "one", 1))})
		if !errors.Is(err, esfence.MarkerMissing) {
			t.Fatalf("pre-created index: %v, want marker_missing", err)
		}
	})
}

// TestSinkDeleteRetention shows why the retention matters: once the cluster forgot a delete's
// version (index.gc_deletes), a replayed older index brings the row back. With the default
// retention the same replay is refused as stale.
func TestSinkDeleteRetention(t *testing.T) {
	engines(t, func(t *testing.T, s *server) {
		sch := ordersSchema("orders")
		run := func(part string, retention time.Duration, attempts int) (resurrected bool) {
			cfg := s.config(part)
			cfg.DeleteRetention = Duration(retention)
			k := s.sink(t, cfg, nil, nil)
			idx := indexOf(t, k, "orders")
			write(t, k, []cdc.Event{ev(cdc.Insert, sch, 1, nil, row(1, "one", 1))})
			write(t, k, []cdc.Event{ev(cdc.Delete, sch, 3, row(1, "one", 1), nil)})
			// Replay the older index until it lands or the tombstone demonstrably held
			// across many prunes (each refresh prunes tombstones older than the retention).
			for attempt := 0; attempt < attempts; attempt++ {
				time.Sleep(50 * time.Millisecond)
				s.refresh(t, idx)
				write(t, k, []cdc.Event{ev(cdc.Update, sch, 2, nil, row(1, "stale", 2))})
				if docs, _ := s.docs(t, idx, []string{"1"}); docs["1"] != nil {
					return true
				}
			}
			return false
		}
		// The short run stops at the first resurrection (about one refresh); the default run
		// replays across 2s of refreshes, each of which prunes what the retention allows.
		if !run("gcshort", time.Millisecond, 200) {
			t.Fatal("with a 1ms retention the stale replay never came back; the failure mode was not shown")
		}
		if run("gcdefault", 0, 40) {
			t.Fatal("with the default retention a stale replay resurrected a deleted row")
		}
	})
}
