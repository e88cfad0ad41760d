// Package statestoretest is the behaviour suite every [statestore.Store] implementation must
// pass: the file and memory stores run it in package statestore's tests, the SQL stores
// (statestore/sqlstate) against real servers. Each behaviour gets an empty store.
package statestoretest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/statestore"
)

// Behaviours are the shared behaviours every Store must show, by name.
var Behaviours = []struct {
	Name string
	Run  func(t *testing.T, s statestore.Store)
}{
	{"Identity", testIdentity},
	{"Checkpoints", testCheckpoints},
	{"CompareAndSet", testCompareAndSet},
	{"List", testList},
	{"DeletePipeline", testDeletePipeline},
	{"Invalid", testInvalid},
	{"Concurrent", testConcurrent},
	{"Closed", testClosed},
}

// Run runs every behaviour as a subtest, each against a new store from open (which registers
// its own cleanup): t.Run(<Behaviour>). The stores open returns must be empty.
func Run(t *testing.T, open func(t *testing.T) statestore.Store) {
	for _, b := range Behaviours {
		t.Run(b.Name, func(t *testing.T) { b.Run(t, open(t)) })
	}
}

func testIdentity(t *testing.T, s statestore.Store) {
	id := s.Identity()
	if len(id) != 36 || id[14] != '4' {
		t.Fatalf("identity %q is not a version 4 UUID", id)
	}
	if s.Identity() != id {
		t.Fatal("identity changed between calls")
	}
}

