package mirror_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"
	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/mirrortest"
	"github.com/tributary-dev/tributary/internal/privtest"
	"github.com/tributary-dev/tributary/internal/search"
	"github.com/tributary-dev/tributary/internal/search/searchtest"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/mirror"
)

// TestPrivilegesMirror proves docs/privileges.md's mirror rows on the secured servers
// (es-secure, os-secure): one PostgreSQL pipeline per engine, over TLS (ca_file) with basic
// authentication as a user whose role is changed between runs.
//
//   - Each privilege of the mirror role removed alone: the run stops at the request that needs
//     it with a permanent refusal (never retried: no reconnect) naming the action, in Run's
//     error and in the pipeline's Status (LastFailure, health stopped).
//   - Exactly the mirror role: the snapshot, an update keeping a TOAST value unchanged (filled
//     by an _mget), a new column (the mapping updated), and the index equal to the table row by
//     row.
//   - Exactly the mirror and reindex roles: a reindex (new generation, refresh, the read alias
//     switched), the retired generation deleted by Run; a second reindex refused at its switch
//     without the refresh privilege, completed by the next Reindex call of the same run.
//   - Exactly the drop role: drop with indices, after refusals without each of its privileges
//     (delete_index's refusal is the same action a retired generation's deletion needs).
func TestPrivilegesMirror(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	searchtest.EachSecure(t, func(t *testing.T, s *searchtest.Secure) {
		privilegesMirror(t, s, dsn)
	})
}

// privRun is one engine's pipeline of TestPrivilegesMirror.
type privRun struct {
	t     *testing.T
	s     *searchtest.Secure
	acct  *privtest.Account
	cfg   *mirror.Config
	node  *mirrortest.Node
	tb    *mirrortest.Postgres
	index string // the read alias
}

