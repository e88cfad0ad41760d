package mysqlcdc_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/mysqlcdc"
)

// TestOpenRefusesMissingTables: a captured table that does not exist and one that exists
// only in another case (the server keeps names' case: lower_case_table_names 0) make Open
// fail with one *cdc.StartError naming each, the near match as the fix.
func TestOpenRefusesMissingTables(t *testing.T) {
	s := testServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sfx := suffix()
	mixed, missing := "h3pre_MyOrders_"+sfx, "h3pre_nothere_"+sfx
	if err := s.exec("CREATE TABLE " + quote(mixed) + " (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	src := s.newSource(t, cdc.SnapshotInitial, mysqlcdc.Options{}, mixed, strings.ToLower(mixed), missing)
	st, err := src.Open(ctx, nil)
	if err == nil {
		st.Close()
		t.Fatal("Open accepted tables that do not exist")
	}
	var se *cdc.StartError
	if !errors.As(err, &se) || !errors.Is(err, cdc.ErrStart) || len(se.Problems) != 2 {
		t.Fatalf("Open: %v, want a *cdc.StartError with two problems", err)
	}
	wrongCase, absent := se.Problems[0], se.Problems[1]
	if wrongCase.Table.Table != strings.ToLower(mixed) || wrongCase.Table.Database != s.db ||
		wrongCase.Fix != "did you mean "+quote(s.db)+"."+quote(mixed)+"?" {
		t.Fatalf("wrong-case table: %+v", wrongCase)
	}
	if absent.Table.Table != missing || !strings.Contains(absent.Problem, "does not exist") || !strings.Contains(absent.Fix, "create it") {
		t.Fatalf("missing table: %+v", absent)
	}
	if !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "did you mean") {
		t.Fatalf("the error does not name the tables and the fix: %v", err)
	}
}

// TestOpenListsTables: the stream lists the captured tables' schemas as of Open, in the
// configured order, tables whose names differ only in case included.
func TestOpenListsTables(t *testing.T) {
	s := testServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sfx := suffix()
	upper, lower := "h3pre_MyOrders_"+sfx, "h3pre_myorders_"+sfx
	if err := s.exec(
		"CREATE TABLE "+quote(upper)+" (id INT PRIMARY KEY, name TEXT)",
		"CREATE TABLE "+quote(lower)+" (code VARCHAR(8), n INT, PRIMARY KEY (code, n))"); err != nil {
		t.Fatal(err)
	}
	src := s.newSource(t, cdc.SnapshotNever, mysqlcdc.Options{}, upper, lower)
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	lister, ok := st.(cdc.TableLister)
	if !ok {
		t.Fatal("the stream does not implement cdc.TableLister")
	}
	tables := lister.Tables()
	if len(tables) != 2 || tables[0].ID.Table != upper || tables[1].ID.Table != lower {
		t.Fatalf("tables %v", tables)
	}
	if !reflect.DeepEqual(tables[1].PrimaryKey, []int{0, 1}) || tables[0].Columns[1].Name != "name" {
		t.Fatalf("schemas %+v %+v", tables[0], tables[1])
	}
}