func testCheckpoints(t *testing.T, s statestore.Store) {
	ctx := context.Background()
	cp, err := s.LoadCheckpoint(ctx, "p1")
	if err != nil || cp != nil {
		t.Fatalf("LoadCheckpoint of a new pipeline = %q, %v; want nil, nil", cp, err)
	}
	for _, c := range []string{"a", "bb", "c"} {
		if err := s.SaveCheckpoint(ctx, "p1", cdc.Checkpoint(c)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SaveCheckpoint(ctx, "p2", cdc.Checkpoint("other")); err != nil {
		t.Fatal(err)
	}
	buf := cdc.Checkpoint("mutable")
	if err := s.SaveCheckpoint(ctx, "p3", buf); err != nil {
		t.Fatal(err)
	}
	buf[0] = 'X' // the store must have kept its own copy
	for p, want := range map[string]string{"p1": "c", "p2": "other", "p3": "mutable"} {
		cp, err := s.LoadCheckpoint(ctx, p)
		if err != nil || string(cp) != want {
			t.Fatalf("LoadCheckpoint(%s) = %q, %v; want %q", p, cp, err, want)
		}
		if at, err := s.CheckpointSaved(ctx, p); err != nil || at.IsZero() {
			t.Fatalf("CheckpointSaved(%s) = %v, %v; want the time of the save", p, at, err)
		}
	}
	if at, err := s.CheckpointSaved(ctx, "none"); err != nil || !at.IsZero() {
		t.Fatalf("CheckpointSaved of a pipeline without a checkpoint = %v, %v; want zero", at, err)
	}
	if err := s.DeletePipeline(ctx, "p3"); err != nil {
		t.Fatal(err)
	}
	if at, err := s.CheckpointSaved(ctx, "p3"); err != nil || !at.IsZero() {
		t.Fatalf("CheckpointSaved after DeletePipeline = %v, %v; want zero", at, err)
	}
}

func testCompareAndSet(t *testing.T, s statestore.Store) {
	ctx := context.Background()
	r, err := s.Get(ctx, "p", "esfence", "idx")
	if err != nil || r.Revision != 0 || r.Value != nil || r.Key != "idx" {
		t.Fatalf("Get of a missing record = %+v, %v", r, err)
	}
	rev1, err := s.Put(ctx, "p", "esfence", "idx", []byte("v1"), 0)
	if err != nil || rev1 == 0 {
		t.Fatalf("create: %d, %v", rev1, err)
	}
	if _, err := s.Put(ctx, "p", "esfence", "idx", []byte("again"), 0); !errors.Is(err, statestore.ErrConflict) {
		t.Fatalf("second create: %v, want statestore.ErrConflict", err)
	}
	rev2, err := s.Put(ctx, "p", "esfence", "idx", []byte("v2"), rev1)
	if err != nil || rev2 <= rev1 {
		t.Fatalf("update: %d, %v", rev2, err)
	}
	if _, err := s.Put(ctx, "p", "esfence", "idx", []byte("stale"), rev1); !errors.Is(err, statestore.ErrConflict) {
		t.Fatalf("stale update: %v, want statestore.ErrConflict", err)
	}
	if err := s.Delete(ctx, "p", "esfence", "idx", rev1); !errors.Is(err, statestore.ErrConflict) {
		t.Fatalf("stale delete: %v, want statestore.ErrConflict", err)
	}
	r, err = s.Get(ctx, "p", "esfence", "idx")
	if err != nil || r.Revision != rev2 || string(r.Value) != "v2" {
		t.Fatalf("Get = %+v, %v; want v2 at %d", r, err, rev2)
	}
	if err := s.Delete(ctx, "p", "esfence", "idx", rev2); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "p", "esfence", "idx", rev2); !errors.Is(err, statestore.ErrConflict) {
		t.Fatalf("delete of a deleted record: %v, want statestore.ErrConflict", err)
	}
	// Created again, the record gets a revision never used before: no ABA.
	rev3, err := s.Put(ctx, "p", "esfence", "idx", []byte("v3"), 0)
	if err != nil || rev3 <= rev2 {
		t.Fatalf("re-create: %d, %v; want a revision above %d", rev3, err, rev2)
	}
	// The same key in another namespace or pipeline is another record.
	if _, err := s.Put(ctx, "p", "other", "idx", []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "q", "esfence", "idx", []byte("y"), 0); err != nil {
		t.Fatal(err)
	}
	// An empty value is a value, distinct from absence.
	rev, err := s.Put(ctx, "p", "esfence", "empty", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := s.Get(ctx, "p", "esfence", "empty"); err != nil || r.Revision != rev || len(r.Value) != 0 {
		t.Fatalf("Get(empty) = %+v, %v", r, err)
	}
}

func testList(t *testing.T, s statestore.Store) {
	ctx := context.Background()
	if rs, err := s.List(ctx, "p", "ns"); err != nil || len(rs) != 0 {
		t.Fatalf("List of nothing = %v, %v", rs, err)
	}
	for _, k := range []string{"c", "a", "b"} {
		if _, err := s.Put(ctx, "p", "ns", k, []byte("v"+k), 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Put(ctx, "p", "ns2", "z", nil, 0); err != nil {
		t.Fatal(err)
	}
	rs, err := s.List(ctx, "p", "ns")
	if err != nil || len(rs) != 3 {
		t.Fatalf("List = %v, %v", rs, err)
	}
	for i, k := range []string{"a", "b", "c"} {
		if rs[i].Key != k || string(rs[i].Value) != "v"+k || rs[i].Revision == 0 {
			t.Fatalf("List[%d] = %+v, want key %s", i, rs[i], k)
		}
	}
}

func testDeletePipeline(t *testing.T, s statestore.Store) {
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.SaveCheckpoint(ctx, "gone", cdc.Checkpoint("cp")))
	must(s.SaveCheckpoint(ctx, "kept", cdc.Checkpoint("cp2")))
	for _, p := range []string{"gone", "kept"} {
		for _, ns := range []string{"esfence", "x"} {
			if _, err := s.Put(ctx, p, ns, "k", []byte("v"), 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	must(s.DeletePipeline(ctx, "gone"))
	must(s.DeletePipeline(ctx, "never-existed"))
	if cp, err := s.LoadCheckpoint(ctx, "gone"); err != nil || cp != nil {
		t.Fatalf("checkpoint after DeletePipeline = %q, %v", cp, err)
	}
	for _, ns := range []string{"esfence", "x"} {
		if r, err := s.Get(ctx, "gone", ns, "k"); err != nil || r.Revision != 0 {
			t.Fatalf("record after DeletePipeline = %+v, %v", r, err)
		}
		if r, err := s.Get(ctx, "kept", ns, "k"); err != nil || r.Revision == 0 {
			t.Fatalf("other pipeline's record = %+v, %v", r, err)
		}
	}
	if cp, err := s.LoadCheckpoint(ctx, "kept"); err != nil || string(cp) != "cp2" {
		t.Fatalf("other pipeline's checkpoint = %q, %v", cp, err)
	}
}

func testInvalid(t *testing.T, s statestore.Store) {
	ctx := context.Background()
	long := string(bytes.Repeat([]byte("k"), statestore.MaxNameBytes+1))
	checks := map[string]error{
		"empty checkpoint": s.SaveCheckpoint(ctx, "p", nil),
		"empty pipeline":   s.SaveCheckpoint(ctx, "", cdc.Checkpoint("x")),
		"delete at 0":      s.Delete(ctx, "p", "ns", "k", 0),
		"empty namespace":  func() error { _, err := s.Put(ctx, "p", "", "k", nil, 0); return err }(),
		"long key":         func() error { _, err := s.Get(ctx, "p", "ns", long); return err }(),
	}
	for what, err := range checks {
		if !errors.Is(err, statestore.ErrInvalid) {
			t.Errorf("%s: %v, want statestore.ErrInvalid", what, err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.LoadCheckpoint(cctx, "p"); err != context.Canceled {
		t.Errorf("cancelled context: %v, want context.Canceled unwrapped", err)
	}
}

// testConcurrent runs CAS increments from many goroutines: none may be lost, and checkpoint
// writers on separate pipelines do not disturb each other.
func testConcurrent(t *testing.T, s statestore.Store) {
	ctx := context.Background()
	const workers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				if err := s.SaveCheckpoint(ctx, fmt.Sprintf("p%d", w), cdc.Checkpoint(fmt.Sprint(i))); err != nil {
					errs <- err
					return
				}
				for {
					r, err := s.Get(ctx, "shared", "counter", "n")
					if err != nil {
						errs <- err
						return
					}
					n := 0
					if r.Revision != 0 {
						fmt.Sscan(string(r.Value), &n)
					}
					_, err = s.Put(ctx, "shared", "counter", "n", []byte(fmt.Sprint(n+1)), r.Revision)
					if err == nil {
						break
					}
					if !errors.Is(err, statestore.ErrConflict) {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	r, err := s.Get(ctx, "shared", "counter", "n")
	if err != nil || string(r.Value) != fmt.Sprint(workers*each) {
		t.Fatalf("counter = %q, %v; want %d", r.Value, err, workers*each)
	}
	for w := range workers {
		if cp, err := s.LoadCheckpoint(ctx, fmt.Sprintf("p%d", w)); err != nil || string(cp) != fmt.Sprint(each-1) {
			t.Fatalf("checkpoint of p%d = %q, %v", w, cp, err)
		}
	}
}

func testClosed(t *testing.T, s statestore.Store) {
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LoadCheckpoint(context.Background(), "p"); !errors.Is(err, statestore.ErrClosed) {
		t.Fatalf("after Close: %v, want statestore.ErrClosed", err)
	}
	if _, err := s.Put(context.Background(), "p", "n", "k", nil, 0); !errors.Is(err, statestore.ErrClosed) {
		t.Fatalf("after Close: %v, want statestore.ErrClosed", err)
	}
}
