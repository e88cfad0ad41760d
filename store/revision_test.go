package store_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/memstore"
)

// A revision a write returned survives the trip through bytes, as a binary protocol carries
// it, and still works as a precondition there: the current one applies, a stale one
// conflicts.
func TestRevisionBytesRoundTrip(t *testing.T) {
	s, err := store.New(map[string]store.Adapter{"m": memstore.New()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	ctx := context.Background()
	a := addr("m", "k")
	put := func(pre store.Precondition) store.Result {
		t.Helper()
		res, err := s.Do(ctx, []store.Op{store.Put(a, store.Document{JSON: []byte(`{"a":1}`)}).WithPrecondition(pre)}, store.WaitApplied)
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	first := put(store.Precondition{})
	wire := first.Revision.Bytes()
	if len(wire) == 0 {
		t.Fatal("a written record's revision has no bytes")
	}
	scratch := first.Revision.Bytes()
	scratch[0] ^= 0xff
	if !bytes.Equal(first.Revision.Bytes(), wire) {
		t.Fatal("changing the slice Bytes returned changed the revision")
	}
	back, err := store.RevisionFromBytes(wire)
	if err != nil || !back.Equal(first.Revision) || back.String() != first.Revision.String() {
		t.Fatalf("RevisionFromBytes(Bytes()) = %v, %v; want %v", back, err, first.Revision)
	}
	wire[0] ^= 0xff
	if !back.Equal(first.Revision) {
		t.Fatal("RevisionFromBytes kept the caller's slice: changing it changed the revision")
	}
	second := put(store.IfRevision(back))
	if second.Err != nil {
		t.Fatalf("put with the round-tripped current revision: %v", second.Err)
	}
	if r := put(store.IfRevision(back)); !errors.Is(r.Err, store.ErrConflict) {
		t.Fatalf("put with the round-tripped stale revision: %v, want ErrConflict", r.Err)
	}
}

func TestRevisionFromBytesValidates(t *testing.T) {
	if r, err := store.RevisionFromBytes(nil); err != nil || !r.IsZero() || r.Bytes() != nil {
		t.Fatalf("RevisionFromBytes(nil) = %v, %v; want the zero revision", r, err)
	}
	if b := (store.Revision{}).Bytes(); b != nil {
		t.Fatalf("the zero revision's Bytes = %v, want nil", b)
	}
	long := bytes.Repeat([]byte{1}, store.MaxRevisionBytes+1)
	if _, err := store.RevisionFromBytes(long); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("RevisionFromBytes of %d bytes: %v, want ErrInvalid", len(long), err)
	}
	ok, err := store.RevisionFromBytes(long[:store.MaxRevisionBytes])
	if err != nil || len(ok.Bytes()) != store.MaxRevisionBytes {
		t.Fatalf("RevisionFromBytes of MaxRevisionBytes: %v", err)
	}
	// The text form applies the same bound.
	if _, err := store.ParseRevision(strings.Repeat("A", 4*(store.MaxRevisionBytes+3)/3)); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("ParseRevision of a too long revision: %v, want ErrInvalid", err)
	}
}
