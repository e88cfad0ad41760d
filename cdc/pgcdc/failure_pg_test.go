package pgcdc_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/cdctest"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// withDSN returns dsn with its user or its database replaced.
func withDSN(t *testing.T, dsn, user, database string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		u.User = url.User(user)
	}
	if database != "" {
		u.Path = "/" + database
	}
	return u.String()
}

// TestOpenRefusedLoginIsPermanent: a role the server refuses (SQLSTATE class 28: no such
// role here; a wrong password or a missing pg_hba.conf entry alike) and a database that does
// not exist (3D000) fail Open with a permanent error, which no reconnect would cure.
func TestOpenRefusedLoginIsPermanent(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sfx := suffix(t)
	for name, d := range map[string]string{
		"unknown role":     withDSN(t, dsn, "pgsd_nobody_"+sfx, ""),
		"missing database": withDSN(t, dsn, "", "pgsd_missing_"+sfx),
	} {
		t.Run(name, func(t *testing.T) {
			src, err := pgcdc.New(d, &pgcdc.Options{Name: "pgsd_" + sfx, Snapshot: cdc.SnapshotNever})
			if err != nil {
				t.Fatal(err)
			}
			st, err := src.Open(ctx, nil)
			if err == nil {
				_ = st.Close()
				t.Fatal("Open succeeded")
			}
			if !cdc.IsPermanent(err) {
				t.Fatalf("Open: %v, want a permanent error", err)
			}
		})
	}
}

// TestOpenResumeWithoutSlotIsPermanent: resuming from a checkpoint whose slot is gone is
// permanent: the changes after the checkpoint went with the slot.
func TestOpenResumeWithoutSlotIsPermanent(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tb := "pgsd_noslot_" + suffix(t)
	createTable(ctx, t, dsn, tb)
	src := newSource(t, dsn, pgcdc.Options{Slot: "pgsd_", Snapshot: cdc.SnapshotNever, Tables: []pgcdc.Table{{Name: tb}}})
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := execSQL(ctx, dsn, false, fmt.Sprintf("INSERT INTO %s VALUES (1, 1)", quote(tb))); err != nil {
		t.Fatal(err)
	}
	cp := cdctest.NextEvent(ctx, t, st).Checkpoint
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := src.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	st, err = src.Open(ctx, cp)
	if err == nil {
		_ = st.Close()
		t.Fatal("Open resumed without the slot")
	}
	if !errors.Is(err, pgcdc.ErrSlotMissing) || !cdc.IsPermanent(err) {
		t.Fatalf("Open: %v, want a permanent ErrSlotMissing", err)
	}
}

// TestStreamHoldsNoSessionWhileIdle: while it streams, the stream keeps no regular SQL
// session open for longer than it uses one (a smart shutdown waits for every regular
// session): once idle, at the start and after a change, only its walsender is left.
func TestStreamHoldsNoSessionWhileIdle(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sfx := suffix(t)
	tb := "pgsd_idle_" + sfx
	createTable(ctx, t, dsn, tb)
	app := "pgsd_app_" + sfx
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	src := newSource(t, u.String(), pgcdc.Options{Slot: "pgsd_", Snapshot: cdc.SnapshotNever, Tables: []pgcdc.Table{{Name: tb}}})
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	sessions := func() (regular, walsenders int) {
		t.Helper()
		if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE backend_type = 'client backend'),
			count(*) FILTER (WHERE backend_type = 'walsender') FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&regular, &walsenders); err != nil {
			t.Fatal(err)
		}
		return regular, walsenders
	}
	waitIdle := func() {
		t.Helper()
		for {
			regular, walsenders := sessions()
			if walsenders != 1 {
				t.Fatalf("%d walsenders of the stream, want 1", walsenders)
			}
			if regular == 0 {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("the stream still holds %d regular sessions", regular)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	waitIdle()
	if err := execSQL(ctx, dsn, false, fmt.Sprintf("INSERT INTO %s VALUES (1, 1)", quote(tb))); err != nil {
		t.Fatal(err)
	}
	if ev := cdctest.NextEvent(ctx, t, st); ev.Op != cdc.Insert {
		t.Fatalf("event %v", ev.Op)
	}
	waitIdle()
}
