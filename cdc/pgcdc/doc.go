// Package pgcdc is the PostgreSQL change-data-capture source: logical replication with the
// built-in pgoutput plugin, an initial snapshot through the slot's exported snapshot, and table
// schemas from pg_catalog.
//
//	src, err := pgcdc.New(dsn, &pgcdc.Options{Name: "orders", Tables: []pgcdc.Table{{Name: "Orders"}}})
//	st, err := src.Open(ctx, storedCheckpoint) // nil the first time
//	for ev := range st.Events() { ... st.Ack(ctx, ev.Checkpoint) once stored ... }
//
// # Requirements
//
// PostgreSQL 14 or later (pgoutput's messages option; table patterns need 15), wal_level =
// logical, a free replication slot and walsender, and a role with REPLICATION that may create
// the publication (or one made beforehand, Options.NoCreatePublication; PostgreSQL 15 lets only
// a superuser create one FOR TABLES IN SCHEMA or FOR ALL TABLES). The DSN is an ordinary SQL
// one; the replication connection adds replication=database. [Source.SlotInfo] reads the
// slot's and the publication's state (active, walsender pid, positions); [Source.Drop]
// removes both when a pipeline is deleted.
//
// # Protocol
//
// Open ensures the publication (created with publish = 'insert, update, delete, truncate'
// FOR TABLES IN SCHEMA for the patterns and FOR TABLE for the other named tables, FOR ALL
// TABLES when Options.Tables is empty; see Table patterns) and the slot
// (CREATE_REPLICATION_SLOT ... LOGICAL pgoutput), then runs START_REPLICATION with
// proto_version 1, text values and messages 'true' (logical decoding messages, available
// from PostgreSQL 14 with any protocol version; see Idle checkpoints). Begin, Relation,
// Insert, Update, Delete, Truncate and Commit become events; this slot's idle notes move the
// slot; Type and Origin messages and every other logical decoding message are ignored. Every change of a transaction is held back until the next one arrives, so the
// last carries the transaction's checkpoint, as cdc.Event requires. Both connections pin the
// settings that shape text output (DateStyle ISO, TimeZone UTC, bytea_output hex,
// extra_float_digits 1, IntervalStyle postgres, UTF8).
//
// A goroutine of the stream only reads the replication connection and hands the frames over
// in batches, each as soon as nothing more is buffered, so that on a machine with more than
// one core the network reads overlap the decoding; up to eight batches of at most 64 KiB (or
// one larger frame) wait for it. Keepalives it takes out of the stream, passing a reply
// request on at once. The stream's goroutine decodes: Insert, Update and Delete messages
// straight from their bytes, the other messages through pglogrepl. It alone writes to the
// connection (status updates, also in answer to keepalives).
//
// # Start checks
//
// Before it creates a publication or a slot, Open checks that every table of Options.Tables
// exists as spelled (pg_class and pg_namespace, exact case, ordinary or partitioned tables),
// and the schema of every pattern (pg_namespace, exact case; it may have no tables); otherwise
// it fails with a *cdc.StartError listing every missing table and schema, and, when one of the
// same name in another case exists, the fix `did you mean public."MyOrders"?` (or
// `"Sales".*`). A captured table an existing publication does not publish, and a pattern whose
// schema it does not publish as a whole, are refused the same way, the fix being the ALTER
// PUBLICATION. The stream implements cdc.TableLister: Tables returns the schemas of the tables
// captured as of Open, as Open read them -- the named tables, the tables each pattern's schema
// held, or (no Options.Tables) the tables the publication published then. Tables created or
// published later are not listed: they arrive in the stream, and a sink checks them when they
// first arrive.
//
// With Options.Owner set, Open first refuses (ErrOwnedByOther) a publication whose comment
// marks it as another owner's, and a slot another owner's publication names; after the
// publication exists it marks it as Owner's with the slot's name (COMMENT ON PUBLICATION
// 'tributary-owner {"owner":...,"slot":...}'), unless it is already or carries a comment of
// the user's. A publication without a comment -- created by hand, or by a version without
// marks -- is claimed by the first Owner that opens it. Drop refuses the same way. Without
// Owner nothing is read or written: two Sources of one Name on one database share the
// default slot and publication (DefaultName), so give each its own Name or Slot and
// Publication.
//
// Open also reports the captured tables with TOASTable columns whose replica identity is not
// FULL, with one Warn line per table naming the columns (once per Source: reopened streams do
// not repeat it), and in [ToastTables]. A column is TOASTable when the server can really store
// its values out of line: a storage other than plain, and values that can be large enough --
// the row can exceed TOAST_TUPLE_THRESHOLD (2032 bytes with 8 KiB blocks), and the column's
// value can be moved with every larger value the server moves before it already out of line
// (the table's toast_tuple_target, if set, is where the server stops). Types without a bound
// (text, bytea, json, jsonb, xml, arrays, varchar, char and numeric without a typmod, any type
// pgcdc does not know) always can; bounded ones (char(n) and varchar(n) at n times the
// database encoding's longest character, numeric(p,s), bit(n), inet) only in a row whose
// columns, each at its largest, can exceed the threshold: pgbench's char(84) rows never
// warn. Sizes are upper bounds, so the report errs on the side of warning. An update that
// leaves such a value unchanged, while it is stored out of line, arrives
// without it, and the sink has to fill it from the stored document with one read per such
// row. ALTER TABLE ... REPLICA IDENTITY FULL makes the server send the old row, which avoids
// those reads at the cost of larger WAL records.
//
// # Table patterns
//
// An entry of Options.Tables whose Name is AllTables ("*"; "sales.*" in configuration files)
// captures every table of its schema: those it holds when Open runs (listed by Tables and read
// by an initial snapshot) and those created in it later. A created publication publishes the
// schema FOR TABLES IN SCHEMA, so the server itself sends the changes of tables created there
// later; named tables of other schemas are added FOR TABLE. A table created after Open is
// picked up by its first relation message, which loads its schema from pg_catalog; all its rows
// arrive through the stream, since it had none before. A table moved into the schema (ALTER
// TABLE ... SET SCHEMA) or added to a publication by hand delivers its changes from then on;
// its earlier rows are not read. Without Options.Tables, every table the publication sends is
// captured, also one it publishes later (a FOR ALL TABLES publication gains every table
// created, ALTER PUBLICATION ... ADD TABLE one more).
//
// An existing publication is never altered: it must already publish what Options.Tables asks
// for, or Open refuses with a *cdc.StartError whose fix is the ALTER PUBLICATION -- a named
// table it does not publish (ADD TABLE), a pattern's schema it does not publish as a whole (ADD
// TABLES IN SCHEMA; publishing each of the schema's current tables is not enough, later ones
// would be missed; FOR ALL TABLES is). What it publishes beyond that is dropped by the stream.
// Patterns need PostgreSQL 15: on an older server Open refuses them unless the publication
// exists FOR ALL TABLES. A table literally named "*" cannot be captured by name.
//
// # Values
//
// Every value is decoded from PostgreSQL's text output, on the stream (pgoutput sends text)
// and in the snapshot (the SELECT asks for text results) by the same decoder, so a row gives
// identical values on both paths: booleans bool; int2/4/8 int64; oid, xid uint64; real and
// double float64 (NaN and ±Inf included, which JSON cannot carry); numeric its exact digits as
// a string ("NaN" too); text, varchar, char (blank-padded, as stored), uuid, enums, date
// ("2006-01-02", "... BC", "infinity"), time, timestamp ("2006-01-02 15:04:05.5"), interval,
// bit strings ("0101"), inet and other types their text form; bytea cdc.Base64; timestamptz
// cdc.EpochMicros (the strings "infinity" and "-infinity" for the infinities, which have no
// instant); json and jsonb cdc.RawJSON (json verbatim, jsonb in its normalized form); arrays
// nested []cdc.Value of their element values, lower bounds dropped. Domains decode as their
// base type. The string values of one row (including array elements) are cut from one string
// holding all of them: keeping any of them keeps that string in memory. A value that does not decode makes the event Malformed (naming the column, never
// the value).
//
// # Unchanged TOAST values
//
// An update that leaves a TOASTed value alone (one stored out of line: text, jsonb, bytea and
// the like over about 2 KB after compression) does not resend it: pgoutput marks the column
// 'u'. With REPLICA IDENTITY FULL the old row fills it in. Under the default identity the
// value is cdc.Unchanged{} in After -- the row's current state holds it, and a consumer that
// keeps that state (the sink: see package sink, Unchanged values) takes it from there. An
// update that changes the value sends it whole. Key columns never are Unchanged: when a key
// column holds an out-of-line value the server logs the old key in full, and it fills the
// new one in. The server sends 'u' only in the new row of an update; met anywhere else it
// makes the event Malformed.
//
// # Schemas
//
// Columns (generated ones excluded: pgoutput never sends them), format_type spellings, kinds
// with precision, scale, lengths and fractional-second digits from the type modifier,
// nullability, enum labels, array element types and the primary key in key order come from
// pg_catalog, cached on the Source (which also implements cdc.SchemaLoader): Open loads the
// tables it lists in a few queries whatever their number (two for columns and keys, one for the
// publication's column lists, one per type not built in), a table it did not list is loaded by
// its first relation message. A relation message whose columns (names,
// type OIDs, typmods, and key flags under the default replica identity) differ from the cache
// reloads the catalog; if the catalog has moved on further (a replayed stream, a dropped
// table) or a publication column list narrows the table, the event schema is the relation
// message's columns, described from their types. The primary key of a relation the catalog
// does not have under the message's name (dropped, or renamed again since) is the one the
// stream knew: from its earlier relation message, or a schema the Source cached under any
// name (the tables listed at Open, and those loaded since, for the Source's life: a new
// process knows only what its Open lists), or the catalog's under the name the relation
// bears now (renamed since). Else (dropped), under the default replica identity, the
// relation message's key flags, which mark the primary key; under REPLICA IDENTITY FULL
// (every column flagged), USING INDEX (the index's columns) or NOTHING they do not, the key
// is unknown, and the table's row changes
// are Malformed with ErrKeyUnknown -- the runner dead-letters them with the reason
// "malformed: pgcdc: the table was dropped before its changes were read and its primary key
// is unknown ...", which holds no row data; a Warn line names the table. Schemas are never
// changed in place: an event keeps the schema it was decoded under. Names are exact, so
// mixed-case and quoted names need no quoting in Options.Tables.
//
// # Relations and renames
//
// Every schema pgcdc produces (Tables, snapshot rows, streamed changes, re-snapshot rows)
// carries the relation its name denoted as cdc.TableSchema.Relation: the pg_class OID in
// decimal, the relation ID of pgoutput's relation messages ("<oid>.<n>" once it came back
// from names not captured: Leaving the capture and coming back). It survives ALTER TABLE ...
// RENAME, SET SCHEMA and column changes; DROP followed by CREATE of the same name gives
// another one. The sink binds each index to one relation (package sink, Schema events).
//
// The server sends a relation message before a relation's first change after any DDL on it,
// so a rename is seen at the renamed table's next change, in WAL order: every change after
// the rename carries the new name (its cdc.TableID) and the same Relation, changes before it
// the old name. The rename is logged at Info. A relation renamed or moved to a name the
// source does not capture (not named, not in a pattern's schema) has its later changes
// skipped, logged at Warn (its destination keeps what it has); one renamed or moved into a
// captured name is captured from its next change, under the new name -- its earlier rows
// arrive only through a re-snapshot, which the sink asks for (the relation entered the
// name). Whether the server sends such changes at all is the publication's: a FOR TABLE
// publication (what pgcdc creates for named tables) follows the relation through renames,
// not the name, so a table created later under a named table's old name is not published
// (a Warn line at the rename gives the ALTER PUBLICATION ... ADD TABLE; the next Open
// refuses it until then); a FOR TABLES IN SCHEMA publication (patterns) publishes what is in
// the schema now, so a table moved out of a pattern's schema stops being sent at all, and one
// created or moved in is sent from its first change.
//
// # Leaving the capture and coming back
//
// A relation that leaves the captured names (RENAME or SET SCHEMA to a name not captured) and
// comes back under the name it left has missed the changes made while it was away. So that
// the sink does not take it for the relation its index holds, it comes back with another
// identity: Relation is "<oid>.<n>" after its n-th such return ("16384.1"), on every schema
// pgcdc produces from then on; the sink resets the name's index and reports the table
// ENTERED (replaced), and mirror re-snapshots it. The return is logged at Warn. One that comes
// back under another captured name keeps its identity: the sink empties the name it left
// (the identity is bound there) and reports the new one ENTERED (renamed). How pgcdc knows:
//
//   - The server sends the relation's changes while it is away (a publication FOR ALL TABLES;
//     FOR TABLE, which follows the relation through renames and moves, what pgcdc creates for
//     named tables; FOR TABLES IN SCHEMA of a schema it is renamed within): its first change
//     there comes with a relation message under the name not captured, which marks it away,
//     with the captured name it left when the stream saw it under one. A relation first seen
//     away (the stream started while it was) counts as having left whichever captured name
//     it comes back to: it gets a new identity there, and a name it had left (if another)
//     keeps its documents, as after a move out. No change while away: no message, and
//     nothing was missed.
//     The marks are part of every later checkpoint ("rels", by OID; checkpoints without it
//     have none), so a restart resumes with them and the same WAL gives the same identities;
//     until a checkpoint carries a new mark, idle notes do not move the slot (a restart
//     decodes the relation message again; the WAL since is kept until the next captured
//     transaction is acknowledged). A relation keeps its entry for good (a few dozen bytes);
//     a publication that sends tables beyond the captured ones adds one for each of them that
//     changes, since the stream cannot tell it was never captured.
//   - A publication FOR TABLES IN SCHEMA (patterns) does not send a table moved out of the
//     schema at all: its return shows only a relation message like the one before, with the
//     same name and columns. For the tables of a pattern's schema (unless the publication is
//     FOR ALL TABLES) the stream reads the pg_class row's xmin at every relation message; when
//     a repeated message (same name and columns, no TRUNCATE of it in between) finds the row
//     rewritten since the previous one while the catalog gives the relation the message's
//     name, the relation may have been away and gets a new identity (Warn "may have been
//     moved out of it and back"). Other rewrites of the row between two such messages do the
//     same, at the cost of a re-snapshot, never a wrong row: a RENAME and back with no change
//     in between, GRANT and REVOKE, ALTER ... OWNER, storage parameters, ADD CONSTRAINT, a
//     column added and dropped again, VACUUM FULL and CLUSTER (VACUUM, ANALYZE and CREATE
//     INDEX update the row in place and do not). The new identity goes into the checkpoints
//     like a mark; but the check reads the catalog as it is now, so a stream that decodes the
//     return again from an earlier checkpoint may not repeat it, and gives the relation its
//     former identity: another reset and re-read, never a wrong row.
//
// Not detected -- the changes made while away are missing from the index without a word; the
// fix is a re-snapshot of the table (Resnapshot; mirror's reindex):
//
//   - under FOR TABLES IN SCHEMA, a move out and back that the xmin check cannot see: the
//     stream restarted while the table was away (it compares only within one stream), the
//     table's columns changed on the way (the message then differs and is read as a column
//     change), or the stream read the catalog only after the table was back (a stream far
//     behind the server);
//   - ALTER PUBLICATION ... DROP TABLE and ADD TABLE again (or SET): the server stops
//     sending the table and starts again, and nothing in the stream or in the table's
//     catalog entry shows it.
//
// # Versions
//
// A streamed change's version is the LSN of its own WAL record (the position the server
// stamps its XLogData with). Within a transaction those increase strictly. Across
// transactions, successive changes of one row are ordered by its row lock: the second writer
// waits for the first to commit, so its record lies after the first's commit record and hence
// after all of the first's changes. A new row with the key of a deleted one waits the same way
// on the unique index. Replays decode the same records, so a replayed change has the same
// version. An LSN fits an int64 until 8 EiB of WAL.
//
// A snapshot row's version is the slot's restart_lsn minus one, read when the snapshot
// starts ("floor"). The server decodes WAL from restart_lsn on, and every change it will
// stream after the snapshot belongs to a transaction it decodes whole, so every such change
// has a record at or after restart_lsn: above the floor, even a change written before the
// slot's consistent point by a transaction that committed after it.
//
// # Snapshots
//
// SnapshotInitial with a new slot creates it with EXPORT_SNAPSHOT, imports that snapshot into
// a REPEATABLE READ READ ONLY transaction (SET TRANSACTION SNAPSHOT) before the replication
// connection does anything else, reads every captured table in it (with patterns, or without
// Options.Tables, those published as that snapshot sees the catalog: a table created while Open
// ran is read too) in primary key order, chunks of Options.SnapshotChunk rows by keyset, then
// streams from the slot's consistent point. The last row of each chunk and table carries a
// snapshot checkpoint; the last row of the snapshot carries a plain stream checkpoint.
//
// The exported snapshot dies with the connection, so an interrupted snapshot, or a snapshot
// over a slot that already exists, reads in a fresh snapshot instead. That is as good: all it
// needs is a snapshot taken no earlier than the point streaming resumes from. Rows it sees that
// changed after that point are streamed again with higher versions; rows it misses because
// they were deleted meanwhile are deleted by the stream; and snapshot rows are always delivered
// before the stream's changes, so a low-versioned snapshot row never follows a delete whose
// tombstone the destination may already have forgotten.
//
// Progress reports the table being read, tables done, the rows the reader has taken from
// Events (counting a resumed snapshot's earlier rows) against the sum of pg_class.reltuples,
// and their rate since this stream started; it is zero once every snapshot row is handed over.
//
// # Re-snapshots
//
// Source.Resnapshot (cdc.Resnapshotter) reads tables again while the stream keeps running:
// some or all captured tables, optionally only the rows an SQL condition selects (a key
// range, a filter). The request is a transactional logical decoding message
// (ResnapshotPrefix, JSON content), so it is as durable as the WAL and anyone with SQL access
// can write one; the stream takes it up when it decodes it, carries out requests one after
// another, and keeps the re-snapshot's position (request, table, last key, rows) in every
// checkpoint until it is done, so a crash or restart resumes it after the last chunk whose
// rows were acknowledged. Idle checkpoints wait while one runs: the slot must not move past a
// request no stored checkpoint carries.
//
// Each chunk (Options.SnapshotChunk rows in key order) is read between two watermarks on a
// connection of its own, and its rows enter the stream at the high watermark as Read events
// (Position.Snapshot set) whose version is the low watermark's commit LSN; rows whose key the
// stream changed between the watermarks are dropped, the stream carries their newer state.
// resnap_window.go states the protocol and the argument that a kept row never overwrites a
// newer change nor brings back a deleted row, even where the destination forgot its
// tombstones; a model test plays it against random interleavings and a real-server test
// (TestResnapshotWhileStreaming) against writers and crashes. A chunk waits for the
// transactions in progress at its snapshot, at most Options.ResnapshotWait, and is read again
// later when one stays open longer (the progress's Error says so). A re-snapshot adds and
// refreshes documents; it does not remove those of rows that no longer exist. Tables need a
// primary key. A condition the server refuses, or a missing privilege, gives the request up
// (logged, and in the progress's Error); a table dropped meanwhile is skipped.
//
// Progress reports a re-snapshot (Resnapshot set to its id) while the initial snapshot is not
// being read: the table being read, tables done of the request's, rows read (those dropped
// included) against the planner's estimate, the rate, and requests queued behind it.
//
// # Checkpoints
//
// A checkpoint is a small JSON document (format version 1). After a transaction it holds the
// end LSN of its commit record: START_REPLICATION from there skips that transaction and
// decodes the next. During a snapshot it also holds the floor, the tables done, the current
// table and the primary key of the last delivered row (text form; this is row data, so
// checkpoints are stored but never logged) and the row count. Once a relation left the
// captured names, every checkpoint also holds the relation marks (Leaving the capture and
// coming back). CheckpointLSN reads the position for operators.
//
// # Acknowledgements
//
// Standby status updates report as written, flushed and applied only the highest checkpoint
// passed to Ack (initially the position the stream started from), or a later position an
// idle note proved to hold no unacknowledged captured change, never what was merely
// received: the server keeps every change the pipeline has not stored. Ack refuses a checkpoint beyond
// the last one delivered. Updates go out every Options.StatusInterval (asking for a reply:
// see Shutdown and failures), when the server asks (keepalive), while the stream waits on a
// slow consumer (so wal_sender_timeout never ends it), and on Close. The one exception is
// the answer to a shutting-down server, which reports nothing as flushed (below).
//
// Close sends its last update and does not wait for the slot to show it: the stored
// checkpoint, not the slot, is what a restart resumes from, and a slot behind it costs WAL
// kept a little longer, never a change (the next stream reports the same position at its
// first update). So right after Close, pg_replication_slots may still show an earlier
// confirmed_flush_lsn -- or move a moment later, when the exiting walsender applies the
// update. Waiting would make Close's duration depend on the server (a walsender decoding a
// large transaction reads replies late, a failing one never), for no gain in correctness.
//
// # Idle checkpoints
//
// The slot's confirmed position would otherwise move only with acknowledged transactions of
// the captured tables, so a quiet captured table would make the server keep all the WAL other
// tables write after it. Once the stream has been idle for Options.IdleCheckpointInterval
// (no transaction with captured changes committed meanwhile, between transactions, every
// delivered checkpoint acknowledged; after an initial snapshot, once its end was
// acknowledged) it reads the WAL
// insert position ("start") and, when that lies at least 64 KiB beyond the reported
// position (the server frees whole segments, and the messages are WAL too: idle pipelines on
// a quiet server must not keep each other writing), writes a non-transactional logical
// decoding message, pg_logical_emit_message(false, 'tributary.pgcdc.idle', note), whose note
// names the slot, a nonce, start and the commit end of the last captured transaction
// delivered ("base"). The
// server sends every transaction in commit order and the message at its own WAL position, so
// when the message comes back with no captured transaction delivered since it was written,
// every captured change before start is acknowledged: start is reported as flushed. No
// checkpoint reaches the runner (an idle note is not an event), so the stored checkpoint stays
// at base, behind the slot.
//
// Keepalives were not used: PostgreSQL 15 skips transactions without published changes
// entirely (no empty Begin/Commit), and a keepalive's WAL end is the walsender's send position,
// which, with nothing pending, the built-in subscriber does report as flushed, but it carries
// nothing a restart could check. Writing the message needs EXECUTE on
// pg_logical_emit_message and pg_current_wal_insert_lsn (granted to PUBLIC by default); if it
// fails, idle checkpoints are off for that stream, with a warning.
//
// # Resume
//
// Reconnecting is the caller's (cdc.Runner does it after every retryable failure): Open again
// with the stored checkpoint. A checkpoint behind
// the slot's confirmed_flush_lsn is accepted only when an idle note of this slot put the slot
// there with a base at or before the checkpoint: start is at or before the note's record, so
// the server sends that note first on the new stream, before any captured change and before a
// probe note Open writes at once; Open waits for that proof and otherwise fails with
// ErrCheckpointBehindSlot (a checkpoint store restored from an old backup, or a slot shared by
// two pipelines, whose acknowledged changes would be skipped). The slot's position is read
// again once the stream holds the slot, since the walsender of a stream closed just before
// may apply its last status update after Open first read it (see Acknowledgements): the note
// that proves the checkpoint is the one at the position the server actually starts from. A
// snapshot checkpoint behind
// the slot and a checkpoint whose slot is gone (ErrSlotMissing) are refused outright: the
// server would silently start later. Events after the checkpoint are delivered again, with
// the same versions. The walsender of a stream just closed releases the slot a moment later,
// so START_REPLICATION is retried while the slot is busy, for at most Options.SlotBusyTimeout
// (a slot held longer has another reader).
//
// # Shutdown and failures
//
// A fast or smart shutdown (pg_ctl -m fast|smart) completes with a stream connected, and never
// makes the slot confirm an unacknowledged change. Once the regular backends are gone, the
// server has every walsender finish before it writes the shutdown checkpoint: a streaming
// logical walsender sends what is left, then exits as soon as its client's last status
// update reports its sent position as replicated -- the flush position, or the write
// position when the flush position is 0 -- and meanwhile asks for a reply each time the
// previous one was answered (WalSndDone, walsender.c). Reporting only acknowledged positions,
// which trail the sent one, would hold the shutdown up until the stream went away. A reply
// request arriving before the stream sent a status update of its own since it answered the
// previous one can only be that handshake (the other reply requests come after half of
// wal_sender_timeout of silence, and the stream reports every StatusInterval), and the
// stream answers it with the request's WAL end as written and 0 as flushed and applied: the
// walsender finishes, and the slot, which only a valid flush position moves, keeps what was
// acknowledged; the stream fails with ErrServerShuttingDown. Should a walsender keep asking
// regardless, the stream closes the connection, which ends it too. The answer does not wait
// for the consumer: the reading goroutine hands reply requests over out of band. Reporting
// the WAL end as flushed instead, when everything delivered was acknowledged, would be as
// safe for the changes but would move the slot past the stored checkpoint with nothing in
// the WAL that shows why, so the next Open would refuse the checkpoint (Resume); and after a
// clean restart PostgreSQL 15 may have forgotten the last confirmations anyway (it saves a
// slot at the shutdown checkpoint only when more than its confirmed position changed), which
// costs a replay, never a change.
//
// A smart shutdown first waits for every regular session. The stream's SQL connection
// (catalog loads, idle notes, the probe of a resumed stream) is therefore opened when needed
// and closed after a second unused, and a server that refuses it because it is shutting
// down (57P03) only skips an idle note. An initial snapshot reads in a transaction that a
// smart shutdown would wait for: while it runs, a probe connection every five seconds looks
// for that refusal and ends the stream with ErrServerShuttingDown when it comes.
//
// Every status update asks for a reply, and a stream that receives nothing for the server's
// wal_sender_timeout plus StatusInterval fails: a connection lost without a word (a network
// partition) ends the stream instead of leaving it waiting (less would misfire: replaying a
// large transaction of other tables, a walsender reads its client's messages only every half
// wal_sender_timeout). Catalog queries and their connects are bounded by 30 seconds.
//
// Errors of New, Open and Err are of two classes. Permanent ones, marked with cdc.Permanent
// (cdc.IsPermanent): everything New refuses; authentication refused (SQLSTATE class 28: a
// wrong password, no pg_hba.conf entry, a role missing or without LOGIN); the database
// missing (3D000); insufficient privilege (42501); the slot or publication gone (42704,
// ErrSlotMissing, ErrPublicationMissing); WAL removed (58P01: "requested WAL segment ... has
// already been removed") or the slot invalidated (its restart_lsn NULL, wal_status lost:
// ErrSlotInvalidated); ErrCheckpointBehindSlot; ErrBadCheckpoint (another kind of source's
// checkpoint among them: *ForeignCheckpointError, ErrForeignCheckpoint); a slot of the wrong kind;
// every *cdc.StartError. Everything else is returned as it is, for the caller to reopen from
// the stored checkpoint: a lost connection, a crash or immediate shutdown, pg_terminate_backend
// of the walsender (57P01), a shutdown (ErrServerShuttingDown) or a server still starting or
// refusing connections (57P03), too many connections, timeouts, and a slot still held
// (55006) after Options.SlotBusyTimeout -- the walsender of a connection lost without a word
// holds its slot until wal_sender_timeout. That retry of START_REPLICATION while the slot is
// busy is the only one pgcdc makes itself. Stream failures are logged at Debug only; the
// consumer (the runner) logs them.
//
// # Lag
//
// The Source implements cdc.LagReporter. Lag(ctx, cp) opens a short-lived SQL connection
// (bounded by ctx; no replication connection, so it works with or without an open stream and
// while the slot is held) and reads pg_current_wal_lsn() and the slot's restart_lsn,
// confirmed_flush_lsn and wal_status from pg_replication_slots, in one query:
//
//   - Head is the current WAL write position.
//   - Applied is, for a stream checkpoint, the later of its LSN (the commit end of the last
//     transaction it covers) and the slot's confirmed_flush_lsn: the slot is confirmed only up
//     to acknowledged checkpoints or to a position an idle note proved free of unacknowledged
//     captured changes (Idle checkpoints), so everything captured before it is applied too,
//     though the stored checkpoint stays behind. While a stream of the Source is open it is at
//     least the WAL end of the latest keepalive that came with no transaction being decoded,
//     once every checkpoint delivered before it is acknowledged (at once, or when the
//     acknowledgement comes: other tables' writes during a burst are passed too). For a
//     snapshot checkpoint it is the position the stream starts from once the snapshot is
//     done; without a checkpoint, 0 -- in both cases, while an open stream has every
//     checkpoint it handed out acknowledged (a snapshot that found nothing hands out none),
//     at least where it started streaming and the WAL end of every keepalive since.
//   - Bytes is Head - Applied (0 when Applied is at or beyond Head); without a checkpoint, what
//     the slot retains (0 without a slot). It counts all WAL, also that of tables the pipeline
//     does not capture: it grows with any write on the server until an acknowledged checkpoint
//     or an idle note (at most Options.IdleCheckpointInterval after the stream goes idle, once
//     64 KiB have accumulated) moves Applied past it, and is 0 only while nothing at all was
//     written since.
//   - Retained is Head - restart_lsn, what the server keeps for the slot (at least Bytes); -1
//     when the slot does not exist.
//
// Without a checkpoint a missing slot is no error (Open creates it); with one it is
// ErrSlotMissing. That, a slot that lost its WAL (wal_status 'lost': ErrSlotLost), a slot of
// another kind or database and a checkpoint this package did not write are permanent errors
// (cdc.Permanent): no reconnect cures them. A slot still being created (no
// confirmed_flush_lsn yet: CREATE_REPLICATION_SLOT waits for the transactions in progress to
// end) is measured like a missing checkpoint's, by what it retains. Other failures (the server
// unreachable, restarting) are plain errors. None carries the DSN's password.
//
// # Truncate
//
// A Truncate message becomes one cdc.Truncate event per captured table it names (no Before or
// After; the table's schema; the transaction's id and commit time). One message may name
// several tables -- those of the statement and, with CASCADE, the tables referencing them --
// and its events share the message's WAL position as their version: each is its table's only
// change at that point. The CASCADE and RESTART IDENTITY options are not carried. The events
// are held back like row changes, so the checkpoint is on the transaction's last event.
// Publications pgcdc creates publish truncates; an existing publication that does not
// (pg_publication.pubtruncate false) is used with a warning at Open, and its TRUNCATEs are
// never sent: the destination keeps the truncated rows.
//
// # Limits
//
//   - The row-lock argument fails for a DEFERRABLE primary key (a new row may be written
//     before the delete of the old one commits; a warning is logged) and for document ids not
//     protected by a unique index (the sink's id_fields): such keys may see an older change win.
//   - An update that leaves a TOASTed value unchanged does not resend it; with REPLICA
//     IDENTITY FULL the old row fills it in, otherwise it is cdc.Unchanged{} (above). Updates
//     carry a Before image only with REPLICA IDENTITY FULL, or the old key when the key
//     changed; deletes carry the key (default identity) or the full row (FULL).
//   - With idle checkpoints off, or while a delivered change waits for its acknowledgement, the
//     slot's confirmed position stays where the pipeline is, and the server keeps the WAL of
//     other tables' traffic (bounded by max_slot_wal_keep_size). Every slot of the database
//     with messages on receives every stream's idle notes (and ignores the others').
//   - Snapshot versions are a single value per snapshot: rows of a second snapshot into the
//     same index win only over changes older than the new slot's restart_lsn.
//   - A table without a primary key is snapshotted in one query and checkpointed only at its
//     end.
//   - Streaming of in-progress transactions (protocol 2+) is not used, so a large transaction
//     is sent only after it commits.
//   - An initial snapshot's reads have no bound of their own: over a connection lost without
//     a word they wait for TCP to give up (Go's keepalive: about two and a half minutes when
//     the peer's kernel is gone; never while a proxy in between still answers).
package pgcdc
