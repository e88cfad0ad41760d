package mirror_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/mirrortest"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/mirror"
)

// The active/standby tests run two mirrors of one configuration on a shared state store
// (state_store:, each with its own holder, as two processes on two hosts) against the real
// servers: exactly one runs the pipeline, the other stands by naming it; a clean stop of the
// active hands the pipeline over (its lease released) with no write lost; a lease that runs
// out under the active (as after a pause or a partition from the store) hands it over too,
// the old active stepping down to standby instead of stopping; and the administrative calls
// respect the lease. Each ends with the index equal to the table, row by row.

// haSide is one process of the pair.
type haSide struct {
	name string // its holder
	cfg  *mirror.Config
	run  *running
	log  *testenv.LogBuffer
}

func (h *haSide) start(t *testing.T) {
	t.Helper()
	h.run = startWith(t, h.cfg, &mirror.Options{Logger: slog.New(slog.NewTextHandler(h.log, &slog.HandlerOptions{Level: slog.LevelInfo}))})
}

func (h *haSide) lead() cdc.Leadership { return h.run.status().Leadership }

// haStore is the shared store of a test: its type, DSN variable, and the schema (MySQL:
// database) made for the test and dropped when it ends.
type haStore struct {
	typ, dsnVar, dsn, schema string
	// expire ends the pipeline's lease now on the store's clock, as a lease that was not
	// renewed in time would end.
	expire func(t *testing.T, pipeline string)
	// expires reads when the pipeline's lease expires (the store's own encoding).
	expires func(t *testing.T, pipeline string) string
}

func postgresStore(t *testing.T, dsn string) *haStore {
	s := &haStore{typ: "postgres", dsnVar: testenv.PostgresDSN, dsn: dsn, schema: "ht2_" + estest.RandomHex(t, 4)}
	pgQuery := func(t *testing.T, sql string, args ...any) string {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Error(err)
			return ""
		}
		defer conn.Close(context.Background())
		var out string
		if err := conn.QueryRow(ctx, sql, args...).Scan(&out); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Errorf("%s: %v", sql, err)
		}
		return out
	}
	t.Cleanup(func() { pgQuery(t, "DROP SCHEMA IF EXISTS "+s.schema+" CASCADE") })
	s.expire = func(t *testing.T, pipeline string) {
		pgQuery(t, "UPDATE "+s.schema+".statestore_leases SET expires = now() - interval '1 second' WHERE name = $1", []byte(pipeline))
	}
	s.expires = func(t *testing.T, pipeline string) string {
		return pgQuery(t, "SELECT expires::text FROM "+s.schema+".statestore_leases WHERE name = $1", []byte(pipeline))
	}
	return s
}

func mysqlStore(t *testing.T, dsn string) *haStore {
	s := &haStore{typ: "mysql", dsnVar: testenv.MySQLDSN, dsn: dsn, schema: "ht2_" + estest.RandomHex(t, 4)}
	t.Cleanup(func() { mysqlExec(t, dsn, "DROP DATABASE IF EXISTS "+s.schema) })
	s.expire = func(t *testing.T, pipeline string) {
		mysqlExec(t, dsn, "UPDATE "+s.schema+".statestore_leases SET expires_us = 0 WHERE name = '"+pipeline+"'")
	}
	s.expires = func(t *testing.T, pipeline string) string {
		return fmt.Sprint(mysqlQuery(t, dsn, "SELECT expires_us FROM "+s.schema+".statestore_leases WHERE name = '"+pipeline+"'"))
	}
	return s
}

// mysqlQuery runs one statement on the MariaDB server and returns its rows as text.
func mysqlQuery(t *testing.T, dsn, sql string) [][]string {
	t.Helper()
	d, err := testenv.ParseMySQLDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.ConnectWithContext(context.Background(), d.Addr, d.User, d.Password, "", 10*time.Second)
	if err != nil {
		t.Error(err)
		return nil
	}
	defer c.Close()
	res, err := c.Execute(sql)
	if err != nil {
		t.Errorf("%s: %v", sql, err)
		return nil
	}
	defer res.Close()
	var out [][]string
	for i := range res.RowNumber() {
		var row []string
		for j := range res.ColumnNumber() {
			v, _ := res.GetString(i, j)
			row = append(row, v)
		}
		out = append(out, row)
	}
	return out
}

