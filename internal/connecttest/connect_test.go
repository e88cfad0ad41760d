package connecttest

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-dev/tributary/internal/testenv"
)

// envelope is the part of a Debezium change record (JsonConverter, schemas enabled) the test reads.
type envelope struct {
	Schema struct {
		Fields []struct {
			Field  string `json:"field"`
			Fields []struct {
				Field      string            `json:"field"`
				Parameters map[string]string `json:"parameters"`
			} `json:"fields"`
		} `json:"fields"`
	} `json:"schema"`
	Payload struct {
		Op     string         `json:"op"`
		After  map[string]any `json:"after"`
		Source struct {
			Version   string `json:"version"`
			Connector string `json:"connector"`
		} `json:"source"`
		Transaction *struct {
			ID string `json:"id"`
		} `json:"transaction"`
	} `json:"payload"`
}

// TestConnectPostgresAndMariaDB creates a connector of each kind on a table of its own, reads the
// snapshot record of the table's row (and, after Pause/Resume of one and Restart of the other, a
// streamed create), and checks that the clean-up left no connector, slot, publication or topic.
func TestConnectPostgresAndMariaDB(t *testing.T) {
	c := Require(t)
	pgDSN := testenv.Require(t, testenv.PostgresDSN)
	my, err := testenv.ParseMySQLDSN(testenv.Require(t, testenv.MySQLDSN))
	if err != nil {
		t.Fatal(err)
	}
	sfx := strconv.FormatInt(time.Now().UnixNano(), 36)
	pgTable, myTable := "ct_pg_"+sfx, "ct_my_"+sfx
	pgName, myName := "ct-pg-"+sfx, "ct-my-"+sfx
	pgPrefix, myPrefix := "ct_pg_"+sfx, "ct_my_"+sfx
	slot := "ct_pg_" + sfx // the defaults: the connector's name as a slot name
	publication := slot

	pgExec(t, pgDSN, fmt.Sprintf("CREATE TABLE %s (id bigint PRIMARY KEY, note text)", pgTable),
		fmt.Sprintf("INSERT INTO %s VALUES (1, 'snapshot')", pgTable))
	t.Cleanup(func() { pgExec(t, pgDSN, "DROP TABLE IF EXISTS "+pgTable) })
	myExec(t, my, fmt.Sprintf("CREATE TABLE %s (id BIGINT PRIMARY KEY, note TEXT)", myTable),
		fmt.Sprintf("INSERT INTO %s VALUES (1, 'snapshot')", myTable))
	t.Cleanup(func() { myExec(t, my, "DROP TABLE IF EXISTS "+myTable) })

	pgTopic, myTopic := pgPrefix+".public."+pgTable, myPrefix+"."+my.DB+"."+myTable
	t.Run("connectors", func(t *testing.T) {
		c.CreatePostgres(t, pgName, PostgresConnector{TopicPrefix: pgPrefix, Tables: []string{"public." + pgTable}})
		c.CreateMariaDB(t, myName, MariaDBConnector{TopicPrefix: myPrefix, Tables: []string{my.DB + "." + myTable}})
		if got := slotCount(t, pgDSN, slot); got != 1 {
			t.Fatalf("%d replication slots %s, want 1", got, slot)
		}

		for _, tc := range []struct{ topic, connector, version, sourceType string }{
			{pgTopic, "postgresql", "3.6.1.Final", "TEXT"},
			{myTopic, "mariadb", "3.5.0.Final", "TEXT"},
		} {
			env := waitRecord(t, c.Brokers, tc.topic, func(e envelope) bool { return e.Payload.Op == "r" && id(e) == 1 })
			if env.Payload.Source.Connector != tc.connector || env.Payload.Source.Version != tc.version {
				t.Errorf("%s: source %+v, want connector %s version %s", tc.topic, env.Payload.Source, tc.connector, tc.version)
			}
			if got := noteSourceType(env); got != tc.sourceType {
				t.Errorf("%s: note's __debezium.source.column.type = %q, want %q (column.propagate.source.type)", tc.topic, got, tc.sourceType)
			}
		}

		c.Pause(t, pgName)
		if st := c.Status(t, pgName); st.Connector.State != "PAUSED" || len(st.Tasks) != 1 || st.Tasks[0].State.State != "PAUSED" {
			t.Errorf("after Pause: %+v", st)
		}
		c.Resume(t, pgName)
		c.Restart(t, myName)
		if st := c.Status(t, myName); st.Connector.State != "RUNNING" || len(st.Tasks) != 1 || st.Tasks[0].State.State != "RUNNING" {
			t.Errorf("after Restart: %+v", st)
		}

		pgExec(t, pgDSN, fmt.Sprintf("INSERT INTO %s VALUES (2, 'streamed')", pgTable))
		myExec(t, my, fmt.Sprintf("INSERT INTO %s VALUES (2, 'streamed')", myTable))
		for _, topic := range []string{pgTopic, myTopic} {
			env := waitRecord(t, c.Brokers, topic, func(e envelope) bool { return e.Payload.Op == "c" && id(e) == 2 })
			if env.Payload.Transaction == nil || env.Payload.Transaction.ID == "" {
				t.Errorf("%s: a streamed create without transaction metadata", topic)
			}
		}
	})

	// The subtest's clean-up has run.
	for _, name := range []string{pgName, myName} {
		if _, found, err := c.status(name); err != nil || found {
			t.Errorf("connector %s: found %v (%v) after the clean-up", name, found, err)
		}
	}
	if got := slotCount(t, pgDSN, slot); got != 0 {
		t.Errorf("%d replication slots %s left after the clean-up", got, slot)
	}
	var pubs int
	pgQuery(t, pgDSN, "SELECT count(*) FROM pg_publication WHERE pubname = $1", []any{publication}, &pubs)
	if pubs != 0 {
		t.Errorf("publication %s left after the clean-up", publication)
	}
	if left := topicsOwned(t, c.Brokers, pgPrefix, myPrefix); len(left) > 0 {
		t.Errorf("topics left after the clean-up: %v", left)
	}
}

