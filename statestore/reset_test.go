package statestore

import (
	"context"
	"testing"
)

// TestResetCheckpoint: the checkpoint and its time go, the records and the identity stay; a
// pipeline without state is no error.
func TestResetCheckpoint(t *testing.T) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			st := s.open(t)
			reset := st.(interface {
				ResetCheckpoint(context.Context, string) error
			}).ResetCheckpoint
			ctx := context.Background()
			id := st.Identity()
			if err := reset(ctx, "none"); err != nil {
				t.Fatal(err)
			}
			if err := st.SaveCheckpoint(ctx, "p", []byte("cp")); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Put(ctx, "p", "esfence", "idx", []byte("rec"), 0); err != nil {
				t.Fatal(err)
			}
			if err := reset(ctx, "p"); err != nil {
				t.Fatal(err)
			}
			cp, err := st.LoadCheckpoint(ctx, "p")
			saved, err2 := st.CheckpointSaved(ctx, "p")
			if cp != nil || err != nil || !saved.IsZero() || err2 != nil {
				t.Fatalf("after reset: %q %v, saved %v %v", cp, err, saved, err2)
			}
			if r, err := st.Get(ctx, "p", "esfence", "idx"); err != nil || string(r.Value) != "rec" {
				t.Fatalf("record after reset: %+v %v", r, err)
			}
			if st.Identity() != id {
				t.Fatal("identity changed")
			}
			if err := st.SaveCheckpoint(ctx, "p", []byte("cp2")); err != nil {
				t.Fatal(err)
			}
			if cp, _ := st.LoadCheckpoint(ctx, "p"); string(cp) != "cp2" {
				t.Fatalf("checkpoint after a new save: %q", cp)
			}
		})
	}
}
