package connecttest

import (
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/tributary-dev/tributary/internal/testenv"
)

// Connector classes of the plugins on the test worker's plugin path.
const (
	PostgresClass = "io.debezium.connector.postgresql.PostgresConnector"
	MariaDBClass  = "io.debezium.connector.mariadb.MariaDbConnector"
)

// PostgresConnector is what a test chooses of a Debezium PostgreSQL connector (pgoutput, a
// publication of its own tables: publication.autocreate.mode=filtered). The zero value of each
// field is its default.
type PostgresConnector struct {
	// TopicPrefix is topic.prefix; default the connector's name. Changes go to
	// <prefix>.<schema>.<table>, transaction metadata to <prefix>.transaction.
	TopicPrefix string
	// Tables is table.include.list, "schema.table" each (Debezium's regular expressions); at
	// least one: a connector of every table of the shared database is never what a test wants.
	Tables []string
	// Slot and Publication are slot.name and publication.name; default the connector's name
	// with every character but [a-z0-9_] replaced by '_' (PostgreSQL's rule for slot names).
	Slot, Publication string
	// SnapshotMode is snapshot.mode (initial, no_data, never, always, ...); "" is Debezium's
	// default, initial.
	SnapshotMode string
	// NoTransactionMetadata turns provide.transaction.metadata off (on by default).
	NoTransactionMetadata bool
	// NoSourceTypes turns column.propagate.source.type=.* off (on by default).
	NoSourceTypes bool
	// DecimalHandling is decimal.handling.mode; default precise.
	DecimalHandling string
	// TimePrecision is time.precision.mode; "" leaves Debezium's default (adaptive).
	TimePrecision string
	// Extra is merged last, over every key above.
	Extra map[string]string
}

// MariaDBConnector is what a test chooses of a Debezium MariaDB connector. The zero value of each
// field is its default.
type MariaDBConnector struct {
	// TopicPrefix is topic.prefix; default the connector's name. Changes go to
	// <prefix>.<database>.<table>, transaction metadata to <prefix>.transaction, schema changes
	// to <prefix>.
	TopicPrefix string
	// Tables is table.include.list, "database.table" each (Debezium's regular expressions); at
	// least one. database.include.list is the databases they name.
	Tables []string
	// ServerID is database.server.id, unique among the server's binlog clients; default one
	// derived from the connector's name (1000000 to 1999999999).
	ServerID uint32
	// HistoryTopic is schema.history.internal.kafka.topic; default <prefix>-schema-history.
	HistoryTopic string
	// SnapshotMode is snapshot.mode (initial, no_data, never, when_needed, ...); "" is
	// Debezium's default, initial.
	SnapshotMode string
	// NoTransactionMetadata turns provide.transaction.metadata off (on by default).
	NoTransactionMetadata bool
	// NoSourceTypes turns column.propagate.source.type=.* off (on by default).
	NoSourceTypes bool
	// DecimalHandling is decimal.handling.mode; default precise.
	DecimalHandling string
	// TimePrecision is time.precision.mode; "" leaves Debezium's default (adaptive_time_microseconds).
	TimePrecision string
	// Extra is merged last, over every key above.
	Extra map[string]string
}

// common is the part of the configuration both connectors share.
func common(prefix, snapshot string, noTx, noSourceTypes bool, decimal, timePrecision string) map[string]string {
	c := map[string]string{
		"tasks.max":                    "1",
		"topic.prefix":                 prefix,
		"provide.transaction.metadata": strconv.FormatBool(!noTx),
		"skipped.operations":           "none",
		"decimal.handling.mode":        cmp(decimal, "precise"),
	}
	if !noSourceTypes {
		c["column.propagate.source.type"] = ".*"
	}
	if snapshot != "" {
		c["snapshot.mode"] = snapshot
	}
	if timePrecision != "" {
		c["time.precision.mode"] = timePrecision
	}
	return c
}

