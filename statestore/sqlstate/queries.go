package sqlstate

import (
	"strings"

	"github.com/jackc/pgx/v5"
)

// queries are one dialect's statements, with the schema's tables filled in. The Go code is the
// same for both dialects; each statement takes its parameters in the order written next to
// it, each once.
type queries struct {
	mysql  bool
	schema string
	lock   string   // PostgreSQL: serializes openers ($1 a name) in the layout's transaction
	create []string // the layout, each statement idempotent
	// schemaExists ($1 the schema's name) -> whether the schema exists. When it does, create's
	// first statement (which makes it) is skipped: PostgreSQL checks CREATE on the database
	// even for a CREATE SCHEMA IF NOT EXISTS of an existing schema, and a role given USAGE,
	// CREATE on a schema made for it must not need it. "" in MySQL.
	schemaExists string
	// initMeta inserts the format ($1) and the identity ($2) unless present; readMeta reads both.
	initMeta, readMeta string

	loadCheckpoint   string // (h_pipeline) -> checkpoint
	saveCheckpoint   string // (h_pipeline, pipeline, checkpoint)
	checkpointSaved  string // (h_pipeline) -> Unix microseconds
	deleteCheckpoint string // (h_pipeline)

	get      string // (h_pipeline, h_namespace, h_key) -> value, revision
	revision string // (h_pipeline, h_namespace, h_key) -> revision
	// PostgreSQL: insert (h_pipeline, h_namespace, h_key, pipeline, namespace, key, value) and
	// update (value, h_pipeline, h_namespace, h_key, expected) return the new revision.
	// MySQL: nextRevision draws it first (LAST_INSERT_ID), then insert (..., value, revision)
	// and update (value, revision, h_pipeline, h_namespace, h_key, expected).
	insert, update, nextRevision string
	delete                       string // (h_pipeline, h_namespace, h_key, expected)
	list                         string // (h_pipeline, h_namespace) -> key, value, revision by key
	deleteRecords                string // (h_pipeline)

	fence       string // (h_name) -> epoch, share-locking the lease row
	ensureLease string // (h_name, name): a free row at epoch 0 unless one exists
	acquire     string // (holder, ttl µs, h_name): only when expired
	renew       string // (ttl µs, h_name, holder, epoch): only when not expired
	lockLease   string // (h_name, holder, epoch) -> 1, locking the row
	release     string // (h_name)
	readLease   string // (h_name) -> name, holder, epoch, expires µs, now µs
}

