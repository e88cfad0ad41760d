package debezium

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/queue"
)

// TestOpenRefusesNativeCheckpoint: a native source's checkpoint is refused permanently before
// the group is joined, naming whose it is and the switch procedure, never quoting it.
func TestOpenRefusesNativeCheckpoint(t *testing.T) {
	joined := false
	src, err := New(func(context.Context) (queue.Consumer, error) {
		joined = true
		return nil, errors.New("not reached")
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for cp, says := range map[string]string{
		`{"v":1,"lsn":"0/16B3748"}`: "a PostgreSQL source's checkpoint",
		`{"v":1,"file":"mariadb-bin.000003","pos":1234,"gtid":"0-1-42","use_gtid":true}`: "a MySQL/MariaDB source's checkpoint",
		"garbage": "another source's checkpoint",
	} {
		_, err := src.Open(context.Background(), cdc.Checkpoint(cp))
		if !errors.Is(err, ErrForeignCheckpoint) || !cdc.IsPermanent(err) || !strings.Contains(err.Error(), says) ||
			!strings.Contains(err.Error(), "cdcmirror switch") || strings.Contains(err.Error(), "16B3748") || strings.Contains(err.Error(), "mariadb-bin") {
			t.Errorf("%s: %v", cp, err)
		}
	}
	if joined {
		t.Fatal("the group was joined")
	}
}
