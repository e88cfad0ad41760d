package cdc

import "time"

// ClusterHealth is the search engine's health of the indices a pipeline writes, as the
// cluster reports it (Elasticsearch and OpenSearch: _cluster/health?level=indices): green
// every shard copy assigned; yellow every primary assigned but some replica not (writes and
// reads succeed; a further node loss may lose data) -- informational; red some primary
// unassigned: writes routed to its shards fail, so a red index makes the pipeline unhealthy
// (HealthClusterRed). A bare Runner leaves it zero; package mirror fills it from the
// pipeline's sink, reading it at most every few seconds and only while its status is read.
type ClusterHealth struct {
	// Status is the worst of Indices: "green", "yellow" or "red"; empty when never read (no
	// index claimed yet, or no read answered).
	Status string
	// Indices is each index's health, by concrete index name.
	Indices map[string]string
	// ReadAt is when the cluster last answered; Err is the last read's failure (nil when it
	// succeeded): Status and Indices are then those of the last answer.
	ReadAt time.Time
	Err    error
}

// HealthClusterRed is the health class of a pipeline one of whose indices is red.
const HealthClusterRed = "cluster_red"
