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
//
// Production-shaped servers: RequireSecure(t, SecureES) and RequireSecure(t, SecureOpenSearch) give
// the secured Elasticsearch and OpenSearch (https; the PEM file of the CA made when the server was
// set up; an admin that creates the users and roles a test needs at run time; a client
// certificate and key that authenticate as Secure.ClientUser). RequireCluster gives the http URLs
// of the three-node Elasticsearch cluster; a fault test stops, kills, pauses and starts one node
// with Servers.Run("stop", "escluster", "--node", "2", "--mode", "kill") and
// Servers.Run("start", "escluster", "--node", "2"), which returns once the node has rejoined and the
// cluster is at least yellow. Every one skips, naming its variable and `make testenv-up`, when the
// servers are not up.
//
// A private TRIBUTARY_TESTENV_HOME (scripts/bench-peers) gets its env file in that home
// ($TRIBUTARY_TESTENV_HOME/env); only the default home writes the checkout's .testenv.
package testenv
