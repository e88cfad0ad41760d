package connecttest

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/internal/testenv"
)

func TestPostgresConfigDefaults(t *testing.T) {
	got, err := postgresConfig("ct-pg-A.1", PostgresConnector{Tables: []string{"public.t1", "public.t2"}},
		"postgres://postgres@127.0.0.1:15432/postgres?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"connector.class":              PostgresClass,
		"tasks.max":                    "1",
		"database.hostname":            "127.0.0.1",
		"database.port":                "15432",
		"database.user":                "postgres",
		"database.dbname":              "postgres",
		"database.sslmode":             "disable",
		"plugin.name":                  "pgoutput",
		"slot.name":                    "ct_pg_a_1",
		"publication.name":             "ct_pg_a_1",
		"publication.autocreate.mode":  "filtered",
		"topic.prefix":                 "ct-pg-A.1",
		"table.include.list":           "public.t1,public.t2",
		"provide.transaction.metadata": "true",
		"skipped.operations":           "none",
		"column.propagate.source.type": ".*",
		"decimal.handling.mode":        "precise",
	}
	diffConfig(t, got, want)
}

func TestPostgresConfigOptions(t *testing.T) {
	got, err := postgresConfig("ct-pg", PostgresConnector{
		TopicPrefix: "ct_p", Tables: []string{"s.t"}, Slot: "ct_slot", Publication: "ct_pub",
		SnapshotMode: "no_data", NoTransactionMetadata: true, NoSourceTypes: true,
		DecimalHandling: "string", TimePrecision: "connect",
		Extra: map[string]string{"decimal.handling.mode": "double", "interval.handling.mode": "string"},
	}, "postgresql://u:p%40ss@db.example:6543/app")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"connector.class":              PostgresClass,
		"tasks.max":                    "1",
		"database.hostname":            "db.example",
		"database.port":                "6543",
		"database.user":                "u",
		"database.password":            "p@ss",
		"database.dbname":              "app",
		"plugin.name":                  "pgoutput",
		"slot.name":                    "ct_slot",
		"publication.name":             "ct_pub",
		"publication.autocreate.mode":  "filtered",
		"topic.prefix":                 "ct_p",
		"table.include.list":           "s.t",
		"snapshot.mode":                "no_data",
		"provide.transaction.metadata": "false",
		"skipped.operations":           "none",
		"decimal.handling.mode":        "double", // Extra wins
		"time.precision.mode":          "connect",
		"interval.handling.mode":       "string",
	}
	diffConfig(t, got, want)

	// The default port, and the database defaults to the user's name as in libpq.
	got, err = postgresConfig("ct-pg", PostgresConnector{Tables: []string{"public.t"}}, "postgres://ct@localhost")
	if err != nil {
		t.Fatal(err)
	}
	if got["database.port"] != "5432" || got["database.dbname"] != "ct" {
		t.Errorf("port %q dbname %q, want 5432 and ct", got["database.port"], got["database.dbname"])
	}
}

func TestPostgresConfigErrors(t *testing.T) {
	const secret = "s3cr3t"
	for _, tc := range []struct {
		name string
		p    PostgresConnector
		dsn  string
	}{
		{"no tables", PostgresConnector{}, "postgres://u@h/db"},
		{"not a URL", PostgresConnector{Tables: []string{"public.t"}}, "u:" + secret + "@tcp(h:1)/db"},
		{"other scheme", PostgresConnector{Tables: []string{"public.t"}}, "mysql://u:" + secret + "@h/db"},
		{"no user", PostgresConnector{Tables: []string{"public.t"}}, "postgres://h:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := postgresConfig("ct", tc.p, tc.dsn)
			if err == nil {
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the error quotes the DSN: %v", err)
			}
		})
	}
}

