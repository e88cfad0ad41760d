package esfence

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/tributary-dev/tributary/cdc"
)

// MarkerKey is the key of the ownership marker inside mappings._meta.
const MarkerKey = "deltaforge"

// MarkerFormat is the marker format this version writes and understands. A marker with a
// higher format was written by a newer version and is refused (marker_unsupported_version)
// rather than guessed at.
const MarkerFormat = 1

// Marker is the immutable ownership marker, stored in mappings._meta.deltaforge when the
// index is created and never written again.
type Marker struct {
	Format   int          `json:"format"`
	Owner    MarkerOwner  `json:"owner"`
	Source   MarkerSource `json:"source"`
	Index    MarkerIndex  `json:"index"`
	Encoding string       `json:"encoding"`
	Instance string       `json:"instance"`
}

// MarkerOwner is the deployment (the state store's identity), pipeline and sink.
type MarkerOwner struct {
	Deployment string `json:"deployment"`
	Pipeline   string `json:"pipeline"`
	Sink       string `json:"sink"`
}

// MarkerSource is the source table the index mirrors.
type MarkerSource struct {
	Connector string `json:"connector"`
	Source    string `json:"source"`
	Database  string `json:"database"`
	Schema    string `json:"schema"`
	Table     string `json:"table"`
}

// MarkerIndex is where the index was created: the cluster and the name.
type MarkerIndex struct {
	ClusterUUID string `json:"cluster_uuid"`
	Name        string `json:"name"`
}

func sourceOf(t cdc.TableID) MarkerSource {
	return MarkerSource{Connector: t.Connector, Source: t.Source, Database: t.Database, Schema: t.Schema, Table: t.Table}
}

// instancePattern: an instance is 16 random bytes in lower-case hex.
var instancePattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// parseMarker reads mappings._meta.deltaforge. It returns the class to refuse with when the
// marker is absent, malformed or of an unknown format.
func parseMarker(meta map[string]json.RawMessage) (*Marker, Class, string) {
	raw, ok := meta[MarkerKey]
	if !ok {
		return nil, MarkerMissing, "mappings._meta has no " + MarkerKey + " marker: the index was not created by this sink"
	}
	// The format is read on its own first: a newer format may have changed everything else.
	var head struct {
		Format json.RawMessage `json:"format"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, MarkerMalformed, "the marker is not a JSON object"
	}
	var format int
	if len(head.Format) == 0 || json.Unmarshal(head.Format, &format) != nil || format < 1 {
		return nil, MarkerMalformed, "the marker has no valid format number"
	}
	if format != MarkerFormat {
		return nil, MarkerUnsupportedVersion, fmt.Sprintf("marker format %d, this version understands %d", format, MarkerFormat)
	}
	var m Marker
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, MarkerMalformed, "the marker does not have the fields of format 1"
	}
	switch {
	case m.Owner.Deployment == "", m.Owner.Pipeline == "", m.Owner.Sink == "":
		return nil, MarkerMalformed, "the marker names no complete owner"
	case m.Source.Connector == "", m.Source.Database == "", m.Source.Table == "":
		return nil, MarkerMalformed, "the marker names no complete source table"
	case m.Index.ClusterUUID == "", m.Index.Name == "":
		return nil, MarkerMalformed, "the marker names no cluster or index"
	case m.Encoding == "":
		return nil, MarkerMalformed, "the marker names no encoding"
	case !instancePattern.MatchString(m.Instance):
		return nil, MarkerMalformed, "the marker's instance is not 32 hex digits"
	}
	return &m, "", ""
}
