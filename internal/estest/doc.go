// Package estest is the plumbing that tests of Elasticsearch and OpenSearch code share: a plain
// client of one real node, for setting up and inspecting what the code under test did, never
// for doing its work. It is an ordinary package so that several packages' tests can import it;
// nothing outside tests may.
//
// # Nodes
//
// Connect builds a Node for one server URL; EachEngine runs a test (or a benchmark) once per
// engine of the test environment, as subtests named "elasticsearch" and "opensearch", skipping
// an engine whose variable (internal/testenv) is unset. The client is the one the code under
// test uses (internal/search: esapi on a bare elastictransport.Client, no product check, no
// retries), so a test sees what the server answered, and every request is bounded by
// CallTimeout, so a hung server fails the test instead of hanging the binary. Unit tests that
// need no server use the fake node of internal/search/searchtest instead.
//
// # Failing tests
//
// Do fails the test only when no answer came (many tests are about the error answer itself);
// OK also fails it on a status outside 2xx. Helpers that read state (IndexExists, GetDoc) fail
// the test on any answer they cannot interpret. Helpers meant for polling loops or for
// goroutines other than the test's (Mget, Count) return errors instead, a status other than 200
// as a *StatusError.
//
// # Names and clean-up
//
// Servers are shared and reused, so every test names its indices with UniqueName (a random
// suffix) and removes them with DeleteAtCleanup, which accepts wildcards (the test environment
// allows wildcard deletes), ignores names that do not exist and marks the test failed if a
// delete is refused. TempIndex does all three for one index.
//
// # The auto-create rule
//
// Fencing requires the cluster to refuse auto-creating df-w-* indices. EnforceAutoCreateRule
// takes the cross-process cluster-settings lock (testenv.HoldClusterSettings), refuses to run
// over a transient value of action.auto_create_index, sets the persistent rule "-df-w-*,+*" when
// it is not already set and puts the previous value back when the test ends.
package estest