func privilegesMirror(t *testing.T, s *searchtest.Secure, dsn string) {
	isOS := s.OpenSearch()
	run := privtest.Pick(s, privtest.ESMirror, privtest.OSMirror)
	reindex := run.Plus(privtest.Pick(s, privtest.ESReindex, privtest.OSReindex))
	drop := privtest.Pick(s, privtest.ESDrop, privtest.OSDrop)

	// The admin's view of the cluster: the deployment requirement, the comparison.
	tp, err := search.NewClient(search.Options{URLs: []string{s.URL}, Username: s.User, Password: s.Password, CACert: s.CA})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tp.Close(context.Background()) })
	node := &mirrortest.Node{Node: &estest.Node{Engine: s.Server.String(), URL: s.URL, Transport: tp}}
	node.EnforceAutoCreateRule(t)

	name := "h6_priv_" + estest.RandomHex(t, 4)
	tb := mirrortest.NewPostgres(t, dsn, name)
	dropSlotAtCleanup(t, dsn, name)
	index := "h6priv-" + name
	t.Cleanup(func() {
		s.Do(t, "DELETE", "/"+index+"-g1,"+index+"-g2,"+index+"-g3?ignore_unavailable=true", "")
	})
	acct := privtest.NewAccount(t, s, "h6-priv", privtest.Patterns(s, "h6priv"), run)

	dir := t.TempDir()
	text := fmt.Sprintf(`pipeline: h6priv
source:
  type: postgres
  dsn: "${%s}"
  tables: [public.%s]
  slot: %s
  publication: %s
sinks:
  - type: elasticsearch
    config:
      id: h6priv
      url: "%s"
      index: "h6priv-{table}"
      auth: {type: basic, username: "%s", password: "%s"}
      tls: {ca_file: "%s"}
      read_alias: true
      retire_after: 1ms
      mapping: {decimal: keyword, uint64: keyword}
      number_of_shards: 1
      number_of_replicas: 0
      connect_timeout: 1m
      request_timeout: 2m
state: %s
dlq: %s
runner:
  batch_max_events: 100
  batch_max_wait: 50ms
`, testenv.PostgresDSN, name, name, name, s.URL, acct.User, acct.Password, s.CAFile,
		filepath.Join(dir, "state.db"), filepath.Join(dir, "dlq.jsonl"))
	p := &privRun{t: t, s: s, acct: acct, cfg: loadYAML(t, dir, text), node: node, tb: tb, index: index}

	const rows = 40
	tb.Exec(t, tb.Insert(1, rows)...)
	// doc is stored out of line, uncompressed: a row update that leaves it alone streams it as
	// an unchanged TOAST value, which the sink fills from the index (_mget).
	tb.Exec(t, "ALTER TABLE "+name+" ALTER COLUMN doc SET STORAGE EXTERNAL",
		"UPDATE "+name+" SET doc = jsonb_build_object('pad', (SELECT string_agg(md5(id::text || g::text), '') FROM generate_series(1, 100) g)) WHERE id <= 3")
	toastUpdate := func(n int) { tb.Exec(t, fmt.Sprintf("UPDATE %s SET qty = qty + %d WHERE id <= 3", name, n)) }

	// The requests of a first start, each refused in turn.
	type removal struct{ privilege, action string }
	atStart := []removal{
		{"monitor", "cluster:monitor/"},
		{"create_index", "indices:admin/create"},
		{"view_index_metadata", "indices:admin/get"},
		{"indices:admin/aliases", "indices:admin/aliases"},
		{"write", "indices:data/write/bulk"},
	}
	if isOS {
		atStart = []removal{
			{"cluster_monitor", "cluster:monitor/"},
			{"create_index", "indices:admin/create"},
			{"indices:admin/get", "indices:admin/get"},
			{"manage_aliases", "indices:admin/aliases"},
			{"indices:data/write/bulk", "indices:data/write/bulk"},
			{"write", "indices:data/write/bulk[s]"},
		}
	}
	for _, c := range atStart {
		t.Run("without "+strings.ReplaceAll(c.privilege, "/", "_"), func(t *testing.T) {
			p.refused(t, run.Without(c.privilege), nil, c.action)
		})
	}

	// Exactly the mirror role.
	acct.Set(t, run)
	r := start(t, p.cfg)
	p.converged(r, "the snapshot", rows)
	toastUpdate(1)
	tb.Exec(t, "ALTER TABLE "+name+" ADD COLUMN note text", "UPDATE "+name+" SET note = 'n-' || id WHERE id BETWEEN 5 AND 7")
	p.converged(r, "the TOAST update and the new column", rows)
	if typ := node.FieldTypes(t, index)["note"]; typ == "" {
		t.Fatal("the new column has no field in the mapping")
	}
	if n := r.status().Reconnects; n != 0 {
		t.Fatalf("%d reconnects with exactly the mirror role", n)
	}
	r.stop()
	r.m.Close()

	// Requests of later runs, each refused in turn: the _mget of an unchanged TOAST value and
	// (OpenSearch, where write does not cover it) reading the mapping of a new column.
	later := []struct {
		removal
		change func()
	}{{removal{"read", "indices:data/read/mget"}, func() { toastUpdate(10) }}}
	if isOS {
		later = append(later,
			struct {
				removal
				change func()
			}{removal{"indices:data/read/mget", "indices:data/read/mget"}, func() { toastUpdate(100) }},
			struct {
				removal
				change func()
			}{removal{"indices:admin/mappings/get", "indices:admin/mappings/get"}, func() {
				tb.Exec(t, "ALTER TABLE "+name+" ADD COLUMN note2 text", "UPDATE "+name+" SET note2 = 'm-' || id WHERE id = 9")
			}})
	}
	for _, c := range later {
		t.Run("without "+strings.ReplaceAll(c.privilege, "/", "_"), func(t *testing.T) {
			p.refused(t, run.Without(c.privilege), c.change, c.action)
		})
	}

	// Exactly the mirror and reindex roles: what the refused runs left is written now, a
	// reindex switches the read alias to generation 2, and Run deletes generation 1.
	acct.Set(t, reindex)
	r = startWith(t, p.cfg, &mirror.Options{RetireInterval: shortRetire})
	p.converged(r, "after the refusals", rows)
	ctx, cancel := context.WithTimeout(context.Background(), 2*mirrortest.WaitBound)
	defer cancel()
	rep, err := r.m.Reindex(ctx, "h6priv", "public."+name)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Generation != index+"-g2" || rep.Replaced != index+"-g1" {
		t.Fatalf("reindex report %+v", rep)
	}
	toastUpdate(1000)
	p.converged(r, "after the reindex", rows)
	// The retired generation goes at Run's next look (RetireInterval; retire_after is over).
	r.wait("the retired generation deleted", func() string {
		if node.IndexExists(t, index+"-g1") {
			return index + "-g1 still exists"
		}
		return ""
	})
	if n := r.status().Reconnects; n != 0 {
		t.Fatalf("%d reconnects with exactly the reindex role", n)
	}

	// Without the refresh privilege, the next reindex fills generation 3 but its switch is
	// refused; the next Reindex call, with the reindex role again, completes the switch.
	refresh := "maintenance"
	if isOS {
		refresh = "indices:admin/refresh*"
	}
	acct.Set(t, reindex.Without(refresh))
	if _, err := r.m.Reindex(ctx, "h6priv", "public."+name); !isNamedRefusal(err, "indices:admin/refresh") {
		t.Fatalf("reindex without the refresh privilege: %v", err)
	}
	acct.Set(t, reindex)
	if rep, err = r.m.Reindex(ctx, "h6priv", "public."+name); err != nil {
		t.Fatalf("the reindex completing the refused switch: %v", err)
	}
	if rep.Generation != index+"-g3" || rep.Replaced != index+"-g2" || rep.Resnapshot != "" {
		t.Fatalf("reindex report %+v", rep)
	}
	toastUpdate(10000)
	p.converged(r, "after the switch completed by the second reindex", rows)
	var aliases map[string]any
	node.OK(t, esapi.IndicesGetAliasRequest{Name: []string{index}}).Decode(t, &aliases)
	if _, ok := aliases[index+"-g3"]; !ok || len(aliases) != 1 {
		t.Fatalf("the read alias is on %v, want %s-g3 alone", slices.Collect(maps.Keys(aliases)), index)
	}
	r.stop()
	r.m.Close()

	// Exactly the drop role, after a refusal without each of its privileges (the records stay
	// when it fails, so the next drop finds the indices again).
	dropCases := []removal{{"delete_index", "indices:admin/delete"}, {"view_index_metadata", "indices:admin/get"}}
	if isOS {
		dropCases = []removal{{"indices:admin/delete", "indices:admin/delete"}, {"indices:admin/get", "indices:admin/get"}}
	}
	for _, c := range dropCases {
		acct.Set(t, drop.Without(c.privilege))
		if _, err := mirror.Drop(context.Background(), p.cfg, "h6priv", &mirror.DropOptions{Indices: true}); !isNamedRefusal(err, c.action) {
			t.Fatalf("drop without %s: %v", c.privilege, err)
		}
	}
	acct.Set(t, drop)
	rep2, err := mirror.Drop(context.Background(), p.cfg, "h6priv", &mirror.DropOptions{Indices: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rep2.Indices, index+"-g3") {
		t.Fatalf("drop report %+v", rep2)
	}
	for _, g := range []string{"-g1", "-g2", "-g3"} {
		if node.IndexExists(t, index+g) {
			t.Fatalf("%s%s is still there after the drop", index, g)
		}
	}
}

