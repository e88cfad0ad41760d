// Package sink is the CDC-to-Elasticsearch sink: a current-state mirror of source tables in
// Elasticsearch 8 or OpenSearch 2, written through versioned _bulk requests so that retries,
// replays and reordering converge to the source's current state. [Sink] implements cdc.Sink.
//
// # Configuration
//
// [ParseConfig] reads one entry of the specification's sinks: list ("type: elasticsearch",
// "config: {id, url, index, id_fields, id_separator, auth, auto_create_index}") plus what
// production needs: urls (several nodes, see Nodes and TLS), tls, request_timeout,
// connect_timeout, batch
// (max_docs, max_bytes), concurrency, delete_retention, item_retries, refresh, keyless
// (refuse | dead_letter, see Start checks), number_of_shards, number_of_replicas, and
// mapping (decimal: scaled_float | keyword | double, uint64: unsigned_long | keyword, json:
// stored | flattened -- for engines without
// scaled_float or unsigned_long, such as Elasticsearch's OSS test build, where index creation
// otherwise fails with a fatal error saying so). ${NAME} in any value is replaced by the environment
// variable (an unset one is an error naming it; "$${" is a literal "${"). Expansion works on
// parsed YAML scalars, never on the text, so a secret containing YAML syntax cannot change
// the document's structure. Unknown keys are errors naming the keys the section knows and the
// likely one. [ParseConfigNode] reads an entry from a node of a larger document (package
// mirror's file), so every problem keeps the line of that file: [ConfigError].Located holds
// them with their key paths (`line 18: unknown key "number_of_replica" in config: did you mean
// "number_of_replicas"? (known: ...)`), in the one format of the project's configuration
// errors (internal/config.Problem). Credentials are of type [Secret], which
// prints, marshals and formats as "[redacted]"; configuration errors are a *[ConfigError] and never
// quote values (not a credential, not the id or the index template; FuzzSinkConfig checks it).
// [Secret], [Duration] and the YAML reading are the project's configuration code
// (internal/config), shared with the other configuration files; the sink's names are aliases.
// The client (internal/search, shared with esfence and store/searchstore) has no product check
// (OpenSearch), never retries a request that may have reached the cluster (a lost _bulk
// answer is the runner's to replay) and never asks for gzip.
//
// # Nodes and TLS
//
// url: names one address of the cluster; urls:, instead of it, lists several of its nodes
// (exactly one of the two; all http:// or all https://; no credentials in them, auth: holds
// those). The sink and its fence share one client over them: the nodes take turns, and a
// request that cannot reach a node (connection refused, a connect timeout, a TLS handshake
// timeout: nothing was sent)
// goes at once to the next, so a dead node costs no write and does not make the sink claim
// its indices again. A node that failed is skipped for 5 s, doubling per failure in a row up
// to a minute; when every node failed lately each request still tries them all, the one
// failed longest ago first. A request that may have reached a node (a reset, a timeout
// waiting for the answer) is not resent: it is backpressure, as with one url.
//
// auth: is basic (username, password), api_key, or none. tls: takes the CA that signed the
// nodes' certificates (ca_file, or ca inline; default the system's roots), a client
// certificate and its unencrypted key (cert_file or cert, key_file or key, a [Secret]) for
// clusters that authenticate clients by certificate -- Elasticsearch's PKI realm, OpenSearch's
// clientcert_auth_domain -- and server_name, the name the nodes' certificates must carry
// when the urls reach them by another (an address). Each PEM is given once (file or inline);
// a certificate needs its key. Files are read by New; an unreadable or malformed one is an
// error naming its key, never its content.
//
// # Documents and _id
//
// _id is built from id_fields when set, else from the primary key. One column gives its text
// as is ("42"). Several are joined by id_separator (default "|") after escaping each: a
// backslash becomes \\ and every byte that occurs in the separator gets a backslash before
// it; the separator itself may not contain a backslash. An unescaped separator byte then only
// belongs to a real separator, so ("a|b","c") -> a\|b|c and ("a","b|c") -> a|b\|c never meet,
// even with multi-byte or self-overlapping separators. Key values render the same from the
// snapshot and from the stream (a MySQL binlog TEXT key, base64-wrapped, is decoded first). A
// NULL key part, a key type that cannot form an id (JSON, arrays), an empty or over-512-byte
// _id is a per-row serialization failure: the row is dead-lettered, never written with an
// auto-generated id. A table with neither a primary key nor the id_fields columns is refused
// as a whole (keyless: refuse, the default; see Start checks) or, with keyless: dead_letter,
// has every row dead-lettered.
//
// Documents are the full after image, produced by [AppendDocument] (values the source left
// out as unchanged are filled in first: Unchanged values).
//
// JSON values with duplicate member names -- PostgreSQL's json type and MariaDB's JSON (text)
// keep them as written -- would be refused by both engines under every mapping (400, "Duplicate
// field", json_parse_exception or x_content_parse_exception), costing the row. The sink writes
// instead the object the source's own JSON semantics read: in every object, at every level,
// only the last member of a name stays, where it stands; the other members keep their order
// (jsonb, PostgreSQL's -> and ->> operators and MySQL 8 all take the last one). Names compare
// by their decoded text ("a" and "\u0061" are one name). Objects without duplicates cost one
// pass that allocates nothing (names compared in a stack scratch); a document with a duplicate,
// an escaped name or an object of more than 32 members is re-read once more, allocating.
//
// # Decimals
//
// No value a column can hold costs its row. The sink knows each column's declared precision
// and scale before it creates the index, and [GenerateMapping] picks, under the default
// mapping (decimal: scaled_float), a field that holds every such value:
//
//   - precision 1..15 and 0 <= scale <= precision: scaled_float with scaling_factor 10^scale,
//     ignore_malformed, and a keyword sub-field "exact" with the digits. Such a column holds at
//     most 10^15-1 units, below 2^53, and the engine's arithmetic -- parse the digits as a
//     double, multiply by 10^scale, Math.round -- is off by less than 0.23 units for them, so
//     it always lands on the exact unscaled integer (TestScaledFloatHoldsEveryDeclaredValue
//     checks boundaries and random values at every precision and scale).
//   - anything else -- unbounded PostgreSQL numeric, a precision above 15 (numeric(38,10),
//     MySQL DECIMAL(65,30)), a negative scale or one above the precision: keyword
//     (ignore_above 8191) holding the exact digits, with a double sub-field "approx"
//     (ignore_malformed) for range queries and sorting -- approximate beyond about 15
//     significant digits, and a value beyond a double's range is simply not indexed there.
//
// decimal: keyword maps every decimal to keyword only; decimal: double to double
// (ignore_malformed) with the "exact" sub-field, approximate and never refused. The document
// always carries the source's digits as a JSON string, so _source is exact under every option.
//
// PostgreSQL's numeric NaN, Infinity and -Infinity, and float4/float8 NaN and infinities, are
// written as the strings "NaN", "Infinity", "-Infinity"; float and double fields are created
// with ignore_malformed too. On both engines (TestMappingServerUnparsableValues) such a
// document is kept with the string in _source; the numeric field leaves it out (Elasticsearch
// and OpenSearch list double and float fields in _ignored; OpenSearch's scaled_float leaves
// the value out without listing it), while a keyword field and the keyword sub-field "exact"
// do index the string, so a term query for "NaN" finds the row. Likewise PostgreSQL dates and
// timestamps no date format parses -- infinity, -infinity, BC dates, years past 9999 (neither
// engine parses a five-digit year with these formats) -- are written as PostgreSQL's text into
// date fields created with ignore_malformed: kept in _source, left out of the date field.
//
// Before encoding a value the sink checks it against the field the index really has, not the
// one it would generate now: each index's mapping is read once per session (see "Schema
// changes"; also with auto_create_index: false, where a user's template may have made a field
// scaled_float), and a guard per column is derived once per table schema. A value headed for
// a scaled_float field -- an index created by an earlier version with the old rule, a
// template's field, or a column whose type widened after the index was created -- must be
// stored exactly under that field's own scaling_factor: at most as many fractional digits as
// the factor keeps (trailing zeros aside) and within 2^53 scaled units (integers and floats
// alike); a factor that is not a power of ten proves nothing. Otherwise the row is
// dead-lettered with a reason naming the column and saying the index maps it as scaled_float
// and a new index is needed -- never silently rounded. NaN and the infinities headed for a
// numeric field without ignore_malformed, and unparsable dates for a date field without it,
// are dead-lettered the same way (the cluster would refuse the document). Only the field's
// own ignore_malformed is read, not the index-wide index.mapping.ignore_malformed. With
// auto_create_index: false a column the index lacks is checked against its generated field
// until a later session reads the field the cluster mapped dynamically. Values of other kinds
// headed for a numeric field of a changed column (text into a long, a decimal into an
// integer field, which the engines coerce) are left to the cluster.
//
// # Index names
//
// The index option is a template with {db}, {schema} (the PostgreSQL schema, falling back to
// the database for MySQL) and {table}; without placeholders it is a static name. Names are
// lowercased and checked against Elasticsearch's rules (not empty, not . or .., at most 255
// bytes, none of \ / * ? " < > | , # : or space, not starting with - _ +) and against the
// fence's df-w- prefix. The template is checked at configuration time with stand-in values;
// each concrete name at start (CheckTables) and the first time a table is seen. A bad
// concrete name (a table name with a space, say) is never a batch the cluster rejects: at
// start it is a *cdc.StartError (the operator must change the template); in a table first met
// by Write (created after start in a captured schema) every row of that table is
// dead-lettered with a reason starting "invalid_index_name:" that names the index and the
// fix, and the pipeline goes on.
//
// # Start checks
//
// [Sink.CheckTables] implements cdc.TableChecker, which cdc.Runner calls with the source's
// tables right after opening it and before reading any event. It sends nothing to the
// cluster and refuses, with one *cdc.StartError naming every table and its fix, what could
// never work: an invalid concrete index name; a table with neither a primary key nor the
// id_fields columns, unless keyless: dead_letter (pgbench's pgbench_history would otherwise
// send every change to the dead-letter queue); a column name that cannot be a document field
// (a "." in it, a metadata name); and two tables whose rows would go into one index (a static
// index with several tables, or {table} with MyOrders and myorders, since index names are
// lowercased), which would overwrite each other's documents by _id. The tables it accepts are
// bound to their indices for the session.
//
// Write holds tables that appear later (a table created in a captured schema, a FOR ALL
// TABLES publication gaining one) or that no check saw (a library user calling Write
// directly) to the same rules before any of their rows is written, but a table met only at
// run time never stops the pipeline for the others: a table without a key (whatever the
// keyless policy: refuse refuses it at the next start), a table whose index name is invalid,
// or one with a column that cannot be a document field has every row dead-lettered
// ("keyless_table:", "invalid_index_name:", "invalid_field_name:", naming the table, index or
// column and the fix), and the runner logs those dead letters. A table whose index is already
// bound in this session to another table -- by CheckTables, a claim, or an earlier batch --
// fails the batch with an *esfence.ConflictError of class bound_to_another_relation, as the
// fence's marker check would on the next run: that is permanent (see Failures), nothing of
// the batch is written.
//
// # Writes
//
// A batch becomes one _bulk request (several only when it exceeds batch.max_docs or
// batch.max_bytes; they are sent up to concurrency at a time). Insert, update and snapshot
// read -> an index action with the full after document; delete -> a delete action keyed by the
// before image. Every action carries version=Position.Version() with version_type=external and
// targets the index's fenced write alias (esfence Claim.WriteAlias) with require_alias=true.
// Events for the same (index, _id) in one batch are coalesced to the highest version, so each
// _id appears once per batch and the split requests need no ordering between them. The older
// changes are superseded, not lost: should the newest one be dead-lettered, its dead letter
// (which carries the newest row) stands for the row. An update
// whose before image carries a different key deletes the old _id at the same version and
// indexes the new one; a before image without the key columns says nothing about the old key.
// When the new key forms no _id (an empty text key, a NULL key part: the update is
// dead-lettered) the old _id is deleted all the same, so no document stays for a row that has
// moved away.
//
// The sink asks for the answer's status and error types only (filter_path; a failed item's
// reason too, read only when the item is refused 401 or 403), which cuts an
// item of the answer from about 200 bytes to about 25, uncompressed (the engines gzip answers
// for clients that accept it, at the cluster's CPU cost), and reads an answer with errors with a
// scanner that allocates nothing (encoding/json decides whatever the scanner cannot read).
// The _ids of a batch are rendered into one buffer and cost one allocation together.
//
// Throughput is the cluster's: against one node on loopback the sink's own work is 3-6% of a
// batch's time (BenchmarkSinkClientCPU against BenchmarkSinkVsBaselines). A batch split into
// requests of batch.max_docs, concurrency of them in flight, lets the cluster index on several
// write threads: with batch.max_docs at half the runner's batch size and the default
// concurrency of 2, batches went 1.0-1.4 times faster on Elasticsearch and 1.15-1.4 times on
// OpenSearch (two shared cores, split/sink in BenchmarkSinkVsBaselines). The default stays one
// request per batch, as the specification says.
//
// The Sink is a cdc.ConcurrentSink: Writes of several batches may run at once (the runner's
// MaxInFlight). Each is prepared -- actions, claims, unchanged values, mapping extensions,
// encoding -- under the sink's mutex and sent outside it. IdentityColumns tells the runner
// which columns form a table's _id, so that it holds back a delete, a key change or an
// update with unchanged values while an earlier batch writing that _id is still at the
// cluster. When a Write reclaims the indices after a connection loss (which rotates the
// write aliases), a batch encoded before with the old aliases gets index_not_found: that is
// backpressure (the batch is offered again with the new aliases), not a fencing.
//
// # Unchanged values
//
// A source may leave a value out of an update because the change did not touch it:
// cdc.Unchanged{} in After (PostgreSQL does so for TOASTed values -- text, jsonb, bytea over
// about 2 KB -- under the default replica identity). The sink is the only writer of its
// indices, so the row's previous state is known to it, and every document it writes is still
// the full row:
//
//   - Within a batch, before coalescing, such a value is taken from the newest older change of
//     the same row in the batch whose value is known: the same _id, or the old _id of an update
//     that changed the key (its before image names it). A value that change lacks too comes
//     from where that change's comes from.
//   - What the batch cannot supply comes from the stored documents: after the claims, one
//     real-time _mget per index through its write alias, for every row still lacking values
//     (and, for a key change, the new _id as well, to see whether the change was applied
//     before). The stored field's JSON, normalized when it was written, goes into the new
//     document as it is. The whole _source is read, never a filtered one: both engines
//     re-serialize a filtered _source (and a filter_path answer), which turns JSON numbers into
//     doubles -- digits of a large number in a jsonb are lost, 1e-5 becomes 1.0E-5.
//   - A stored document at or above the version of the change that first needed it (or the
//     new _id already at or above the change's version) means the index already holds a newer
//     state of the row: the batch is a replay. The row is then not written -- its write would
//     be a 409 or is overtaken by the replay's later changes -- and not dead-lettered.
//   - No stored document, a stored document without the field, or an older change in the
//     batch that deleted the row: the row is dead-lettered with a reason
//     "unchanged_value_unavailable: column "c": ..." naming the first such column, suggesting
//     REPLICA IDENTITY FULL. The dead letter holds the event as the source sent it (its
//     Unchanged values render as {"_unchanged": true}).
//   - A transport failure, 5xx, 429 or 408 of the _mget is backpressure (a connection loss
//     also makes the next Write claim again); an index_not_found_exception through the alias
//     is the refusal _bulk meets (fenced or destination_missing); another 4xx is permanent.
//
// Write never modifies the batch: a row is copied before its first value is filled in.
//
// Why this converges under replays and reordering: every change carries the row's whole state
// except its Unchanged values, and those equal the row's state just before the change. A batch
// is a contiguous run of the source's history, so the previous change of a row is either in the
// batch (used directly) or older than all of it; the stored document, written by the sink
// alone, is then the row's latest applied state, which is that previous change's -- unless the
// index is already past it (a replay, handled above: not written), or that previous change was
// dead-lettered (which was reported then; its values are missing from the index either way).
// Values in stored documents keep the normalization they were written with.
//
// Limits: an update replayed after a later delete of the row was applied finds no document
// and is dead-lettered although the index is right (the delete's tombstone is not visible to
// _mget; the replay applies the delete again) -- rare, since cdc.Runner replays at most the
// last batch and an unfinished transaction, and a delete in the same batch coalesces the update
// away. A document changed by anyone but the sink breaks the premise.
//
// # Outcomes
//
//   - 2xx, a delete's 404 not_found (the version is still recorded), and 409
//     version_conflict_engine_exception (a newer version is already there): applied or
//     superseded -- success.
//   - Per-item 429 and 5xx: the items alone are sent again, item_retries times with doubling
//     pauses; still rejected, the whole batch is returned as *cdc.BackpressureError (replaying
//     it is safe: versions make every action idempotent).
//   - Per-item index_not_found_exception (require_alias refusing a rotated-away alias, or the
//     auto-create rule refusing a delete through it): the fence moved or the index is gone. The
//     sink checks which and returns an *esfence.ConflictError of class fenced or
//     destination_missing -- the sink_destination_conflict incident: never dead-lettered,
//     nothing acknowledged, permanent (cdc.Permanent).
//   - Per-item 401 or 403 (a privilege missing on the index, or an index block): every
//     document would be refused alike, so nothing is dead-lettered; the Write fails
//     permanently with the refusal the cluster names (see Failures).
//   - Any other per-item error (mapper_parsing_exception, document_parsing_exception,
//     illegal_argument_exception, ...): a cdc.DeadLetter with the event's index in the batch
//     and a reason made of status and error types only -- the cluster's reason texts quote
//     field values, so they are dropped.
//   - Whole request: 429, every 5xx, 408, a timeout, a reset or a refused connection are
//     backpressure (Retry-After is passed on); 401, 403, 400 and the other 4xx are permanent
//     (see Failures). 413 for a request of one document dead-letters it.
//
// When one batch has several outcomes, a refusal wins over any other fatal error, which wins
// over backpressure, which wins over dead letters (the replay yields them again).
//
// # Failures
//
// cdc.Runner reopens the stream after every sink error that is not cdc.Permanent, and
// replays a *cdc.BackpressureError's batch. Every error of Write says which it is, for every
// request a Write sends (the fence's claims and index creation, mapping reads and additions,
// the engine check, _mget of unchanged values, _bulk):
//
//   - permanent (errors.Is(err, cdc.ErrPermanent)): refusals (*esfence.ConflictError, still
//     reachable with errors.As and errors.Is against an esfence.Class); the cluster refusing
//     the credentials or a privilege -- a 401 or 403 answer to any request, or to one _bulk
//     item: the error wraps a *search.AuthError (through *esfence.ServerError for the fence's
//     requests), whose message is "authentication failed: the cluster refused the
//     credentials (basic)" (the scheme sent: basic, api key, client certificate, none) or
//     "permission denied: action indices:data/write/bulk[s] on indices cdc-orders for user
//     mirror (granted by the index privileges create_doc, create, index, write, all)" --
//     the action, indices, user and granting privileges the engine names, nothing else of
//     its reason; a 403 cluster_block_exception says "refused by a block: ..."; TLS failing
//     on a certificate (the server's not trusted or not matching server_name, or the
//     client's refused: the error says "certificate" and which tls: keys to check); a request
//     the cluster refuses as such -- 400 (a generated mapping the engine cannot take: the error
//     says which mapping options to change), 413 for a request of several documents (a
//     batch.max_bytes above the cluster's http.max_content_length) and every other 4xx but
//     408 and 429; the start refusals of CheckTables (*cdc.StartError), where a table without
//     a possible mapping is refused (met only at run time, its rows are dead-lettered);
//     statestore.ErrNotLeader from a state store view fenced by a lease another process
//     took over (errors.Is finds it: the process must step down);
//   - backpressure: 429, 5xx, 408, refused or reset connections, timeouts (request_timeout),
//     answers that cannot be read, a failing state store during a claim;
//   - the caller's context ending comes back as ctx.Err(), unwrapped.
//
// Anything else (an unexpected 1xx or 3xx answer) is a plain error: the runner reopens.
//
// # Truncate
//
// A cdc.Truncate event (TRUNCATE TABLE: every row removed, no row carried) is mirrored
// exactly: the table gets a new, empty index generation that readers see at once
// (esfence.Fence.Reset: the read alias moves to it as a reindex's switch moves it; a legacy
// index without read alias is replaced by the alias and deleted at once), and the Truncate's
// version becomes the table's version FLOOR, recorded in its table record with the new
// generation (it survives restarts). From then on every change of the table with a version
// below the floor is void: dropped before it is sent, counted as superseded (BulkStats of
// the next _bulk request). This is exact because a table's changes committed after a
// TRUNCATE have higher versions (PostgreSQL: TRUNCATE's ACCESS EXCLUSIVE lock; MariaDB and
// MySQL: binlog commit order). In one batch the table's changes before the Truncate are void
// (lower versions) and those after it go to the new generation; a replayed Truncate at or
// below the floor is a no-op, so a replay never empties the index twice nor brings a removed
// row back. The outgoing generation is retired for retire_after and deleted by DeleteRetired,
// as after a reindex; a reindex in progress is abandoned (the table is empty now). The runner
// makes a Truncate wait for every earlier batch and every later batch wait for it
// (cdc.ConcurrentSink). A reset cut short (a lost answer) fails the batch as backpressure;
// the table record already holds the decision, so the next claim completes it and the
// replayed Truncate is a no-op.
//
// A Truncate without a schema (Debezium's) of a table the sink has not written since it
// started is applied the same way: the table is claimed as it exists and its new generation
// gets the live generation's mapping (read through its write alias, the marker left out); one
// this pipeline never wrote (no record) has nothing to empty. Without auto_create_index the
// new generation is created without a mapping, as the first one was. A Truncate whose schema
// has no columns (package mysqlcdc: a reader behind the DDL that no longer knows the
// relation's columns, or whose description predates an ALTER TABLE) is applied the same way,
// its relation identity kept (Schema events) -- except that when its identity is another
// relation than the one bound (the name entered), the new generation gets none of the former
// relation's fields: the rows to come map theirs, so a column whose type changed is mapped
// for its new type; of a table this pipeline never wrote, it creates the index (its fields
// mapped from the rows to come) so that the relation is bound and its entry reported. A
// Truncate writes no row, so the checks of a table's rows do not apply to it: a schema without
// a key (keyless) empties the table all the same (its rows are still dead-lettered); only an
// index name or column name the cluster cannot take dead-letters it. Where the exact path is
// impossible -- a sink under shared_owner (a new generation needs one writer: esfence refuses
// it) -- the Truncate is still dead-lettered, with a reason starting "truncate_not_mirrored:"
// that says why, and the index keeps the table's earlier documents.
//
// # Schema events
//
// The rule: an index mirrors the table that bears its name now. Besides TRUNCATE, the source
// tells the sink which relation a table's name denotes: cdc.TableSchema.Relation
// (PostgreSQL: the pg_class OID; MariaDB: the version of the DDL that gave the name its
// relation; "" unknown, the Debezium path). Each table's record (esfence, with its
// generations) binds the table to one relation identity and keeps the identities retired
// from it, each with its version (the last esfence.MaxRetiredRelations). Per change, in batch order:
//
//   - an empty identity has no effect (it never counts as a different relation);
//   - a table bound to none binds it, without emptying anything -- unless it was vacated
//     (below): then, as for a new identity, it gets a new empty generation mapped for the
//     relation's schema and is reported ENTERED (EnteredReplaced);
//   - the bound identity: written as usual;
//   - an identity retired from this table, at a version below its retirement (the version of
//     the change that retired it): the change is void (a change of a relation that left the
//     name, replayed); at or above it the relation came back (a rename undone) and is
//     treated as below;
//   - a new identity: the name denotes another relation now (DROP and CREATE, or another
//     relation renamed to it): the old identity is retired, the table gets a new empty
//     generation, and the table is reported ENTERED (EnteredReplaced);
//   - an identity bound to ANOTHER table U of the sink: the relation was renamed or moved to
//     this name. U is VACATED -- a new empty generation, the identity retired there -- and
//     this table binds it (emptied too unless this session just created it), reported
//     ENTERED (EnteredRenamed, From U). The sink finds U through a map of every identity of
//     its tables, read from the state store on first need and kept current.
//
// The first write ever of a table (no record, no index) through a streamed change rather than
// a snapshot read is reported ENTERED too (EnteredNew): the rows it had before that change are
// missing -- unless that change is a Truncate, before which the table had no rows to miss (a
// CREATE TABLE; for a relation renamed into a name the sink never wrote, MariaDB's second
// Truncate brings a second new identity, reported EnteredReplaced: one report, one
// re-snapshot). An ENTERED table holds only the changes streamed since: Options.OnEntered is
// called (outside the sink's mutex, once per entry, after the batch was prepared) and package
// mirror asks the source for a re-snapshot of the table. A table that leaves the capture
// (DROP, a rename to a name not captured) keeps its index's last documents; when its relation
// reappears under a captured name, the vacate rule empties its old index and the new name is
// re-snapshotted: a table is never split over two indices and two relations never share one.
// Under shared_owner identities are not bound (binding and emptying need one writer): the
// Debezium path, which has none. Each report is recorded with the table (esfence
// EnteredMark, in the same state-store write as the binding or reset) until the caller says it
// was handled (EnteredHandled): a sink restarted in between reports it again when it first
// claims the table, so a crash never loses one. Under shared_owner a new table's report is not
// recorded.
//
// # Fencing and index creation
//
// Every index is bound to one table per session (see Start checks) and claimed through
// esfence before the session first writes to it
// ([esfence.Fence.EnsureTable]) and again before the first write after a connection loss (the
// specification's "after a reconnect"), every index of the session in one claim round
// ([esfence.Fence.ReclaimTables]: three reads sent at once, then one _aliases request rotating
// every fence -- two round trips, whatever the number of tables). A claim error that is not
// a refusal (transport, server, state store) is backpressure, unless the cluster refused the
// request as such (see Failures).
//
// What counts as a reconnect: any request of the sink (a _bulk, an _mget, a claim's, a
// mapping's) that got no complete answer -- a reset, a refused connection, a timeout, a
// request the stall guard gave up (below) -- marks every claim stale, and the next Write
// claims every index again before it writes anything. A pooled idle connection the network
// dropped while nothing was sent on it is not one: the client replaces it without any request
// failing, and no request was exposed to the loss. The guarantee the specification asks for
// holds either way, because the cluster enforces it: a copied state store (same identity)
// that claimed an index after this sink rotated its fence, so this sink's next write through
// the old alias is refused (fenced), and so is its next claim (the fence is neither its
// record's current nor its pending one). A claim after a reconnect proves ownership again
// before writing and picks up the fields another writer may have added meanwhile.
//
// A takeover (a standby becoming the pipeline's active on a shared state store, package
// statestore/sqlstate) calls [Sink.FenceOut] before the first Write, on a sink built on the
// store view fenced by the new lease's epoch: every index the pipeline's records name has its
// write alias rotated in one _aliases request ([esfence.Fence.FenceOut]), including the
// indices of tables this process will not write for a long time, so the old active, paused
// across the takeover, has every write through its aliases refused by the cluster (fenced,
// permanent) and every claim or state write refused by the store (statestore.ErrNotLeader,
// permanent: it must step down). Its errors are classed as a claim's; a cut one is called
// again and carries on. Claims the sink held are claimed again by the next Write.
//
// # Networks that misbehave
//
// Connection resets: every request that failed this way is offered again by the runner with
// the batch (backpressure, at its backoff of 100ms doubling to 5s), after the claim round
// above, which fits between two resets of a network that drops every connection every 2s.
//
// Black holes (packets dropped, no reset): a request whose connection went into one waits
// for its timeout (request_timeout, 60s by default) even when the network returned long
// before, since the bytes it sent are gone. The sink's transport therefore has a stall guard:
// while a request has been in flight for 3s it asks the cluster for its local node's version
// (the monitor privilege, at most 3s) every second. A request that was already in flight when
// such a probe failed is given up once a later probe is answered -- the cluster was out of
// reach and is back, so the request's own connection is the lost one -- and fails as a
// connection loss (backpressure; the claims go stale). Writes then resume a second or two
// after the network returns instead of at the request's timeout. A request that is merely
// slow while the cluster answers probes is never given up, nor one while the cluster stays
// out of reach (its timeout ends it); a probe failing under heavy load and then answered may
// give up a slow _bulk, which is replayed (versions make that harmless). The encoding recorded in the
// marker names everything that decides an _id (id_fields, id_separator, format version), so a
// sink configured differently is refused an existing index (encoding_mismatch) instead of
// writing a second copy of every row.
//
// auto_create_index: true (the default) creates a missing index, in the fence's single
// request, with the mapping [GenerateMapping] derives from the source schema for the detected
// engine and the settings index.gc_deletes (below), number_of_shards and
// number_of_replicas. auto_create_index: false sends no mapping: the fence creates the index
// with only its marker and write alias, and the cluster maps fields dynamically (or by a
// user's index template), though the sink still reads the mapping to guard values (see
// "Decimals"). An index someone else created is refused either way
// (marker_missing): the fence's rule "the sink writes only to indices it creates" has no
// exception, because adopting an unowned index would make every fencing guarantee void. To
// pre-create mappings with auto_create_index: false, use a composable index template that
// matches the index name.
//
// The cluster must refuse to auto-create df-w-* indices, whatever auto_create_index says:
// every claim proves it (esfence, "Deployment requirement") and refuses with
// fencing_unenforced, quoting the request that fixes it, when it cannot. [Sink.CheckCluster]
// makes the same proof without claiming anything, so that a caller (package mirror, before it
// opens the source) learns of a certain refusal before anything is created;
// [Sink.AutoCreate] and [Sink.EnforceAutoCreate] read and apply the setting with the sink's
// credentials (cdcmirror prepare-cluster).
//
// [Sink.DropIndices] deletes the indices the pipeline created (and their write aliases) when
// the pipeline is deleted to start over; package mirror's Drop does that, then deletes the
// pipeline's state.
//
// # Shared owners
//
// A pipeline whose source spreads one table over several processes -- a Debezium source
// reading its topics through a consumer group, whose members share a topic's partitions --
// has several sinks, one per process and each with its own state store, writing the same
// index at once. shared_owner makes them one owner: every process of one scale-out group sets
// the same value (for a Debezium pipeline, e.g. the consumer group's name), and the indices
// are owned by it (esfence Options.SharedOwner: the marker names "shared:<shared_owner>", the
// pipeline and the sink id) instead of by the state store's identity. Processes of one owner
// never fence each other: a claim joins the index's write alias instead of rotating it, the
// first process to need an index creates it and the others join it (a creation lost to
// another process joins the winner's index). Their writes converge by the external versions
// every change carries. Everyone else is still refused (owned_by_other): a deployment with
// another shared_owner or with none, another pipeline or sink id, and an index created without
// shared_owner (and the other way round), so switching an existing pipeline to shared_owner
// takes new indices. Every member must use the same configuration (index template, id_fields,
// id_separator -- encoding_mismatch otherwise -- and read_alias: a table is joined as the
// first member created it). The value is validated (1 to 255 bytes of printable UTF-8, no
// leading or trailing white space) and is no secret, but errors never quote it anyway.
//
// Members share the fate of their indices: a member whose state records an index refuses it
// once it is gone (destination_missing), while a member without that record would create it
// again. Delete a shared index only with every member stopped, and delete the pipeline's
// state of every member (package mirror's Drop) before they start again. Reindexing needs one
// writer: BeginReindex fails (permanent, errors.Is esfence.ErrSharedOwner), and DeleteRetired
// has nothing to do.
//
// # Schema changes
//
// With auto_create_index: true the sink owns the index's mapping, and it keeps it in step with
// added columns: the first time a table schema (a new *cdc.TableSchema value, as sources
// produce after DDL or a relation message) is about to be written in a session, the sink reads
// the index's mapping once per session (with auto_create_index: false too, for the guards of
// "Decimals") and adds, with one PUT _mapping, the generated field of every column the mapping
// lacks -- before any document carrying it, so dynamic mapping never
// guesses (it would make a DECIMAL or a DATETIME text). Both requests go through the fenced
// write alias (esfence Fields and AddFields): a fenced sink cannot change the mapping, and
// _meta (the marker) is never sent. Dropped columns keep their fields; new documents simply
// lack them. A column whose type changed keeps its existing field, since a field's type cannot
// change in place: values the old field would round (a scaled_float) are dead-lettered by the
// sink (see "Decimals"); other values the old field accepts are indexed (coerced by the
// cluster, e.g. a numeric string into an integer field), the others are rejected per document
// and dead-lettered with the cluster's error type (document_parsing_exception on Elasticsearch,
// mapper_parsing_exception on OpenSearch). Changing a type for good takes a new index: a
// reindex (see "Reindexing"), or a new index name in the template, or a new pipeline. A column
// name the mapping refuses (a "." in
// it, a metadata name) stops the pipeline with a fatal error naming it, as at creation. With
// auto_create_index: false nothing is sent and new columns are mapped dynamically.
//
// The engine (for the mapping) is read once from the local node's info: Elasticsearch 8
// reports a build_flavor, OpenSearch 2 does not. GET / is not used because some
// distributions do not serve it.
//
// # Reindexing
//
// Every table is claimed as generations (esfence.EnsureTable). With read_alias: true a new
// table's index is created as <index>-g1 behind a read-only alias <index> that readers query;
// without it (the default) the index is <index> itself, a legacy index. BeginReindex(schema)
// starts the next generation with the mapping generated from the given schema (the table's
// current one); from then on every action of the table is written to both generations, each
// with the guards and mapping knowledge of its own index, so a value the old field rejects is
// dead-lettered for the old generation only (its dead letter names that index's reason) while
// the new one takes it. The caller fills the new generation (package mirror: a re-snapshot of
// the table) and, once every row is stored, calls SwitchReindex: the read alias moves to the
// new generation in one request that also removes the old generation's write alias (a legacy
// index is replaced by the alias, and deleted at once: searches in flight on it at that
// instant may fail); the old generation is kept for retire_after (default 1h) and deleted by
// DeleteRetired (package mirror calls it while it runs). Chunks still in flight to the old
// generation at the switch come back as backpressure and are written again to the new one.
// A switch that fails once begun (a refused refresh, a lost answer) is completed by the next
// SwitchReindex (Generations reports Switching meanwhile; AbandonReindex refuses it), unless
// another copy of the deployment changed the table record since: fenced.
// AbandonReindex drops a new generation. A restart while a reindex fills keeps writing to
// both generations (the state store records it); the fill must be made again (mirror.Reindex
// resumes it). Reindexing needs auto_create_index: true (without it the sink owns no mapping).
// Readers must query the read alias, not a wildcard over the generations (<index>* would also
// match the generation being filled).
//
// # Deletes never resurrect
//
// Elasticsearch and OpenSearch remember a deleted document's version only for index.gc_deletes
// (60s by default). After that, a replayed older index action for the same _id is accepted
// and brings the document back. Replays happen after a crash between acknowledgement and
// checkpoint, after backpressure, and after a restore of the state store: they repeat events
// no older than the last durable checkpoint. The sink therefore creates its indices with
// index.gc_deletes = delete_retention, 24h by default. The guarantee: a deleted row stays
// deleted as long as every replay of events older than the delete reaches the cluster within
// delete_retention of the delete being applied -- in practice, as long as the pipeline does not
// stay down (or keep replaying a stuck batch) for longer than that. Raise delete_retention for
// longer outages; the cost is tombstones kept that long. The retention is an index setting
// fixed at creation; changing the option later affects only new indices (an operator may PUT
// the setting on existing ones). TestSinkDeleteRetention shows a 1ms retention resurrecting a
// row and the default holding.
//
// The retention has a second bound: both engines keep a delete's version for version checks
// only in the shard engine's in-memory version map (elastic/elasticsearch#101178; the
// soft-deleted tombstone kept in Lucene for recovery is not consulted once the engine is
// reopened, as the test below shows). Whatever recreates the engine forgets every delete
// version at once, however young: a node restart, closing and opening the index, and,
// by the same mechanism though not tested here, a shard moving to another node or a replica
// promoted after a failure. TestSinkDeleteVersionLostOnReopen pins it on both engines with a
// close and open (24h retention, the stale replay comes back). So the guarantee above holds
// only for replays that do not straddle such an event. What still holds across it: cdc.Runner
// replays in source order from the last checkpoint, so every replayed event older than a
// delete is followed in the same replay by the delete itself, which removes the row again --
// the index converges, and the row is visible at most between the two replayed events. Only a
// delivery out of source order (older events arriving after the delete's last replay, which
// cdc.Runner never does) can leave a deleted row resurrected for good.
//
// # What is not promised
//
// At-least-once and idempotent, not exactly-once: Elasticsearch writes are not transactional
// with the checkpoint. A bulk request the cluster accepted before a fence rotation may still
// complete. A truncate is reported, not mirrored; a changed column type is not remapped (see
// above).
//
// # Observing
//
// Options.Observer (default none) hears one BulkStats per _bulk request -- actions, body
// bytes, HTTP status (0 when no answer came), duration, and the items applied, superseded
// (409), dead-lettered and pushed back (per-item 429 and 5xx) -- and one Claimed per claim,
// on first use of an index and after a reconnect. An Observer that also implements
// UnchangedObserver hears, per Write that met unchanged values, how many values came from the
// batch and from the index, how many rows were superseded or dead-lettered, and the _mget
// requests and their time. The example pipelines export the bulk stats and claims to
// Prometheus; none of the calls carries row data.
package sink
