package esfence

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"

	"github.com/tributary-dev/tributary/cdc"
)

// Class is the kind of a refusal, spelled as the specification spells it. A Class is also an
// error so that errors.Is(err, esfence.Fenced) picks one class out of a *ConflictError.
type Class string

// The refusal classes of the specification.
const (
	MarkerMissing               Class = "marker_missing"
	MarkerMalformed             Class = "marker_malformed"
	MarkerUnsupportedVersion    Class = "marker_unsupported_version"
	OwnedByOther                Class = "owned_by_other"
	BoundToAnotherRelation      Class = "bound_to_another_relation"
	DestinationIdentityMismatch Class = "destination_identity_mismatch"
	EncodingMismatch            Class = "encoding_mismatch"
	Fenced                      Class = "fenced"
	FenceMalformed              Class = "fence_malformed"
	AliasNotSupported           Class = "alias_not_supported"
	DestinationMissing          Class = "destination_missing"
	UnrecordedDestination       Class = "unrecorded_destination"
	FencingUnenforced           Class = "fencing_unenforced"
)

// Classes lists every refusal class, in the order of the specification.
var Classes = []Class{
	MarkerMissing, MarkerMalformed, MarkerUnsupportedVersion,
	OwnedByOther, BoundToAnotherRelation,
	DestinationIdentityMismatch, EncodingMismatch,
	Fenced, FenceMalformed,
	AliasNotSupported, DestinationMissing, UnrecordedDestination,
	FencingUnenforced,
}

func (c Class) Error() string { return "esfence: " + string(c) }

// ErrDestinationConflict matches every refusal: errors.Is(err, ErrDestinationConflict) is true
// for any *ConflictError, whatever its class.
var ErrDestinationConflict = errors.New("sink_destination_conflict")

// Incident is the name of the incident every refusal is reported as.
const Incident = "sink_destination_conflict"

// ConflictError is a refusal: the sink must not write to Index. It is the
// sink_destination_conflict incident. It never carries row data, credentials or another
// owner's identity -- only OwnerDigest, a one-way digest that lets an operator tell owners
// apart and match them against their own deployments (see [OwnerDigest]).
type ConflictError struct {
	Class Class
	Index string
	Table cdc.TableID
	// OwnerDigest is set for owned_by_other: the digest of the owner the marker names.
	OwnerDigest string
	// Detail says what was found, in words that carry no values from documents or
	// settings beyond names of indices, aliases and rules.
	Detail string
	// Err is what made the refusal certain, when it is an error (the *search.AuthError of a
	// cluster that refused to show action.auto_create_index); errors.As finds it.
	Err error
}

// Unwrap returns Err.
func (e *ConflictError) Unwrap() error { return e.Err }

func (e *ConflictError) Error() string {
	var b strings.Builder
	b.WriteString(Incident)
	b.WriteString(" (")
	b.WriteString(string(e.Class))
	b.WriteString(")")
	if e.Index != "" || e.Table != (cdc.TableID{}) { // a cluster-wide refusal names neither
		b.WriteString(": index ")
		b.WriteString(quote(e.Index))
		b.WriteString(", table ")
		b.WriteString(e.Table.String())
	}
	if e.OwnerDigest != "" {
		b.WriteString(", owner digest ")
		b.WriteString(e.OwnerDigest)
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	return b.String()
}

// Is makes errors.Is match the error's class and ErrDestinationConflict.
func (e *ConflictError) Is(target error) bool {
	if target == ErrDestinationConflict {
		return true
	}
	c, ok := target.(Class)
	return ok && c == e.Class
}

// ClassOf returns the class of a refusal anywhere in err's chain, or "" when err is not one.
func ClassOf(err error) Class {
	var ce *ConflictError
	if errors.As(err, &ce) {
		return ce.Class
	}
	return ""
}

// OwnerDigest is the digest a refusal shows for the owner (deployment identity, pipeline,
// sink). An operator computes it for their own deployments to find who owns an index without
// the refusal revealing another deployment's identity.
func OwnerDigest(deployment, pipeline, sink string) string {
	h := sha256.New()
	for _, s := range []string{"deltaforge-owner", deployment, pipeline, sink} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// quote keeps control bytes of a hostile name visible instead of letting them shape the text.
func quote(s string) string { return strconv.Quote(s) }
