// Package testenv gates integration tests on the real servers that scripts/testenv starts.
//
// Integration tests are ordinary tests (no build tags, so they always compile). Each asks for the
// environment variable naming its server; when it is unset the test is skipped with a message that
// names the variable and the make target that sets it. `make check` starts the servers and loads
// .testenv/env, so there every integration test runs.
//
// Fault tests (named TestFault*, gated by RequireFaults) stop, restart or kill those servers
// through the script: Servers.Run("restart", "postgres", "--mode", "immediate"). stop, start and
// restart keep the server's data and ports and return once it answers again, so a test sees its
// tables, indices and topics after the fault; only `up` of a stopped server starts a fresh one.
package testenv
