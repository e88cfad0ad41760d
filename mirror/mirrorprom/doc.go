// Package mirrorprom exports a mirror's pipelines to Prometheus: one prometheus.Collector
// that is both the observers mirror.Options.Observe hands to every runner and sink
// (histograms and counters of batches and _bulk requests) and a reader of every pipeline's
// cdc.Status at scrape time, so health, state, lag and backlog are current also while a
// pipeline is idle, reconnecting or stopped.
//
//	c := mirrorprom.New(nil)
//	m, err := mirror.Open(cfg, &mirror.Options{Observe: c.Observe})
//	c.Watch(m)
//	reg := prometheus.NewRegistry() // a registry of your own, not the global one
//	reg.MustRegister(c)
//
// # Metrics
//
// Every series carries the label pipeline; other labels have a small fixed set of values (a
// status class, an item outcome, a reason or state word, an index name per captured table),
// never row data. Names start with Options.Namespace (default "mirror"; examples/cdcmirror
// keeps its "cdcmirror").
//
// Read from Status at scrape time:
//
//	healthy                              1/0
//	health_reason{reason}                1 for the current reason: ok, not_running, starting,
//	                                     stopped, stalled, reconnecting, backpressure,
//	                                     sink_unavailable, sink_not_answering, lagging,
//	                                     cluster_red, table_incomplete, standby
//	                                     (cdc.Health.Class), other
//	incomplete_tables                    tables whose index misses rows the pipeline cannot
//	                                     restore on its own (cdc.Status.Incomplete)
//	state{state}                         1 for the current state, 0 for the others: not_running,
//	                                     starting, snapshotting, resnapshotting, streaming,
//	                                     reconnecting, stopped, standby, taking_over
//	replication_lag_seconds              from the source's lag measurements (cdc.LagReporter),
//	                                     else from the newest commit of the last streamed batch
//	replication_lag_bytes, retained_bytes, lag_measured_timestamp_seconds, lag_measurement_failing
//	pending_events                       events read, not yet acknowledged
//	last_batch_timestamp_seconds, last_checkpoint_timestamp_seconds
//	snapshot_active, snapshot_rows_done, snapshot_rows_estimated, snapshot_tables_done,
//	snapshot_tables_total                of the running snapshot, else of the last one
//	resnapshot_active, resnapshot_rows_done, resnapshot_rows_estimated, resnapshot_rows_per_second,
//	resnapshot_tables_done, resnapshot_tables_total, resnapshot_queued
//	                                     of the running re-snapshot, else of the last one
//	events_total, batches_total, dead_letters_total, backpressure_retries_total, reconnects_total
//
// Read from Status.Leadership, only with a shared state store (an active/standby deployment;
// none of them exists for a pipeline whose Leadership.Role is ""):
//
//	role{role}                           1 for this process's current role, 0 for the others:
//	                                     active, standby, taking_over
//	takeovers_total                      times this process acquired the pipeline's lease (its
//	                                     first start as the active included)
//	lease_epoch                          the lease's epoch as last read (the fencing token)
//	last_takeover_seconds                how long the last takeover took, from the lease to
//	                                     writing; absent before this process's first
//	state_store_error                    1 while the last attempt to reach the store failed
//
// Every process of a deployment exports them for every pipeline, so "no process is active"
// is max by (pipeline) (role{role="active"}) == 0 across the processes (the alert
// CdcmirrorNoActive of observability/ also covers a pipeline whose processes all vanished).
//
// From the observers:
//
//	batch_duration_seconds               histogram: first offer to the sink to checkpoint
//	checkpoints_total, backpressure_wait_seconds_total
//	bulk_requests_total{status}          by status class (2xx, 4xx, 5xx, none)
//	bulk_duration_seconds                histogram of _bulk round trips
//	bulk_request_bytes_total
//	bulk_items_total{outcome}            applied, superseded, dead_lettered, retried
//	claims_total{index}                  fence claims (first use, after a connection loss)
//	unchanged_values_total{from}         batch, index, unavailable
//
// Under the namespace "cdcmirror" every name examples/cdcmirror exported before this package
// keeps its name and meaning, except replication_lag_seconds, which no longer freezes at the
// last batch's value while the pipeline is idle or disconnected, and the snapshot gauges,
// which keep the last snapshot's totals instead of dropping to 0. The Go runtime and process
// collectors are the program's to register.
package mirrorprom
