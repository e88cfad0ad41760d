package esfence

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Namespace is the state store namespace of ownership records; the key is the index name.
const Namespace = "esfence"

// record is the state store's side of an index's ownership, one per (pipeline, index).
//
// Current is the fence the index's write alias carries as far as this store knows; it is empty
// until the index's creation is confirmed. Pending is the fence a claim in progress is about to
// install (or the fence of the index being created); it is set before the cluster is asked to
// change anything, so whatever a crash leaves behind, the index's alias is Current or Pending.
type record struct {
	Version  int    `json:"v"`
	Instance string `json:"instance"`
	Current  string `json:"current,omitempty"`
	Pending  string `json:"pending,omitempty"`
}

const recordVersion = 1

func decodeRecord(b []byte) (record, error) {
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("esfence: the ownership record is not valid JSON")
	}
	if r.Version != recordVersion || !instancePattern.MatchString(r.Instance) ||
		(r.Current != "" && !fencePattern.MatchString(r.Current)) ||
		(r.Pending != "" && !fencePattern.MatchString(r.Pending)) ||
		(r.Current == "" && r.Pending == "") {
		return r, fmt.Errorf("esfence: the ownership record has an unknown format")
	}
	return r, nil
}

func (r record) encode() []byte {
	r.Version = recordVersion
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // a struct of strings always marshals
	}
	return b
}

// A fence is "<generation>-<nonce>": the generation counts claims, so people can read the order
// of aliases; the random nonce makes the fences of two copies of one state store differ even
// when both claim from the same generation, so a copy can never mistake the other's rotation
// for its own interrupted one.
var fencePattern = regexp.MustCompile(`^[1-9][0-9]{0,18}-[0-9a-f]{16}$`)

func fenceGeneration(f string) uint64 {
	g, _ := strconv.ParseUint(f[:strings.IndexByte(f, '-')], 10, 64)
	return g
}

// writeAlias is the name of an index's write alias for a fence.
func writeAlias(instance, fence string) string {
	return internalPrefix + instance + "-" + fence
}

// parseWriteAlias splits an internal alias name; ok is false when it is not one this version
// makes.
func parseWriteAlias(alias string) (instance, fence string, ok bool) {
	rest, found := strings.CutPrefix(alias, internalPrefix)
	if !found || len(rest) < 34 || rest[32] != '-' {
		return "", "", false
	}
	instance, fence = rest[:32], rest[33:]
	if !instancePattern.MatchString(instance) || !fencePattern.MatchString(fence) {
		return "", "", false
	}
	return instance, fence, true
}
