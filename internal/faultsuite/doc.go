// Package faultsuite is the fault suite of the whole mirror: a pipeline built from the
// library (PostgreSQL 15 or MariaDB 10.11 -> cdc.Runner -> package sink -> Elasticsearch 8 or
// OpenSearch 2, with a bbolt state file and a dead-letter file) runs under write load while
// the real servers are restarted, stopped, killed, partitioned from it and reset; each case
// ends with the index equal to the source row by row and the pipeline's reported health
// checked against what happened. The package has no code outside its tests; this file is
// its specification.
//
// Its tests are fault tests (internal/testenv, Faults): named TestFault*, gated by
// testenv.RequireFaults, they stop and restart the shared servers, so they run only in
// `make fault` (part of `make check`), one at a time, after every other test.
//
// # A case
//
// Two tables on the source -- items with a bigint key; events with a composite (text,
// integer) key whose text holds the _id separator "|" and the escape character -- carry
// integers, text (quotes, backslashes, control and non-ASCII characters, empty), decimals,
// a boolean (MariaDB: TINYINT), doubles, timestamps with and without fractions, dates and
// NULLs; on PostgreSQL one table has REPLICA IDENTITY FULL, the other the default. Three
// writers seed ten rows per table each (the snapshot), the pipeline starts and its snapshot
// is awaited; then the writers commit a transaction of one to three statements -- upserts,
// updates of random columns, key changes, deletes -- every 100ms each, over connections of
// their own straight to the server. The load runs two seconds, during the fault, and two
// seconds after it; it keeps the tables at a few hundred rows. The expected state is the
// source itself: a commit whose answer a fault lost costs nothing.
//
// The pipeline: the library's parts composed as a user would (openPipeline; the one place
// that changes when the mirror package builds it), one pipeline per case with fresh tables
// (prefix flt_), slot and publication, indices (flt-<suffix>-<table>) and files. The suite's
// settings: batches of at most 100 events or 200ms; the runner's default backoff (100ms to
// 5s); health thresholds of one second of backpressure and five seconds of lag, measured
// every second; the sink's requests bounded by 10s (connections by 5s). When the case breaks
// the network, the pipeline reaches its source and its engine through internal/faultproxy
// TCP proxies (its lag measurements too); the writers and the comparison never do.
//
// # The end of a case
//
// Once the load stopped, a marker row is written; its document arriving means the pipeline
// caught up (bounded by four minutes). Then the index must equal the source row by row within
// a minute: every row read back with SQL (each value's text; MariaDB through HEX) has its
// document under its _id (the key's text; composite keys escaped and joined as sink/doc.go
// says), with every column as the field sink/doc.go says it becomes -- integers as the same
// JSON number, decimals as the source's digits in a string, doubles equal in value, booleans
// as JSON booleans (MariaDB's TINYINT a number), timestamps and dates as their text with
// trailing fraction zeros trimmed, NULL as null -- and no other field; and the index holds no
// document without its row (a search of the whole index after a refresh). No dead letter may
// exist: every value of the suite is mirrorable.
//
// Health: a recorder polls Runner.Status every 100ms and keeps each change of (healthy,
// state, reason class); every case logs them, with the fault's start, its end and the
// catching up marked. Each fault says what the pipeline must have reported: a lost source
// (restart, outage, connection resets) "reconnecting" between the fault and catching up, and
// the stream reopened (Status.Reconnects grew); pg_terminate_backend only the reopened stream
// (the reconnection is too quick for a 100ms poll to be sure to see it); a lost engine
// "backpressure" (beyond the one-second threshold) or "reconnecting"; a partition one of
// those -- for the source also "lagging" -- while it lasts, not only once it healed. In every
// case the pipeline never stops, and is healthy and streaming at the end (within a minute).
// Run must return within a minute of its context ending.
//
// # The faults
//
//   - TestFaultPostgresFastRestart, TestFaultPostgresImmediateRestart: `testenv restart
//     postgres --mode fast|immediate` (a stop that takes more than 30s is escalated to a kill
//     and fails the case: a fast shutdown must complete within seconds while a pipeline is
//     connected).
//   - TestFaultPostgresTerminateWalsender: pg_terminate_backend of the walsender serving the
//     pipeline's slot.
//   - TestFaultPostgresOutage: PostgreSQL stopped for a minute, then started on its data.
//   - TestFaultMariaDBRestart/{graceful,kill}.
//   - TestFaultElasticsearchRestart, TestFaultOpenSearchRestart: graceful restarts of the
//     engine, PostgreSQL source.
//   - TestFaultPartition/{postgres,mariadb,elasticsearch,opensearch}: the path between the
//     pipeline and that server black-holed both ways for 15s. Bytes a black-hole swallows are
//     lost, which TCP never does, so when the partition heals the connections that lived
//     through it are reset -- what a partition long enough for the peers' timeouts leaves;
//     the pipeline must have reported it before.
//   - TestFaultConnectionResets/{postgres,mariadb,elasticsearch,opensearch}: every connection
//     to that server reset (RST), and every new one for three seconds.
//   - TestFaultEngineFlapping (network_test.go): the path to Elasticsearch, 50ms each way,
//     resets every connection every 2s for 30s (faultproxy SetResetEvery); batches must be
//     acknowledged in each half of the window -- the claim round after every reconnect fits
//     between two resets -- and the number of each is logged.
//   - TestFaultEngineBlackholeResume (network_test.go): the path to OpenSearch swallows
//     everything for 20s, then works again with the connections that lived through it kept;
//     a batch must be acknowledged within 30s of the return (the time is logged: the sink's
//     stall guard gives up requests lost in the hole within seconds).
//   - TestFaultEngineUnresponsive: with the runner's and the sink's default settings, every
//     byte between the pipeline and Elasticsearch held (connections open, no RST, nothing
//     answered) until health says sink_not_answering -- the runner's UnansweredThreshold, well
//     within the sink's 60s request timeout -- then let through; healthy again after it.
//   - TestFaultClusterNodeKill/{first_configured_node,primary_of_the_items_index,elected_master}
//     (multinode_test.go; escluster, testenv.RequireCluster): one pipeline whose sink lists
//     the three nodes (urls:, indices with one replica), under the writers' load plus pgbench
//     (a script of upserts and deletes of items rows at 20 transactions a second); in turn
//     node 1, the node holding the items index's primary and the elected master are killed
//     (kill -9), each once the indices are green, and kept down at least 20s. While the node is down the pipeline must apply a
//     few hundred more events, and its status (cdc.Status.Cluster) must show its indices
//     yellow when the node held a copy of one; then the node is started, and the case ends
//     as every case does (its own marker row), with no document's version lower than before
//     the kill. The longest pause of the applied events around the kill is logged, not
//     asserted. The cluster is put back to three nodes, at least yellow, whatever happened.
//
// TestHealthIdleAfterBurst/{postgres,mariadb} (an integration test, no fault): a transaction
// of 5000 captured rows, transactions of an uncaptured table right behind it, then silence:
// healthy with the lag near zero a lag threshold after the burst is applied (issue 31: a
// MariaDB pipeline reported an ever growing lag until a captured row changed).
//
// # The soak
//
// TestFaultSoak runs TRIBUTARY_SOAK_SCHEDULES randomized fault schedules (`make soak`; skipped
// when unset). A schedule's seed draws the source, the engine and one to three faults with
// their modes, lengths and the load before each: restarts of the source (PostgreSQL fast or
// immediate, MariaDB graceful or kill), pg_terminate_backend, outages of 1-20s, partitions of
// 2-20s and reset windows of 0-4s towards the source or the engine, and, less often, engine
// restarts (graceful or kill). Every schedule runs proxied and ends like a case; it demands
// the union of its faults' health reports, except that a partition, whose report depends on
// its length, demands only the reopened stream. TRIBUTARY_SOAK_SEED sets the first seed
// (default random); schedule i runs seed+i. The soak goes on after a failed schedule and
// fails at the end, listing each failed seed (diverged, or failed another check) with its
// schedule; it prints
//
//	soak: N schedules, D diverged, mean schedule X s
//
// A seed fixes the schedule and the values written, not the timing. To repeat one:
//
//	make soak SOAK_SEED=<seed> SOAK_SCHEDULES=1
//
// # Running it on private servers
//
// While other tests use the shared servers, run the suite against instances of your own:
//
//	export TRIBUTARY_TESTENV_HOME=/var/tmp/tt-NAME TRIBUTARY_PG_PORT=45632 TRIBUTARY_MYSQL_PORT=43506 \
//	  TRIBUTARY_ES_PORT=49400 TRIBUTARY_ES_TRANSPORT_PORT=49500 \
//	  TRIBUTARY_OPENSEARCH_PORT=49401 TRIBUTARY_OPENSEARCH_TRANSPORT_PORT=49501
//	scripts/testenv/testenv up postgres mariadb elasticsearch opensearch
//	set -a; . .testenv/env; set +a
//	TRIBUTARY_FAULTS=$PWD/scripts/testenv/testenv go test -count=1 -v -run '^TestFault' ./internal/faultsuite/
package faultsuite
