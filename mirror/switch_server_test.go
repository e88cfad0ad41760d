package mirror

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/mirrortest"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/statestore"
)

// debeziumCheckpoint is what a Debezium source stores.
const debeziumCheckpoint = "debezium1:0123456789abcdef:42"

// switchServerConfigs are a Debezium configuration and a native one (source: YAML native) of
// pipeline "orders" on the state file in dir. Keep is what the tests use: no Kafka is needed.
func switchServerConfigs(t *testing.T, dir, native string) (dbz, nat *Config) {
	state := filepath.Join(dir, "state.db")
	name := "  name: " + sourceTypeOfYAML(native) + "\n"
	return switchConfig(t, strings.Replace(switchDbz, "  name: postgres\n", name, 1), state), switchConfig(t, native, state)
}

func sourceTypeOfYAML(source string) string {
	_, rest, _ := strings.Cut(source, "type: ")
	typ, _, _ := strings.Cut(rest, "\n")
	return typ
}

// storeCheckpoint stores cp as pipeline orders' checkpoint in the state file of cfg.
func storeCheckpoint(t *testing.T, cfg *Config, cp string) {
	t.Helper()
	st, err := statestore.Open(cfg.State, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.SaveCheckpoint(context.Background(), "orders", []byte(cp)); err != nil {
		t.Fatal(err)
	}
}

func storedCheckpoint(t *testing.T, cfg *Config) string {
	t.Helper()
	st, err := statestore.Open(cfg.State, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cp, err := st.LoadCheckpoint(context.Background(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	return string(cp)
}

// TestSwitchBackNeedsPrepare: a switch from Debezium to a native source is refused, with the
// fix, until its prepare step ran (PostgreSQL: the slot; MariaDB: the recorded position),
// leaving the Debezium checkpoint alone; once prepared it resets the checkpoint (PostgreSQL)
// or replaces it by the prepared position, a snapshot first (MariaDB), and a second switch
// finds it done. The native source refuses the Debezium checkpoint, naming it.
func TestSwitchBackNeedsPrepare(t *testing.T) {
	ctx := context.Background()
	keep := &SwitchOptions{Keep: true}
	t.Run("postgres", func(t *testing.T) {
		dsn := testenv.Require(t, testenv.PostgresDSN)
		name := "w32_swp_" + estest.RandomHex(t, 4)
		mirrortest.NewPostgres(t, dsn, name)
		t.Setenv("W32_PG_DSN", dsn)
		dbz, nat := switchServerConfigs(t, t.TempDir(),
			"  type: postgres\n  dsn: \"${W32_PG_DSN}\"\n  tables: [public."+name+"]\n  slot: "+name+"\n  publication: "+name+"\n")
		t.Cleanup(func() {
			c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if src, err := pgcdc.New(dsn, &pgcdc.Options{Slot: name, Publication: name}); err == nil {
				_ = src.Drop(c)
			}
		})
		storeCheckpoint(t, nat, debeziumCheckpoint)
		src, err := newSource(nat.Pipeline("orders"), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := src.Open(ctx, []byte(debeziumCheckpoint)); !errors.Is(err, pgcdc.ErrForeignCheckpoint) || !strings.Contains(err.Error(), "a Debezium checkpoint") {
			t.Fatalf("Open with a Debezium checkpoint: %v", err)
		}
		if _, err := Switch(ctx, nat, dbz, "orders", keep); !errors.Is(err, ErrSwitchRefused) || !strings.Contains(err.Error(), "prepare step is missing") {
			t.Fatalf("switch without prepare: %v", err)
		}
		if cp := storedCheckpoint(t, nat); cp != debeziumCheckpoint {
			t.Fatalf("checkpoint after a refusal: %q", cp)
		}
		rep, err := Switch(ctx, nat, dbz, "orders", &SwitchOptions{Prepare: true})
		if err != nil || !strings.Contains(rep.Prepared, "created replication slot "+name) {
			t.Fatalf("prepare: %+v %v", rep, err)
		}
		if rep, err = Switch(ctx, nat, dbz, "orders", keep); err != nil || !rep.Checkpoint || len(rep.Kept) != 1 {
			t.Fatalf("switch: %+v %v", rep, err)
		}
		if cp := storedCheckpoint(t, nat); cp != "" {
			t.Fatalf("checkpoint after the switch: %q", cp)
		}
		storeCheckpoint(t, nat, `{"v":1,"lsn":"0/16B3748"}`) // the native pipeline ran since
		if rep, err = Switch(ctx, nat, dbz, "orders", keep); err != nil || rep.Checkpoint || !rep.Switched {
			t.Fatalf("switch again: %+v %v", rep, err)
		}
	})
	t.Run("mariadb", func(t *testing.T) {
		dsn := testenv.Require(t, testenv.MySQLDSN)
		name := "w32_swm_" + estest.RandomHex(t, 4)
		mirrortest.NewMySQL(t, dsn, name)
		t.Setenv("W32_MY_DSN", dsn)
		dir := t.TempDir()
		dbz, nat := switchServerConfigs(t, dir, "  type: mysql\n  dsn: \"${W32_MY_DSN}\"\n  tables: ["+name+"]\n")
		storeCheckpoint(t, nat, debeziumCheckpoint)
		if _, err := Switch(ctx, nat, dbz, "orders", keep); !errors.Is(err, ErrSwitchRefused) || !strings.Contains(err.Error(), "prepare step is missing") {
			t.Fatalf("switch without prepare: %v", err)
		}
		rep, err := Switch(ctx, nat, dbz, "orders", &SwitchOptions{Prepare: true})
		if err != nil || !strings.Contains(rep.Prepared, "recorded the server's current binlog position") {
			t.Fatalf("prepare: %+v %v", rep, err)
		}
		if rep, err = Switch(ctx, nat, dbz, "orders", keep); err != nil || !rep.Checkpoint {
			t.Fatalf("switch: %+v %v", rep, err)
		}
		cp := storedCheckpoint(t, nat)
		if checkpointKind([]byte(cp)) != "mysql" || !strings.Contains(cp, `"snapshot":`) {
			t.Fatalf("checkpoint after the switch: %s", cp)
		}
		if _, err := os.Stat(switchFile(nat, "orders")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the prepared position's file stays: %v", err)
		}
	})
}
