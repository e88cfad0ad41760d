package esfence

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/statestore"
)

// Shared owners (doc.go, "Shared owners"): the processes of one scale-out group -- each with
// its own state store, so each its own deployment identity -- write the same indices at once.
// The marker names the shared owner instead of a deployment identity, and a claim joins the
// index's one write alias instead of rotating it: members never fence each other, while every
// other deployment, pipeline or sink is still refused (owned_by_other).

// SharedOwnerPrefix starts the marker's owner deployment of an index created under a shared
// owner. A state store's identity is a UUID, so an exclusive owner and a shared one never
// match each other.
const SharedOwnerPrefix = "shared:"

// MaxSharedOwnerBytes bounds a shared owner's name.
const MaxSharedOwnerBytes = 255

// SharedDeployment is the owner deployment the marker names for the shared owner name: what
// an operator passes to OwnerDigest to recognise a shared owner in an owned_by_other refusal.
func SharedDeployment(name string) string { return SharedOwnerPrefix + name }

// ErrSharedOwner is the error of an operation a shared owner cannot make: every generation
// operation of a reindex (BeginGeneration, Switch, AbandonGeneration, DeleteRetired) and a
// claim of a table that has reindex state. A reindex needs one writer: it fences the live
// generation off and moves the read alias, which would cut the other members off in the
// middle of their writes. Test with errors.Is; it is not a refusal (*ConflictError).
var ErrSharedOwner = errors.New("esfence: not available under a shared owner (a reindex needs one writer)")

// CheckSharedOwner says whether name can be a shared owner: 1 to MaxSharedOwnerBytes bytes of
// valid UTF-8, printable characters only (spaces inside, none leading or trailing). The error
// never quotes the name.
func CheckSharedOwner(name string) error {
	switch {
	case name == "":
		return errors.New("esfence: the shared owner is empty")
	case len(name) > MaxSharedOwnerBytes:
		return fmt.Errorf("esfence: the shared owner is longer than %d bytes", MaxSharedOwnerBytes)
	case !utf8.ValidString(name):
		return errors.New("esfence: the shared owner is not valid UTF-8")
	case strings.TrimSpace(name) != name:
		return errors.New("esfence: the shared owner starts or ends with white space")
	}
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return errors.New("esfence: the shared owner has a character that is not printable")
		}
	}
	return nil
}

// ownerKindHint tells, in an owned_by_other refusal, when the index's owner is of the other
// kind (shared against exclusive): the commonest cause is one member configured without the
// shared owner, or with it while the index was created without. It reveals no identity.
func ownerKindHint(deployment string, shared bool) string {
	switch isShared := strings.HasPrefix(deployment, SharedOwnerPrefix); {
	case isShared && !shared:
		return " (the index has a shared owner; this claim has none)"
	case !isShared && shared:
		return " (the index belongs to one deployment alone; this claim is for a shared owner)"
	}
	return ""
}

// join is the claim of an existing index under a shared owner, once the marker proved it the
// owner's, this table's, this index's and this encoding's: the index's one write alias is used
// as it is (never rotated), and the state store records its instance and fence. An index
// without a record is adopted -- another member created it -- as is one whose creation this
// member's record shows unfinished; a record of another instance is
// destination_identity_mismatch: the index was deleted and created again since this member
// last claimed it.
func (f *Fence) join(ctx context.Context, d Destination, uuid string, st indexState, m *Marker, rec record,
	rev statestore.Revision) (*Claim, error) {
	if rev != 0 && m.Instance != rec.Instance && rec.Current != "" {
		return nil, f.refuse(d, DestinationIdentityMismatch,
			"the index is not the one the state store recorded (another instance: it was deleted and created again)")
	}
	fence, err := f.currentFence(d, st, m)
	if err != nil {
		return nil, err
	}
	if rev == 0 || rec.Instance != m.Instance || rec.Current != fence || rec.Pending != "" {
		if _, err := f.putRecord(ctx, d, record{Instance: m.Instance, Current: fence}, rev); err != nil {
			return nil, err
		}
	}
	return &Claim{dest: d, instance: m.Instance, fence: fence, clusterUUID: uuid}, nil
}

// refuseShared is ErrSharedOwner for an operation on d's table.
func refuseShared(d Destination, what string) error {
	return fmt.Errorf("%w: %s (table %q)", ErrSharedOwner, what, d.Index)
}