// postgresQueries is the PostgreSQL dialect. Names are bytea (any bytes, ordered byte-wise like
// the file store); rows are keyed by the names' SHA-256 (h_*), so long names fit the index.
func postgresQueries(schema string) queries {
	t := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	f := strings.NewReplacer(
		"{schema}", pgx.Identifier{schema}.Sanitize(),
		"{meta}", t("statestore_meta"),
		"{rev}", t("statestore_revision"),
		"{checkpoints}", t("statestore_checkpoints"),
		"{records}", t("statestore_records"),
		"{leases}", t("statestore_leases"),
		"{us}", "(extract(epoch FROM %s) * 1000000)::bigint",
	).Replace
	us := func(col string) string { return strings.Replace(f("{us}"), "%s", col, 1) }
	return queries{
		schema: schema,
		lock:   "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
		// schemaExists's statement skips create[0], the CREATE SCHEMA.
		schemaExists: "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1)",
		create: []string{
			f("CREATE SCHEMA IF NOT EXISTS {schema}"),
			f("CREATE TABLE IF NOT EXISTS {meta} (name text PRIMARY KEY, value text NOT NULL)"),
			f("CREATE SEQUENCE IF NOT EXISTS {rev} AS bigint"),
			f(`CREATE TABLE IF NOT EXISTS {checkpoints} (
				h_pipeline bytea PRIMARY KEY, pipeline bytea NOT NULL,
				checkpoint bytea NOT NULL, saved timestamptz NOT NULL)`),
			f(`CREATE TABLE IF NOT EXISTS {records} (
				h_pipeline bytea NOT NULL, h_namespace bytea NOT NULL, h_key bytea NOT NULL,
				pipeline bytea NOT NULL, namespace bytea NOT NULL, key bytea NOT NULL,
				value bytea NOT NULL, revision bigint NOT NULL,
				PRIMARY KEY (h_pipeline, h_namespace, h_key))`),
			f(`CREATE TABLE IF NOT EXISTS {leases} (
				h_name bytea PRIMARY KEY, name bytea NOT NULL, holder bytea NOT NULL,
				epoch bigint NOT NULL, expires timestamptz NOT NULL)`),
		},
		initMeta: f(`INSERT INTO {meta} (name, value) VALUES ('format', $1), ('identity', $2)
			ON CONFLICT (name) DO NOTHING`),
		readMeta: f(`SELECT (SELECT value FROM {meta} WHERE name = 'format'),
			(SELECT value FROM {meta} WHERE name = 'identity')`),

		loadCheckpoint: f("SELECT checkpoint FROM {checkpoints} WHERE h_pipeline = $1"),
		saveCheckpoint: f(`INSERT INTO {checkpoints} (h_pipeline, pipeline, checkpoint, saved)
			VALUES ($1, $2, $3, clock_timestamp())
			ON CONFLICT (h_pipeline) DO UPDATE SET checkpoint = EXCLUDED.checkpoint, saved = EXCLUDED.saved`),
		checkpointSaved:  f("SELECT " + us("saved") + " FROM {checkpoints} WHERE h_pipeline = $1"),
		deleteCheckpoint: f("DELETE FROM {checkpoints} WHERE h_pipeline = $1"),

		get:      f("SELECT value, revision FROM {records} WHERE h_pipeline = $1 AND h_namespace = $2 AND h_key = $3"),
		revision: f("SELECT revision FROM {records} WHERE h_pipeline = $1 AND h_namespace = $2 AND h_key = $3"),
		insert: f(`INSERT INTO {records} (h_pipeline, h_namespace, h_key, pipeline, namespace, key, value, revision)
			VALUES ($1, $2, $3, $4, $5, $6, $7, nextval('{rev}'))
			ON CONFLICT (h_pipeline, h_namespace, h_key) DO NOTHING RETURNING revision`),
		update: f(`UPDATE {records} SET value = $1, revision = nextval('{rev}')
			WHERE h_pipeline = $2 AND h_namespace = $3 AND h_key = $4 AND revision = $5 RETURNING revision`),
		delete: f(`DELETE FROM {records}
			WHERE h_pipeline = $1 AND h_namespace = $2 AND h_key = $3 AND revision = $4`),
		list: f(`SELECT key, value, revision FROM {records} WHERE h_pipeline = $1 AND h_namespace = $2
			ORDER BY key`),
		deleteRecords: f("DELETE FROM {records} WHERE h_pipeline = $1"),

		fence: f("SELECT epoch FROM {leases} WHERE h_name = $1 FOR SHARE"),
		ensureLease: f(`INSERT INTO {leases} (h_name, name, holder, epoch, expires)
			VALUES ($1, $2, ''::bytea, 0, 'epoch'::timestamptz) ON CONFLICT (h_name) DO NOTHING`),
		acquire: f(`UPDATE {leases} SET holder = $1, epoch = epoch + 1, expires = now() + $2 * interval '1 microsecond'
			WHERE h_name = $3 AND expires <= now()`),
		renew: f(`UPDATE {leases} SET expires = now() + $1 * interval '1 microsecond'
			WHERE h_name = $2 AND holder = $3 AND epoch = $4 AND expires > now()`),
		lockLease: f("SELECT 1 FROM {leases} WHERE h_name = $1 AND holder = $2 AND epoch = $3 FOR UPDATE"),
		release:   f("UPDATE {leases} SET expires = least(expires, now()) WHERE h_name = $1"),
		readLease: f("SELECT name, holder, epoch, " + us("expires") + ", " + us("now()") +
			" FROM {leases} WHERE h_name = $1"),
	}
}

