package pgcdc_test

import (
	"context"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// TestToastWarningOnlyWhereValuesCanBeToasted: pgbench's tables (char(84), char(22) fillers),
// whose rows can never reach the TOAST threshold, get no warning; a text column does, and so
// does a bounded column whose row can exceed the threshold in the database's encoding (a
// domain over varchar included), one Warn line per table naming only those columns.
func TestToastWarningOnlyWhereValuesCanBeToasted(t *testing.T) {
	dsn := testenv.Require(t, testenv.PostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sfx := suffix(t)
	sch := "p32_toast_" + sfx
	qs := quote(sch)
	dropAtEnd(t, dsn, "DROP SCHEMA IF EXISTS "+qs+" CASCADE")
	if err := execSQL(ctx, dsn, false,
		"CREATE SCHEMA "+qs,
		"CREATE DOMAIN "+qs+".longname AS varchar(3000)",
		"CREATE TABLE "+qs+".accounts (aid int PRIMARY KEY, bid int, abalance int, filler char(84))",
		"CREATE TABLE "+qs+".branches (bid int PRIMARY KEY, bbalance int, filler char(88))",
		"CREATE TABLE "+qs+".history (tid int, bid int, aid int, delta int, mtime timestamp, filler char(22))",
		"CREATE TABLE "+qs+".notes (id int PRIMARY KEY, code varchar(8), price numeric(12,2), body text)",
		"CREATE TABLE "+qs+".wide (id int PRIMARY KEY, w "+qs+".longname, small varchar(20))"); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	src := p32Source(t, dsn, pgcdc.Options{Snapshot: cdc.SnapshotNever, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Tables: []pgcdc.Table{{Schema: sch, Name: pgcdc.AllTables}}}, "DROP SCHEMA IF EXISTS "+qs+" CASCADE")
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got := map[string][]string{}
	for _, r := range pgcdc.ToastTables(st) {
		got[r.Table.Table] = r.Columns
	}
	want := map[string][]string{"notes": {"body"}, "wide": {"w"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("TOAST report %v, want %v", got, want)
	}
	var warned []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "REPLICA IDENTITY FULL") {
			warned = append(warned, line)
		}
	}
	if len(warned) != 2 || !strings.Contains(warned[0], sch+".notes") || !strings.Contains(warned[0], "columns=body ") ||
		!strings.Contains(warned[1], sch+".wide") || !strings.Contains(warned[1], "columns=w ") {
		t.Fatalf("TOAST warnings %q, want one for notes (body) and one for wide (w)", warned)
	}
}
