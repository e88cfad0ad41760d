package mirror

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/statestore"
)

// A state_store whose connection string the store refuses stops every pipeline at once with
// that reason (no retry can open it), in Run's error and in Status, never quoting the string.
func TestStateStoreRefusedStopsPipelines(t *testing.T) {
	setTestEnv(t)
	dir := t.TempDir()
	text := strings.Replace(validConfig, "state: /tmp/state.db",
		"state_store: {type: postgres, dsn: \"postgres://u:"+testPassword+"@127.0.0.1:1/db?sslmode=sometimes\"}", 1)
	text = strings.Replace(text, "dlq: /tmp/dlq.jsonl", "dlq: "+dir+"/dlq.jsonl", 1)
	cfg, err := ParseConfig([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	m, err := Open(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = m.Run(ctx)
	var pe *PipelineError
	if !errors.As(err, &pe) || !errors.Is(err, statestore.ErrInvalid) || !cdc.IsPermanent(err) {
		t.Fatalf("Run: %v, want a permanent *PipelineError wrapping statestore.ErrInvalid", err)
	}
	st := m.Status()[0]
	if st.State != "stopped" || st.Health.Healthy || !strings.Contains(st.Health.Reason, "state store") {
		t.Errorf("Status: %s, %+v", st.State, st.Health)
	}
	for _, s := range []string{err.Error(), st.Health.Reason} {
		if strings.Contains(s, testPassword) {
			t.Errorf("%q quotes the password", s)
		}
	}
}
