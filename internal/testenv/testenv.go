// Package testenv gates integration tests on the real servers that scripts/testenv starts.
//
// Integration tests are ordinary tests (no build tags, so they always compile). Each asks for the
// environment variable naming its server; when it is unset the test is skipped with a message that
// names the variable and the make target that sets it. `make check` starts the servers and loads
// .testenv/env, so there every integration test runs.
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