// isNamedRefusal: err is a 403 naming action, with the permission-denied wording.
func isNamedRefusal(err error, action string) bool {
	var ae *search.AuthError
	return err != nil && errors.As(err, &ae) && strings.Contains(err.Error(), "permission denied") && strings.Contains(err.Error(), action)
}

// converged waits until the index equals the table row by row, and the TOAST value filled
// from the index and the new column's values equal the table's.
func (p *privRun) converged(r *running, what string, maxID int) {
	p.t.Helper()
	r.wait(what, func() string {
		if why := p.node.Converged(p.t, p.index, p.tb, maxID)(); why != "" {
			return why
		}
		return p.extrasDiffer()
	})
}

// extrasDiffer compares doc (rows 1..3 carry the TOAST value) and, once the column exists,
// note of every row.
func (p *privRun) extrasDiffer() string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.tb.DSN)
	if err != nil {
		p.t.Fatal(err)
	}
	defer conn.Close(context.Background())
	q := "SELECT id, doc->>'pad', to_jsonb(t)->>'note' FROM " + p.tb.Table + " t WHERE id <= 10"
	rs, err := conn.Query(ctx, q)
	if err != nil {
		p.t.Fatal(err)
	}
	type extra struct{ pad, note *string }
	want := map[string]extra{}
	for rs.Next() {
		var id int64
		var e extra
		if err := rs.Scan(&id, &e.pad, &e.note); err != nil {
			p.t.Fatal(err)
		}
		want[fmt.Sprint(id)] = e
	}
	if err := rs.Err(); err != nil {
		p.t.Fatal(err)
	}
	ids := make([]string, 0, len(want))
	for id := range want {
		ids = append(ids, id)
	}
	docs, err := p.node.Mget(p.t, p.index, ids)
	if err != nil {
		return err.Error()
	}
	str := func(v any) *string {
		if s, ok := v.(string); ok {
			return &s
		}
		return nil
	}
	eq := func(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
	for _, d := range docs {
		if !d.Found {
			return "document " + d.ID + " missing"
		}
		obj, err := d.Object()
		if err != nil {
			return err.Error()
		}
		var pad *string
		if m, ok := obj["doc"].(map[string]any); ok {
			pad = str(m["pad"])
		}
		w := want[d.ID]
		if !eq(pad, w.pad) {
			return "document " + d.ID + ": doc differs"
		}
		if !eq(str(obj["note"]), w.note) {
			return "document " + d.ID + ": note differs"
		}
	}
	return ""
}

// refused runs the pipeline with role r until it stops by itself (change, when given, is made
// once it runs): it must stop with a permanent refusal naming action, never reconnecting, and
// its status must say so.
func (p *privRun) refused(t *testing.T, r privtest.Role, change func(), action string) {
	p.acct.Set(t, r)
	run := start(t, p.cfg)
	if change != nil {
		change()
	}
	select {
	case run.err = <-run.done:
		run.ended = true
	case <-time.After(mirrortest.WaitBound):
		t.Fatalf("the pipeline still runs %v after it started without the privilege (status %+v)", mirrortest.WaitBound, run.status())
	}
	st := run.status()
	run.m.Close()
	if !isNamedRefusal(run.err, action) {
		t.Fatalf("Run: %v, want a permission refusal naming %s", run.err, action)
	}
	if !cdc.IsPermanent(run.err) {
		t.Fatalf("Run: %v is not permanent", run.err)
	}
	// The runner keeps the failure as the reason of its health: stopped.
	if st.Health.Healthy || st.Health.Class != cdc.HealthStopped || !strings.Contains(st.Health.Reason, "permission denied") ||
		!strings.Contains(st.Health.Reason, action) || st.Reconnects != 0 {
		t.Fatalf("status after the refusal: health %+v, %d reconnects", st.Health, st.Reconnects)
	}
	t.Logf("health: %s", st.Health.Reason)
}
