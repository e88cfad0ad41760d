// Package mysqlcdc is the MySQL and MariaDB binlog source of package cdc: an initial consistent
// snapshot, then the row changes of the captured tables from the binary log, through go-mysql's
// BinlogSyncer, as cdc.Events with normalized values, versions and checkpoints.
//
// # Server requirements
//
// binlog_format=ROW and binlog_row_image=FULL (every event carries whole before and after
// images); binlog_row_metadata=FULL is strongly recommended: it puts column names, signedness,
// character sets and ENUM/SET labels into every table map, which lets rows written before a
// later DDL still be decoded with the columns they were written with. The account needs
// REPLICATION SLAVE, REPLICATION CLIENT (MariaDB: BINLOG MONITOR), SELECT on the captured tables
// and INFORMATION_SCHEMA, and, for a MySQL snapshot, RELOAD. Every reader of one server needs its
// own Options.ServerID (see Failures).
//
// # Positioning and checkpoints
//
// A checkpoint is a small JSON document: the binlog file and offset right after a transaction's
// commit event (XID, or COMMIT / a DDL statement for non-transactional groups) and, with GTID
// positioning, the GTID set executed up to it (MariaDB: one domain-server-sequence per domain,
// as gtid_binlog_pos spells it). Only the last event of a transaction carries one -- the reader
// holds each event back until it knows whether the next binlog event commits -- so resuming
// starts at the beginning of the next transaction and a transaction is never half applied: a
// stream reopened from its last checkpoint reads an interrupted transaction again from its
// start (its events repeat with the same versions). Every checkpoint carries the file and
// offset of its commit, GTID-positioned ones too (Lag measures with them).
// Event.TxID is the transaction's GTID (MariaDB "domain-server-sequence", MySQL "uuid:number"),
// or "file:offset" of its BEGIN without GTIDs; Event.CommitTime is the timestamp of the
// transaction's GTID event (MySQL 8: its immediate commit timestamp), second precision on MariaDB.
// Transactions that touch no captured table produce no event and so no checkpoint: the stored
// checkpoint lags until a captured change arrives, which costs re-reading on restart only.
// Ack only validates and records: the binlog has no reader-owned retention to release
// (expire_logs_days / binlog_expire_logs_seconds must outlast any pipeline outage).
//
// # Versions
//
// With PositionGTID on MariaDB (the default there) an event's version is
//
//	GTID sequence number << 20 | ordinal of the row change within the transaction
//
// counting every row change of the transaction (captured tables or not), so it does not depend
// on the capture configuration. A snapshot taken at GTID position S reads with version
// S<<20 | (1<<20 - 1): at least every change it contains, below every later transaction.
// Limits: sequence numbers up to 2^43; more than 2^20-1 row changes in one transaction
// saturate the ordinal (a warning is
// logged; two changes of the same row beyond that point tie and the later one is refused by the
// sink); sequence numbers are compared across domains as if they were one sequence, which is
// right for a single domain (gtid_domain_id the same on every server writing) and wrong for
// multi-source setups with several domains (a warning is logged when a second domain appears);
// sequence numbers must increase in binlog order (gtid_strict_mode). A failover to a replica that
// logs the same GTIDs (log_slave_updates) keeps versions intact; the checkpoint's GTID set is
// valid on the new primary.
//
// With PositionFile (the default for MySQL, and used for MySQL's versions even with GTID
// positioning) the version packs the binlog file's numeric suffix, the rows event's end offset
// and the row's index within that event:
//
//	index << 45 | offset << 13 | row
//
// A snapshot at (file, offset) reads with index<<45 | offset<<13: every later rows event ends
// past the offset. Limits: 2^18 binlog files, 2^13 rows per rows event (the server cuts rows
// events at binlog-row-event-max-size, 8 KiB by default, so only a raised limit and tiny rows
// can overflow; a warning is logged). File positions belong to one server: after a failover to another server,
// or RESET MASTER / RESET BINARY LOGS, positions restart lower and versions go backwards -- the
// sink will refuse changes until the new versions overtake the old ones, so re-snapshot into a
// fresh index instead.
//
// # Snapshots
//
// MariaDB: START TRANSACTION WITH CONSISTENT SNAPSHOT, then the binlog_snapshot_file and
// binlog_snapshot_position status variables give the binlog position that exactly matches the
// read view without any lock, and BINLOG_GTID_POS() turns it into a GTID position
// (@@gtid_binlog_pos would not do: it moves with commits made after the read view). MySQL has no
// such variables: FLUSH TABLES WITH READ LOCK is held just long enough to open the read view and
// read the binlog status. Each captured table is read with one streaming SELECT; rows are
// cdc.Read events. The last row of the last table carries the checkpoint of the snapshot
// position P1, from which streaming continues. The last row of every other table carries a
// snapshot checkpoint: P1 plus the tables done. Resuming from one opens a new read view at a
// later position P2, reads only the remaining tables -- their rows versioned from P2 -- and then
// streams from P1: changes between P1 and P2 come again, newer than the rows of the tables read
// at P1 and older than those read at P2, so both converge. A table interrupted midway is read
// again in full. Empty tables produce no event (and so no checkpoint). Progress counts rows
// delivered, not rows acknowledged. A table altered (or created) after the read view opened
// cannot be read in it (the server answers "Table definition has changed", 1412): the stream
// fails with that retryable error, and the reopened stream reads the remaining tables in a
// new view.
//
// # Re-snapshots
//
// On MariaDB the Source is a cdc.Resnapshotter: Resnapshot(ctx, cdc.ResnapshotRequest) reads
// tables again while the stream keeps running (a table, several, every captured one with a
// primary key, and optionally an SQL condition on the rows). Requests and watermarks are rows
// of a signal table (Options.SignalTable, default tributary_signal in the first captured
// table's database, created when missing, never captured): Resnapshot checks the tables
// (captured, existing, a primary key of types a range can bound: integers, DECIMAL, strings
// under their collation, binary strings, temporal types, UUID; not FLOAT/DOUBLE, ENUM, SET,
// BIT) and the condition (EXPLAIN), then writes the request row -- so anyone with SQL access can
// request one too:
//
//	INSERT INTO db.tributary_signal (id, kind, body)
//	VALUES ('fix-1', 'resnapshot', '{"tables": ["db.orders"], "where": "id < 1000"}')
//
// (body: tables as db.table, empty for every captured table; where; source, the SourceName
// that should carry it out, empty for any source capturing the tables). The stream takes a
// request up at its commit in the binlog, so it survives a crash: a stored checkpoint before
// the request reads it again, and every checkpoint after it carries the job's state (the jobs,
// the table being read, the last key done) until the job ends, from which a reopened stream
// resumes.
//
// A goroutine with its own connection reads each table in chunks of Options.SnapshotChunk
// rows in key order (keyset bounds, strings compared under the column's collation), each chunk
// in its own consistent snapshot, whose binlog position P MariaDB reports exactly. Before the
// snapshot is taken, the chunk's window opens: the reader records the newest version of every
// key of the table it decodes. After the chunk's rows are read, a watermark row is written;
// at its commit the reader drops the rows whose key changed after P (the stream carries
// their newer state, a delete included) and emits the others there as cdc.Read events with
// P's snapshot version, which is above every change before P and below every change after
// it. A row so emitted follows every change decoded before it and precedes every later one,
// so it neither overwrites a newer change nor brings back a deleted row, also where the
// destination keeps no tombstones. A DDL statement naming the table, a TRUNCATE of it or a
// change whose key cannot be read in the window makes the chunk be read again; connection
// failures are retried with backoff (1s..30s, Progress().Error says why); a condition the
// server refuses, a missing privilege give the job up (logged, Progress().Error); a dropped
// table is skipped. Progress reports the re-snapshot (Resnapshot set) whenever the initial
// snapshot is not being read. Not done by a re-snapshot: removing documents of rows deleted
// before it (no event names them). MySQL cannot tell a consistent snapshot's binlog position
// without a global lock: there Resnapshot is errors.ErrUnsupported and a request row is
// ignored with a warning.
//
// # Schemas
//
// Schemas come from INFORMATION_SCHEMA (COLUMNS, STATISTICS for the primary key, and on MariaDB
// CHECK_CONSTRAINTS, since its JSON is LONGTEXT with a json_valid() check), read in one
// transaction that first takes the table's shared metadata lock (a SELECT of no row): a
// concurrent RENAME, DROP or ALTER waits, so a schema's columns and key are of one relation. The
// wait is bounded by the connection's lock_wait_timeout (5 s), three times; then the load fails
// with a retryable error (a DDL statement held or queued for the lock). Captured tables are
// loaded when a stream opens; any DDL statement in the binlog (CREATE, ALTER, DROP, RENAME,
// TRUNCATE) empties the cache and the next row reloads. Each rows event's table map is checked
// against the cached schema (column count and, with full metadata, names, types, character
// sets, and the primary key where the schema has one); when the catalog has already moved past
// the event -- a replay, or a reader behind a DDL, where the name may even denote another
// relation by now -- the schema is rebuilt from the table map, keeping the catalog's
// description of the columns that still fit (same name, type and character set); when the
// catalog no longer has the table at all (renamed or dropped since), from the table map and the
// last description the stream had of the name (binlog_row_metadata=FULL: without column names
// such rows are malformed, "table not found in the catalog"). MariaDB's table map writes JSON
// as a LONGTEXT of utf8mb4_bin, INET4 as a BINARY(4), INET6 and UUID as a BINARY(16): a column
// of one of those with no description left (the catalog has no such column and, for a table
// gone from the catalog, the stream never described it: a table renamed in from an uncaptured
// name and dropped before its rows were read, or a column dropped since) could be either, so
// its rows go out malformed (dead-lettered, ErrAmbiguousType, an Error line per table map
// naming the columns), their values kept as the binlog has them for the dead letter, rather
// than indexed as text or bytes in place of a JSON object or an address. A real LONGTEXT or
// BINARY column in that position is dead-lettered too: the binlog cannot tell it apart. A
// table map names a character column's character set by its collation id only: the ids are
// read once per stream
// (INFORMATION_SCHEMA.COLLATIONS, and on MariaDB 10.10+ COLLATION_CHARACTER_SET_APPLICABILITY,
// where the UCA 14 collations have theirs) and a rebuilt column takes its collation's
// character set, never a default; a collation id the server does not list makes the rows of
// that table map malformed (dead-lettered, an Error line per table), and so does a character
// column without a collation and without a catalog column to take one from. ENUM and SET
// labels are decoded from their own collation's character set. The table's primary key comes
// from the table map where it has one. (The key is not compared when the schema has none:
// MariaDB's table map names a UNIQUE NOT NULL index the primary key of a table without one,
// which the catalog does not.) The description a name's rows were decoded with is the one its
// later schema events carry (see Schema events).
//
// # Captured tables and start checks
//
// New's tables name tables (db.table) or whole databases (db.*, Table AllTables): every
// table of such a database is captured, those that exist at Open and those created later --
// a later table is captured from its first row on (its schema is loaded then, and an Info line
// says so); its CREATE TABLE is a schema event (see Schema events). Every table means every
// table: the shadow tables of online schema change tools (gh-ost's _t_gho,
// pt-online-schema-change's _t_new) are captured too, and their final swap is a rename like any
// other. A table moved into such a database by RENAME TABLE brings rows that were never
// captured: its name gets a new relation identity, which a sink answers with a re-snapshot.
//
// Open first checks what no retry can change. The server must log row changes with whole
// images: log_bin on, binlog_format=ROW and binlog_row_image=FULL globally, or Open fails
// with a permanent error naming the setting. (A session may still set its own binlog_format:
// its changes are then logged as statements, which carry no rows; the first such statement a
// stream meets is reported with a Warn line, its rows are not captured.) Every named table
// and every database captured whole must exist as spelled (INFORMATION_SCHEMA.TABLES and
// SCHEMATA, compared with case: the binlog names tables as they were created, and capture
// compares them exactly); otherwise Open fails with a *cdc.StartError listing every missing
// table or database, with the name of another case as the fix when there is one. A database
// without tables is not an error. With lower_case_table_names 0 (the default on Linux; the
// test server's setting) MyOrders and myorders are two tables, both of which may be captured;
// with 1 the server stores names in lower case, so a configured MyOrders is refused with "did
// you mean `db`.`myorders`?".
//
// The stream implements cdc.TableLister: Tables returns the schemas of the captured tables
// that exist at Open, as Open read them, in the order of New's tables (a database's tables in name
// order at its entry's place). Tables created later are not listed: a sink checks them when
// their first event arrives. A snapshot reads the captured tables that exist in its read
// view (listed again once the view is open, so that a table created just before it is read).
//
// # Failures
//
// A stream reads the binlog over one connection and never reconnects by itself: a lost
// connection, a server shutting down or restarting, a read timeout end it (Events is closed,
// Err says why) and a cdc.Runner reopens the source from its stored checkpoint, so one
// mechanism recovers every source. A stream whose server hangs (a stopped process, a
// black-holed network) ends too: the server is asked for a heartbeat every Options.Heartbeat
// while the binlog is idle, and a connection silent for three periods is taken for dead
// (default 15 s). Nothing blocks without a bound: connecting and logging in are bounded by
// Options.ConnectTimeout and the context, statements by Options.QueryTimeout, and Close ends
// every blocked step by closing its socket, so it returns at once also on a hung server.
//
// Failures that no reopening can cure are permanent (cdc.IsPermanent), so a runner stops
// instead of retrying: access denied (server errors 1044, 1045, 1698, 1862, a locked
// account, a missing privilege 1227, 1142, 1143), an unknown database (1049), a binlog
// position the server cannot serve (1236 for a file it does not have -- purged, or never
// existed --, an offset beyond a file's end, GTIDs it purged, never logged or that run ahead
// of its own: the fix is a new snapshot into a fresh destination), the binlog settings above,
// a missing table or database, and a checkpoint this source cannot use (another kind of
// source's: *ForeignCheckpointError, ErrForeignCheckpoint). A second reader
// registering with the same server id displaces the first (MariaDB's error 4052, MySQL's
// 1236 "same server_uuid/server_id"); the displaced stream's error is permanent, naming the
// id: retrying would displace the other reader in turn, for ever. A reader's own reconnect or
// restart is not affected: the server displaces the dead connection, not the new one.
// Everything else -- any error this package does not recognize included -- is retryable: a
// wrong guess costs a reconnect, never data. A failure is logged once, by whoever reads Err;
// this package logs it only at Debug, and go-mysql's own messages two levels lower than it
// gives them.
//
// # Lag
//
// Source implements cdc.LagReporter. Lag opens a short-lived connection of its own (bounded
// by its context), reads the binlog's end (SHOW BINLOG STATUS on MariaDB 10.5.2 and later,
// SHOW BINARY LOG STATUS on MySQL 8.2 and later, SHOW MASTER STATUS before) and the binlog
// files with their sizes (SHOW BINARY LOGS), and reports positions as binlog file sequence
// number << 32 | offset: Head is the binlog's end, Applied the checkpoint's commit position,
// Bytes the binlog between them across file rotations. While a stream of the Source is open,
// Applied is at least the end of the latest transaction of other tables -- or of the header
// events a rotation adds -- that the reader passed, once every change delivered before it is
// acknowledged (at once, or when the acknowledgement comes): an idle pipeline after a burst,
// other tables' writes or a FLUSH LOGS is caught up. So is one whose snapshot found nothing
// (no checkpoint) or ended on a snapshot checkpoint: once every checkpoint handed out is
// acknowledged, Applied is at least where the stream started and what it passed since.
// Otherwise, without a checkpoint Applied is 0 and
// Bytes the whole binlog the server retains (all of it lies ahead of a pipeline that has not
// started). Retained is -1: binlogs are kept by the server's expiry, not for a reader. A
// checkpoint whose file the server no longer lists (purged), or that lies beyond the binlog's
// end (another server, RESET MASTER), makes Lag fail.
//
// # Truncate
//
// TRUNCATE TABLE is logged as a statement, not as row deletes. A truncate of a captured table
// becomes one cdc.Truncate event (no row; the table's schema; positioned and versioned like a
// row change at the statement's place, so it orders between the rows before and after it);
// it is its own transaction, so it carries a checkpoint. The table is read from the statement
// (a name without a database is resolved in the database the statement ran in); truncates of
// other tables produce nothing. Like other DDL it empties the schema cache. ALTER TABLE ...
// TRUNCATE PARTITION removes rows without row events and is not reported.
//
// # Schema events
//
// The rule (package sink, Schema events): an index mirrors the table that bears its name now.
// The binlog carries DDL as statements, so the stream reads the ones that change which relation
// a captured name denotes and turns them into cdc.Truncate events at the statement's place
// (the statement is its own transaction: the events take its version with increasing ordinals,
// the last carries the checkpoint), and into relation identities: cdc.TableSchema.Relation is
// the decimal version of the Truncate event that announced the name's current relation, given
// by the DDL this stream read; "" for a name no DDL of the stream touched (a reopened stream
// forgets; "" never counts as another relation). Versions order these events exactly against
// every row change of the table: binlog commit order.
//
// A Truncate's schema describes the relation concerned as the stream knows it: the
// description it decoded that relation's rows with, followed through the renames it read
// (under its old name, or out of the capture); only without one the catalog's description of
// the name now, which for a reader behind the DDL may already be a later relation's. With
// neither (a relation from a name the stream never followed, gone from the catalog by the
// time the reader gets there) the schema has no columns and no key: the columns are not known
// here (package sink applies such a Truncate like one without a schema, its identity kept;
// a new identity gets a generation mapped from the rows to come), and the rows that follow
// carry their own. A description older than an ALTER TABLE of the relation the stream read
// since (no row of it decoded after the statement, an ALTER TABLE ... RENAME that also
// changed the definition, an ALTER while the relation was out of the capture) is not used:
// the Truncate carries no columns, since the types it would carry may be outdated (a sink
// would map a new generation with them). Limit: the Truncate of a CREATE TABLE read from
// behind a later DROP and CREATE of the same name carries the later table's description (the
// stream has none of its own; its rows are decoded from their table maps all the same).
//
//   - CREATE TABLE of a captured name (with columns, LIKE, OR REPLACE, ... SELECT): one Truncate
//     with a new identity and the new table's schema -- the name starts empty. The rows of a
//     CREATE ... SELECT follow in the same transaction, above it. A CREATE TABLE IF NOT EXISTS
//     of a table the stream knows to exist changes nothing (MariaDB does not log it; MySQL does).
//   - RENAME TABLE a TO b [, c TO d ...] and ALTER TABLE a ... RENAME [TO|AS] b (with other
//     clauses or not), names qualified or in the statement's database, moves to another
//     database included: by the statement's net effect (a name a swap only passes through
//     produces nothing). First every captured name whose relation moves to another captured
//     name is vacated: a Truncate with its old schema and the identity it had. Then every
//     captured name that receives a relation gets a Truncate with a new identity and its schema
//     -- preceded by a Truncate with another new identity, so that a sink whose binding of the
//     name is still empty sees a second, different relation: the name is reported ENTERED
//     (once, also for a name the sink never wrote: a first write that is a Truncate misses no
//     row and reports nothing) and re-snapshotted, and its rows (those of the renamed table, captured under the old name or
//     never) are read again. (Always two, whatever the stream knows of the name: a stream that
//     reads the statement again gives the same events the same versions and identities.) The
//     changes after the statement carry the new name and identity. A relation renamed or moved
//     to a name that is not captured produces nothing: its index keeps its last documents.
//     The stream follows it among uncaptured names (renames, until it is dropped), and when it
//     comes back under another captured name its rows move with it: after the names entered,
//     the captured name it left is vacated (a Truncate with the identity it had there) --
//     unless a relation entered that name since (a CREATE or a rename into it: the name then
//     denotes another relation and is left alone). Back under its own old name it is entered
//     like any relation: the name is emptied and re-snapshotted (its changes while away were
//     not captured). Limits: a stream reopened after the move out does not know where the
//     relation came from (as with identities, it forgets), and one stream follows at most 4096
//     relations out of the capture (past that a Warn line, once); in both cases the name it
//     left keeps its documents, and the relation's rows are also in its new name's index:
//     empty the old name's index by hand.
//     The cut-over of an online schema change tool (RENAME TABLE t TO _t_del, _t_gho TO t) is
//     such a rename: t is emptied and re-snapshotted (and, in a database captured whole, the
//     tool's tables are vacated and entered like any other).
//   - DROP TABLE (and DROP DATABASE) produce nothing: an index keeps the dropped table's last
//     documents until its name denotes a relation again (a CREATE or a rename into it).
//   - ALTER TABLE without RENAME, and RENAME COLUMN / INDEX, keep the relation: the schema
//     cache is refreshed, and the stream's description of the relation counts as outdated
//     until its next row (above). TEMPORARY tables are ignored.
//
// Names compare as the binlog spells them, in lower case when the server's
// lower_case_table_names is 1 (read at Open); quoted identifiers, comments and executable
// comments (/*! ... */) are read as the server reads them. A RENAME, ALTER, CREATE or DROP
// TABLE statement the stream cannot read is logged with a Warn line (its place, never its
// text) and its effect on names is not followed: the schema cache is refreshed, but a renamed
// or re-created table then needs a re-snapshot by hand. A re-snapshot needs MariaDB (see
// Re-snapshots): with MySQL an ENTERED table cannot be refilled by the source, and package
// mirror reports it loudly (an Error line and a status entry naming the table and the fix).
//
// # Values
//
// Binlog and snapshot produce the same values (cdc/value.go): signed integers and YEAR as int64;
// UNSIGNED integers as uint64; DECIMAL as its exact string ("-1.50"); DOUBLE as float64, FLOAT
// as the float64 of its shortest round-tripping decimal (0.1, not 0.10000000149011612); BIT as
// uint64; CHAR and VARCHAR decoded from their character set to UTF-8 strings; TEXT types as
// cdc.Base64 of the bytes in the column's character set (Column.Charset tells the sink how to
// decode them); BINARY, VARBINARY, BLOB and spatial types as cdc.Base64; ENUM as its label and
// SET as its labels joined by ","; DATE, TIME and DATETIME as the server's strings
// ("2024-01-02 03:04:05.123", "0000-00-00" kept as is); TIMESTAMP as cdc.EpochMicros (the zero
// timestamp as 0); JSON as compacted cdc.RawJSON. The snapshot selects FLOAT as DOUBLE, ENUM and
// SET as their numbers and TIMESTAMP through UNIX_TIMESTAMP, with character_set_results=NULL, so
// that it reads exactly what the binlog carries. A row that cannot be decoded is delivered with
// Event.Malformed set; errors never quote row data.
//
// # Decoding
//
// go-mysql's parser reads every event, but a rows event's row images are decoded here, straight
// from the event's bytes into the normalized values (rowsdecode.go, binvalues.go), through the
// parser's rows-event hook: go-mysql would box each value, format temporal values with fmt and
// hand over strings that would then be parsed back, copied or re-encoded. The values are
// exactly those of go-mysql's decoding normalized as above (a test compares both on every
// storage format); JSON is compacted by a one-pass validator that accepts and writes what
// encoding/json.Compact does (jsoncompact.go, tested against it). go-mysql still decodes what
// this decoder leaves to it: MySQL's binary JSON, MySQL's partial JSON updates, v0 rows events,
// and the types of the last paragraph of Deviations. In an update, a column whose bytes are the same in both images
// gets the same value in Before and After; CHAR and VARCHAR strings in UTF-8 share the event's
// buffer, as go-mysql's own decoded strings do. Values are immutable: never modify one.
//
// The binlog's bytes are checked before they are trusted. A rows event whose column count is
// not its table map's, or whose images name no column (an image of no column takes no bytes,
// and every reader of such images would loop for ever), is corrupt, and so is an image that
// runs past its event or does not follow its table map, and a TIME2, DATETIME2 or TIMESTAMP2 of
// more than 6 fraction digits: the rows event fails with errCorruptRows, which ends the binlog
// connection like a parse error of go-mysql's (the event is read again after reconnecting).
// A temporal value whose fields no server writes (an hour of 25, a negative DATETIME, a
// fraction above 999999 µs) is the column's error: the event is delivered Malformed. MariaDB's
// compressed rows events are inflated here, within their bytes, never allocating what their
// header states (go-mysql's decompression panicked on a short header). A panic of go-mysql's
// rows decoding (the fallback path) is caught and reported as errCorruptRows; go-mysql's own
// parser runs on the syncer's goroutine, which turns its panics into the stream's error; one
// gap is left there: a table map whose ENUM or SET label list states more labels than it has
// bytes makes go-mysql allocate the stated number (a few bytes can state 2^36, a fatal out of
// memory), and nothing here sees the table map before go-mysql decodes it.
// Fuzz targets cover these readers (binlog_fuzz_test.go: FuzzBinlogRows, FuzzBinlogValue,
// FuzzBinlogTableMap, FuzzCompactJSON; seeds captured from MariaDB by TestCaptureFuzzSeeds).
//
// A table map's optional metadata lists signedness bits and collations for some of the columns
// only, in column order, and the servers count different columns (tablemap.go): MariaDB gives
// YEAR (always UNSIGNED) a signedness bit and GEOMETRY a collation, MySQL neither. These two
// lists are read here, by Options.Flavor, not with go-mysql's UnsignedMap, which skips YEAR on
// both servers and so, on MariaDB, shifted the signedness of every numeric column after a YEAR
// onto the next one. The MariaDB rules are verified against MariaDB 10.11 for a table mixing
// every type (TestTableMapMetadataMatchesCatalog); the MySQL rules follow MySQL 8's source and
// are not exercised. Column names, ENUM and SET labels and geometry types are counted alike by
// both servers and read through go-mysql.
//
// # Deviations
//
// XA transactions are not supported: their rows are delivered at XA PREPARE, without a
// checkpoint of their own. Partial row images (binlog_row_image=MINIMAL or NOBLOB) are not supported.
// MariaDB's UUID (KindUUID), INET4 and INET6 (KindOther) come out as the server's text forms.
// Other types (spatial aside) not named above come out as the server's text in a snapshot and
// as go-mysql's decoding in the stream, which may differ. MySQL's
// flavour is implemented but only MariaDB 10.11 is exercised by the tests.
package mysqlcdc
