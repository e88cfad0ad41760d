package esfence

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/statestore"
)

// TestRefusals reproduces every refusal class on both engines, one subtest per class named as
// the specification spells it.
func TestRefusals(t *testing.T) {
	ctx := context.Background()
	engines(t, func(t *testing.T, s *server) {
		cases := map[Class]func(t *testing.T) (error, Destination){
			MarkerMissing: func(t *testing.T) (error, Destination) {
				d := s.dest("plain")
				s.CreateIndex(t, d.Index, nil)
				_, err := s.fence(t, s.newStore(t)).Ensure(ctx, d)
				return err, d
			},
			MarkerMalformed: func(t *testing.T) (error, Destination) {
				d := s.dest("malformed")
				s.CreateIndex(t, d.Index, map[string]any{"mappings": map[string]any{"_meta": map[string]any{
					"deltaforge": map[string]any{"format": 1, "owner": "someone"}}}})
				_, err := s.fence(t, s.newStore(t)).Ensure(ctx, d)
				return err, d
			},
			MarkerUnsupportedVersion: func(t *testing.T) (error, Destination) {
				d := s.dest("future")
				s.CreateIndex(t, d.Index, map[string]any{"mappings": map[string]any{"_meta": map[string]any{
					"deltaforge": map[string]any{"format": 2, "anything": "new"}}}})
				_, err := s.fence(t, s.newStore(t)).Ensure(ctx, d)
				return err, d
			},
			OwnedByOther: func(t *testing.T) (error, Destination) {
				d := s.dest("other-owner")
				mine := s.newStore(t)
				ensure(t, s.fence(t, mine), d)
				_, err := s.fence(t, s.newStore(t)).Ensure(ctx, d)
				if ce := wantRefusal(t, err, OwnedByOther, d); ce.OwnerDigest != OwnerDigest(mine.Identity(), d.Pipeline, d.Sink) ||
					strings.Contains(err.Error(), mine.Identity()) {
					t.Fatalf("owner digest %q in %q; want the digest and never the identity", ce.OwnerDigest, err)
				}
				return err, d
			},
			BoundToAnotherRelation: func(t *testing.T) (error, Destination) {
				d := s.dest("relation")
				f := s.fence(t, s.newStore(t))
				ensure(t, f, d)
				d.Table.Table = "order_lines"
				_, err := f.Ensure(ctx, d)
				return err, d
			},
			DestinationIdentityMismatch: func(t *testing.T) (error, Destination) {
				d := s.dest("original")
				f := s.fence(t, s.newStore(t))
				ensure(t, f, d)
				// A reindex (or a snapshot restore with rename) into another name keeps the
				// mapping and with it the marker naming the original index.
				copyName := s.name("reindexed")
				s.CreateIndex(t, copyName, map[string]any{"mappings": s.mappings(t, d.Index)})
				d.Index = copyName
				_, err := f.Ensure(ctx, d)
				return err, d
			},
			EncodingMismatch: func(t *testing.T) (error, Destination) {
				d := s.dest("encoding")
				f := s.fence(t, s.newStore(t))
				ensure(t, f, d)
				d.Encoding = "doc-v2"
				_, err := f.Ensure(ctx, d)
				return err, d
			},
			Fenced: func(t *testing.T) (error, Destination) {
				d := s.dest("fenced")
				st := s.newStore(t)
				f := s.fence(t, st)
				c := ensure(t, f, d)
				ensure(t, s.fence(t, s.copyStore(t, st)), d)
				_, err := f.Reclaim(ctx, c)
				return err, d
			},
			FenceMalformed: func(t *testing.T) (error, Destination) {
				d := s.dest("no-fence")
				f := s.fence(t, s.newStore(t))
				c := ensure(t, f, d)
				s.OK(t, esapi.IndicesDeleteAliasRequest{Index: []string{d.Index}, Name: []string{c.WriteAlias()}})
				_, err := f.Reclaim(ctx, c)
				return err, d
			},
			AliasNotSupported: func(t *testing.T) (error, Destination) {
				d := s.dest("an-alias")
				s.CreateIndex(t, s.name("behind-alias"), map[string]any{"aliases": map[string]any{d.Index: map[string]any{}}})
				_, err := s.fence(t, s.newStore(t)).Ensure(ctx, d)
				return err, d
			},
			DestinationMissing: func(t *testing.T) (error, Destination) {
				d := s.dest("deleted")
				f := s.fence(t, s.newStore(t))
				c := ensure(t, f, d)
				s.OK(t, esapi.IndicesDeleteRequest{Index: []string{d.Index}})
				if _, err := f.Reclaim(ctx, c); ClassOf(err) != DestinationMissing {
					t.Fatalf("Reclaim of a deleted index: %v", err)
				}
				_, err := f.Ensure(ctx, d)
				if s.IndexExists(t, d.Index) {
					t.Fatalf("the deleted index was recreated")
				}
				return err, d
			},
			UnrecordedDestination: func(t *testing.T) (error, Destination) {
				d := s.dest("unrecorded")
				f := s.fence(t, s.newStore(t))
				ensure(t, f, d)
				if err := f.ForgetPipeline(ctx, d.Pipeline); err != nil {
					t.Fatal(err)
				}
				_, err := f.Ensure(ctx, d)
				return err, d
			},
			FencingUnenforced: func(t *testing.T) (error, Destination) {
				d := s.dest("unenforced")
				s.setAutoCreate(t, "+*")
				_, err := s.fence(t, s.newStore(t)).Ensure(ctx, d)
				if s.IndexExists(t, d.Index) {
					t.Fatalf("an index was created although fencing is not enforced")
				}
				return err, d
			},
		}
		for _, class := range Classes {
			t.Run(string(class), func(t *testing.T) {
				run, found := cases[class]
				if !found {
					t.Fatalf("no test for class %s", class)
				}
				err, d := run(t)
				wantRefusal(t, err, class, d)
			})
		}
	})
}