func TestMariaDBConfigDefaults(t *testing.T) {
	my := testenv.MySQL{User: "tributary", Password: "pw", Addr: "127.0.0.1:13306", DB: "test"}
	got, err := mariadbConfig("ct-my", MariaDBConnector{Tables: []string{"test.a", "other.b", "test.c"}}, my,
		[]string{"127.0.0.1:19092", "127.0.0.1:19094"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"connector.class":       MariaDBClass,
		"tasks.max":             "1",
		"database.hostname":     "127.0.0.1",
		"database.port":         "13306",
		"database.user":         "tributary",
		"database.password":     "pw",
		"database.server.id":    strconv.FormatUint(uint64(ServerID("ct-my")), 10),
		"database.include.list": "test,other",
		"table.include.list":    "test.a,other.b,test.c",
		"topic.prefix":          "ct-my",
		"schema.history.internal.kafka.bootstrap.servers":        "127.0.0.1:19092,127.0.0.1:19094",
		"schema.history.internal.kafka.topic":                    "ct-my-schema-history",
		"schema.history.internal.store.only.captured.tables.ddl": "true",
		"schema.history.internal.skip.unparseable.ddl":           "true",
		"snapshot.locking.mode":                                  "none",
		"bigint.unsigned.handling.mode":                          "precise",
		"provide.transaction.metadata":                           "true",
		"skipped.operations":                                     "none",
		"column.propagate.source.type":                           ".*",
		"decimal.handling.mode":                                  "precise",
	}
	diffConfig(t, got, want)
}

func TestMariaDBConfigOptions(t *testing.T) {
	my := testenv.MySQL{User: "u", Password: "p", Addr: "db:3306", DB: "test"}
	got, err := mariadbConfig("ct-my", MariaDBConnector{
		TopicPrefix: "ct_m", Tables: []string{"test.t"}, ServerID: 4242, HistoryTopic: "ct_hist",
		SnapshotMode: "no_data", NoTransactionMetadata: true, NoSourceTypes: true, TimePrecision: "connect",
		Extra: map[string]string{"bigint.unsigned.handling.mode": "long"},
	}, my, []string{"k:9092"})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"topic.prefix":                        "ct_m",
		"database.server.id":                  "4242",
		"schema.history.internal.kafka.topic": "ct_hist",
		"snapshot.mode":                       "no_data",
		"provide.transaction.metadata":        "false",
		"time.precision.mode":                 "connect",
		"bigint.unsigned.handling.mode":       "long",
		"database.hostname":                   "db",
		"database.port":                       "3306",
	} {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if _, set := got["column.propagate.source.type"]; set {
		t.Error("column.propagate.source.type set with NoSourceTypes")
	}

	for _, tables := range [][]string{nil, {"t"}, {".t"}} {
		if _, err := mariadbConfig("ct", MariaDBConnector{Tables: tables}, my, nil); err == nil {
			t.Errorf("tables %q: no error", tables)
		}
	}
	if _, err := mariadbConfig("ct", MariaDBConnector{Tables: []string{"test.t"}}, testenv.MySQL{Addr: "nohostport"}, nil); err == nil {
		t.Error("address without a port: no error")
	}
}

func TestServerID(t *testing.T) {
	seen := map[uint32]string{}
	for _, name := range []string{"a", "b", "ct-my-1", "ct-my-2", "dbzn_my_x", strings.Repeat("z", 300)} {
		id := ServerID(name)
		if id < 1_000_000 || id >= 2_000_000_000 {
			t.Errorf("ServerID(%q) = %d, outside [1000000, 2000000000)", name, id)
		}
		if id != ServerID(name) {
			t.Errorf("ServerID(%q) is not stable", name)
		}
		if other, dup := seen[id]; dup {
			t.Errorf("ServerID(%q) = ServerID(%q)", name, other)
		}
		seen[id] = name
	}
}

func TestPGName(t *testing.T) {
	for in, want := range map[string]string{
		"ct-pg-1":               "ct_pg_1",
		"CT.Pg x":               "ct_pg_x",
		"ok_name_9":             "ok_name_9",
		strings.Repeat("a", 70): strings.Repeat("a", 63),
	} {
		if got := pgName(in); got != want {
			t.Errorf("pgName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestOwnsTopic(t *testing.T) {
	pg := ownsTopic(map[string]string{"topic.prefix": "ct_p"})
	my := ownsTopic(map[string]string{"topic.prefix": "ct_m", "schema.history.internal.kafka.topic": "ct_m-schema-history",
		"topic.heartbeat.prefix": "hb"})
	for _, tc := range []struct {
		owns  func(string) bool
		topic string
		want  bool
	}{
		{pg, "ct_p", true},
		{pg, "ct_p.public.t", true},
		{pg, "ct_p.transaction", true},
		{pg, "__debezium-heartbeat.ct_p", true},
		{pg, "ct_px.public.t", false},
		{pg, "ct_p-schema-history", false},
		{pg, "dbz.public.t", false},
		{my, "ct_m-schema-history", true},
		{my, "ct_m.test.t", true},
		{my, "hb.ct_m", true},
		{my, "__debezium-heartbeat.ct_m", false},
		{my, "tributary-connect-offsets", false},
	} {
		if got := tc.owns(tc.topic); got != tc.want {
			t.Errorf("%s: owned = %v, want %v", tc.topic, got, tc.want)
		}
	}
}

func diffConfig(t *testing.T, got, want map[string]string) {
	t.Helper()
	keys := slices.Sorted(maps.Keys(got))
	for _, k := range keys {
		if w, ok := want[k]; !ok {
			t.Errorf("unexpected %s = %q", k, got[k])
		} else if got[k] != w {
			t.Errorf("%s = %q, want %q", k, got[k], w)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if _, ok := got[k]; !ok {
			t.Errorf("missing %s = %q", k, want[k])
		}
	}
}