func mysqlExec(t *testing.T, dsn, sql string) { mysqlQuery(t, dsn, sql) }

// haPair writes one configuration of pipeline for source with a state_store of st and
// returns it for two holders, ht2-a and ht2-b (each with a dead-letter file of its own: it
// is a local file of each process).
func haPair(t *testing.T, pipeline, source string, st *haStore, ttl time.Duration, eng mirrortest.Engine, index string) (a, b *haSide) {
	dir := t.TempDir()
	text := "pipeline: " + pipeline + "\n" + source + fmt.Sprintf(`sinks:
  - type: elasticsearch
    config:
      id: es-ha
      url: "${%s}"
      index: "%s"
      id_separator: "|"
      auth: {type: none}
%s      number_of_shards: 1
      number_of_replicas: 0
state_store:
  type: %s
  dsn: "${%s}"
  schema: %s
  lease_ttl: %s
  holder: ht2-a
dlq: %s
runner:
  batch_max_events: 100
  batch_max_wait: 50ms
`, eng.URLVar, index, eng.MappingYAML("      "), st.typ, st.dsnVar, st.schema, ttl, filepath.Join(dir, "dlq-a.jsonl"))
	cfgA := loadYAML(t, dir, text)
	cfgB := *cfgA
	ss := *cfgA.StateStore
	ss.Holder = "ht2-b"
	cfgB.StateStore = &ss
	cfgB.Pipelines = slices.Clone(cfgA.Pipelines)
	cfgB.Pipelines[0].DLQ = filepath.Join(dir, "dlq-b.jsonl")
	a = &haSide{name: "ht2-a", cfg: cfgA, log: &testenv.LogBuffer{}}
	b = &haSide{name: "ht2-b", cfg: &cfgB, log: &testenv.LogBuffer{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log of ht2-a:\n%s", a.log)
			t.Logf("log of ht2-b:\n%s", b.log)
		}
	})
	return a, b
}

// waitRoles waits until one of a, b is active and the other standby naming it, and
// returns them in that order. Neither Run may end meanwhile.
func waitRoles(t *testing.T, what string, a, b *haSide) (act, sby *haSide) {
	t.Helper()
	mirrortest.WaitFor(t, what, func() error {
		for _, h := range []*haSide{a, b} {
			if err := h.run.endedErr(); err != nil {
				return fmt.Errorf("%s: %w", h.name, err)
			}
		}
		return nil
	}, func() string {
		la, lb := a.lead(), b.lead()
		switch {
		case la.Role == cdc.RoleActive && lb.Role == cdc.RoleStandby && lb.Holder == a.name && la.Holder == a.name:
			act, sby = a, b
		case lb.Role == cdc.RoleActive && la.Role == cdc.RoleStandby && la.Holder == b.name && lb.Holder == b.name:
			act, sby = b, a
		default:
			return fmt.Sprintf("%s: %q (holder %q, epoch %d); %s: %q (holder %q, epoch %d)",
				a.name, la.Role, la.Holder, la.Epoch, b.name, lb.Role, lb.Holder, lb.Epoch)
		}
		if la.Epoch != lb.Epoch {
			return fmt.Sprintf("the standby read epoch %d, the active holds %d", sby.lead().Epoch, act.lead().Epoch)
		}
		return ""
	})
	return act, sby
}

// haCase is what the two sources' tests differ in.
type haCase struct {
	pipeline string
	store    *haStore
	ttl      time.Duration
	tb       mirrortest.Table
	table    string // the captured table in the source's spelling (Reindex)
	source   string // the source: section
	// streaming checks, while the pipeline streams in act, what its source's server shows
	// (MariaDB: the replica it registered); "" when nothing is wrong.
	streaming func(t *testing.T, act *haSide) string
}

