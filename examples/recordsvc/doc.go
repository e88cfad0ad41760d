// Command recordsvc is the record store layer as a gRPC service: batch-native Read, Write
// (put or Lua merge) and Delete over named stores (memory, MongoDB, Elasticsearch,
// OpenSearch), with the three completion modes and a durable queue per store. It is thin on
// purpose: validation, same-record ordering, coalescing of one-item calls, merges with
// compare-and-set retries, the accepted-mode queue path and the worker all live in the
// library (store, luamerge, queue, store/worker); this program reads a configuration, wires
// those packages together and translates between protobuf and store values.
//
//	recordsvc --config FILE [--mode server|worker|all]
//
// memory.yaml beside this file needs no server:
//
//	cd examples && go run ./recordsvc --config recordsvc/memory.yaml
//
// # API
//
// proto/tributary/record/v1/record.proto defines tributary.record.v1.RecordService; the
// generated Go code is committed and `make proto` regenerates it. Server reflection is on by
// default (listen.reflection), so grpcurl needs no proto file:
//
//	grpcurl -plaintext 127.0.0.1:8080 list
//	grpcurl -plaintext -d '{"service":"tributary.record.v1.RecordService"}' 127.0.0.1:8080 grpc.health.v1.Health/Check
//	grpcurl -plaintext -d '{"items":[{"address":{"store":"main","namespace":"crm","dataset":"people","key":{"string":"ada"}},"put":{"document":{"json":"{\"name\":\"Ada\"}"}}}]}' 127.0.0.1:8080 tributary.record.v1.RecordService/Write
//
// Documents are JSON text (Document.json is a string; it was bytes before v1.1, which is the
// same wire format for UTF-8, so older clients keep working).
//
// Every response has one
// result per item in request order. A request with a malformed item is refused whole with
// INVALID_ARGUMENT and a google.rpc.BadRequest detail naming every bad item at once (those the
// service cannot translate and those the store's validation refuses, in index order, each
// described as "<op> <address>: <cause>"); nothing is written. A RETURN_AFTER_ACCEPTED write
// to a store without a queue fails on its own with ERROR_KIND_NO_QUEUE (retryable, as the
// specification asks: nothing was applied or enqueued; it succeeds on a service whose store
// has a queue, or with a synchronous completion), and the request's other items run -- the
// kind tells a missing queue from one that is down (UNAVAILABLE). Per-item failures carry an
// ErrorKind mapped one to one from store's kinds, and retryable is true for
// ERROR_KIND_UNAVAILABLE (the item had no effect), ERROR_KIND_NO_QUEUE (nor did it) and
// ERROR_KIND_OUTCOME_UNKNOWN (it may have had one: an accepted-mode item whose queue did not
// answer within delivery_timeout, or before the call ended). ERROR_KIND_PERMISSION_DENIED
// (not retryable) says the store's backend refused the service's credentials ("authentication
// failed") or found its role lacking a privilege for that item's dataset (the message names
// the action and the privileges the backend names); other items of the request are not
// affected. An accepted-mode item answers
// within its queue's delivery_timeout even when a broker hangs, so a client deadline above it
// never fires on an item that took effect.
//
// A call with a gRPC deadline answers before it, even when its store hangs: at the deadline less
// service.deadline_reserve (50ms by default, at most a tenth of the call's time) every item not
// done fails on its own, retryably -- ERROR_KIND_UNAVAILABLE for a read and for a write never
// sent to the store (also one queued behind the store's hung batches; it is not sent later),
// ERROR_KIND_OUTCOME_UNKNOWN for a write the store received and did not answer (it may have
// been applied, and may still be). Backend attempts end by the deadline or the store's timeout,
// whichever comes first, and no retry starts that cannot end before the deadline. Every item
// counts in recordsvc_items_total, those answered at the deadline under their error kind and
// those of calls the client canceled as error_canceled. Revisions travel as opaque bytes;
// documents as JSON object text plus the JSON Pointers of their date-time strings. A merge
// names its program inline or by index into the request's programs list, so a batch carries a
// shared program once. Requests and responses are limited to 64 MiB by default
// (limits.max_request_bytes, limits.max_response_bytes); a larger request fails with
// RESOURCE_EXHAUSTED before it is decoded, and bytes that do not decode as the request
// message with INVALID_ARGUMENT (grpc-go's own answer would be INTERNAL).
//
// # Configuration
//
// One YAML file, required; CONFIG.md documents every field. Nothing is read from the
// environment except ${NAME} references inside values (an unset variable is an error naming
// it; "$${" is a literal "${"). Unknown keys and invalid values stop the start with a message
// naming the field; messages never quote values, which may be secrets.
//
// Elasticsearch and OpenSearch stores list every node (urls; a request that cannot reach one
// goes to the next) and take username/password or api_key and tls (ca_file or inline ca,
// cert_file and key_file, server_name); MongoDB stores take the driver's URI options for
// credentials and TLS, and tls for what a URI cannot say (an inline CA, a server name).
//
// # Modes
//
// The configuration's mode: (default server), overridden by --mode. server serves the gRPC API; accepted-mode writes go to each store's queue. worker serves no
// API: it runs one store/worker.Worker per store with a queue, applying that store's queued
// records through the Service, with dead letters to the store's dead-letter topic; a record of
// another store on the topic is dead-lettered (other_store), never applied, and no two stores
// may share a record topic. all does both in
// one process, and is the only mode an in-process (memory) queue works in. A worker-only
// process has no gRPC listener, hence no health service: its dependency checks show in the
// recordsvc_dependency_healthy metric.
//
// # Health
//
// The standard gRPC health service (grpc.health.v1.Health) reports "" and
// tributary.record.v1.RecordService SERVING while the process runs. Each store has
// tributary.record.v1.storage.<store>, and each store with a queue
// tributary.record.v1.queue.<store> (a Kafka queue also under the deprecated name of earlier
// releases, tributary.record.v1.kafka.<store>; an in-process queue is SERVING while the process
// runs), set every health.interval by a check bounded by health.timeout: a read of the store's
// health record (any answer from the server counts as reachable, except a refusal of the
// credentials or of the read's privilege: permission denied) and a Kafka ping
// (kafkaqueue.Monitor: the brokers answer, accept the credentials and know the topic). A failed store never changes "" or another store's status. During shutdown every
// service reports NOT_SERVING.
//
// The same Kafka check measures the queue's lag against the broker (kafkaqueue.Monitor.Backlog),
// in every mode: the depth (the sum over partitions of end offset minus the worker group's
// committed offset) and the timestamp of the oldest unapplied record (that of the message at
// the group's committed offset, the oldest over the partitions with a backlog; read once per
// partition and offset). Both are 0 for an empty queue, whatever the last fetch looked like.
// When the measurement fails -- the broker unreachable, which also turns the queue's service
// NOT_SERVING, or the lag read failing on its own, which does not -- the depth keeps its last
// value flagged stale (recordsvc_queue_stale 1, recordsvc_queue_measured_timestamp_seconds
// stays at the last success) and the oldest age keeps growing from the last oldest
// timestamp: it is computed when scraped, never frozen. The health transitions of a Kafka
// queue are logged with these figures (queue_depth, queue_oldest_age, queue_stale), and a
// lag read that starts or stops failing while the brokers answer is logged once each way.
// The age is the producer's clock (the record's Kafka timestamp) against this process's:
// hosts with skewed clocks skew it.
//
// # Metrics
//
// Prometheus text at http://<listen.metrics>/metrics, from a registry of the process's own.
// Labels: store (configured names, else "other"), method (Read, Write, Delete, health, reflection,
// other), op (read, put, merge, delete), result (an outcome or error_<kind>), code (gRPC
// codes), call (read, write), dependency (storage, kafka, memory_queue): all bounded.
//
//	recordsvc_rpc_requests_total{method,code}           gRPC calls (every one, also those refused before a handler)
//	recordsvc_rpc_duration_seconds{method}              gRPC latency
//	recordsvc_rpc_items{method}                         items per request (client batch size)
//	recordsvc_items_total{store,op,result}              items by outcome or error kind
//	recordsvc_item_duration_seconds{store,op}           latency of requests with such items
//	recordsvc_items_in_flight{store}                    items of requests in progress
//	recordsvc_adapter_calls_total{store,call,result}    backend batch calls
//	recordsvc_adapter_duration_seconds{store,call}      backend batch latency
//	recordsvc_adapter_batch_size{store,call}            records per backend call (after coalescing)
//	recordsvc_coalesced_batch_size{store}               one-item calls per coalesced batch
//	recordsvc_coalescer_waiting{store}                  calls queued behind the last batch formed
//	recordsvc_coalescer_refused_total{store}            one-item calls refused: coalescer queue full
//	recordsvc_unavailable_retries_total{store,call}     backend reads/writes resent after "unavailable"
//	recordsvc_deadline_cut_items_total{store}           items answered at their call's deadline, unsettled
//	recordsvc_late_outcomes_total{store,result}         outcome-unknown writes settled after their answer
//	recordsvc_merge_cas_retries_total{store}            merge runs repeated after a revision conflict
//	recordsvc_queue_depth{store}                        Kafka messages the worker group has not committed (0: empty)
//	recordsvc_queue_oldest_age_seconds{store}           age of the oldest of them, computed when scraped (0: empty)
//	recordsvc_queue_measured_timestamp_seconds{store}   Unix time of the last successful measurement of both
//	recordsvc_queue_stale{store}                        1 when the last measurement failed (figures kept, age growing)
//	recordsvc_queue_published_total{store,result}       accepted-mode records published
//	recordsvc_queue_publish_duration_seconds{store}     publish latency until acknowledged
//	recordsvc_worker_records_total{store,result}        applied, dead_lettered, retried
//	recordsvc_worker_fetches_total{store}               fetches finished and committed
//	recordsvc_worker_redeliveries_total{store}          records delivered again that the worker had finished
//	recordsvc_worker_lag_seconds{store}                 deprecated: slowest record of the last fetch finished (below)
//	recordsvc_worker_fetch_duration_seconds{store}      fetch to commit
//	recordsvc_dependency_healthy{store,dependency}      last periodic check: 1 or 0
//
// plus the Go runtime and process collectors. recordsvc_worker_lag_seconds is deprecated: it
// is the largest acceptance-to-application time among the records of the last fetch the
// worker finished and keeps that value until another fetch finishes, so an idle worker of an
// empty queue shows the lag of its last busy fetch; the queue's lag is
// recordsvc_queue_oldest_age_seconds (and recordsvc_queue_depth), measured in every mode. The adapter, coalescer and retry metrics come
// from the Service's store.Observer; merge program runs are the merge items plus their
// compare-and-set retries.
//
// # Shutdown
//
// On SIGINT or SIGTERM: health turns NOT_SERVING; with shutdown.drain_delay the server keeps
// serving new calls for that long, so clients watching health move away first; then it stops
// accepting and drains the calls in flight (GracefulStop, cut short after shutdown.timeout),
// the workers finish and commit the fetch in hand, the Service closes (waiting for its calls,
// closing the adapters), then the queue clients close. A second signal ends the process at
// once.
package main
