package pgcdc_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/cdctest"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// TestCaptureFuzzSeeds streams an insert, an update and a delete of a table of the built-in
// types the stream decodes without a catalog through a Source, whose stream hands each
// pgoutput message to the WAL hook first. The stream must deliver the values written, and
// the captured messages, decoded as FuzzPgoutputChange decodes them, must give the same rows.
// With TRIBUTARY_FUZZ_CAPTURE=1 it writes them as seeds testdata/fuzz/FuzzPgoutputChange/pg-*
// and testdata/fuzz/FuzzPgoutputMessage/pg-*:
//
//	TRIBUTARY_FUZZ_CAPTURE=1 go test -run TestCaptureFuzzSeeds ./cdc/pgcdc
func TestCaptureFuzzSeeds(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tb := "fzmy_pg_" + suffix(t)
	if err := execSQL(ctx, dsn, false, fmt.Sprintf(`CREATE TABLE %s (id int PRIMARY KEY, b bool, i2 int2, i8 int8,
		f8 float8, num numeric, t text, by bytea, ts timestamptz, j jsonb, ta text[], ia int4[])`, quote(tb))); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var msgs [][]byte
	pgcdc.SetWALHook(func(wal []byte) {
		mu.Lock()
		defer mu.Unlock()
		msgs = append(msgs, append([]byte(nil), wal...))
	})
	defer pgcdc.SetWALHook(nil)
	src := newSource(t, dsn, pgcdc.Options{Snapshot: cdc.SnapshotNever, Slot: "fzmy_", Tables: []pgcdc.Table{{Name: tb}}})
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := execSQL(ctx, dsn, false,
		fmt.Sprintf(`INSERT INTO %s VALUES (1, true, -32768, 9223372036854775807, -2.5e-10, -12345.678901234567890,
			'naïve "q" ☃', '\x00ff10', '2024-05-06 07:08:09.123456+02', '{"a": [1, true], "b": null}', '{"x y", NULL, "q\"z"}', '{1, -2}'),
			(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)`, quote(tb)),
		fmt.Sprintf(`UPDATE %s SET t = 'changed', i8 = -1 WHERE id = 1`, quote(tb)),
		fmt.Sprintf(`DELETE FROM %s WHERE id = 2`, quote(tb))); err != nil {
		t.Fatal(err)
	}
	var evs []cdc.Event
	for range 4 {
		evs = append(evs, cdctest.NextEvent(ctx, t, st))
	}
	if evs[0].Op != cdc.Insert || evs[1].Op != cdc.Insert || evs[2].Op != cdc.Update || evs[3].Op != cdc.Delete {
		t.Fatalf("ops %v %v %v %v", evs[0].Op, evs[1].Op, evs[2].Op, evs[3].Op)
	}
	row := evs[0].After
	want := map[int]cdc.Value{0: int64(1), 1: true, 2: int64(-32768), 3: int64(9223372036854775807), 4: -2.5e-10,
		6: `naïve "q" ☃`, 7: cdc.Base64("AP8Q"), 8: cdc.EpochMicros(time.Date(2024, 5, 6, 5, 8, 9, 123456000, time.UTC).UnixMicro()),
		9: cdc.RawJSON(`{"a": [1, true], "b": null}`)}
	for k, w := range want {
		if !reflect.DeepEqual(row[k], w) {
			t.Errorf("column %d: %#v, want %#v", k, row[k], w)
		}
	}
	if evs[2].After[6] != "changed" || evs[2].After[3] != int64(-1) {
		t.Errorf("update: %#v", evs[2].After)
	}
	st.Close()
	pgcdc.SetWALHook(nil)

	mu.Lock()
	defer mu.Unlock()
	var rel []byte
	var relID uint32
	var changes, others [][]byte
	for _, m := range msgs {
		switch m[0] {
		case 'R':
			if len(m) > 5 && bytes.HasPrefix(m[5:], []byte("public\x00"+tb+"\x00")) {
				rel, relID = m, binary.BigEndian.Uint32(m[1:5])
			}
		case 'I', 'U', 'D':
			if rel != nil && len(m) > 5 && binary.BigEndian.Uint32(m[1:5]) == relID {
				changes = append(changes, m)
			}
		case 'B', 'C':
			if rel != nil && len(others) < 2 {
				others = append(others, m)
			}
		}
	}
	if rel == nil || len(changes) != len(evs) {
		t.Fatalf("captured a relation %v and %d changes, want %d", rel != nil, len(changes), len(evs))
	}
	for i, m := range changes {
		before, after, err := pgcdc.DecodeFuzzChange(rel, m)
		if err != nil {
			t.Fatalf("change %d: %v", i, err)
		}
		if !reflect.DeepEqual(after, evs[i].After) || evs[i].Op == cdc.Delete && len(before) == 0 {
			t.Fatalf("change %d through the fuzz harness: %#v, the stream's %#v", i, after, evs[i].After)
		}
	}
	if os.Getenv("TRIBUTARY_FUZZ_CAPTURE") == "" {
		t.Log("seeds not written: TRIBUTARY_FUZZ_CAPTURE is unset")
		return
	}
	write := func(target, name string, vals ...[]byte) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		f := "go test fuzz v1\n"
		for _, v := range vals {
			f += fmt.Sprintf("[]byte(%q)\n", v)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i, m := range changes {
		write("FuzzPgoutputChange", fmt.Sprintf("pg-%c-%02d", m[0], i), rel, m)
		write("FuzzPgoutputMessage", fmt.Sprintf("pg-%c-%02d", m[0], i), m)
	}
	write("FuzzPgoutputMessage", "pg-relation", rel)
	for i, m := range others {
		write("FuzzPgoutputMessage", fmt.Sprintf("pg-%c-%02d", m[0], i), m)
	}
}
