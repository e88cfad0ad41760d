package pgcdc

import (
	"errors"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/cdc"
)

// TestForeignCheckpoint: a Debezium source's or mysqlcdc's checkpoint is refused permanently,
// naming whose it is and the switch procedure, never as "malformed", never quoting it; this
// package's own checkpoints still decode.
func TestForeignCheckpoint(t *testing.T) {
	for _, c := range []struct{ cp, writer, says string }{
		{"debezium1:0123456789abcdef:42", "debezium", "a Debezium checkpoint"},
		{`{"v":1,"file":"mariadb-bin.000003","pos":1234,"gtid":"0-1-42","use_gtid":true}`, "mysqlcdc", "a MySQL/MariaDB source's checkpoint"},
		{`{"v":1,"file":"mysql-bin.000001","pos":4}`, "mysqlcdc", "binlog position"},
		{`{"v":1,"use_gtid":true}`, "mysqlcdc", "binlog position"},
	} {
		_, err := decodeCheckpoint(cdc.Checkpoint(c.cp))
		var fe *ForeignCheckpointError
		if !errors.As(err, &fe) || fe.Writer != c.writer || !errors.Is(err, ErrForeignCheckpoint) || !errors.Is(err, ErrBadCheckpoint) {
			t.Fatalf("%s: %v", c.cp, err)
		}
		msg := err.Error()
		if !strings.Contains(msg, c.says) || !strings.Contains(msg, "cdcmirror switch") || strings.Contains(msg, "malformed") ||
			strings.Contains(msg, "0123456789abcdef") || strings.Contains(msg, "mariadb-bin") {
			t.Errorf("%s: message %q", c.cp, msg)
		}
		if !cdc.IsPermanent(classify(err)) {
			t.Errorf("%s: not permanent", c.cp)
		}
	}
	for _, cp := range []cdc.Checkpoint{encodeCheckpoint(0x16B3748, nil, nil, nil), encodeCheckpoint(0x20, &snapshotState{Floor: "0/1F"}, nil, nil)} {
		if _, err := decodeCheckpoint(cp); err != nil {
			t.Errorf("%s: %v", cp, err)
		}
	}
	for _, bad := range []string{"garbage", `{"v":1}`, `{"v":1,"lsn":"x"}`} {
		if _, err := decodeCheckpoint(cdc.Checkpoint(bad)); !errors.Is(err, ErrBadCheckpoint) || errors.Is(err, ErrForeignCheckpoint) {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