func TestActiveStandbyPostgres(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	oneEngine(t, func(t *testing.T, eng mirrortest.Engine, node *mirrortest.Node) {
		name := "ht2_ha_" + estest.RandomHex(t, 4)
		dropSlotAtCleanup(t, dsn, name)
		runActiveStandby(t, eng, node, &haCase{
			pipeline: name,
			store:    postgresStore(t, dsn),
			ttl:      2 * time.Second,
			tb:       mirrortest.NewPostgres(t, dsn, name),
			table:    "public." + name,
			source: fmt.Sprintf("source:\n  type: postgres\n  dsn: \"${%s}\"\n  tables: [public.%s]\n  slot: %s\n  publication: %s\n",
				testenv.PostgresDSN, name, name, name),
		})
	})
}

// TestActiveStandbyMySQL is TestActiveStandbyPostgres with a MariaDB source and the store in
// that MariaDB. No server_id is configured: both processes derive the same one from the
// pipeline's name, and the server shows one replica of that id whichever process streams.
// The lease is the default 6s, so that the active renews it only every 2s: the lease run out
// under it is taken over (and the new active's binlog dump registered) before the old active
// finds out at its next renewal, while its own dump of the same server_id is still open.
func TestActiveStandbyMySQL(t *testing.T) {
	dsn := testenv.Require(t, testenv.MySQLDSN)
	oneEngine(t, func(t *testing.T, eng mirrortest.Engine, node *mirrortest.Node) {
		name := "ht2_ha_" + estest.RandomHex(t, 4)
		tb := mirrortest.NewMySQL(t, dsn, name)
		id := fmt.Sprint(derivedServerID(name))
		runActiveStandby(t, eng, node, &haCase{
			pipeline: name,
			store:    mysqlStore(t, dsn),
			ttl:      6 * time.Second,
			tb:       tb,
			table:    tb.DSN.DB + "." + name,
			source:   fmt.Sprintf("source:\n  type: mysql\n  dsn: \"${%s}\"\n  tables: [%s]\n  flavor: mariadb\n", testenv.MySQLDSN, name),
			streaming: func(t *testing.T, act *haSide) string {
				n := 0
				for _, r := range mysqlQuery(t, dsn, "SHOW SLAVE HOSTS") {
					if r[0] == id {
						n++
					}
				}
				if n != 1 {
					return fmt.Sprintf("the server lists %d replicas of server id %s (the id derived from the pipeline's name), want 1", n, id)
				}
				return ""
			},
		})
	})
}

// derivedServerID is the server id a mysql pipeline registers with by default (mirror's
// serverID): what both processes of a pair use.
func derivedServerID(pipeline string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte("mirror/" + pipeline))
	return 1<<24 + h.Sum32()%(1<<31-1<<24)
}

// oneEngine runs fn on one search engine: Elasticsearch, else OpenSearch (the takeover does
// not depend on the engine; both run the fencing suites elsewhere).
func oneEngine(t *testing.T, fn func(t *testing.T, eng mirrortest.Engine, node *mirrortest.Node)) {
	for _, eng := range mirrortest.Engines {
		if url := os.Getenv(eng.URLVar); url != "" {
			n := &mirrortest.Node{Node: estest.Connect(t, eng.Name, url)}
			n.EnforceAutoCreateRule(t)
			fn(t, eng, n)
			return
		}
	}
	t.Skipf("neither %s nor %s is set: no search engine to mirror into", mirrortest.Engines[0].URLVar, mirrortest.Engines[1].URLVar)
}

