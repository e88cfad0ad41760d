package pgcdc_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// TestOwnerMarks: with Options.Owner, Open claims a publication without a comment (created
// by hand, or by a version without marks), so a Source of another owner is refused it -- and
// the slot it names, with a publication of its own -- before creating anything, with
// ErrOwnedByOther and a fix that never shares; Drop of the other owner drops neither. A
// publication carrying a comment of the user's is left alone (and not checked), a Source
// without Owner checks nothing.
func TestOwnerMarks(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sfx := suffix(t)
	tb := "n32own_" + sfx
	if err := execSQL(ctx, dsn, false, "CREATE TABLE "+quote(tb)+" (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = execSQL(context.Background(), dsn, false, "DROP TABLE IF EXISTS "+quote(tb)) })
	newSrc := func(owner, slot, pub string) *pgcdc.Source {
		t.Helper()
		src, err := pgcdc.New(dsn, &pgcdc.Options{Name: "n32own", Slot: slot, Publication: pub, Owner: owner,
			Snapshot: cdc.SnapshotNever, Tables: []pgcdc.Table{{Name: tb}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			plain, _ := pgcdc.New(dsn, &pgcdc.Options{Slot: slot, Publication: pub})
			if err := plain.Drop(ctx); err != nil {
				t.Errorf("drop %s: %v", slot, err)
			}
		})
		return src
	}
	slotA, pubA := "n32own_a_"+sfx, "n32own_a_"+sfx
	// A publication made by hand, without a comment: the first owner to open it claims it.
	if err := execSQL(ctx, dsn, false, "CREATE PUBLICATION "+quote(pubA)+" FOR TABLE "+quote(tb)); err != nil {
		t.Fatal(err)
	}
	a := newSrc("owner a", slotA, pubA)
	st, err := a.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if !exists(t, dsn, "SELECT 1 FROM pg_publication WHERE pubname = $1 AND obj_description(oid, 'pg_publication') LIKE 'tributary-owner %'", pubA) {
		t.Fatal("the publication was not marked")
	}

	slotB, pubB := "n32own_b_"+sfx, "n32own_b_"+sfx
	for _, tc := range []struct {
		what      string
		slot, pub string
		want      string
	}{
		{"A's publication", slotB, pubA, "publication " + pubA + " belongs to owner a"},
		{"A's slot", slotA, pubB, "slot " + slotA + " is read by owner a, with publication " + pubA},
	} {
		b := newSrc("owner b", tc.slot, tc.pub)
		st, err := b.Open(ctx, nil)
		if err == nil {
			st.Close()
			t.Fatalf("another owner opened %s", tc.what)
		}
		if !errors.Is(err, pgcdc.ErrOwnedByOther) || !cdc.IsPermanent(err) || !strings.Contains(err.Error(), tc.want) ||
			!strings.Contains(err.Error(), "a slot and a publication of its own") || strings.Contains(err.Error(), "ALTER PUBLICATION") {
			t.Fatalf("another owner opening %s: %v", tc.what, err)
		}
		if err := b.Drop(ctx); !errors.Is(err, pgcdc.ErrOwnedByOther) {
			t.Fatalf("another owner dropping %s: %v", tc.what, err)
		}
	}
	if exists(t, dsn, "SELECT 1 FROM pg_replication_slots WHERE slot_name = $1", slotB) ||
		exists(t, dsn, "SELECT 1 FROM pg_publication WHERE pubname = $1", pubB) {
		t.Fatal("a refused Open created a slot or a publication")
	}
	if !exists(t, dsn, "SELECT 1 FROM pg_replication_slots WHERE slot_name = $1", slotA) {
		t.Fatal("A's slot is gone")
	}
	// A opens again: its own marks.
	if st, err = a.Open(ctx, nil); err != nil {
		t.Fatalf("the owner reopening: %v", err)
	}
	st.Close()

	// A comment of the user's is left alone and marks nothing.
	slotC, pubC := "n32own_c_"+sfx, "n32own_c_"+sfx
	if err := execSQL(ctx, dsn, false, "CREATE PUBLICATION "+quote(pubC)+" FOR TABLE "+quote(tb),
		"COMMENT ON PUBLICATION "+quote(pubC)+" IS 'the reporting team''s'"); err != nil {
		t.Fatal(err)
	}
	c := newSrc("owner c", slotC, pubC)
	if st, err = c.Open(ctx, nil); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if !exists(t, dsn, "SELECT 1 FROM pg_publication WHERE pubname = $1 AND obj_description(oid, 'pg_publication') = 'the reporting team''s'", pubC) {
		t.Fatal("the user's comment was replaced")
	}
	// Without Owner nothing is checked.
	if err := newSrc("", slotC, pubA).Drop(ctx); err != nil {
		t.Fatalf("Drop without Owner: %v", err)
	}
}
