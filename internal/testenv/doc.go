// Package testenv gates integration tests on the real servers that scripts/testenv starts.
//
// Integration tests are ordinary tests (no build tags, so they always compile). Each asks for the
// environment variable naming its server; when it is unset the test is skipped with a message that
// names the variable and the make target that sets it. `make check` starts the servers and loads
// .testenv/env, so there every integration test runs.
package testenv
