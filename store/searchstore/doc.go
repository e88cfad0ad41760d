// Package searchstore is the Elasticsearch 8 and OpenSearch 2 adapter of package store: one
// REST adapter for both engines, built from go-elasticsearch's esapi request types over its
// transport (elastictransport), which has no product check and so talks to OpenSearch too.
//
// [New] takes the transport by position (it must not retry on its own: see New);
// [NewFromURLs] builds one from node URLs (the client internal/search builds for the sink and
// esfence too; requests are sent and read, and error types parsed, there). [Options] hold the
// rest, with documented defaults; their connection fields (Username and Password or APIKey,
// CACert, ClientCert and ClientKey, ServerName: all PEM bytes, never quoted in errors) are
// NewFromURLs' only.
//
// # Several nodes
//
// NewFromURLs takes every node's URL. Requests go round robin; one that cannot reach its node
// (connection refused, no route, a connect timeout: nothing was sent) goes at once to the next
// node, and the unreachable node is skipped for a while (internal/search's node pool), so a
// stopped node costs no failed call while another answers. A read (_mget, a dataset check)
// that reached a node and lost its connection (the node died with it in flight) is sent once
// more, to another node: it changed nothing. A _bulk that reached a node and lost its answer
// is never sent again (it could apply twice): it fails as the table under Errors says.
//
// Proven on a three-node Elasticsearch cluster (TestFaultClusterNodeKill,
// multinode_fault_test.go, a fault test): the node holding an index's primary, then the first
// URL's node, killed (kill -9) under a loop of puts and gets, calls go on succeeding while it
// is down; only puts in flight at the kill, or sent within a moment after it on a pooled
// connection to the dead node, may fail, retryable (KindOutcomeUnknown; a read in that
// position is sent again to another node); every acknowledged put reads back after it.
//
// # Records
//
// The address's dataset is the complete name of an existing index or alias; the adapter never
// creates, maps or aliases anything. The namespace is a logical business namespace only, and
// the store name selects this adapter: neither is part of the stored identity.
//
// The document is stored as the _source, byte for byte as the caller's JSON (see Deviations for
// line breaks), and reads return the _source bytes the server sends, never re-encoded.
//
// # Keys
//
// A string key is the _id unchanged, so documents written by other clients are addressable.
// The other key types get a deterministic encoding under [ReservedIDPrefix] ("~~"):
// "~~i:<decimal>" for int64, "~~b:<unpadded base64url>" for bytes, "~~o:<24 hex digits>" for
// ObjectIDs; at most 346 bytes, inside the 512-byte _id limit. [Store.ValidateAddress] refuses,
// as invalid, a string key starting with the reserved prefix and a dataset name the engines
// would reject (upper case, wildcards, commas, a leading '-', '_' or '+', ...).
//
// # Revisions
//
// A revision is the document's _seq_no and _primary_term, the pair the engines compare in
// if_seq_no / if_primary_term: 17 bytes (a format byte and two big-endian integers). Bytes of
// any other shape fail the write with KindInvalid before anything is sent. Sequence numbers only
// grow within a shard, so a revision taken before a delete is stale after the record is created
// again.
//
// # Requests
//
// Read sends one _mget for all its addresses (docs with _index and _id, any datasets); it is
// real-time, so it sees every acknowledged write. Write sends at most one _bulk:
//
//	put                  index
//	put  IfAbsent        create
//	put  IfRevision      index  with if_seq_no and if_primary_term
//	delete               delete
//	delete IfRevision    delete with if_seq_no and if_primary_term
//	delete IfAbsent      nothing to write: an _mget decides AlreadyExists or NotFound
//
// With WriteOptions.Visible the _bulk carries refresh=wait_for: it returns once a refresh has
// made the writes searchable, without forcing one.
//
// # Missing datasets
//
// An index, create or delete action naming a missing index makes the server create that index
// (with dynamic mappings) unless the cluster's action.auto_create_index forbids it; require_alias
// is no remedy (it refuses plain index names, and deletes still create). So before a _bulk, the
// adapter checks each
// dataset of the call it has not seen within [Options].DatasetTTL (default one minute) with
// HEAD /<dataset>, which answers for indices and aliases alike: writes to a missing dataset fail
// with KindNotFound and are not sent. Datasets seen to exist are cached; missing ones never are,
// and a dataset the server reports missing is dropped from the cache at once.
//
// The residual race: when a dataset is deleted after the check and before a write within the
// TTL, that write recreates it as an index with dynamic mappings. Clusters that must exclude
// this set action.auto_create_index so that it forbids the names written through this adapter;
// the write then fails with KindNotFound, and [Options].SkipDatasetCheck saves the check.
//
// # Privileges
//
// The least privilege of a Store on a secured cluster, reads and writes, on the datasets it
// addresses (index names or patterns).
// Elasticsearch, a role descriptor:
//
//	{"indices": [{"names": ["people", "orders-*"],
//	              "privileges": ["read", "write", "view_index_metadata"]}]}
//
// read lets Read's _mget through (indices:data/read/mget[shard]), write the _bulk items
// (indices:data/write/bulk[s], with the dynamic mapping updates a new field makes), and
// view_index_metadata the dataset check before a write (HEAD /<dataset> is
// indices:admin/get; not needed with Options.SkipDatasetCheck). A Store that only reads needs
// read alone. OpenSearch checks _bulk and _mget also as cluster-level actions, so its role
// names them:
//
//	{"cluster_permissions": ["indices:data/write/bulk", "indices:data/read/mget"],
//	 "index_permissions": [{"index_patterns": ["people", "orders-*"],
//	                        "allowed_actions": ["read", "write", "indices:admin/get"]}]}
//
// (cluster_all does not cover those two: they are not cluster:* actions; the action group
// cluster_composite_ops does, with more). Every privilege of both roles is proven needed
// by a test that removes it alone and sees the refusal naming it (secure_server_test.go, on
// the secured test servers). A record service's health check reads its health dataset, so
// its role covers that dataset too (read).
//
// # Errors
//
// Every failure carries a driver.ErrorKind; the server's status and error types stay reachable
// as a [*BackendError] (never its reason texts, which can quote document values).
//
// The rule for writes: KindUnavailable only when the write cannot have been applied (nothing
// was sent, or the server refused it before executing it); KindOutcomeUnknown (retryable, but
// it may have been applied, and a retry may apply it twice: an IfAbsent put retried can answer
// AlreadyExists for its own first attempt) whenever a _bulk was or may have been sent and no
// answer says what became of the write; KindInternal for a permanent failure. Reads change
// nothing, so a read never has an unknown outcome: a read failing where a write's outcome
// would be unknown is KindUnavailable.
//
//	per _bulk item
//	  409 on create                        KindAlreadyExists
//	  409 otherwise (stale revision)       KindConflict
//	  429 (rejected execution, a block)    KindUnavailable: not applied
//	  404 index_not_found_exception        KindNotFound
//	  413, *_too_long / *_too_large types  KindTooLarge
//	  400 (mapping, parsing, arguments)    KindInvalid
//	  403 security_exception (the role     KindPermissionDenied: not applied, for that
//	  lacks a privilege on its index)      item only
//	  another 4xx (403 blocks)             KindInternal: not applied
//	  5xx (unavailable shards, an          KindOutcomeUnknown
//	  exception while executing it), an
//	  error with a status of no failure
//	whole request
//	  cannot connect                       KindUnavailable: nothing was sent
//	  429, 503                             KindUnavailable: refused before execution
//	  413                                  KindTooLarge
//	  400                                  KindInvalid
//	  401 (credentials refused), 403       KindPermissionDenied: not executed
//	  security_exception (a privilege
//	  missing, e.g. OpenSearch's cluster
//	  action indices:data/write/bulk)
//	  another 4xx (a 403 block) or a 3xx,  KindInternal: not executed, and will not be
//	  a certificate that does not verify
//	  caller's context ended before        KindCanceled: nothing was sent
//	  sending
//	  after sending a _bulk: a timeout     KindOutcomeUnknown
//	  (Options.Timeout), the caller's
//	  context ending, a connection lost
//	  before or during the answer, 408,
//	  another 5xx, a 2xx answer that does
//	  not account for every write (not
//	  JSON, too few items, an item without
//	  an action or with an unexpected result)
//	  an applied write whose answer lacks  KindInternal
//	  _seq_no or _primary_term
//	  a failed _mget or dataset check      KindUnavailable (reads change nothing; a write
//	                                       behind a failed check is not sent), except 4xx as
//	                                       above, KindCanceled when the caller left and
//	                                       KindInternal for an answer that cannot be decoded
//
// The Service resends only KindUnavailable writes; a KindOutcomeUnknown one is reported to its
// caller, who decides whether to send it again.
//
// A KindPermissionDenied message says which: "authentication failed: the cluster refused the
// credentials (basic)" for a 401 (the kind of credentials sent, never them), or "permission
// denied: action indices:data/write/bulk[s] on indices people for user recordsvc (granted by
// the index privileges create_doc, create, delete, index, write, all)" for a 403, with what
// the engine names (OpenSearch names the actions and the user, not the index: the address
// does). Both engines refuse per item (_bulk items, _mget entries), so a role that does not
// cover one dataset fails only that dataset's operations; a dataset check refused (HEAD has no
// body) is asked again as GET /<dataset> for the reason. A 403 index or cluster block
// (cluster_block_exception, e.g. FORBIDDEN/8/index write) is no privilege: KindInternal,
// naming the block.
//
// # Deviations
//
//   - Date-time pointers are not stored: a read returns the date-time values as the strings
//     they are, with no pointers (the conformance harness declares PlainTimes). The string
//     itself is kept exactly in _source, whatever its precision; what searches see depends on
//     the index mapping: a date field indexes the instant to the millisecond, a date_nanos
//     field to the nanosecond. The Store implements no driver.TimePrecisioner, so merge context
//     times (luamerge's context.time) keep their nanoseconds in _source.
//   - A document whose JSON has line breaks between tokens is stored with each line feed
//     replaced by a space: _bulk bodies are one document per line. The JSON value is unchanged.
//   - The namespace is not part of the stored identity: two addresses that differ only in
//     namespace name the same document.
//   - A revision taken before its index was deleted and created again under the same name can
//     match a document of the new index (sequence numbers restart with the index).
//   - The residual race of "Missing datasets": a write within Options.DatasetTTL after its
//     dataset was deleted can recreate it, unless action.auto_create_index forbids that.
//   - Reads of an alias must resolve to one index (a get needs one); such a read fails with
//     KindInvalid, while writes through an alias with a write index work.
package searchstore
