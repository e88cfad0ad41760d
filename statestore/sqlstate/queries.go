package sqlstate

import (
	"strings"

	"github.com/jackc/pgx/v5"
)

// queries are one dialect's statements, with the schema's tables filled in.
type queries struct {
	schema string
	lock   string   // serializes openers: $1 a name
	create []string // the layout, each statement idempotent
	// initMeta inserts the format ($1) and the identity ($2) unless present; readMeta reads both.
	initMeta, readMeta string

	loadCheckpoint, saveCheckpoint, checkpointSaved, deleteCheckpoint string
	get, revision, insert, update, delete, list, deleteRecords        string

	fence, acquire, renew, release, readLease string
}

// postgresQueries is the PostgreSQL dialect. Names are bytea (any bytes, ordered byte-wise like
// the file store); rows are keyed by the names' SHA-256 (h_*), so long names fit the index.
func postgresQueries(schema string) queries {
	t := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	r := strings.NewReplacer(
		"{schema}", pgx.Identifier{schema}.Sanitize(),
		"{meta}", t("statestore_meta"),
		"{rev}", t("statestore_revision"),
		"{checkpoints}", t("statestore_checkpoints"),
		"{records}", t("statestore_records"),
		"{leases}", t("statestore_leases"),
	)
	f := r.Replace
	const ttl = "now() + $4 * interval '1 microsecond'"
	const leaseCols = "name, holder, epoch, expires, now()"
	return queries{
		schema: schema,
		lock:   "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
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
		checkpointSaved:  f("SELECT saved FROM {checkpoints} WHERE h_pipeline = $1"),
		deleteCheckpoint: f("DELETE FROM {checkpoints} WHERE h_pipeline = $1"),

		get:      f("SELECT value, revision FROM {records} WHERE h_pipeline = $1 AND h_namespace = $2 AND h_key = $3"),
		revision: f("SELECT revision FROM {records} WHERE h_pipeline = $1 AND h_namespace = $2 AND h_key = $3"),
		insert: f(`INSERT INTO {records} (h_pipeline, h_namespace, h_key, pipeline, namespace, key, value, revision)
			VALUES ($1, $2, $3, $4, $5, $6, $7, nextval('{rev}'))
			ON CONFLICT (h_pipeline, h_namespace, h_key) DO NOTHING RETURNING revision`),
		update: f(`UPDATE {records} SET value = $4, revision = nextval('{rev}')
			WHERE h_pipeline = $1 AND h_namespace = $2 AND h_key = $3 AND revision = $5 RETURNING revision`),
		delete: f(`DELETE FROM {records}
			WHERE h_pipeline = $1 AND h_namespace = $2 AND h_key = $3 AND revision = $4`),
		list: f(`SELECT key, value, revision FROM {records} WHERE h_pipeline = $1 AND h_namespace = $2
			ORDER BY key`),
		deleteRecords: f("DELETE FROM {records} WHERE h_pipeline = $1"),

		fence: f("SELECT epoch FROM {leases} WHERE h_name = $1 FOR SHARE"),
		acquire: f(`INSERT INTO {leases} AS l (h_name, name, holder, epoch, expires)
			VALUES ($1, $2, $3, 1, ` + ttl + `)
			ON CONFLICT (h_name) DO UPDATE SET holder = EXCLUDED.holder, epoch = l.epoch + 1, expires = EXCLUDED.expires
			WHERE l.expires <= now()
			RETURNING ` + leaseCols),
		renew: f(`UPDATE {leases} SET expires = ` + ttl + `
			WHERE h_name = $1 AND holder = $2 AND epoch = $3 AND expires > now()
			RETURNING ` + leaseCols),
		release: f(`UPDATE {leases} SET expires = least(expires, now())
			WHERE h_name = $1 AND holder = $2 AND epoch = $3
			RETURNING ` + leaseCols),
		readLease: f("SELECT " + leaseCols + " FROM {leases} WHERE h_name = $1"),
	}
}
