package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

var (
	heldMu sync.Mutex
	// held keeps each locked file reachable: a collected *os.File is closed by its finalizer,
	// and closing the descriptor would drop the lock.
	held = map[string]*os.File{}
)

// HoldClusterSettings gives this test process the cluster-wide settings of the search server
// at serverURL (action.auto_create_index, which fencing depends on) until the process exits.
// `go test ./...` runs packages in parallel processes against the same servers; a package that
// changes or relies on those settings calls this before it does, so it never sees another
// package's temporary value. The first call blocks until no other process holds them; later
// calls in the same process return at once.
func HoldClusterSettings(t testing.TB, serverURL string) {
	t.Helper()
	if err := LockClusterSettings(serverURL); err != nil {
		t.Fatal(err)
	}
}

// LockClusterSettings is HoldClusterSettings for programs that are not tests (the demo): it
// takes the same lock and holds it until the process exits.
func LockClusterSettings(serverURL string) error {
	heldMu.Lock()
	defer heldMu.Unlock()
	if held[serverURL] != nil {
		return nil
	}
	sum := sha256.Sum256([]byte(serverURL))
	path := filepath.Join(os.TempDir(), "tributary-cluster-settings-"+hex.EncodeToString(sum[:8])+".lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return fmt.Errorf("cluster settings lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return fmt.Errorf("cluster settings lock: %w", err)
	}
	// The descriptor stays open (and locked) until the process exits; the kernel releases it.
	held[serverURL] = f
	return nil
}
