package statestore

import (
	"path/filepath"
	"testing"
)

// stores lists the in-package implementations, for tests of package statestore's own
// functions (ResetCheckpoint). The shared behaviour suite is package statestoretest, run by
// TestSuite (suite_ext_test.go).
var stores = []struct {
	name string
	open func(t *testing.T) Store
}{
	{"file", func(t *testing.T) Store {
		s, err := Open(filepath.Join(t.TempDir(), "state.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}},
	{"memory", func(t *testing.T) Store {
		s := NewMemory()
		t.Cleanup(func() { _ = s.Close() })
		return s
	}},
}