func id(e envelope) float64 {
	v, _ := e.Payload.After["id"].(float64)
	return v
}

// noteSourceType is the source type Debezium put on the "note" column of the record's "after".
func noteSourceType(e envelope) string {
	for _, f := range e.Schema.Fields {
		if f.Field != "after" {
			continue
		}
		for _, col := range f.Fields {
			if col.Field == "note" {
				return col.Parameters["__debezium.source.column.type"]
			}
		}
	}
	return ""
}

// waitRecord reads topic from its start until a record's value matches, for up to a minute.
func waitRecord(t *testing.T, brokers []string, topic string, match func(envelope) bool) envelope {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("no matching record in %s after a minute", topic)
		}
		for _, fe := range fs.Errors() {
			t.Logf("fetching %s: %v", topic, fe.Err)
		}
		var found *envelope
		fs.EachRecord(func(r *kgo.Record) {
			var e envelope
			if found != nil || r.Value == nil || json.Unmarshal(r.Value, &e) != nil {
				return
			}
			if len(e.Schema.Fields) > 0 && match(e) {
				found = &e
			}
		})
		if found != nil {
			return *found
		}
	}
}

func topicsOwned(t *testing.T, brokers []string, prefixes ...string) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	td, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, name := range td.Names() {
		for _, p := range prefixes {
			if ownsTopic(map[string]string{"topic.prefix": p, "schema.history.internal.kafka.topic": historyTopic(p, "")})(name) {
				left = append(left, name)
			}
		}
	}
	return left
}

func slotCount(t *testing.T, dsn, slot string) int {
	t.Helper()
	var n int
	pgQuery(t, dsn, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", []any{slot}, &n)
	return n
}

func pgQuery(t *testing.T, dsn, sql string, args []any, dst ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(ctx, sql, args...).Scan(dst...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func pgExec(t *testing.T, dsn string, stmts ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func myExec(t *testing.T, my testenv.MySQL, stmts ...string) {
	t.Helper()
	conn, err := client.ConnectWithContext(context.Background(), my.Addr, my.User, my.Password, my.DB, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, s := range stmts {
		if _, err := conn.Execute(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}
