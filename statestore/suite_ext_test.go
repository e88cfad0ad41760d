package statestore_test

import (
	"path/filepath"
	"testing"

	"github.com/tributary-dev/tributary/statestore"
	"github.com/tributary-dev/tributary/statestore/statestoretest"
)

// TestSuite runs the shared behaviours (package statestoretest) against the file and memory
// stores: TestSuite/<store>/<Behaviour>.
func TestSuite(t *testing.T) {
	t.Run("file", func(t *testing.T) {
		statestoretest.Run(t, func(t *testing.T) statestore.Store {
			s, err := statestore.Open(filepath.Join(t.TempDir(), "state.db"), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		})
	})
	t.Run("memory", func(t *testing.T) {
		statestoretest.Run(t, func(t *testing.T) statestore.Store {
			s := statestore.NewMemory()
			t.Cleanup(func() { _ = s.Close() })
			return s
		})
	})
}
