package cdc_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/cdc"
)

// TestForeignCheckpointError: one type for every source's refusal of another source's
// checkpoint; it is ErrForeignCheckpoint, reaches what the refusing source also calls it (Err)
// through Permanent, and names the writer and the switch procedure.
func TestForeignCheckpointError(t *testing.T) {
	errMine := errors.New("mine")
	err := cdc.Permanent(&cdc.ForeignCheckpointError{Reader: "pgcdc", Writer: "debezium", Err: errMine})
	var fe *cdc.ForeignCheckpointError
	if !errors.Is(err, cdc.ErrForeignCheckpoint) || !errors.Is(err, errMine) || !cdc.IsPermanent(err) ||
		!errors.As(err, &fe) || fe.Writer != "debezium" {
		t.Fatalf("%v", err)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "pgcdc: ") || !strings.Contains(msg, "a Debezium checkpoint") ||
		!strings.Contains(msg, "cdcmirror switch") || strings.Contains(msg, "mine") {
		t.Errorf("message %q", msg)
	}
	if plain := (&cdc.ForeignCheckpointError{Reader: "debezium"}); errors.Is(plain, errMine) || !strings.Contains(plain.Error(), "another source's checkpoint") {
		t.Errorf("unknown writer: %v", plain)
	}
}
