// Package debezium is a cdc.Source that reads Debezium's change events from Kafka: the
// migration path for pipelines already captured by Debezium in Kafka Connect, and the way to
// spread one mirror over several processes (Kafka partitions the work; every process of one
// consumer group takes a share).
//
//	src, err := debezium.New(func(ctx context.Context) (queue.Consumer, error) {
//		return kafkaqueue.NewConsumer(ctx, kafkaqueue.Config{Brokers: brokers, Group: "orders-mirror",
//			TopicPattern: `shop\.public\..*`}, nil)
//	}, &debezium.Options{Name: "shop"})
//	runner := cdc.NewRunner("orders", src, sink, checkpoints, dlq, nil)
//
// # Connector settings
//
// The source reads JsonConverter's records with the schema embedded
// (key.converter.schemas.enable and value.converter.schemas.enable true, Kafka Connect's
// default), or without it when it has the database's catalog (Options.Catalog, below);
// otherwise a record without it stops the stream with an error saying so. Set on the
// connector:
//
//   - column.propagate.source.type=.* so that every column's schema names its database type,
//     length and scale: with them a table's columns are exactly those the native source
//     (pgcdc, mysqlcdc) reports, hence the same mappings. Without them the stream stops
//     with a permanent error naming the setting, unless Options.InferTypes lets the source
//     derive columns from Kafka Connect's types (widths can differ; an unsigned BIGINT
//     cannot be told from a signed one).
//   - provide.transaction.metadata=true for MariaDB (its versions need each change's place in
//     its transaction; see Versions).
//   - interval.handling.mode=string for PostgreSQL intervals (as microseconds they have no
//     exact text form: such values are dead-lettered, naming the setting).
//   - decimal.handling.mode=string for PostgreSQL (precise, the default, drops an
//     unconstrained numeric's trailing zeros and writes NaN as null: such columns are
//     refused, see Edge values); precise or string for MariaDB; double is refused.
//   - time.precision.mode adaptive (PostgreSQL's default) or adaptive_time_microseconds
//     (MariaDB's default); connect is refused for columns with sub-millisecond digits and for
//     MariaDB's TIME.
//   - skipped.operations=none to see TRUNCATE (Debezium skips it by default), and, for
//     PostgreSQL, REPLICA IDENTITY FULL or the default identity as with pgcdc.
//
// # Records without a schema
//
// With schemas.enable=false a record holds only values. Options.Catalog (a pgcdc or mysqlcdc
// Source for the database the connector reads; mirror's source.catalog and source.dsn) gives
// the columns: exactly the native source's, read when a table's first record arrives and again
// when a record holds a field the columns lack (a column added since); a field the catalog
// still lacks is a column dropped since the record was written, left out with one Warn. Values
// are read in Debezium's default representations for the column's type (adaptive temporal
// types, binary as base64, BIGINT UNSIGNED as a long or a precise decimal, PostgreSQL
// intervals as ISO-8601 text), decimals in the precise binary form unless
// Options.DecimalStrings says decimal.handling.mode=string. A table the catalog does not have
// (dropped since) is dead-lettered record by record; a catalog out of reach fails the stream,
// which the runner reopens. MariaDB's JSON columns keep their native mapping this way.
//
// Debezium's topics also carry records that are not row changes: tombstones (the null value
// after a delete, for compaction), the transaction topic's BEGIN and END, schema change
// events, heartbeats and logical decoding messages. They are skipped, and their offsets
// committed with the next event's (or at once when nothing is pending).
//
// # Events
//
// Ops c, u, d, r and t become Insert, Update, Delete, Read and Truncate of the table the
// source block names (cdc.TableID: connector postgres for postgresql, mysql for mysql and
// mariadb; Source is Options.Name, which should be the native source's name so that both
// write the same indices). Debezium writes a primary-key change as a delete of the old key
// (header __debezium.newkey) and a create of the new one (header __debezium.oldkey): the
// delete is skipped and the create becomes the Update a native source reports, the old key in
// Before, so the sink deletes the old document at the change's version and takes values the
// change left alone (a TOASTed value: Debezium's placeholder) from it. The key schema's
// fields are the primary key, in key order. Values take the shapes of the native sources
// (package cdc, Value): Decimal and VariableScaleDecimal become their exact digits, io.debezium.time
// types the text or EpochMicros the native source reports, Bits a MySQL BIT's integer or
// PostgreSQL's bit string, Geometry MySQL's internal form, the placeholder of an unchanged
// TOASTed value (__debezium_unavailable_value) cdc.Unchanged. What differs from the native
// sources, because Debezium's schema does not carry it: MariaDB's JSON (declared LONGTEXT to
// Debezium: mapped as text, its values the same text). PostgreSQL's varbit, money and timetz,
// whose values Debezium cannot carry (a varbit's length, money's currency format, timetz's
// offset), are refused (see Edge values). MariaDB's UUID columns are read right by the connector's snapshot and corrupted by its
// binlog reader (debezium-connector-mariadb 3.5.0: a zero byte first, the last byte lost), so a
// streamed row holding one is dead-lettered, naming the column. The placeholder text
// __debezium_unavailable_value is taken for an unchanged value wherever it appears: a row
// whose text really is that string is dead-lettered outside an update.
//
// # Edge values
//
// Every value is exact (the native source's value for it), or its row is dead-lettered with a
// reason naming the column and the setting that fixes it, or the table is refused at its first
// record (a *cdc.StartError naming the column and the setting, never a value; the pipeline
// stops) when the connector's settings make a column's values impossible to tell apart, as its
// schema shows. Measured through debezium-connector-postgres 3.6.1.Final and
// debezium-connector-mariadb 3.5.0.Final (edges.go; TestEdgeValues pins the measured forms;
// the server tests TestDebeziumDifferential -- random tables of these columns, random changes,
// pgcdc's and mysqlcdc's documents against this source's field by field, every dead letter
// accounted for; make differential runs it long -- and TestEdgeRefusedByRealConnector):
//
//	PostgreSQL                     setting                          outcome
//	numeric NaN, ±Infinity         decimal.handling.mode=string     exact ("NaN", "Infinity", "-Infinity";
//	  (numeric and numeric(p,s))                                      written NAN, POSITIVE_INFINITY, ...)
//	numeric (unconstrained),       precise                          refused: NaN and Infinity arrive as null, and
//	  numeric[] of it                                                 1.50 as 1.5 (fix: string)
//	numeric(p,s) NaN               precise, nullable column         refused: NaN arrives as null (fix: string)
//	                               precise, NOT NULL column         exact; a NaN stops the connector's task (nothing
//	                                                                  arrives after it; fix: string), a null that
//	                                                                  arrives all the same is dead-lettered
//	numeric trailing zeros         string                           exact ("1.50")
//	any decimal                    double                           refused (digits lost; fix: string or precise)
//	date ±infinity                 any                              exact ("infinity", "-infinity")
//	date BC                        streamed                         exact
//	                               snapshot                         refused at the first snapshot read of a table
//	                                                                  with a date column (the JDBC read drops the
//	                                                                  era: 1 BC arrives as 0001-01-01), unless
//	                                                                  Options.PlainDates
//	timestamp ±infinity            adaptive, connect                exact ("infinity", "-infinity")
//	timestamp after 294247-01-10   adaptive                         dead-lettered (the connector's microseconds
//	  04:00:25.2                                                      overflow); the instant 294247-01-10
//	                                                                  04:00:25.2 itself is written as, and read
//	                                                                  as, +infinity (indistinguishable)
//	timestamp years 10000+, BC     any                              exact
//	timestamptz ±infinity, 10000+  any                              exact
//	time(p), timestamp(p), p > 3   time.precision.mode=connect      refused: milliseconds (fix: adaptive or
//	  (timestamp alone is p=6)                                        adaptive_time_microseconds)
//	time(p), timestamp(p), p <= 3  connect                          exact
//	time 24:00:00                  any                              exact
//	int[][] and other arrays       any                              a sub-array arrives as null: an array with a
//	  of non-text elements                                            null element is dead-lettered (a NULL element
//	                                                                  cannot be told from a sub-array)
//	text[][], varchar[][],         any                              a sub-array arrives as Java object text
//	  uuid[][]                                                        ("[Ljava.lang.String;@4cb15355"):
//	                                                                  dead-lettered; NULL elements exact
//	numeric[] holding NaN/Inf      any                              the whole array arrives as null: a null
//	                                                                  numeric array is dead-lettered
//	interval                       interval.handling.mode=string    exact; numeric: dead-lettered (fix: string)
//	timetz, money, varbit          any                              refused: the offset, the currency format, the
//	  (and their arrays)                                              length are lost (fix: leave the column out,
//	                                                                  column.exclude.list, or capture with pgcdc)
//
//	MariaDB                        setting                          outcome
//	TIME, -838:59:59..838:59:59    adaptive_time_microseconds       exact
//	                               connect                          refused: beyond 24:00:00 or negative
//	                                                                  arrives as null (fix: adaptive_time_microseconds)
//	DATETIME(p), TIME(p), p > 3    connect                          refused: milliseconds (same fix)
//	DATETIME(p), p <= 3            connect                          exact
//	zero dates (0000-00-00, a zero adaptive, connect                nullable DATE/DATETIME: arrive as null, so a
//	  month or day, year 0)                                           null is dead-lettered; NOT NULL: arrive as
//	                                                                  1970-01-01, so that date is dead-lettered;
//	                                                                  with Options.PlainDates (no zero date is
//	                                                                  ever written: sql_mode NO_ZERO_DATE,
//	                                                                  NO_ZERO_IN_DATE) both are taken as they are
//	zero TIMESTAMP                 streamed; snapshot, NOT NULL     exact (0, as mysqlcdc)
//	                               snapshot, nullable               arrives as null: dead-lettered in snapshot
//	                                                                  reads, unless Options.PlainDates
//	DECIMAL                        precise, string                  exact; double refused
//	UUID                           streamed                         dead-lettered (the connector corrupts it)
//
// A dead-lettered value dead-letters the event whose after image holds it; under PostgreSQL's
// REPLICA IDENTITY FULL (or MariaDB's full row images) an update or delete whose before image
// holds a value that cannot be decoded (a multi-dimensional array, an overflowed timestamp) is
// dead-lettered too, and the document keeps its last state until the next change of the row.
// MariaDB's zero-date checks look at after images only.
//
// Without an embedded schema (Options.Catalog) the same rules hold for the representation
// Options.DecimalStrings names; the temporal types must be in Debezium's default
// representation (time.precision.mode adaptive for PostgreSQL, adaptive_time_microseconds for
// MariaDB): records without a schema do not say which one they carry.
//
// # Schema events
//
// The rule of package mirror holds on this path too ("an index mirrors the table that bears
// its name now"), with what Debezium's events carry: cdc.TableSchema.Relation is always empty
// (the envelopes carry no relation identity; an empty identity never counts as a different
// relation), so a table dropped and created again under its name, or a table renamed to a
// captured name, is not recognised as another relation by its identity. A TRUNCATE (op t,
// with skipped.operations=none) is a cdc.Truncate versioned like a change at its place: the
// PostgreSQL connector gives it the LSN of its WAL record (pgcdc's version for it); the
// MariaDB connector gives it its own GTID and transaction total_order 1, so its version is
// the GTID's sequence number << 20, mysqlcdc's version of the same TRUNCATE (both equalities
// checked by TestDebeziumDifferential, whose changes include TRUNCATEs). The sink mirrors it
// exactly. A TRUNCATE's event carries no row schema (cdc.Event.Schema is nil). A renamed table's changes arrive on a new topic, under its new name:
// a table new to the sink, which reports it ENTERED; this source cannot re-snapshot it, so
// mirror logs it loudly with the fix (a blocking or incremental snapshot of the connector, or
// a native re-snapshot), and the old name's index keeps its last documents.
// A record that cannot be read is a Malformed event: the runner dead-letters it with a
// reason naming the topic, partition and offset, never a value.
//
// # Versions
//
// A streamed PostgreSQL change's version is source.lsn, the LSN of the change's own WAL
// record: the version pgcdc gives the same change, so a pipeline can move between the two
// without a version going backwards. MariaDB (VersionsGTID, the default for the mariadb
// connector): the GTID's sequence number << 20 | (transaction.total_order - 1), the layout of
// mysqlcdc's GTID versions; equal to mysqlcdc's when every row change of the transaction is in
// a captured table and none of them changes a key (Debezium counts captured events only, and
// a key change as two). MySQL (VersionsFile): binlog file index << 45 | source.pos << 13 |
// source.row, the layout of mysqlcdc's file versions, with the rows event's start offset where
// mysqlcdc uses its end, so ordered the same way but not equal.
//
// Snapshot reads (op r, including Debezium's incremental and blocking snapshots) get version
// 0, below every streamed change: Debezium's snapshot position does not bound the WAL records
// of the transactions streamed after it (a transaction that began before a PostgreSQL slot's
// consistent point and commits after it has records below it), so no higher version is safe.
// A snapshot read therefore never replaces a document the index already holds: it fills an
// empty index, and a streamed change always wins over it. To switch a native pipeline to
// Debezium on the same indices, start the connector with snapshot.mode=no_data while the
// native pipeline runs, and stop the native pipeline once the connector streams: the overlap
// is written twice with equal versions (PostgreSQL) or versions that keep each transaction's
// order (MariaDB), and nothing falls in a gap.
//
// # Offsets and scale-out
//
// The consumer group's committed offsets are where a stream starts; a stored checkpoint only
// names a stream and an event within it, so that the runner's Ack can finish every record up
// to that event (queue.Consumer.Finish) and commit: an offset moves only past events the
// sink applied, so a process killed at any moment loses nothing and repeats at most what was
// not acknowledged (the same changes at the same versions). Open refuses a checkpoint another
// kind of source stored (a pipeline switched from a native source by a configuration change
// alone: *ForeignCheckpointError, naming the switch procedure, mirror.Switch).
//
// Several processes with the same group share the topics' partitions; Debezium keys records by
// primary key, so all changes of one row are in one partition, in order. A rebalance commits
// the revoked partitions' acknowledged prefix (kafkaqueue) and the new owner resumes after it:
// a change may be written twice, by the old owner still finishing a batch and by the new one,
// always with the same version, which the sink's external versioning makes harmless. Within a
// process, the partitions of a fetch of 64 records or more are decoded in parallel (a decoder
// per partition, up to GOMAXPROCS goroutines; tables read from the catalog are shared),
// interleave in one stream in fetch order, and the runner's concurrent batches
// (RunnerOptions.MaxInFlight) write them in parallel. kafkaqueue's static membership
// (Config.InstanceID) lets a restarted process take its partitions back at once.
//
// With Options.Lag (mirror sets it from a kafkaqueue.Monitor of the same topics) the source is
// a cdc.LagReporter: the runner's lag in records and seconds is the group's, whichever process
// measures it.
package debezium