func runActiveStandby(t *testing.T, eng mirrortest.Engine, node *mirrortest.Node, c *haCase) {
	ctx := context.Background()
	began := time.Now()
	phase := func(what string) { t.Logf("%v: %s", time.Since(began).Round(time.Millisecond), what) }
	defer phase("end")
	index := "ht2-ha-" + c.tb.Name()
	node.DeleteAtCleanup(t, index)
	node.DeleteAtCleanup(t, index+"-*")
	a, b := haPair(t, c.pipeline, c.source, c.store, c.ttl, eng, "ht2-ha-{table}")
	c.tb.Exec(t, c.tb.Insert(1, 200)...)
	next := 301 // the next row inserted; rows 221..300 stay free
	converged := func() func() string { return node.Converged(t, index, c.tb, next+20) }

	// Both start at once: one takes the lease, the other stands by naming it.
	a.start(t)
	b.start(t)
	act, sby := waitRoles(t, "one active, one standby", a, b)
	act.run.wait("snapshot convergence", converged())
	c.tb.Exec(t, mirrortest.Changes(c.tb, 201, 220)...)
	act.run.wait("stream convergence", converged())
	if la := act.lead(); la.Takeovers != 1 || la.LastTakeover <= 0 || la.Epoch == 0 {
		t.Errorf("the active's leadership %+v: want one takeover with its duration", la)
	}
	if s := sby.run.status(); s.State != "standby" || !s.Health.Healthy || s.Health.Class != cdc.HealthStandby ||
		!strings.Contains(s.Health.Reason, act.name) {
		t.Errorf("the standby's status: state %q, health %+v", s.State, s.Health)
	}
	if c.streaming != nil {
		act.run.wait("the active's replica registered", func() string { return c.streaming(t, act) })
	}

	phase("standby refusals and the administrative calls")
	// What only the active may do is refused on the standby, naming the active.
	if _, err := sby.run.m.Resnapshot(ctx, c.pipeline, cdc.ResnapshotRequest{}); !errors.Is(err, mirror.ErrStandby) || !strings.Contains(err.Error(), act.name) {
		t.Errorf("Resnapshot on the standby: %v, want ErrStandby naming %s", err, act.name)
	}
	if _, err := sby.run.m.Reindex(ctx, c.pipeline, c.table); !errors.Is(err, mirror.ErrStandby) {
		t.Errorf("Reindex on the standby: %v, want ErrStandby", err)
	}
	// The administrative calls see the lease: Drop refuses, Inspect reads the shared state
	// and reports the pipeline running.
	if _, err := mirror.Drop(ctx, a.cfg, c.pipeline, &mirror.DropOptions{Indices: true}); !errors.Is(err, mirror.ErrRunning) || !strings.Contains(err.Error(), act.name) {
		t.Fatalf("Drop while %s holds the lease: %v, want ErrRunning naming it", act.name, err)
	}
	insp, err := mirror.Inspect(ctx, a.cfg, c.pipeline, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !insp.StateInUse || !insp.Checkpoint || !slices.Contains(insp.Indices, index) {
		t.Errorf("Inspect while running: in use %v, checkpoint %v, indices %v", insp.StateInUse, insp.Checkpoint, insp.Indices)
	}

	phase("clean handover")
	// A clean stop of the active releases the lease: the standby takes over while rows keep
	// coming, and every one of them arrives.
	oldEpoch := act.lead().Epoch
	act.run.cancel()
	stopped := time.Now()
	var took time.Duration
	for took == 0 {
		c.tb.Exec(t, c.tb.Insert(next, next)...)
		next++
		if l := sby.lead(); l.Role == cdc.RoleActive {
			took = time.Since(stopped)
		}
		if err := sby.run.endedErr(); err != nil {
			t.Fatalf("the standby's Run ended: %v", err)
		}
		if time.Since(stopped) > mirrortest.WaitBound {
			t.Fatalf("the standby did not take over within %v: %+v", mirrortest.WaitBound, sby.lead())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for range 20 {
		c.tb.Exec(t, c.tb.Insert(next, next)...)
		next++
	}
	act.run.stop()
	l := sby.lead()
	t.Logf("clean handover: %s active %v after %s stopped (its takeover: %v), %d rows written meanwhile",
		sby.name, took.Round(time.Millisecond), act.name, l.LastTakeover.Round(time.Millisecond), next-301)
	if l.Takeovers != 1 || l.LastTakeover <= 0 || l.Epoch <= oldEpoch || l.Holder != sby.name {
		t.Errorf("after the handover: %+v, want one takeover at an epoch after %d", l, oldEpoch)
	}
	sby.run.wait("convergence after the handover", converged())
	if c.streaming != nil {
		sby.run.wait("the new active's replica registered", func() string { return c.streaming(t, sby) })
	}

	phase("the stopped process restarts")
	// The stopped process comes back as the standby of the new active.
	act.start(t)
	act, sby = waitRoles(t, "the restarted process standing by", sby, act)

	phase("the lease runs out under the active")
	// The active's lease runs out under it (expired on the store's clock: a pause or a
	// partition from the store past the lease looks the same to the others). The standby
	// takes the pipeline over; the old active finds out (its renewal or a fenced write is
	// refused) and stands by again instead of stopping. Either may win the lease back first;
	// what matters is one active, the other standing by, no row lost.
	// Right after a renewal, so that the standby takes the lease before the old active's next
	// renewal (a third of the lease later) tells it: a takeover while the old active still
	// streams (MariaDB: its binlog dump of the same server id still open).
	oldEpoch = act.lead().Epoch
	before := c.store.expires(t, c.pipeline)
	mirrortest.WaitFor(t, "a renewal", act.run.endedErr, func() string {
		if c.store.expires(t, c.pipeline) == before {
			return "the lease's expiry did not move"
		}
		return ""
	})
	// No row is written until the new term began: the old active learns of the takeover from
	// its source or its next renewal, not from a checkpoint the fence refuses (MariaDB ends its
	// binlog dump, error 4052, once the new active's registers the same server id).
	expired := time.Now()
	c.store.expire(t, c.pipeline)
	mirrortest.WaitFor(t, "a new term", nil, func() string {
		if e := max(a.lead().Epoch, b.lead().Epoch); e <= oldEpoch {
			return fmt.Sprintf("epochs %d, %d: not after %d", a.lead().Epoch, b.lead().Epoch, oldEpoch)
		}
		return ""
	})
	act2, sby2 := waitRoles(t, "one active, one standby after the lease ran out", a, b)
	t.Logf("lease run out under %s: %s active at epoch %d after %v", act.name, act2.name, act2.lead().Epoch, time.Since(expired).Round(time.Millisecond))
	for _, line := range strings.Split(act.log.String(), "\n") {
		if strings.Contains(line, "stepped down") {
			t.Logf("%s: %s", act.name, line)
		}
	}
	for range 20 {
		c.tb.Exec(t, c.tb.Insert(next, next)...)
		next++
	}
	c.tb.Exec(t, mirrortest.Changes(c.tb, next, next+10)...)
	act2.run.wait("convergence after the lease ran out", converged())
	if c.streaming != nil {
		act2.run.wait("one replica after the lease ran out", func() string { return c.streaming(t, act2) })
	}

	phase("drop")
	// Drop refuses while either runs, and works once both stopped.
	sby2.run.stop()
	if _, err := mirror.Drop(ctx, a.cfg, c.pipeline, &mirror.DropOptions{Indices: true}); !errors.Is(err, mirror.ErrRunning) {
		t.Fatalf("Drop while %s runs: %v, want ErrRunning", act2.name, err)
	}
	act2.run.stop()
	if insp, err := mirror.Inspect(ctx, a.cfg, c.pipeline, nil); err != nil || insp.StateInUse || !insp.Checkpoint {
		t.Fatalf("Inspect after both stopped: %+v, %v", insp, err)
	}
	rep, err := mirror.Drop(ctx, b.cfg, c.pipeline, &mirror.DropOptions{Indices: true})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Checkpoint || !slices.Contains(rep.Indices, index) {
		t.Fatalf("drop report %+v", rep)
	}
	if node.IndexExists(t, index) {
		t.Fatal("the index is still there after the drop")
	}
	if insp, err := mirror.Inspect(ctx, a.cfg, c.pipeline, nil); err != nil || insp.Checkpoint || len(insp.Indices) != 0 {
		t.Fatalf("Inspect after the drop: %+v, %v", insp, err)
	}
}