// TestCloneAndRestore plays the scenarios of "Clone and restore" and the other situations the
// issue lists, on both engines.
func TestCloneAndRestore(t *testing.T) {
	ctx := context.Background()
	enginesAndStores(t, func(t *testing.T, s *server) {
		t.Run("created_and_writable", func(t *testing.T) {
			d := s.dest("fresh")
			c := ensure(t, s.fence(t, s.newStore(t)), d)
			if got := s.aliases(t, d.Index); !slices.Equal(got, []string{c.WriteAlias()}) {
				t.Fatalf("aliases %v, want [%s]", got, c.WriteAlias())
			}
			var m Marker
			if err := json.Unmarshal(s.meta(t, d.Index)[MarkerKey], &m); err != nil {
				t.Fatal(err)
			}
			if m.Format != MarkerFormat || m.Index.Name != d.Index || m.Index.ClusterUUID != c.ClusterUUID() ||
				m.Instance != c.Instance() || m.Source != sourceOf(d.Table) || m.Encoding != d.Encoding {
				t.Fatalf("marker %+v", m)
			}
			s.wantWrites(t, c.WriteAlias(), d.Index)
		})

		t.Run("two_separate_state_stores", func(t *testing.T) {
			d := s.dest("separate")
			a, b := s.fence(t, s.newStore(t)), s.fence(t, s.newStore(t))
			ca := ensure(t, a, d)
			_, err := b.Ensure(ctx, d)
			wantRefusal(t, err, OwnedByOther, d)
			s.wantWrites(t, ca.WriteAlias(), d.Index) // the refused deployment changed nothing
			ca = reclaim(t, a, ca)
			s.wantWrites(t, ca.WriteAlias(), d.Index)
		})

		t.Run("copied_state_store_fences_the_other", func(t *testing.T) {
			d := s.dest("copied")
			orig := s.newStore(t)
			a := s.fence(t, orig)
			ca := ensure(t, a, d)
			s.wantWrites(t, ca.WriteAlias(), d.Index)
			b := s.fence(t, s.copyStore(t, orig))
			cb := ensure(t, b, d) // the copy's first claim
			s.wantFencedWrites(t, ca.WriteAlias())
			s.wantWrites(t, cb.WriteAlias(), d.Index)
			_, err := a.Reclaim(ctx, ca)
			wantRefusal(t, err, Fenced, d)
			_, err = a.Ensure(ctx, d)
			wantRefusal(t, err, Fenced, d)
		})

		t.Run("restored_from_older_backup", func(t *testing.T) {
			d := s.dest("older-backup")
			live := s.newStore(t)
			f := s.fence(t, live)
			c := ensure(t, f, d)
			backup := s.copyStore(t, live)
			c = reclaim(t, f, c)
			_, err := s.fence(t, backup).Ensure(ctx, d)
			wantRefusal(t, err, Fenced, d)
			s.wantWrites(t, c.WriteAlias(), d.Index) // the refusal took nothing from the live one
		})

		t.Run("restored_from_backup_older_than_the_index", func(t *testing.T) {
			d := s.dest("before-index")
			live := s.newStore(t)
			backup := s.copyStore(t, live)
			ensure(t, s.fence(t, live), d)
			_, err := s.fence(t, backup).Ensure(ctx, d)
			wantRefusal(t, err, UnrecordedDestination, d)
		})

		t.Run("restored_from_latest_state", func(t *testing.T) {
			d := s.dest("latest")
			live := s.newStore(t)
			c := ensure(t, s.fence(t, live), d)
			restored := s.fence(t, s.copyStore(t, live))
			c2 := ensure(t, restored, d)
			s.wantFencedWrites(t, c.WriteAlias())
			s.wantWrites(t, c2.WriteAlias(), d.Index)
			reclaim(t, restored, c2)
		})

		t.Run("deleted_index", func(t *testing.T) {
			d := s.dest("gone")
			st := s.newStore(t)
			f := s.fence(t, st)
			c := ensure(t, f, d)
			if err := st.SaveCheckpoint(ctx, d.Pipeline, []byte("lsn:1")); err != nil {
				t.Fatal(err)
			}
			s.OK(t, esapi.IndicesDeleteRequest{Index: []string{d.Index}})
			s.wantFencedWrites(t, c.WriteAlias()) // the stale alias auto-creates nothing either
			for i := 0; i < 2; i++ {
				_, err := f.Ensure(ctx, d)
				wantRefusal(t, err, DestinationMissing, d)
			}
			if s.IndexExists(t, d.Index) {
				t.Fatal("the deleted index was recreated")
			}
			// Only deleting the pipeline forgets the index, and it resets the checkpoint.
			if err := f.ForgetPipeline(ctx, d.Pipeline); err != nil {
				t.Fatal(err)
			}
			if cp, err := st.LoadCheckpoint(ctx, d.Pipeline); err != nil || cp != nil {
				t.Fatalf("checkpoint after deleting the pipeline: %q, %v", cp, err)
			}
			c = ensure(t, f, d)
			s.wantWrites(t, c.WriteAlias(), d.Index)
		})

		t.Run("index_created_by_someone_else", func(t *testing.T) {
			d := s.dest("foreign")
			s.CreateIndex(t, d.Index, map[string]any{"mappings": map[string]any{"_meta": map[string]any{"owner": "ops"}}})
			_, err := s.fence(t, s.newStore(t)).Ensure(ctx, d)
			wantRefusal(t, err, MarkerMissing, d)
			if got := s.aliases(t, d.Index); len(got) != 0 {
				t.Fatalf("a refused index got aliases %v", got)
			}
		})

		t.Run("alias_name", func(t *testing.T) {
			d := s.dest("alias-name")
			f := s.fence(t, s.newStore(t))
			// An alias in front of an index of ours is refused as well: never adopted.
			real := s.dest("real")
			ensure(t, f, real)
			s.OK(t, esapi.IndicesPutAliasRequest{Index: []string{real.Index}, Name: d.Index})
			_, err := f.Ensure(ctx, d)
			wantRefusal(t, err, AliasNotSupported, d)
		})

		t.Run("data_stream_name", func(t *testing.T) {
			d := s.dest("ds")
			d.Index = s.dataStream(t)
			_, err := s.fence(t, s.newStore(t)).Ensure(ctx, d)
			wantRefusal(t, err, AliasNotSupported, d)
		})

		t.Run("two_internal_aliases", func(t *testing.T) {
			d := s.dest("two-fences")
			f := s.fence(t, s.newStore(t))
			c := ensure(t, f, d)
			extra := writeAlias(c.Instance(), "99-0000000000000000")
			s.OK(t, esapi.IndicesPutAliasRequest{Index: []string{d.Index}, Name: extra})
			_, err := f.Reclaim(ctx, c)
			wantRefusal(t, err, FenceMalformed, d)
		})

		t.Run("claims_leave_meta_and_user_aliases", func(t *testing.T) {
			d := s.dest("keep")
			f := s.fence(t, s.newStore(t))
			c := ensure(t, f, d)
			user := s.name("keep-read")
			s.OK(t, esapi.IndicesPutAliasRequest{Index: []string{d.Index}, Name: user})
			before := s.meta(t, d.Index)
			if string(before["team"]) != `"search"` {
				t.Fatalf("the mapping's own _meta keys were not kept: %v", before)
			}
			for i := 0; i < 3; i++ {
				c = reclaim(t, f, c)
			}
			after := s.meta(t, d.Index)
			if len(after) != len(before) || string(after[MarkerKey]) != string(before[MarkerKey]) || string(after["team"]) != `"search"` {
				t.Fatalf("_meta changed by claims: %v -> %v", before, after)
			}
			got := s.aliases(t, d.Index)
			slices.Sort(got)
			want := []string{c.WriteAlias(), user}
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("aliases %v, want %v", got, want)
			}
		})

		t.Run("setting_not_forbidding_df_w", func(t *testing.T) {
			d := s.dest("weak")
			f := s.fence(t, s.newStore(t))
			c := ensure(t, f, d)
			for _, v := range []string{"true", "+*", "-df-w-a*,+*", "+df-w-x,-df-w-*", "-df-w-*x,+*"} {
				t.Run(v, func(t *testing.T) {
					s.setAutoCreate(t, v)
					_, err := f.Reclaim(ctx, c)
					wantRefusal(t, err, FencingUnenforced, d)
				})
			}
			// A transient value wins over the persistent one, in both directions.
			t.Run("transient_overrides", func(t *testing.T) {
				s.putAutoCreate(t, "transient", "+*")
				t.Cleanup(func() { s.putAutoCreate(t, "transient", nil) })
				_, err := f.Reclaim(ctx, c)
				wantRefusal(t, err, FencingUnenforced, d)
				s.putAutoCreate(t, "transient", "false")
				s.setAutoCreate(t, "true")
				c = reclaim(t, f, c)
			})
			// Rules that do forbid every df-w-* name are accepted.
			for _, v := range []string{"false", "-df-w-*", "-d*,+*", "-*", "-df-w-a*,-df-w-*,+*", "+logs-*,-df-*"} {
				t.Run(v, func(t *testing.T) {
					s.setAutoCreate(t, v)
					c = reclaim(t, f, c)
				})
			}
		})

		t.Run("index_under_another_name", func(t *testing.T) {
			d := s.dest("source-name")
			f := s.fence(t, s.newStore(t))
			c := ensure(t, f, d)
			s.write(t, c.WriteAlias(), "index", "d1")
			renamed := d
			renamed.Index = s.name("restored-as")
			// A reindex into an index made with the source's mapping, or a snapshot restore
			// with rename, carries the marker, which names the original index. Neither test
			// server has _reindex or snapshot repositories (not in the integ-test zips), so
			// the copy is made by hand: the mapping, then the document.
			s.CreateIndex(t, renamed.Index, map[string]any{"mappings": s.mappings(t, d.Index)})
			s.OK(t, esapi.IndexRequest{Index: renamed.Index, DocumentID: "d1", Body: estest.JSONBody(t, map[string]any{"k": "v"})})
			_, err := f.Ensure(ctx, renamed)
			wantRefusal(t, err, DestinationIdentityMismatch, renamed)
		})

		t.Run("index_from_another_cluster", func(t *testing.T) {
			d := s.dest("other-cluster")
			st := s.newStore(t)
			f := s.fence(t, st)
			c := ensure(t, f, d)
			// Rebuild the index as a snapshot restored into another cluster would look here:
			// same name, marker and alias, but the marker names the cluster it came from.
			var m Marker
			if err := json.Unmarshal(s.meta(t, d.Index)[MarkerKey], &m); err != nil {
				t.Fatal(err)
			}
			m.Index.ClusterUUID = "another-cluster-uuid"
			s.OK(t, esapi.IndicesDeleteRequest{Index: []string{d.Index}})
			s.CreateIndex(t, d.Index, map[string]any{
				"mappings": map[string]any{"_meta": map[string]any{MarkerKey: m}},
				"aliases":  map[string]any{c.WriteAlias(): map[string]any{}},
			})
			_, err := f.Reclaim(ctx, c)
			wantRefusal(t, err, DestinationIdentityMismatch, d)
		})

		t.Run("crash_between_pending_fence_and_rotation", func(t *testing.T) {
			d := s.dest("crash-pending")
			st := s.newStore(t)
			f := s.fence(t, st)
			c := ensure(t, f, d)
			f.afterPending = func(string) error { return errCrash }
			if _, err := f.Reclaim(ctx, c); err != errCrash {
				t.Fatalf("crashing claim: %v", err)
			}
			s.wantWrites(t, c.WriteAlias(), d.Index) // the crash rotated nothing
			restarted := s.fence(t, st)
			c2 := ensure(t, restarted, d)
			s.wantFencedWrites(t, c.WriteAlias())
			s.wantWrites(t, c2.WriteAlias(), d.Index)
		})

		t.Run("crash_between_rotation_and_record", func(t *testing.T) {
			d := s.dest("crash-rotated")
			st := s.newStore(t)
			f := s.fence(t, st)
			c := ensure(t, f, d)
			f.afterRotate = func(string) error { return errCrash }
			if _, err := f.Reclaim(ctx, c); err != errCrash {
				t.Fatalf("crashing claim: %v", err)
			}
			s.wantFencedWrites(t, c.WriteAlias()) // the rotation happened
			c2 := ensure(t, s.fence(t, st), d)
			s.wantWrites(t, c2.WriteAlias(), d.Index)
			if got := s.aliases(t, d.Index); len(got) != 1 {
				t.Fatalf("aliases after recovery: %v", got)
			}
		})

		t.Run("crash_during_creation", func(t *testing.T) {
			for _, hook := range []string{"before_create", "after_create"} {
				t.Run(hook, func(t *testing.T) {
					d := s.dest("crash-" + hook)
					st := s.newStore(t)
					f := s.fence(t, st)
					if hook == "before_create" {
						f.afterPending = func(string) error { return errCrash }
					} else {
						f.afterRotate = func(string) error { return errCrash }
					}
					if _, err := f.Ensure(ctx, d); err != errCrash {
						t.Fatalf("crashing creation: %v", err)
					}
					c := ensure(t, s.fence(t, st), d)
					s.wantWrites(t, c.WriteAlias(), d.Index)
				})
			}
		})

		t.Run("copies_racing_to_create", func(t *testing.T) {
			d := s.dest("race")
			orig := s.newStore(t)
			a, b := s.fence(t, orig), s.fence(t, s.copyStore(t, orig))
			// a records its pending creation, then b creates the index first.
			var cb *Claim
			a.afterPending = func(string) error {
				cb = ensure(t, b, d)
				return nil
			}
			_, err := a.Ensure(ctx, d)
			wantRefusal(t, err, Fenced, d)
			s.wantWrites(t, cb.WriteAlias(), d.Index)
		})
	})
}

