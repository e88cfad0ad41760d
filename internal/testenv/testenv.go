package testenv

import (
	"os"
	"testing"
)

// Variables written to .testenv/env by `make testenv-up`, one per server.
const (
	ElasticsearchURL = "TRIBUTARY_ES_URL"
	OpenSearchURL    = "TRIBUTARY_OPENSEARCH_URL"
	KafkaBrokers     = "TRIBUTARY_KAFKA_BROKERS"
	PostgresDSN      = "TRIBUTARY_PG_DSN"
	MySQLDSN         = "TRIBUTARY_MYSQL_DSN"
	MongoURI         = "TRIBUTARY_MONGO_URI"
)

// Require returns the value of the environment variable name, or skips the test when it is unset
// or empty.
func Require(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Skipf("integration test skipped: %s is unset (run `make testenv-up` and `. .testenv/env`, or `make check`)", name)
	}
	return v
}