// mysqlQueries is the MySQL/MariaDB dialect (InnoDB): the same layout in a database, names
// VARBINARY, times as Unix microseconds of the server's UTC clock (no time zone enters), and
// revisions from a counter row (MySQL has no sequences).
func mysqlQueries(database string) queries {
	q := func(name string) string { return "`" + strings.ReplaceAll(name, "`", "``") + "`" }
	t := func(name string) string { return q(database) + "." + q(name) }
	const now = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))"
	f := strings.NewReplacer(
		"{schema}", q(database),
		"{meta}", t("statestore_meta"),
		"{rev}", t("statestore_revision"),
		"{checkpoints}", t("statestore_checkpoints"),
		"{records}", t("statestore_records"),
		"{leases}", t("statestore_leases"),
		"{now}", now,
	).Replace
	const engine = " ENGINE=InnoDB"
	return queries{
		mysql:  true,
		schema: database,
		create: []string{
			f("CREATE DATABASE IF NOT EXISTS {schema}"),
			f("CREATE TABLE IF NOT EXISTS {meta} (name VARCHAR(64) NOT NULL PRIMARY KEY, value VARCHAR(255) NOT NULL)" + engine),
			f("CREATE TABLE IF NOT EXISTS {rev} (id TINYINT NOT NULL PRIMARY KEY, n BIGINT NOT NULL)" + engine),
			f(`CREATE TABLE IF NOT EXISTS {checkpoints} (
				h_pipeline BINARY(32) NOT NULL PRIMARY KEY, pipeline VARBINARY(1024) NOT NULL,
				checkpoint LONGBLOB NOT NULL, saved_us BIGINT NOT NULL)` + engine),
			f("CREATE TABLE IF NOT EXISTS {records} (" +
				"h_pipeline BINARY(32) NOT NULL, h_namespace BINARY(32) NOT NULL, h_key BINARY(32) NOT NULL, " +
				"pipeline VARBINARY(1024) NOT NULL, namespace VARBINARY(1024) NOT NULL, `key` VARBINARY(1024) NOT NULL, " +
				"value LONGBLOB NOT NULL, revision BIGINT NOT NULL, " +
				"PRIMARY KEY (h_pipeline, h_namespace, h_key))" + engine),
			f(`CREATE TABLE IF NOT EXISTS {leases} (
				h_name BINARY(32) NOT NULL PRIMARY KEY, name VARBINARY(1024) NOT NULL, holder VARBINARY(1024) NOT NULL,
				epoch BIGINT NOT NULL, expires_us BIGINT NOT NULL)` + engine),
			f("INSERT IGNORE INTO {rev} (id, n) VALUES (1, 0)"),
		},
		initMeta: f("INSERT IGNORE INTO {meta} (name, value) VALUES ('format', ?), ('identity', ?)"),
		readMeta: f(`SELECT (SELECT value FROM {meta} WHERE name = 'format'),
			(SELECT value FROM {meta} WHERE name = 'identity')`),

		loadCheckpoint: f("SELECT checkpoint FROM {checkpoints} WHERE h_pipeline = ?"),
		saveCheckpoint: f(`INSERT INTO {checkpoints} (h_pipeline, pipeline, checkpoint, saved_us)
			VALUES (?, ?, ?, {now})
			ON DUPLICATE KEY UPDATE checkpoint = VALUES(checkpoint), saved_us = VALUES(saved_us)`),
		checkpointSaved:  f("SELECT saved_us FROM {checkpoints} WHERE h_pipeline = ?"),
		deleteCheckpoint: f("DELETE FROM {checkpoints} WHERE h_pipeline = ?"),

		get:          f("SELECT value, revision FROM {records} WHERE h_pipeline = ? AND h_namespace = ? AND h_key = ?"),
		revision:     f("SELECT revision FROM {records} WHERE h_pipeline = ? AND h_namespace = ? AND h_key = ?"),
		nextRevision: f("UPDATE {rev} SET n = LAST_INSERT_ID(n + 1) WHERE id = 1"),
		insert: f("INSERT INTO {records} (h_pipeline, h_namespace, h_key, pipeline, namespace, `key`, value, revision) " +
			"VALUES (?, ?, ?, ?, ?, ?, ?, ?)"),
		update: f(`UPDATE {records} SET value = ?, revision = ?
			WHERE h_pipeline = ? AND h_namespace = ? AND h_key = ? AND revision = ?`),
		delete: f(`DELETE FROM {records}
			WHERE h_pipeline = ? AND h_namespace = ? AND h_key = ? AND revision = ?`),
		list:          f("SELECT `key`, value, revision FROM {records} WHERE h_pipeline = ? AND h_namespace = ? ORDER BY `key`"),
		deleteRecords: f("DELETE FROM {records} WHERE h_pipeline = ?"),

		fence:       f("SELECT epoch FROM {leases} WHERE h_name = ? LOCK IN SHARE MODE"),
		ensureLease: f("INSERT IGNORE INTO {leases} (h_name, name, holder, epoch, expires_us) VALUES (?, ?, '', 0, 0)"),
		acquire: f(`UPDATE {leases} SET holder = ?, epoch = epoch + 1, expires_us = {now} + ?
			WHERE h_name = ? AND expires_us <= {now}`),
		renew: f(`UPDATE {leases} SET expires_us = {now} + ?
			WHERE h_name = ? AND holder = ? AND epoch = ? AND expires_us > {now}`),
		lockLease: f("SELECT 1 FROM {leases} WHERE h_name = ? AND holder = ? AND epoch = ? FOR UPDATE"),
		release:   f("UPDATE {leases} SET expires_us = LEAST(expires_us, {now}) WHERE h_name = ?"),
		readLease: f("SELECT name, holder, epoch, expires_us, {now} FROM {leases} WHERE h_name = ?"),
	}
}
