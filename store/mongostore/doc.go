// Package mongostore is the MongoDB adapter of package store: a driver.Store over a
// *mongo.Client (go.mongodb.org/mongo-driver/v2).
//
//	client, err := mongo.Connect(options.Client().ApplyURI(uri))
//	...
//	adapter, err := mongostore.New(client, nil) // nil: the documented defaults
//	s, err := store.New(map[string]store.Adapter{"main": adapter}, &store.Options{Merger: m})
//
// # Addresses
//
// The namespace of a record address is the database, the dataset is the collection; both are
// created by MongoDB on first write, and reading a missing one finds no records. Store
// implements driver.AddressValidator: names MongoDB refuses (a database name with one of
// /\. "$*<>:|? or NUL, or 64 bytes and longer; a collection name that is empty, holds '$' or
// NUL, starts with '.' or "system."; both together over 255 bytes) and the system databases
// admin, local and config are refused before anything is written.
//
// Keys are _id values by type: a string key is a BSON string, an int64 key a BSON int64, a
// bytes key generic binary (subtype 0), an ObjectID key an ObjectID. Reads map them back to the
// same key kind. MongoDB compares numbers by value, so an int64 key also finds a record whose
// _id is the int32 or integral double of the same value.
//
// # Documents
//
// A document's JSON object becomes the top level of the stored BSON document, member order
// kept, after the _id and followed by the metadata field; reads return the object without the
// two. JSON values map to BSON as follows, chosen so that nothing changes silently on a round
// trip:
//
//   - Strings stay strings, except at the marked JSON Pointers (Document.Times), which become
//     BSON datetimes. A string that merely looks like a date stays a string. Reads turn every
//     BSON datetime back into an RFC 3339 string and mark its pointer.
//   - Integers (no fraction, no exponent) become int32 when they fit, int64 when they fit that.
//     "-0" is the exception: it becomes the double -0.0, so that its sign survives.
//   - Other numbers become doubles when the shortest form of the nearest double is the same
//     decimal value (0.1, 2.5e-8, 1e300; 1.0, 1e0, 1.5e3 and -0.0 too, as doubles), and
//     Decimal128 otherwise (integers beyond int64, more digits than a double keeps, exponents
//     beyond a double's range), keeping the literal's own digits when they fit. A number that
//     needs more than 34 significant digits has no exact BSON form and is refused (KindInvalid).
//   - Reads write int32 and int64 as integers, doubles in shortest form always with a fraction
//     or an exponent (1.0, -0.0, 1500.0, 0.000001, 1e-7, 1e+21, -1e+300) so that they come back
//     as the same double, and Decimal128 as its exact decimal (an integer of up to 100 digits
//     without an exponent when those digits are stored as the same Decimal128). Every int32, every double, every
//     int64 beyond the int32 range and every Decimal128 the rules above would store as a
//     Decimal128 again is thus written back as the same BSON value, bit for bit.
//   - Two kinds of values only other applications write have no JSON text of their own under
//     these rules: an int64 within the int32 range (5 reads as 5, which is stored as an int32),
//     and a Decimal128 whose text the rules would not store as that same Decimal128 (5, 1.50
//     or 0.1 become an int32 and doubles). Reads remember the JSON Pointers of such values,
//     with the revision read, for the last reads of each record (a bounded cache: 4 MiB in all,
//     oldest records out first; a record that needs more is not remembered). A put conditioned
//     on that revision (IfRevision: the write of a merge, or of any read-modify-write through
//     the same Store) stores a number at such a pointer with the type the read found whenever
//     that type holds it exactly -- an int64 for an integer within int64 except -0, a
//     Decimal128 for a number of at most 34 significant digits within its exponent range --
//     whether or not the number changed; any other value there follows the rules above. So an
//     int64 counter another application keeps stays an int64 through merges that increment
//     it, and its untouched Decimal128 prices stay Decimal128s. Unconditional and if-absent
//     puts, puts conditioned on a revision this Store did not read (another process, a
//     forgotten entry) and values at other pointers follow the rules above alone. The pointer
//     is the value's position: a value moved to another member or array index is stored by
//     the rules.
//   - BSON types JSON lacks are read as MongoDB Extended JSON v2 objects in canonical form --
//     {"$oid": ...}, {"$binary": {"base64": ..., "subType": ...}}, {"$timestamp": ...},
//     {"$regularExpression": ...}, {"$minKey": 1}, {"$maxKey": 1}, and {"$numberDouble": ...}
//     and {"$numberDecimal": ...} for NaN and infinities -- and a write turns an object of
//     exactly such a shape back into the type, so a merge on a record another application
//     wrote keeps its ObjectIDs and binaries. Any other object whose member names all start
//     with '$' is refused. Deprecated types (undefined, DBPointer, symbol, JavaScript code) and
//     strings that are not valid UTF-8 have no JSON form: reading such a record fails with
//     KindInvalid rather than altering it. Bytes that break the BSON format (a boolean other
//     than 0 or 1, a string without its closing NUL, a Decimal128 significand beyond 34
//     digits, which no server writes) are KindInternal, a malformed reply.
//
// Refused as KindInvalid, before anything is sent: a top-level member named _id (the key is
// the _id), named like the metadata field, or starting with '$'; a member name holding NUL;
// the same member name twice in one object; a lone UTF-16 surrogate; objects and arrays nested
// more than 100 levels. A document over MongoDB's 16 MiB limit as BSON is KindTooLarge.
//
// # Revisions and the metadata field
//
// Every write stores the document with one metadata field (Options.MetadataField, default
// "_tributary") holding {rev: <16 random bytes>}, a token drawn fresh for every write; the
// revision is a format byte and that token. Tokens never repeat, so a revision stays stale
// after its record was deleted and created again -- a counter would start over and let a stale
// writer through. Records written by other applications have no metadata field until their
// first write through the adapter. Their revision is the distinguished legacy revision, and a
// write conditioned on it carries the filter "metadata field absent": the first
// read-modify-write of a legacy record is as atomic as any later one.
//
// # Requests
//
// Read sends one find with {_id: {$in: [...]}} per collection (the collections concurrently;
// a plain _id equality when the call reads one record there, the same query to MongoDB but one
// FerretDB 1.x answers without scanning the collection), always to the primary. Write sends, per collection and concurrently (at most
// Options.MaxConcurrency requests in flight):
//
//   - unconditional puts: one unordered bulk of replaceOne {_id} with upsert. Created or
//     Updated comes from the upserted _ids of the reply, matched by value, not by index --
//     FerretDB numbers upserts among upserts rather than by statement;
//   - if-absent puts: one unordered bulk of inserts; a duplicate _id is KindAlreadyExists;
//   - if-revision puts: individual replaceOne {_id, <field>.rev: token} (or {_id, <field>:
//     {$exists: false}} for the legacy revision), concurrently, because a bulk reply says how
//     many filters matched but not which; matching nothing is KindConflict;
//   - deletes: individual deleteOne, the same filters; nothing deleted is NotFound
//     (unconditional) or KindConflict (if-revision). An if-absent delete only checks, with a
//     find.
//
// Writes are visible to every later read once acknowledged, so the visible completion mode
// costs nothing.
//
// # Errors
//
// A write is KindUnavailable (retryable) only when it cannot have been applied: no server
// could be selected, no connection checked out or established, the client is closed, too
// little of the context's time was left to send it, the server refused the command as not
// primary or labelled it NoWritesPerformed, one write of a bulk failed with a transient code
// (write conflict, interruption), or an upsert lost the race for a new _id to a concurrent
// insert.
//
// A write is KindOutcomeUnknown (retryable, but it may have been applied, and may still be:
// a retry may apply it twice, and an if-absent put retried can answer AlreadyExists for its
// own first attempt) when it was sent and no reply says what became of it: the connection
// broke or timed out after the command was sent, the caller's context ended while it was in
// flight, the command failed as a whole with a transient code (interrupted, stepped down,
// shutting down, out of time), a write concern error (the write was applied on the primary
// but not confirmed, so it may yet be rolled back), or a bulk reply that does not account for
// the put (see FerretDB). The Service reports it and does not resend it.
//
// KindCanceled is the caller's context ending before the command was sent;
// KindPermissionDenied credentials the server refused (authentication failed while
// connecting, code 18) or a command the user's roles do not allow (Unauthorized, code 13),
// said as such without the server's text, which quotes the command; KindInternal a permanent
// failure (an unknown server code, a write concern that can never be satisfied, a malformed
// reply). Reads change nothing, so a read never has an unknown outcome:
// every transient read failure, a lost reply included, is KindUnavailable, and the caller's
// context ending is KindCanceled.
//
// A duplicate key on a unique secondary index is KindInvalid. MongoDB names the index in its
// error; FerretDB 1.x does not, and then one find tells whether the _id exists.
//
// Error messages carry addresses, keys, and server error codes and names, never server
// messages (MongoDB quotes duplicate values in them) or document contents; the driver's error
// stays reachable with errors.As.
//
// # FerretDB
//
// FerretDB 1.x speaks the MongoDB protocol with differences Options.FerretDB works around: it
// stops an update batch at its first failing statement even when unordered and then leaves
// every count out of its reply, and FerretDB 1.24 holds one SQL connection per statement of an
// update command until the command ends, from a pool of 100, so an update of more than about
// 100 statements waits for itself forever (and, behind the test relay, blocks every write to
// the server). With the option, unconditional puts therefore go out as individual upserting
// replaceOnes, and no request the adapter sends has more than one update statement; without
// it, a Write with more than about 100 unconditional puts to one collection hangs FerretDB 1.24
// (the test server's relay refuses update commands of more than 50 statements instead, which
// fails those puts with KindInvalid, nothing applied). FerretDB also cannot store Decimal128, NaN,
// infinities, MinKey or MaxKey (some of them make it drop the connection), and stores the double
// -0.0 as 0.0, so with the option documents needing them -- -0.0 and -0 included, at any depth
// -- are refused as KindInvalid before sending rather than changed. (Lua arithmetic can yield
// -0, as in 0 * -1; a program for FerretDB adds 0 to such a result, -0 + 0 being 0.) Without
// the option, a bulk reply that does not account for every put is reported as
// KindOutcomeUnknown (the put may or may not have been applied), never as a guessed outcome,
// and -0.0 silently becomes 0.0. FerretDB also scans the whole collection for an $in (a
// multi-record read costs a collection scan there), refuses '$'-prefixed and dotted member
// names at every level, and its filtered updates are atomic only behind a relay that
// serializes writes (tools/ferretdb). FerretDB 1.x also refuses arrays directly inside arrays
// ([[1]]; KindInvalid, from the server) and moves a member named _id to the front of a nested
// object ({"b":1,"_id":2} reads back as {"_id":2,"b":1}); the adapter passes both through.
//
// # Deviations
//
//   - Date-times: BSON datetimes keep milliseconds since the epoch and no offset. A marked
//     date-time finer than a millisecond is refused (KindInvalid, naming its JSON Pointer, never
//     the value); an offset is folded into UTC,
//     so "2026-01-01T01:00:00+01:00" reads back as "2026-01-01T00:00:00Z" (the same instant),
//     and fractions lose trailing zeros (".100Z" reads back as ".1Z"). Store implements
//     driver.TimePrecisioner with time.Millisecond, so the Service truncates the times it hands
//     to merge programs (MergeContext.Time, luamerge's context.time) to the millisecond, and a
//     program's json.datetime(context.time) is stored exactly and reads back as the same
//     instant, marked. Date-times in documents given to puts are not truncated: a finer one is
//     refused as above.
//   - Documents the store contract accepts but BSON cannot hold, or that would collide with the
//     adapter's own fields, are refused (see Documents): a top-level _id, '$'-prefixed or
//     metadata-named member, NUL in a member name, duplicate member names, lone surrogates,
//     nesting beyond 100 levels, numbers beyond 34 significant digits, BSON over 16 MiB.
//   - Numbers keep their value and their BSON type but not always their spelling: 1E2 reads
//     back as 100.0, 2.50 as 2.5, a Decimal128 may read back in exponent form (an integer put
//     as digits, however long, reads back as those digits: 10^36 is not 1.000...E+36). An int64 within
//     the int32 range or a Decimal128 another application stored keeps its type only through
//     writes conditioned on a revision this Store read (see Documents); any other write stores
//     it as an int32 or a double when that type holds the value exactly.
//   - Legacy records: a write conditioned on the legacy revision applies to whatever record
//     without the metadata field holds that _id, so a record another application deletes and
//     inserts again between a read and a write is not detected. Records written through the
//     adapter carry random tokens and have no such gap.
//   - With Options.FerretDB, unconditional puts are individual requests, not one bulk.
package mongostore
