package store

import (
	"encoding/base64"
	"fmt"
)

// Revision identifies one state of one record. It is opaque: compare revisions only with
// Equal, keep them only to hand back in an IfRevision precondition. A revision is meaningful
// only to the store it came from. It serializes to text (MarshalText, String) and back
// (ParseRevision, UnmarshalText), so it can travel through JSON, a queue or a client, and to
// bytes (Bytes) and back (RevisionFromBytes), for binary protocols.
// The zero Revision means "no revision" (an absent record).
type Revision struct {
	b string
}

func revisionOf(b []byte) Revision { return Revision{b: string(b)} }

func (r Revision) bytes() []byte {
	if r.b == "" {
		return nil
	}
	return []byte(r.b)
}

// IsZero reports whether r is the zero Revision.
func (r Revision) IsZero() bool { return r.b == "" }

// Equal reports whether r and o name the same state.
func (r Revision) Equal(o Revision) bool { return r.b == o.b }

// String returns the serialized form: unpadded URL-safe base64 of the adapter's bytes.
func (r Revision) String() string { return base64.RawURLEncoding.EncodeToString([]byte(r.b)) }

// MarshalText implements encoding.TextMarshaler with the String form.
func (r Revision) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (r *Revision) UnmarshalText(text []byte) error {
	p, err := ParseRevision(string(text))
	if err != nil {
		return err
	}
	*r = p
	return nil
}

// MaxRevisionBytes bounds the bytes of a revision that comes from outside. Every adapter's
// revisions are far shorter (memstore 8 bytes, mongostore 16, searchstore 17), so a longer
// value cannot name a state of any store and is refused before it travels further.
const MaxRevisionBytes = 256

// ParseRevision reads the String form of a revision. Whether the revision means anything to a
// store is checked when it is used: a malformed one fails that operation with ErrInvalid.
// Text that is not unpadded URL-safe base64, or decodes to more than MaxRevisionBytes, fails
// with ErrInvalid. The empty string is the zero Revision.
func ParseRevision(s string) (Revision, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Revision{}, &Error{Kind: KindInvalid, Err: fmt.Errorf("malformed revision: %w", err)}
	}
	return RevisionFromBytes(b)
}

// Bytes returns the revision's bytes, the adapter's own encoding, in a new slice; nil for the
// zero Revision. RevisionFromBytes reverses it.
func (r Revision) Bytes() []byte { return r.bytes() }

// RevisionFromBytes returns the revision whose Bytes are b (copied). Empty b is the zero
// Revision; more than MaxRevisionBytes fails with ErrInvalid. As with ParseRevision, whether
// the revision means anything to a store is checked when it is used.
func RevisionFromBytes(b []byte) (Revision, error) {
	if len(b) > MaxRevisionBytes {
		return Revision{}, &Error{Kind: KindInvalid, Err: fmt.Errorf("malformed revision: %d bytes, more than the %d any store uses", len(b), MaxRevisionBytes)}
	}
	return revisionOf(b), nil
}
