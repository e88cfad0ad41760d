package statestore

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tributary-dev/tributary/cdc"
)

func openFile(t *testing.T, path string) *DB {
	t.Helper()
	s, err := Open(path, &Options{LockTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestReopenKeepsIdentityAndState(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s := openFile(t, path)
	id := s.Identity()
	if err := s.SaveCheckpoint(ctx, "pipe", cdc.Checkpoint("cp-7")); err != nil {
		t.Fatal(err)
	}
	rev, err := s.Put(ctx, "pipe", "esfence", "idx", []byte("fence-3"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openFile(t, path)
	defer s.Close()
	if s.Identity() != id {
		t.Fatalf("identity after reopen %q, want %q", s.Identity(), id)
	}
	if cp, err := s.LoadCheckpoint(ctx, "pipe"); err != nil || string(cp) != "cp-7" {
		t.Fatalf("checkpoint after reopen %q, %v", cp, err)
	}
	if r, err := s.Get(ctx, "pipe", "esfence", "idx"); err != nil || r.Revision != rev || string(r.Value) != "fence-3" {
		t.Fatalf("record after reopen %+v, %v", r, err)
	}
	// Revisions keep increasing across reopens.
	if rev2, err := s.Put(ctx, "pipe", "esfence", "other", nil, 0); err != nil || rev2 <= rev {
		t.Fatalf("revision after reopen %d, %v; want above %d", rev2, err, rev)
	}
}

func TestSeparateFilesHaveSeparateIdentities(t *testing.T) {
	dir := t.TempDir()
	a := openFile(t, filepath.Join(dir, "a.db"))
	defer a.Close()
	b := openFile(t, filepath.Join(dir, "b.db"))
	defer b.Close()
	if a.Identity() == b.Identity() {
		t.Fatalf("two new stores share identity %q", a.Identity())
	}
	if m1, m2 := NewMemory(), NewMemory(); m1.Identity() == m2.Identity() {
		t.Fatal("two memory stores share an identity")
	}
}

// TestBackupRestore: a backup restored later is the old state under the same identity, and
// the live store is unaffected by it.
func TestBackupRestore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openFile(t, filepath.Join(dir, "live.db"))
	defer s.Close()
	if err := s.SaveCheckpoint(ctx, "p", cdc.Checkpoint("old")); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := s.Backup(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveCheckpoint(ctx, "p", cdc.Checkpoint("new")); err != nil {
		t.Fatal(err)
	}
	restored := filepath.Join(dir, "restored.db")
	if err := os.WriteFile(restored, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	r := openFile(t, restored)
	defer r.Close()
	if r.Identity() != s.Identity() {
		t.Fatal("restored backup has another identity")
	}
	if cp, _ := r.LoadCheckpoint(ctx, "p"); string(cp) != "old" {
		t.Fatalf("restored checkpoint %q, want old", cp)
	}
	if cp, _ := s.LoadCheckpoint(ctx, "p"); string(cp) != "new" {
		t.Fatalf("live checkpoint %q, want new", cp)
	}
}

func TestMemoryCopy(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	rev, _ := m.Put(ctx, "p", "ns", "k", []byte("v1"), 0)
	c := m.Copy()
	if c.Identity() != m.Identity() {
		t.Fatal("copy has another identity")
	}
	if _, err := m.Put(ctx, "p", "ns", "k", []byte("v2"), rev); err != nil {
		t.Fatal(err)
	}
	if r, _ := c.Get(ctx, "p", "ns", "k"); string(r.Value) != "v1" || r.Revision != rev {
		t.Fatalf("copy changed with the original: %+v", r)
	}
}

func TestSecondOpenWaitsForTheLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openFile(t, path)
	defer s.Close()
	if _, err := Open(path, &Options{LockTimeout: 50 * time.Millisecond}); !errors.Is(err, ErrLocked) {
		t.Fatalf("a second Open of a locked file: %v, want ErrLocked", err)
	}
}

// The saved time comes from Options.Now and survives reopening.
func TestCheckpointSavedClock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	at := time.Date(2026, 3, 4, 5, 6, 7, 8, time.UTC)
	s, err := Open(path, &Options{Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SaveCheckpoint(context.Background(), "p", cdc.Checkpoint("x")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openFile(t, path)
	defer s.Close()
	if got, err := s.CheckpointSaved(context.Background(), "p"); err != nil || !got.Equal(at) {
		t.Fatalf("CheckpointSaved = %v, %v; want %v", got, err, at)
	}
}

func TestForeignFileIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.db")
	b, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("theirs")); return err }); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if _, err := Open(path, nil); !errors.Is(err, ErrFormat) {
		t.Fatalf("Open of another program's bbolt file: %v, want ErrFormat", err)
	}
}

// crashEnv names the state file for the writer subprocess of TestFileCrash.
const crashEnv = "STATESTORE_CRASH_FILE"

// TestFileCrash kills a writing subprocess at random moments and checks after each kill that
// the file opens, passes bbolt's consistency check and holds the last committed values (or
// the one write in flight, which may have committed before it was reported).
func TestFileCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns subprocesses")
	}
	path := filepath.Join(t.TempDir(), "state.db")
	ctx := context.Background()
	var identity string
	next := 1
	for round := range 6 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFileCrashWriter$", "-test.v")
		cmd.Env = append(os.Environ(), crashEnv+"="+path, "STATESTORE_CRASH_START="+strconv.Itoa(next))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(out)
		committed := next - 1
		killed := false
		for lines.Scan() {
			n, ok := strings.CutPrefix(lines.Text(), "committed ")
			if !ok {
				continue
			}
			committed, _ = strconv.Atoi(n)
			if !killed && committed >= next+5 {
				// Let it run on for a random moment so the kill lands anywhere in a write.
				time.Sleep(time.Duration(rand.IntN(20_000)) * time.Microsecond)
				_ = cmd.Process.Kill()
				killed = true
			}
		}
		_ = cmd.Wait()
		if !killed {
			t.Fatalf("round %d: the writer stopped on its own after %d", round, committed)
		}

		s := openFile(t, path)
		if round == 0 {
			identity = s.Identity()
		} else if s.Identity() != identity {
			t.Fatalf("round %d: identity changed to %q from %q", round, s.Identity(), identity)
		}
		if err := s.db.View(func(tx *bolt.Tx) error {
			for err := range tx.Check() {
				return err
			}
			return nil
		}); err != nil {
			t.Fatalf("round %d: file inconsistent: %v", round, err)
		}
		cpb, err := s.LoadCheckpoint(ctx, "p")
		if err != nil {
			t.Fatal(err)
		}
		cp, _ := strconv.Atoi(string(cpb))
		r, err := s.Get(ctx, "p", "fence", "idx")
		if err != nil {
			t.Fatal(err)
		}
		rec, _ := strconv.Atoi(string(r.Value))
		// The writer saves checkpoint i, then record i, then reports i.
		if cp != committed && cp != committed+1 {
			t.Fatalf("round %d: checkpoint %d after %d were reported committed", round, cp, committed)
		}
		if rec != cp && rec != cp-1 {
			t.Fatalf("round %d: record %d with checkpoint %d", round, rec, cp)
		}
		t.Logf("round %d: killed after %d reported, file holds checkpoint %d, record %d", round, committed, cp, rec)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		next = cp + 1
	}
}

// TestFileCrashWriter is TestFileCrash's subprocess; it does nothing in a normal run.
func TestFileCrashWriter(t *testing.T) {
	path := os.Getenv(crashEnv)
	if path == "" {
		t.Skip("the subprocess of TestFileCrash")
	}
	start, _ := strconv.Atoi(os.Getenv("STATESTORE_CRASH_START"))
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := start; ; i++ {
		if err := s.SaveCheckpoint(ctx, "p", cdc.Checkpoint(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
		r, err := s.Get(ctx, "p", "fence", "idx")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Put(ctx, "p", "fence", "idx", []byte(strconv.Itoa(i)), r.Revision); err != nil {
			t.Fatal(err)
		}
		// Padding makes transactions span pages, so a kill can tear more than one write.
		if _, err := s.Put(ctx, "p", "pad", strconv.Itoa(i%50), bytes.Repeat([]byte{byte(i)}, 3000), currentRev(ctx, s, i%50)); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(os.Stdout, "committed %d\n", i)
	}
}

func currentRev(ctx context.Context, s *DB, k int) Revision {
	r, _ := s.Get(ctx, "p", "pad", strconv.Itoa(k))
	return r.Revision
}
