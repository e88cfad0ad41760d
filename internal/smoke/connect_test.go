package smoke

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-dev/tributary/internal/connecttest"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// connectRecord is the part of a Debezium record (JsonConverter with schemas) the smoke reads:
// a change envelope or a transaction metadata event.
type connectRecord struct {
	Schema  json.RawMessage `json:"schema"`
	Payload struct {
		Op          string         `json:"op"`
		After       map[string]any `json:"after"`
		Transaction *struct {
			ID string `json:"id"`
		} `json:"transaction"`
		Status string `json:"status"` // transaction topic: BEGIN, END
		ID     string `json:"id"`     // transaction topic
	} `json:"payload"`
}

// TestSmokeConnect proves the Kafka Connect worker does what the Debezium consumer relies on: the
// two Debezium plugins at their pinned versions, and a connector of each kind (made by
// internal/connecttest) whose change records carry their schema, snapshot a row, stream a create
// in a transaction, and end that transaction with an END event on <prefix>.transaction. A
// PostgreSQL transaction id is "txid:lsn" with each event's own LSN, so END is matched by txid.
func TestSmokeConnect(t *testing.T) {
	t.Parallel()
	c := connecttest.Require(t)
	pgDSN := testenv.Require(t, testenv.PostgresDSN)
	my, err := testenv.ParseMySQLDSN(testenv.Require(t, testenv.MySQLDSN))
	if err != nil {
		t.Fatal(err)
	}

	plugins := connectPlugins(t, c.URL)
	for class, version := range map[string]string{
		connecttest.PostgresClass: "3.6.1.Final",
		connecttest.MariaDBClass:  "3.5.0.Final",
	} {
		if plugins[class] != version {
			t.Errorf("plugin %s: version %q, want %s", class, plugins[class], version)
		}
	}

	sfx := strconv.FormatInt(time.Now().UnixNano(), 36)
	pgTable, myTable := "ct_smoke_pg_"+sfx, "ct_smoke_my_"+sfx
	pgExec := func(sql string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, pgDSN)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	myExec := func(sql string) {
		t.Helper()
		conn, err := client.ConnectWithContext(context.Background(), my.Addr, my.User, my.Password, my.DB, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.Execute(sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	pgExec(fmt.Sprintf("CREATE TABLE %s (id bigint PRIMARY KEY, note text); INSERT INTO %[1]s VALUES (1, 'snapshot')", pgTable))
	t.Cleanup(func() { pgExec("DROP TABLE IF EXISTS " + pgTable) })
	myExec(fmt.Sprintf("CREATE TABLE %s (id BIGINT PRIMARY KEY, note TEXT)", myTable))
	t.Cleanup(func() { myExec("DROP TABLE IF EXISTS " + myTable) })
	myExec(fmt.Sprintf("INSERT INTO %s VALUES (1, 'snapshot')", myTable))

	pgPrefix, myPrefix := "ct_smoke_pg_"+sfx, "ct_smoke_my_"+sfx
	c.CreatePostgres(t, "ct-smoke-pg-"+sfx, connecttest.PostgresConnector{TopicPrefix: pgPrefix, Tables: []string{"public." + pgTable}})
	c.CreateMariaDB(t, "ct-smoke-my-"+sfx, connecttest.MariaDBConnector{TopicPrefix: myPrefix, Tables: []string{my.DB + "." + myTable}})

	pgTopic, myTopic := pgPrefix+".public."+pgTable, myPrefix+"."+my.DB+"."+myTable
	byID := func(op string, id float64) func(connectRecord) bool {
		return func(r connectRecord) bool {
			v, _ := r.Payload.After["id"].(float64)
			return r.Payload.Op == op && v == id
		}
	}
	for _, topic := range []string{pgTopic, myTopic} {
		if r := connectWaitRecord(t, c.Brokers, topic, byID("r", 1)); len(r.Schema) == 0 || string(r.Schema) == "null" {
			t.Errorf("%s: a snapshot record without its schema (JsonConverter schemas.enable)", topic)
		}
	}

	pgExec(fmt.Sprintf("INSERT INTO %s VALUES (2, 'streamed')", pgTable))
	myExec(fmt.Sprintf("INSERT INTO %s VALUES (2, 'streamed')", myTable))
	for _, tc := range []struct{ topic, txTopic string }{{pgTopic, pgPrefix + ".transaction"}, {myTopic, myPrefix + ".transaction"}} {
		r := connectWaitRecord(t, c.Brokers, tc.topic, byID("c", 2))
		if r.Payload.Transaction == nil || r.Payload.Transaction.ID == "" {
			t.Errorf("%s: a streamed create without its transaction", tc.topic)
			continue
		}
		tx, _, _ := strings.Cut(r.Payload.Transaction.ID, ":")
		connectWaitRecord(t, c.Brokers, tc.txTopic, func(e connectRecord) bool {
			id, _, _ := strings.Cut(e.Payload.ID, ":")
			return e.Payload.Status == "END" && id == tx
		})
	}
}

// connectPlugins returns the worker's connector plugins, class to version.
func connectPlugins(t *testing.T, url string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/connector-plugins", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /connector-plugins: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /connector-plugins: HTTP %d %s (%v)", resp.StatusCode, body, err)
	}
	var list []struct{ Class, Version string }
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatalf("GET /connector-plugins: %v", err)
	}
	out := map[string]string{}
	for _, p := range list {
		out[p.Class] = p.Version
	}
	return out
}

// connectWaitRecord reads topic from its start until a record matches, for up to a minute.
func connectWaitRecord(t *testing.T, brokers []string, topic string, match func(connectRecord) bool) connectRecord {
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
		var found *connectRecord
		fs.EachRecord(func(rec *kgo.Record) {
			var r connectRecord
			if found == nil && rec.Value != nil && json.Unmarshal(rec.Value, &r) == nil && match(r) {
				found = &r
			}
		})
		if found != nil {
			return *found
		}
	}
}
