// Package sqlstate keeps a deployment's state store in a SQL server that every copy of the
// deployment reaches, so a standby on another machine sees the active's checkpoint and
// ownership records and can take over (issue 36). It implements [statestore.Store] with the
// guarantees of the bbolt file (it passes the same suite, package statestoretest) and
// [statestore.Leaser]: a leadership lease per pipeline, and writes fenced by the lease's epoch.
// Package mirror keeps its state here under Config.StateStore (cdcmirror's state_store:), the
// active/standby mode (mirror's doc.go, High availability).
//
// # Which server
//
// PostgreSQL sources keep the store in the source PostgreSQL itself ([OpenPostgres]), in a
// schema the user names (Options.Schema, default "tributary"). MySQL/MariaDB sources keep it
// in the source server itself ([OpenMySQL]), in InnoDB tables of a database the user names
// (same option, same default): the same Go code over a second dialect of statements. Reasons,
// for both:
//   - No new server, no new failure domain: when the source is down the pipeline cannot move
//     anyway, so a store that fails with it costs no availability; a store on a third server
//     (a PostgreSQL for a MariaDB source) would add one more thing whose outage stops the
//     mirror, and one more thing to secure, back up and monitor.
//   - Both are transactional with row locks, which is everything the store needs: one
//     transaction per call, compare-and-set as a conditional UPDATE, the fence as a locking
//     read of the lease row in the write's transaction, and a server clock for leases.
//   - The engine (Elasticsearch, OpenSearch) is not used: it has no multi-document
//     transactions, so DeletePipeline (checkpoint and records together) and a fenced write
//     (lease check and write together) could not be atomic; and the store must hold the
//     fence of the engine's indices, which cannot live in what it fences.
//
// The store must be on the source's primary (where the slot or binlog is read). An
// asynchronously replicated store that fails over may lose its last commits: a lease
// acquired or a checkpoint saved may go back. Checkpoints going back only replay (the sinks
// are idempotent by version), and the destination fence (esfence) still refuses a stale
// writer at the cluster; but run the store on a synchronously replicated or single primary.
//
// # Tables
//
// In the schema (created when missing; every statement of the layout is idempotent; in
// PostgreSQL they run in one transaction, serialized among concurrent openers by an advisory
// lock on the schema's name, so the layout and the identity appear together or not at all;
// in MySQL, where DDL commits, the format and identity rows are inserted by one INSERT IGNORE,
// so concurrent openers all read the first one's identity):
//
//	statestore_meta         (name, value): "format" = "1", "identity" = the deployment's UUID
//	statestore_revision     a sequence: record revisions (never reused, so no ABA)
//	statestore_checkpoints  (h_pipeline PK, pipeline, checkpoint, saved = the server's time)
//	statestore_records      (h_pipeline, h_namespace, h_key PK, pipeline, namespace, key,
//	                         value, revision)
//	statestore_leases       (h_name PK, name, holder, epoch, expires = the server's time)
//
// MySQL differs in types only where it must: names VARBINARY(1024), values LONGBLOB, hashes
// BINARY(32), times BIGINT Unix microseconds of UTC_TIMESTAMP(6) (saved_us, expires_us: no
// session time zone or DST enters), and statestore_revision is a counter row drawn with
// LAST_INSERT_ID(n + 1) in the write's transaction (MySQL has no sequences; the row lock
// serializes record writes, and a rolled-back draw is drawn again, never used twice).
// Connections are go-mysql's client (already the binlog reader's) behind database/sql via
// sql.OpenDB: no driver name is registered, so a program may import another MySQL driver.
//
// Names and values are bytea (any bytes; List orders keys byte-wise, like the file store);
// rows are keyed by the SHA-256 of each name (h_*), so three names of MaxNameBytes fit one
// index entry. A format other than "1" fails with [statestore.ErrFormat]. The identity is
// drawn once, by the first opener; every store opened on the schema shares it (that is what
// makes the standby the same deployment to esfence, not a copy).
//
// # Transactions
//
// Every write is one transaction (READ COMMITTED; in InnoDB also no gap locks): a checkpoint
// save is an upsert; Put with revision 0 is INSERT .. ON CONFLICT DO NOTHING (MySQL: a
// duplicate key error), with a revision an UPDATE .. WHERE
// revision = expected (the row lock makes a concurrent Put wait and then see the new
// revision: exactly one of two racing writers wins, the other gets ErrConflict); Delete
// likewise; DeletePipeline deletes the checkpoint and the records in one transaction. A
// connection cut at any point rolls the transaction back: nothing partial is stored
// (TestPostgresCrashMidTransaction and TestMySQLCrashMidTransaction cut it between
// statements). Reads are single statements.
//
// Every call is bounded by its ctx and returns the context's error at its deadline, even
// when the server blocks it (TestPostgresContextBounds, TestMySQLContextBounds): pgx cancels
// the statement; a MySQL statement cut by its context closes its connection (the server rolls
// its transaction back). Give every call a deadline: without one, a partition can hold a call
// until the operating system gives up on the connection.
//
// # Errors
//
// Besides the statestore errors: [statestore.ErrUnavailable] wraps connection failures
// (refused, reset, cut), a server shutting down or starting (57P01-57P03), serialization
// failures and deadlocks (40001, 40P01) and too many connections (53300); in MySQL 1040,
// 1053, 1205 (lock wait timeout), 1213 (deadlock), 1927, 2006, 2013. Retryable: the store
// reconnects by itself (database/sql's pool; TestPostgresConnectionLoss,
// TestMySQLConnectionLoss: after every connection was ended, about one call fails, the
// MySQL pool discarding every connection older than the one found lost; retry with a
// backoff). A write whose
// COMMIT was cut off may or may not have taken effect: a compare-and-set retried after
// ErrUnavailable must re-read first (the conflict may be its own write). Every other server
// error (missing privileges, a foreign table in the way) is permanent. Errors name pipelines,
// namespaces, keys and lease names, never values or the connection string's password.
//
// # Leases
//
// A lease per name (by convention the pipeline; the mirror may use one name for all its
// pipelines) has a holder, an epoch and an expiry on the server's clock (now()):
//   - Acquire succeeds only if the lease is free (never acquired, released, or expired on the
//     server's clock), and sets epoch = last epoch + 1: it makes sure the lease row exists
//     (at epoch 0, free), then UPDATE .. SET epoch = epoch + 1 .. WHERE expires <= now():
//     the row lock serializes racing acquirers, the later ones re-check the condition against
//     the winner's expiry, so exactly one wins.
//   - Renew extends it only for the same holder and epoch before it expired.
//   - Release ends it now (expires = now()), keeping the epoch, so a successor starts at
//     once; Read returns it (Lease.Held, Lease.Remaining on the server's clock).
//   - Lease rows are never deleted (not by DeletePipeline either: leadership is not state), so
//     epochs never repeat.
//
// Fenced(name, epoch) is a view of the store whose writes first read the lease row with
// SELECT .. FOR SHARE in the write's own transaction and refuse with
// [statestore.ErrNotLeader] unless its epoch is the view's. A takeover's Acquire updates that
// row, so it waits for a fenced write in flight to commit, and every fenced write after it
// sees the new epoch: once a standby has acquired the lease, no write of the old active
// reaches the store, however long it was paused. The fence is the epoch, not the expiry: an
// expired lease nobody took over still lets its holder write (nobody else is active), which
// keeps a slow renewal from stopping a healthy active needlessly.
//
// # Clock assumptions
//
// Safety (no stale write reaches the store; no stale write reaches an index once the new
// active has claimed it, through esfence) does not depend on any clock: it is the epoch.
// Clocks decide only when a standby may take over, and must be bounded for the old active
// to know it should stop before the takeover:
//   - Expiry is the store server's clock alone; process clocks never meet it. A holder
//     measures its lease on its own monotonic clock from before it sent the Acquire or Renew:
//     the server's expiry is at least ttl after that moment, so with clock rates within
//     drift rho (NTP: < 0.1%) the holder knows it holds the lease until sent + ttl*(1-rho).
//   - The server's wall clock stepping (an NTP step, a VM migration) moves every expiry with
//     it: forward takes the lease away early (the fence still refuses the old holder's
//     writes), backward delays a takeover by the step.
//   - Renew every ttl/3 (defaults for the mirror: ttl 6s, renew every 2s, a standby polling
//     Acquire every 1s: takeover within ttl + 1s of the active's last renewal, under 10 s);
//     a holder that fails to renew before sent + ttl*(1-rho) stops writing and steps down.
//     A pause (GC, SIGSTOP, a partition) longer than the lease is the case the fence is for:
//     the paused holder's next store write fails with ErrNotLeader, its next index write
//     with esfence's fence error, and it must step down, not retry.
//
// # Privileges
//
// Checked by TestPostgresLeastPrivilege and TestMySQLLeastPrivilege with a user holding
// exactly these grants (and each grant removed alone: the statement needing it is refused,
// permanently).
//
// PostgreSQL: the user of the connection string needs CREATE on the database, so that the
// first opener creates the schema and its tables (and owns them) -- or, with the schema created
// beforehand by an administrator, USAGE and CREATE on the schema and nothing on the database
// (an existing schema is not created again; CREATE TABLE IF NOT EXISTS is checked against the
// schema even when the tables exist). Tables another role created need SELECT, INSERT, UPDATE,
// DELETE on the statestore_* tables (UPDATE also for the fence's SELECT .. FOR SHARE) and
// USAGE on the statestore_revision sequence. pg_advisory_xact_lock needs no grant.
//
// MySQL/MariaDB: CREATE, SELECT, INSERT, UPDATE, DELETE ON tributary.* -- CREATE at every
// open, not only the first (CREATE DATABASE and CREATE TABLE IF NOT EXISTS are checked even
// when the database and tables exist); it also creates the database when missing. Nothing
// server-wide (the binlog reader's REPLICATION grants are separate).
//
// The store holds the deployment's ownership of its indices: grant it to the mirror's user
// only.
package sqlstate
