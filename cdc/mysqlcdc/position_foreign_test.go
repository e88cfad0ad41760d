package mysqlcdc

import (
	"errors"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/cdc"
)

// TestForeignCheckpoint: a Debezium source's or pgcdc's checkpoint is refused, naming whose it
// is and the switch procedure, never quoting it; this package's own checkpoints still decode.
func TestForeignCheckpoint(t *testing.T) {
	for _, c := range []struct{ cp, writer, says string }{
		{"debezium1:0123456789abcdef:42", "debezium", "a Debezium checkpoint"},
		{`{"v":1,"lsn":"0/16B3748"}`, "pgcdc", "a PostgreSQL source's checkpoint"},
		{`{"v":1,"lsn":"0/20","snap":{"floor":"0/1F","rows":0}}`, "pgcdc", "WAL position"},
	} {
		_, err := decodeCheckpoint(cdc.Checkpoint(c.cp))
		var fe *ForeignCheckpointError
		if !errors.As(err, &fe) || fe.Writer != c.writer || !errors.Is(err, ErrForeignCheckpoint) {
			t.Fatalf("%s: %v", c.cp, err)
		}
		if msg := err.Error(); !strings.Contains(msg, c.says) || !strings.Contains(msg, "cdcmirror switch") ||
			strings.Contains(msg, "0123456789abcdef") || strings.Contains(msg, "16B3748") {
			t.Errorf("%s: message %q", c.cp, msg)
		}
	}
	own := checkpoint{File: "mariadb-bin.000003", Pos: 1234, GTID: "0-1-42", UseGTID: true}
	if _, err := decodeCheckpoint(own.encode()); err != nil {
		t.Fatal(err)
	}
	if _, err := decodeCheckpoint(cdc.Checkpoint("nope")); err == nil || errors.Is(err, ErrForeignCheckpoint) {
		t.Fatalf("nope: %v", err)
	}
}