// TestDropIndices: the pipeline's own indices are deleted with their write aliases; one that
// another deployment owns by now is left in place and refused; the records stay for
// ForgetPipeline, and after it the pipeline creates its indices afresh.
func TestDropIndices(t *testing.T) {
	ctx := context.Background()
	engines(t, func(t *testing.T, s *server) {
		st := statestore.NewMemory()
		f := s.fence(t, st)
		a, b := s.dest("drop-a"), s.dest("drop-b")
		ca := ensure(t, f, a)
		ensure(t, f, b)
		// b's record now names an index of another deployment: delete b and let another
		// state store create it.
		s.OK(t, esapi.IndicesDeleteRequest{Index: []string{b.Index}})
		ensure(t, s.fence(t, statestore.NewMemory()), b)
		// A record of an index deleted meanwhile is skipped.
		gone := s.dest("drop-gone")
		ensure(t, f, gone)
		s.OK(t, esapi.IndicesDeleteRequest{Index: []string{gone.Index}})

		dropped, err := f.DropIndices(ctx, a.Pipeline)
		if !slices.Equal(dropped, []string{a.Index}) {
			t.Fatalf("dropped %v, want [%s]", dropped, a.Index)
		}
		wantRefusal(t, err, OwnedByOther, Destination{Index: b.Index})
		if s.IndexExists(t, a.Index) || s.IndexExists(t, ca.WriteAlias()) {
			t.Fatal("the pipeline's index or its write alias is still there")
		}
		if !s.IndexExists(t, b.Index) {
			t.Fatal("the other deployment's index was deleted")
		}
		// Until the pipeline is forgotten, its deleted index stays deleted; after, it starts over.
		_, err = f.Ensure(ctx, a)
		wantRefusal(t, err, DestinationMissing, a)
		if err := f.ForgetPipeline(ctx, a.Pipeline); err != nil {
			t.Fatal(err)
		}
		s.wantWrites(t, ensure(t, f, a).WriteAlias(), a.Index)
	})
}