func cmp(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// postgresConfig builds the configuration of connector name for the database of dsn (a
// postgres:// URL, as TRIBUTARY_PG_DSN). Errors never quote the DSN: it may hold a password.
func postgresConfig(name string, p PostgresConnector, dsn string) (map[string]string, error) {
	if len(p.Tables) == 0 {
		return nil, errors.New("PostgresConnector.Tables is empty")
	}
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
		return nil, errors.New("the PostgreSQL DSN is not a postgres://user@host:port/db URL")
	}
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	user := u.User.Username()
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" {
		db = user
	}
	if user == "" || db == "" {
		return nil, errors.New("the PostgreSQL DSN names no user")
	}
	c := common(cmp(p.TopicPrefix, name), p.SnapshotMode, p.NoTransactionMetadata, p.NoSourceTypes, p.DecimalHandling, p.TimePrecision)
	c["connector.class"] = PostgresClass
	c["database.hostname"] = u.Hostname()
	c["database.port"] = port
	c["database.user"] = user
	if pw, ok := u.User.Password(); ok {
		c["database.password"] = pw
	}
	c["database.dbname"] = db
	if mode := u.Query().Get("sslmode"); mode != "" {
		c["database.sslmode"] = mode
	}
	c["plugin.name"] = "pgoutput"
	c["slot.name"] = cmp(p.Slot, pgName(name))
	c["publication.name"] = cmp(p.Publication, pgName(name))
	c["publication.autocreate.mode"] = "filtered"
	c["table.include.list"] = strings.Join(p.Tables, ",")
	maps.Copy(c, p.Extra)
	return c, nil
}

// mariadbConfig builds the configuration of connector name for the server of my (as
// TRIBUTARY_MYSQL_DSN, parsed), its schema history kept on brokers.
func mariadbConfig(name string, m MariaDBConnector, my testenv.MySQL, brokers []string) (map[string]string, error) {
	if len(m.Tables) == 0 {
		return nil, errors.New("MariaDBConnector.Tables is empty")
	}
	var dbs []string
	for _, t := range m.Tables {
		db, _, ok := strings.Cut(t, ".")
		if !ok || db == "" {
			return nil, fmt.Errorf("MariaDBConnector.Tables: %q is not database.table", t)
		}
		if !slices.Contains(dbs, db) {
			dbs = append(dbs, db)
		}
	}
	host, port, err := net.SplitHostPort(my.Addr)
	if err != nil {
		return nil, errors.New("the MariaDB DSN's address is not host:port")
	}
	prefix := cmp(m.TopicPrefix, name)
	c := common(prefix, m.SnapshotMode, m.NoTransactionMetadata, m.NoSourceTypes, m.DecimalHandling, m.TimePrecision)
	c["connector.class"] = MariaDBClass
	c["database.hostname"] = host
	c["database.port"] = port
	c["database.user"] = my.User
	c["database.password"] = my.Password
	id := m.ServerID
	if id == 0 {
		id = ServerID(name)
	}
	c["database.server.id"] = strconv.FormatUint(uint64(id), 10)
	c["database.include.list"] = strings.Join(dbs, ",")
	c["table.include.list"] = strings.Join(m.Tables, ",")
	c["schema.history.internal.kafka.bootstrap.servers"] = strings.Join(brokers, ",")
	c["schema.history.internal.kafka.topic"] = historyTopic(prefix, m.HistoryTopic)
	// Only the captured tables' DDL: the shared test database holds many other tests' tables.
	c["schema.history.internal.store.only.captured.tables.ddl"] = "true"
	// Other tests' DDL on the shared server may use what Debezium's parser cannot read (an
	// INET6 column stops the connector's task otherwise); the captured tables' DDL is plain.
	c["schema.history.internal.skip.unparseable.ddl"] = "true"
	c["snapshot.locking.mode"] = "none"
	c["bigint.unsigned.handling.mode"] = "precise"
	maps.Copy(c, m.Extra)
	return c, nil
}

func historyTopic(prefix, topic string) string { return cmp(topic, prefix+"-schema-history") }

// ServerID is the default database.server.id of a MariaDB connector named name: 1000000 plus a
// hash of the name, below 2000000000.
func ServerID(name string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(name))
	return 1_000_000 + h.Sum32()%1_999_000_000
}

// pgName is name as a PostgreSQL slot name: [a-z0-9_] only, at most 63 bytes.
func pgName(name string) string {
	b := []byte(strings.ToLower(name))
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			b[i] = '_'
		}
	}
	if len(b) > 63 {
		b = b[:63]
	}
	return string(b)
}

// ownsTopic reports whether a Kafka topic belongs to the connector of configuration c: the
// schema-change topic <prefix>, every <prefix>.* topic (changes, transaction metadata), the
// heartbeat topic and the schema history topic.
func ownsTopic(c map[string]string) func(topic string) bool {
	prefix := c["topic.prefix"]
	heartbeat := cmp(c["topic.heartbeat.prefix"], "__debezium-heartbeat") + "." + prefix
	history := c["schema.history.internal.kafka.topic"]
	return func(topic string) bool {
		return topic == prefix || strings.HasPrefix(topic, prefix+".") || topic == heartbeat ||
			(history != "" && topic == history)
	}
}
