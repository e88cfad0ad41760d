package sink

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/mysqlcdc"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/statestore"
)

// mysqlTarget is the MariaDB test server from TRIBUTARY_MYSQL_DSN (user:pass@tcp(host:port)/db).
type mysqlTarget struct{ user, pass, addr, db string }

func mysqlServer(t *testing.T) mysqlTarget {
	d, err := testenv.ParseMySQLDSN(testenv.Require(t, testenv.MySQLDSN))
	if err != nil {
		t.Fatalf("%s: %v", testenv.MySQLDSN, err)
	}
	m := mysqlTarget{d.User, d.Password, d.Addr, d.DB}
	return m
}

func (m mysqlTarget) exec(t *testing.T, stmts ...string) {
	t.Helper()
	c, err := client.ConnectWithContext(context.Background(), m.addr, m.user, m.pass, m.db, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, q := range stmts {
		if _, err := c.Execute(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// TestSinkMariaDBPipeline is TestSinkPostgresPipeline from MariaDB: a two-column key (the _id
// joins and escapes them), TEXT and BLOB (base64 in the binlog), unsigned BIGINT, DATETIME,
// TIMESTAMP, JSON; snapshot, then streamed changes including a key change; the snapshot and the
// binlog must give the same document for the same values.
func TestSinkMariaDBPipeline(t *testing.T) {
	engines(t, func(t *testing.T, s *server) {
		m := mysqlServer(t)
		table := "snk_orders_" + estest.RandomHex(t, 5)
		m.exec(t, "CREATE TABLE "+table+` (id INT NOT NULL, code VARCHAR(10) NOT NULL, name TEXT, qty INT, ok TINYINT(1),
			price DECIMAL(12,2), ratio DOUBLE, day DATE, at DATETIME(6), ts TIMESTAMP(6) NULL, doc JSON, raw BLOB,
			big BIGINT UNSIGNED, PRIMARY KEY (id, code))`)
		t.Cleanup(func() { m.exec(t, "DROP TABLE IF EXISTS "+table) })
		const values = `'héllo', 7, 1, 1234567.89, 0.5, '2026-11-30', '2026-11-30 12:34:56.123456',
			'2026-11-30 12:34:56.123456', '{"a":[1,2]}', X'DEADBEEF', 18446744073709551615`
		m.exec(t, "INSERT INTO "+table+" VALUES (1, 'a|b', "+values+"), (2, 'x', 'two', 2, 0, 2, 2, NULL, NULL, NULL, NULL, NULL, NULL)")
		src, err := mysqlcdc.New(m.addr, m.user, m.pass, []mysqlcdc.TableName{{Database: m.db, Table: table}}, &mysqlcdc.Options{SourceName: "shop", ServerID: 1<<24 + uint32(time.Now().UnixNano()%(1<<29))})
		if err != nil {
			t.Fatal(err)
		}
		k, done, stop := runPipeline(t, s, src, statestore.NewMemory(), "my")
		defer stop()
		idx, err := IndexName(k.cfg.Index, cdc.TableID{Database: m.db, Table: table})
		if err != nil {
			t.Fatal(err)
		}
		ids := []string{`1|a\|b`, "2|x", `3|a\|b`, "4|x", "5|x"}
		waitDocs(t, s, done, idx, ids, "snapshot", func(d map[string]map[string]any) bool { return len(d) == 2 })
		m.exec(t,
			"INSERT INTO "+table+" VALUES (3, 'a|b', "+values+")",
			"UPDATE "+table+" SET name = 'two v2', qty = 22 WHERE id = 2",
			"UPDATE "+table+" SET id = 4 WHERE id = 2",
			"INSERT INTO "+table+" VALUES (5, 'x', 'five', 5, 1, 5, 5, NULL, NULL, NULL, NULL, NULL, NULL)",
			"DELETE FROM "+table+" WHERE id = 5")
		docs := waitDocs(t, s, done, idx, ids, "stream", func(d map[string]map[string]any) bool {
			return len(d) == 3 && d["4|x"] != nil && d[`3|a\|b`] != nil
		})
		if docs["4|x"]["name"] != "two v2" || jsonNum(docs["4|x"]["qty"]) != "22" {
			t.Fatalf("row 4 after the key change: %v", docs["4|x"])
		}
		a, b := docs[`1|a\|b`], docs[`3|a\|b`]
		delete(a, "id")
		delete(b, "id")
		if !reflect.DeepEqual(a, b) {
			ja, _ := json.Marshal(a)
			jb, _ := json.Marshal(b)
			t.Fatalf("snapshot and binlog documents differ:\n snapshot %s\n binlog   %s", ja, jb)
		}
		if a["name"] != "héllo" {
			t.Fatalf("TEXT column: %v", a["name"])
		}
		k.dlqForTest.mu.Lock()
		defer k.dlqForTest.mu.Unlock()
		if len(k.dlqForTest.recs) != 0 {
			t.Fatalf("dead letters: %v", k.dlqForTest.recs[0].Reason)
		}
	})
}
