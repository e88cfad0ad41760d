// Package esfence decides whether a sink may write to an Elasticsearch or OpenSearch index,
// and makes the cluster itself refuse writes from a sink that lost that right: destination
// ownership and fencing, as the Elasticsearch sink specification defines them.
//
// A mirror is safe only if exactly one writer -- or one scale-out group of writers under a
// shared owner (below) -- feeds each index. Clones of a deployment,
// restored backups of its state and second deployments pointed at the same cluster all break
// that quietly unless something refuses them. esfence does, with two pieces of state: a marker
// in the index, written once, and a record in the deployment's state store ([statestore]),
// rewritten by every claim.
//
// # Use
//
//	f, _ := esfence.New(transport, state, nil)
//	claim, err := f.Ensure(ctx, esfence.Destination{Pipeline: ..., Sink: ..., Table: ...,
//		Index: "cdc-shop.orders", Encoding: ..., Mapping: mapping})
//	// every _bulk action (index and delete) targets claim.WriteAlias(), require_alias=true
//	claim, err = f.Reclaim(ctx, claim) // after a reconnect or a client recreation
//
// Writes between claims make no ownership request: the cluster enforces the fence. A refusal
// is a *[ConflictError] (test with errors.Is against a [Class] or [ErrDestinationConflict]);
// any other error (transport, server, state store) may be retried: a failed answer is a
// *[ServerError], whose Class (internal/search: overloaded, unavailable, auth, ...) says
// whether sending it again can help. A 401 or 403 never can: its ServerError carries (Auth,
// also through errors.As) the *search.AuthError naming the credentials refused or the action,
// user and privileges of the refusal, and prints that instead of the bare status. A cluster
// that refuses to show action.auto_create_index (403) is refused fencing_unenforced with that
// AuthError in the refusal's detail and Err; a 401 there is the ServerError itself.
//
// # The index
//
// The sink writes only to indices it creates. [Fence.Ensure] creates a missing index in one
// request carrying the given mapping, the ownership marker in mappings._meta.deltaforge
// ([Marker]: the owner -- deployment identity of the state store, pipeline, sink --, the
// source table, the cluster's cluster_uuid and the index name, the encoding, a random
// instance, the format version) and the internal write alias df-w-<instance>-<fence>. Other
// keys of the mapping's _meta are kept. An existing index without the marker is refused, never
// adopted; so is a name that is an alias or a data stream.
//
// # The record
//
// The state store keeps one record per (pipeline, index) in namespace "esfence" with key = the
// index name, as JSON:
//
//	{"v":1,"instance":"<32 hex>","current":"<fence>","pending":"<fence>"}
//
// A fence is "<generation>-<16 hex>": the generation orders claims for people reading alias
// names, the random part keeps two copies of one state store from ever installing the same
// fence. current is the fence the index carries as far as the store knows (empty until the
// index's creation is confirmed); pending is the fence a claim is installing. pending is
// written before the cluster is touched, so after a crash at any point the index carries
// current or pending, and the next claim carries on from either.
//
// # Claims
//
// Each claim, in order (under a shared owner, from step 4 on, a join: see "Shared owners"):
//
//  1. reads the cluster_uuid and proves that the cluster refuses to auto-create df-w-*
//     indices (below); otherwise fencing_unenforced;
//  2. reads the record and the index (GET /<name>: a name that resolves to other index names
//     is an alias or a data stream: alias_not_supported);
//  3. a missing index: destination_missing if the record says it existed (it is never
//     recreated); otherwise it is created as above, the record first holding the instance and
//     the fence as pending, then as current;
//  4. an existing index: the marker must be present, well-formed and of a known format
//     (marker_missing, marker_malformed, marker_unsupported_version), name this deployment,
//     pipeline and sink (owned_by_other, reporting only [OwnerDigest]), this source table
//     (bound_to_another_relation), this index name and this cluster
//     (destination_identity_mismatch: a copy restored or reindexed elsewhere) and this
//     encoding (encoding_mismatch). Then the record must exist (unrecorded_destination: the
//     state is older than the index, or the pipeline was deleted) and name the marker's
//     instance (destination_identity_mismatch; fenced when our own creation never finished
//     and another copy created the index). The index must carry exactly one df-w-* alias of
//     its instance (fence_malformed) whose fence is the record's current or pending one
//     (fenced: another claim rotated it since);
//  5. the rotation: the record gets current = the fence found and pending = a new fence;
//     one _aliases request removes the old alias with must_exist and adds the new one -- if
//     the old alias is gone by then, the request fails as a whole and the claim is fenced;
//     then the record gets current = the new fence.
//
// Claims never write _meta and leave other aliases alone.
//
// # Claim rounds
//
// [Fence.ReclaimTables] claims again every table a session holds -- what a sink does after a
// reconnect -- in one round instead of one claim after the other (four requests per index,
// five behind a read alias, each a round trip: on a network that resets connections every
// few seconds such a sequence of claims never completes). A round:
//
//  1. sends its three reads at once: the cluster_uuid, the auto-create setting (proven as
//     above) and one GET of every index and read alias (ignore_unavailable; several GETs when
//     the names exceed 3000 bytes). Each read is idempotent and is sent again, up to three
//     times in all, when its connection fails under it (not after a timeout);
//  2. proves every index as step 4 does (marker, record, the write alias's fence) and every
//     read alias as a claim of its table does;
//  3. records every pending fence, then rotates every index's fence in ONE _aliases request
//     -- atomic across indices: it moves every fence or none --, then records every current
//     fence. Under a shared owner nothing is rotated: every index is joined.
//
// A round costs two round trips whatever the number of tables. A table that is not a plain
// case (a switch in progress, reindex state under a shared owner, an index or a read alias
// missing or not as recorded) is claimed alone ([Fence.ReclaimTable]), which completes or
// refuses it exactly as before; so is every table when the round's _aliases request is
// refused (a fence moved, an index deleted since the reads: the tables' own claims find out
// which). A round cut short anywhere leaves records whose pending fence allows whichever
// fence the index carries, so the next round (or claim) carries on from it; a copied state
// store that claimed since is refused (fenced) by the round's proofs or by its _aliases
// request, as by a single claim.
//
// # Fencing out
//
// [Fence.FenceOut] is a takeover's claim of a whole pipeline (an active/standby pair sharing
// one state store, package statestore/sqlstate): before the new active's runner writes
// anything, every index the pipeline's ownership records name is fenced against the old
// active -- also the indices of tables the new active will not write for a long time, whose
// old write aliases no claim of its own would rotate soon (a paused old active, resumed, could
// otherwise still write a stale change through them). It is a claim round over the records
// instead of over held claims: the same three reads, each index proven as a claim proves it
// (marker of this owner, pipeline, index, cluster and the record's instance; exactly one
// write alias, of that instance, whose fence is the record's current or pending one), the
// pending fences recorded, ONE _aliases request rotating every fence, the current fences
// recorded; cut short, the next FenceOut or claim carries on. A recorded index missing from
// the cluster is skipped and reported, as is one carrying no write alias at all (a retired
// generation: the switch removed it); a legacy index replaced by its table's read alias is
// skipped. An index that fails its proof is refused with its class and left alone while the
// others are rotated. When the _aliases request is refused because a fence moved between the
// reads and the request -- an old active's claim that had recorded its pending fence before
// the takeover and was paused before sending it -- FenceOut reads again (three passes at
// most) and also accepts the fences the records named earlier in the same call: the pending
// fence of the old active that its own pending record replaced. (A crash of the new active
// in exactly that window leaves that index fenced for the next claim: two faults at once.)
//
// The new active builds its Fence on the store view fenced by its lease epoch
// (statestore.Leaser's Fenced): every record write of the old active then fails with
// statestore.ErrNotLeader, so its claims, rounds and FenceOuts stop before their _aliases
// request, and its writes through the write aliases it held fail at the cluster. Under a
// shared owner FenceOut fails with [ErrSharedOwner] and sends nothing.
//
// # Shared owners
//
// Some sources spread one table's changes over several processes: a Debezium pipeline reads
// its Kafka topics through a consumer group, whose N members share the partitions of one
// table's topic and therefore write the same index at the same time. Each member has its own
// state store, so its own deployment identity; under exclusive ownership each would refuse
// the others' index (owned_by_other), and a copy's claim would fence the rest out. Every
// change carries an external version (its source position), so writers of one change stream
// converge whatever their order; what fencing must still prevent is a different deployment,
// pipeline or sink writing the index.
//
// [Options].SharedOwner names the owner of a scale-out group; every member sets the same
// name (for a Debezium pipeline, e.g. the consumer group's). It must pass [CheckSharedOwner]:
// 1 to [MaxSharedOwnerBytes] bytes of printable UTF-8 without leading or trailing white
// space. Under it:
//
//   - the marker's owner deployment is [SharedDeployment](name), "shared:<name>": never a
//     state store's identity (a UUID), so an index created by an exclusive deployment and one
//     created under a shared owner never match each other -- each is owned_by_other to the
//     other (the refusal's detail says which kind of owner holds the index), as is another
//     shared owner, pipeline or sink. [OwnerDigest] of SharedDeployment(name), the pipeline
//     and the sink is the digest such a refusal shows;
//   - a claim joins instead of rotating. Steps 1 to 3 and the marker checks of step 4 are as
//     above, the owner being the shared owner. Then the index must carry exactly one df-w-*
//     alias of the marker's instance (fence_malformed), which becomes the claim's write alias
//     as it is; the record gets the instance and that fence as current. No _aliases request
//     is sent, so members never fence each other: a member's Reclaim leaves every other
//     member's write alias working;
//   - an index with no record in this member's state store is adopted (not
//     unrecorded_destination): another member created it. So is one whose creation this
//     member's record shows unfinished (pending only). A record naming another instance is
//     destination_identity_mismatch: the index was deleted and created again since;
//   - members creating a missing index at the same time: the cluster creates it once, the
//     others' requests are answered resource_already_exists, and each of them reads the index
//     again and joins it;
//   - a missing index is refused (destination_missing) when this member's record says it
//     existed; a member without a record creates it. Members share the fate of their indices:
//     deleting a shared index needs every member stopped, and every member's pipeline state
//     deleted ([Fence.ForgetPipeline]) before they start again -- a member that kept its
//     record refuses the new index (destination_identity_mismatch) or the missing one
//     (destination_missing), and one that is still writing finds its write alias gone;
//   - [Fence.DropIndices] checks each marker against the shared owner;
//   - generations: [Fence.EnsureTable] works for a table without reindex state -- a legacy
//     index or generation 1 behind the read alias. A member without a table record joins the
//     table as another member created it (generation 1 when the name is the read alias of
//     exactly <name>-g1, otherwise the index of that name), whatever its own legacy flag. A
//     reindex needs one writer: it fences the live generation off and moves the read alias
//     under the others' writes. So [Fence.BeginGeneration], [Fence.Switch],
//     [Fence.AbandonGeneration] and [Fence.DeleteRetired] fail with [ErrSharedOwner] without
//     sending anything, and so does a claim of a table whose record has reindex state (a
//     generation past the first, one being filled, a switch, retired ones).
//
// What the fence then guarantees is the owner's, not a member's: every write that is not the
// owner's (pipeline's, sink's) is refused; among members, writes are ordered by the cluster's
// external versions alone.
//
// # Mappings after creation
//
// [Fence.Fields] reads the index's top-level field mappings and [Fence.AddFields] adds fields
// (one PUT _mapping carrying only "properties"), both through the claim's write alias: a
// fenced claim is refused (fenced, or destination_missing when the index is gone) instead of
// touching an index it no longer owns, and _meta -- the marker -- is never sent, so it stays as
// created. An existing field cannot be changed; the cluster refuses such a request whole.
// [Fence.Mapping] reads the whole mapping the same way, the marker left out, so that another
// generation can be created like the live one (a Reset whose caller has no schema).
//
// # Clones and restores
//
// Two separately created state stores have different identities: each is owned_by_other to
// the other. A copied state store has the same identity; whichever copy claims first rotates
// the fence, and the other's next write fails at the cluster and its next claim is fenced. A
// state store restored from an older backup has an older fence: fenced. Restored from its
// latest state it continues. A deleted index stays deleted (destination_missing); its record
// goes away only with [Fence.ForgetPipeline], which is [statestore.Store.DeletePipeline]: the
// pipeline's checkpoint is reset in the same operation.
//
// # Deleting a pipeline
//
// [Fence.DropIndices] deletes the indices a pipeline's records name, each only after its
// marker proved it this deployment's (or shared owner's), this pipeline's and the record's
// instance (an index of another owner is left in place and refused); the write alias goes
// with its index. Then
// [Fence.ForgetPipeline] lets the pipeline start over: its next claims create the indices
// afresh.
//
// # Generations
//
// [Fence.EnsureTable] claims a table rather than one index: its documents live in a concrete
// generation <name>-g<N>, readers use <name>, a read-only alias (is_write_index false: a
// write through it fails) the sink owns, created with generation 1 in the same request as
// the index and its write alias. Each generation is an ordinary destination -- marker naming
// the generation's own name, instance, write alias, ownership record -- so every claim step
// and refusal above holds for each; the table record (namespace esfence-table, key <name>)
// says which generation is live, which is being filled, which are retired, and the highest
// number ever used (numbers are never reused). A claim checks that the read alias resolves to
// exactly the live generation (fence_malformed otherwise; alias_not_supported when the name
// has become a concrete index). An index created under the table's name before generations (a
// legacy index, generation 0) is claimed as it is, without a read alias.
//
// Reindexing: [Fence.BeginGeneration] records the next generation, then creates and claims it
// (with the new mapping, without the read alias); from then on every change goes to both
// generations ([Generations.Targets]) while the caller fills the new one. [Fence.Switch]
// records that it switches, refreshes the new generation, and sends one _aliases request that
// removes the live generation's write alias (must_exist: the proof of the claim, and the end
// of writes to it), removes the read alias from it and adds the read alias to the new one: a
// reader sees the old generation or the new one, never a mix. A legacy index cannot carry an
// alias of its own name, so it is fenced off first and then replaced by the read alias in a
// second request (remove_index runs before the add: the legacy index is deleted at once). The
// outgoing generation is retired: [Fence.DeleteRetired] deletes it, marker-checked, once the
// retention given to Switch has passed. A switch cut short is completed by the next claim:
// the read alias already on the new generation (only the record lags), a legacy index
// already fenced off (the replacement remains), or nothing done yet (the switch is made
// again). In the same process, a Switch that failed once the record said switching returns,
// with its error, the value that replaces g ([Generations.Switching]); Switch called with it
// completes the switch the same way, with the claims in hand, after proving the table record
// unchanged (a copy's claim that completed it meanwhile: Fenced). [Fence.AbandonGeneration]
// drops a generation being filled, never one whose switch has begun.
//
// Emptying: [Fence.Reset] gives a table a new, empty generation that readers see at once (a
// TRUNCATE, or a relation leaving the table's name: package sink, "Schema events"). The table
// record names the next generation as switching with emptying set, together with [Reset]'s
// changes, before anything is sent; then the generation is created and the read alias moved
// as by Switch (a legacy index fenced off and replaced, another generation retired). A reset
// cut short is completed by the next claim, which creates the empty generation if a crash
// left it uncreated: the record is the decision. A generation being filled is abandoned
// first.
//
// The table record's other fields (JSON):
//
//	{"v":1,"live":2,"top":2,"retired":[...],"floor":1234,"relation":"16385",
//	 "retired_relations":[{"id":"16001","at":1200}],"sink":"es","source":{...}}
//
// floor is the table's version floor (a change with a lower version is void); relation the
// source relation identity bound to the table ([Fence.Bind], or a Reset's); retired_relations
// the identities retired from it with the version they were retired at (at most
// [MaxRetiredRelations], oldest dropped first); sink and source the sink and source table that
// bound them, so that [Fence.Relations] lists a sink's identity -> table map from the state
// store; entered an ENTERED report not handled yet ([EnteredMark]: [Fence.MarkEntered], a
// Reset's or Bind's, removed by [Fence.ClearEntered]). Records written before these fields
// read as bound to nothing with no floor.
//
// # Deployment requirement
//
// require_alias does not apply to delete actions: a delete through a removed alias would
// auto-create an index of the alias's name and succeed. Deletes are fenced only when the
// cluster refuses to auto-create indices named df-w-*, for example:
//
//	PUT _cluster/settings
//	{ "persistent": { "action.auto_create_index": "-df-w-*,+*" } }
//
// Every claim reads the effective value (transient, then persistent, then the default, which
// is the node's configuration or true) and evaluates it the way Elasticsearch does: "true" and
// "false" exactly are booleans; anything else is a comma-separated list of trimmed rules,
// "-pattern" forbidding and "+pattern" or "pattern" allowing, tried in order, the first
// matching rule deciding and no match forbidding; '*' is the only wildcard and matching is
// case-sensitive. The claim proves on automata that no name starting with df-w- can be
// auto-created, and refuses with fencing_unenforced when it cannot read the setting or the
// proof fails (the refusal names a rule that lets a df-w- name through). The refusal quotes the
// request that fixes it while keeping every other name's outcome: -df-w-* put before the
// cluster's own rules ("+logs-*,-*" becomes "-df-w-*,+logs-*,-*"; true, unset or invalid
// becomes "-df-w-*,+*"), persistent, a transient value that would override it reset in the
// same request ([AutoCreate.Request]); "false" forbids every auto-creation and passes.
// [Fence.CheckAutoCreate] makes the same proof without claiming anything (a start check, its
// refusal naming no index); [Fence.ReadAutoCreate] and [Fence.EnforceAutoCreate] read and
// send the setting.
//
// # Privileges
//
// The least roles, per engine and per use (mirror run, reindex, drop with indices, record
// store), written as the role a user pastes, are in docs/privileges.md, each proven on secured
// servers. In short, on Elasticsearch the sink's user needs the monitor cluster privilege
// (cluster settings, state and nodes info) and, on its index pattern and on df-w-* (the write
// aliases, which Elasticsearch checks by their own names), create_index, view_index_metadata,
// write (also PUT _mapping), read (the _mget of unchanged TOAST values) and the action
// indices:admin/aliases: the specification's manage_aliases does not exist on Elasticsearch
// (a role naming it is refused), and the only named privilege holding that action is manage.
// Reindexing adds maintenance (the refresh before a switch) and delete_index (retired
// generations); dropping with indices needs view_index_metadata and delete_index alone.
// OpenSearch also checks _bulk and _mget as cluster-level actions (indices:data/write/bulk,
// indices:data/read/mget) and has manage_aliases but no view_index_metadata.
//
// # What fencing does not promise
//
// A bulk request the cluster already accepted before a rotation may still complete: writes
// around an ownership change are at least once, as everywhere else. The fence works on newly
// evaluated actions only.
//
// The proof covers action.auto_create_index only. A composable index template whose pattern
// matches df-w-* names and that sets allow_auto_create: true (or data_stream) overrides the
// setting inside the cluster; such templates are not inspected (reading them needs a
// privilege the sink does not otherwise have), so do not create them.
//
// A claim whose _aliases request timed out has an unknown outcome; the record allows either
// fence, so the next claim finishes or repeats it.
//
// # Engines
//
// The same requests work on Elasticsearch 8 and OpenSearch 2 through esapi on a bare
// elastictransport client (no product check), sent and read by internal/search. The tests run
// every refusal class and every clone and restore scenario against both; what the servers
// cannot be made to do (refuse a privilege, drop a connection) is played by the shared fake
// node (internal/search/searchtest).
package esfence
