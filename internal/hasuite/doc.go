// Package hasuite proves the active/standby mode of cdcmirror (mirror, High availability)
// under faults, row by row: two cdcmirror processes -- the binary of examples/cdcmirror, built
// once per test run -- share one configuration whose state_store is a PostgreSQL schema, and
// one of them is killed, paused, cut off from the store or sees the store's server restart
// while a write load runs; each case ends with the index equal to the source row by row and
// no document's version ever going backwards. The package has no code outside its tests;
// this file is its specification.
//
// Its tests are fault tests (internal/testenv, Faults): named TestFault*, gated by
// testenv.RequireFaults, they run in `make fault`. They signal only the cdcmirror processes
// they started and restart only a PostgreSQL of their own; the shared servers are only used.
//
// # A case
//
// The pair: one YAML file (pipeline ht1-<suffix>, a PostgreSQL source of two fresh tables
// with their own slot and publication, an Elasticsearch sink into ht1-<suffix>-{table} with
// no replica, state_store type postgres in the schema ht1_<suffix> with lease_ttl 3s unless
// the case says otherwise). What differs between the two processes comes from the
// environment the file expands: the holder (a, b), the dead-letter file, and the state
// store's DSN, which reaches the store through an internal/faultproxy TCP proxy of the
// process's own (the source's DSN and the engine are direct). Each serves /status on a port
// of its own; a monitor polls both every 100ms and keeps every change of role, lease epoch
// and holder, and the pipeline's reason and last failure. Process a starts first and is
// awaited active (its snapshot read), then b is awaited standby with a as the active.
//
// The tables: items (bigint key, REPLICA IDENTITY DEFAULT) and events (a (text, integer)
// key, REPLICA IDENTITY FULL), between them integers, text (quotes, backslashes, control and
// non-ASCII characters, empty), numeric(12,2), boolean, double precision, timestamp(6), date
// and NULLs. Three writers seed ten rows per table each, then commit a transaction of one to
// three statements -- upserts, updates of random columns, key changes, deletes -- every 100ms
// each, reconnecting after a failure; the expected state is the source itself.
//
// Versions: every document carries the source position of its row's last change as an
// external version (sink/doc.go, Writes). A sampler reads every document's _version of both
// indices every 500ms during the case (a search with "version": true); a document whose
// version is lower than one seen before for its _id -- an old active's write landing after
// the new active's -- fails the case.
//
// # The end of a case
//
// The load is stopped; a marker row is written and its document awaited (four minutes);
// then the index must equal the source row by row within a minute: every row has its
// document under its _id with every column as sink/doc.go says it becomes -- integers as the
// same JSON number, numeric as the source's digits in a string, doubles equal in value,
// booleans as JSON booleans, timestamps and dates as their text with trailing fraction zeros
// trimmed, NULL as null -- and no other field, and no document lacks its row. A last version
// sample must show no version lower than one seen before, and none above the marker's (the
// marker was committed after every other row). Neither dead-letter file may hold a line, no
// process may have exited unless the case stopped it, and the monitor must never have seen a
// fencing conflict (esfence.Incident) in the active's status.
//
// # The faults
//
//   - TestFaultHAKill/ttl=3s, /ttl=6s (the default): kill -9 of the active. The standby must
//     report active, and a marker row written right after the kill must be visible; both
//     times from the kill are logged (with the takeover time the new active reports, from its
//     acquisition until it writes):
//     takeover case=kill ttl=3s ms=<status active> marker_ms=<marker visible> reported_ms=<..>
//     The new active must have logged the fence-out of the indices (every takeover of the
//     suite checks it). The killed process is started again and must become standby.
//   - TestFaultHAGracefulStop: SIGTERM of the active: it releases its lease, and the standby
//     takes over at its next attempt (well within the TTL); the time is logged as case=term.
//   - TestFaultHAStopCont: SIGSTOP of the active for three TTLs; the standby takes over; then
//     SIGCONT. The resumed process must say standby within 15s and log its step down, while
//     the new active keeps its role and lease epoch to the end of the case (no process ever
//     reports a higher epoch) and never reports a fencing conflict.
//   - TestFaultHAStorePartition: the active's proxy to the store black-holes both ways. The
//     active must say standby with a store error by its lease deadline (within three TTLs),
//     the other take over; after 3 TTLs the partition heals (the connections that lived
//     through it reset) and the cut-off process must say standby without a store error while
//     the new active keeps its role and epoch. The cut-off process's renewal, step-down and
//     fence lines are logged.
//   - TestFaultHAStoreSlow: the active's path to the store delayed 2s each way (no renewal
//     completes within the 3s lease, checkpoints still pass, slowly): it must step down, the
//     other take over; after 3 TTLs the delay is removed and the slowed process must say
//     standby while the new active keeps its role and epoch.
//   - TestFaultHAStoreRestart/{fast_restart,outage}: the source and store are one PostgreSQL
//     of the test's own (scripts/testenv with a private TRIBUTARY_TESTENV_HOME and a free
//     port), restarted with `testenv restart postgres --mode fast`, or stopped for two TTLs
//     and started (every lease runs out), under load. Both processes must ride through
//     (neither exits): a row written once the server is back arrives, and the pair settles,
//     one active and the other standby.
//
// # MariaDB
//
// TestFaultHAMariaDBKill and TestFaultHAMariaDBStopCont (mysql_test.go) are the kill -9 and
// SIGSTOP/SIGCONT cases with a MariaDB source: one table of internal/mirrortest's under a
// write load, the state store in that MariaDB (state_store type mysql, a database of the
// case's own, reached directly). No server_id is configured: both processes register with
// the one derived from the pipeline's name, and a takeover relies on the server ending the
// older binlog dump of that id (error 4052 to the old active) when the new active's
// registers; the SIGSTOP case checks that the paused process's dump leaves the server's
// process list. Each ends as the PostgreSQL cases do.
//
// # The soak
//
// TestSoakHA runs TRIBUTARY_HA_SOAK_SCHEDULES randomized schedules (`make soak-ha`;
// skipped when unset). A schedule's seed draws one to three faults of the current active --
// kill -9, SIGSTOP then SIGCONT after 0.5 to 3 TTLs, a store partition or a 2s-each-way
// delay on the path to the store of 0.5 to 3 TTLs, SIGTERM -- each after one to four seconds
// of load; a killed or stopped (SIGTERM) process is started again, and after each fault the
// pair must settle (one active, the other standby naming it, no store error) within two
// minutes. Each schedule is a fresh pair and ends like a case.
// TRIBUTARY_HA_SOAK_SEED sets the first seed (default random); schedule i runs seed+i, and
// a failed schedule names its seed:
//
//	make soak-ha SOAK_HA_SEED=<seed> SOAK_HA_SCHEDULES=1
package hasuite
