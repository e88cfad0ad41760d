package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
)

func TestHoldClusterSettingsExcludesOthers(t *testing.T) {
	url := "http://127.0.0.1:1/lock-test-" + t.Name()
	HoldClusterSettings(t, url)
	HoldClusterSettings(t, url) // a second call in the same process must not block
	runtime.GC()                // the lock must survive a collection (a lost *os.File closes itself)
	runtime.GC()

	// Another open file description stands for another process: it must not get the lock.
	sum := sha256.Sum256([]byte(url))
	f, err := os.Open(filepath.Join(os.TempDir(), "tributary-cluster-settings-"+hex.EncodeToString(sum[:8])+".lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Fatalf("a second holder got the lock (err %v)", err)
	}
}
