package mysqlcdc_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/cdctest"
	"github.com/tributary-dev/tributary/cdc/mysqlcdc"
)

// signednessColumn is one column of TestNumericColumnsAroundYearKeepSignedness with the literal
// and normalized value of each of the test's three rows (min, max, mixed).
type signednessColumn struct {
	name, typ string
	lits      [3]string
	want      [3]cdc.Value
}

// signednessColumns mixes YEAR columns (first, among the integers, after the floating and
// decimal columns, last) with every integer width signed and UNSIGNED, FLOAT, DOUBLE, DECIMAL
// signed and UNSIGNED, and a BIT (which has no signedness bit). The mixed row holds the values
// the differential test saw corrupted when the table map's signedness bits were misassigned.
var signednessColumns = []signednessColumn{
	{"y0", "YEAR", [3]string{"1901", "2155", "0"}, [3]cdc.Value{int64(1901), int64(2155), int64(0)}},
	{"ti", "TINYINT", [3]string{"-128", "127", "-1"}, [3]cdc.Value{int64(-128), int64(127), int64(-1)}},
	{"tiu", "TINYINT UNSIGNED", [3]string{"0", "255", "128"}, [3]cdc.Value{uint64(0), uint64(255), uint64(128)}},
	{"y1", "YEAR", [3]string{"2155", "1901", "2024"}, [3]cdc.Value{int64(2155), int64(1901), int64(2024)}},
	{"si", "SMALLINT", [3]string{"-32768", "32767", "-5"}, [3]cdc.Value{int64(-32768), int64(32767), int64(-5)}},
	{"siu", "SMALLINT UNSIGNED", [3]string{"0", "65535", "46761"}, [3]cdc.Value{uint64(0), uint64(65535), uint64(46761)}},
	{"mi", "MEDIUMINT", [3]string{"-8388608", "8388607", "-7143621"}, [3]cdc.Value{int64(-8388608), int64(8388607), int64(-7143621)}},
	{"miu", "MEDIUMINT UNSIGNED", [3]string{"0", "16777215", "9633595"}, [3]cdc.Value{uint64(0), uint64(16777215), uint64(9633595)}},
	{"y2", "YEAR", [3]string{"1901", "2155", "1999"}, [3]cdc.Value{int64(1901), int64(2155), int64(1999)}},
	{"i", "INT", [3]string{"-2147483648", "2147483647", "-1"}, [3]cdc.Value{int64(-2147483648), int64(2147483647), int64(-1)}},
	{"iu", "INT UNSIGNED", [3]string{"0", "4294967295", "2147483648"}, [3]cdc.Value{uint64(0), uint64(4294967295), uint64(2147483648)}},
	{"bi", "BIGINT", [3]string{"-9223372036854775808", "9223372036854775807", "-1"},
		[3]cdc.Value{int64(-9223372036854775808), int64(9223372036854775807), int64(-1)}},
	{"biu", "BIGINT UNSIGNED", [3]string{"0", "18446744073709551615", "9223372036854775808"},
		[3]cdc.Value{uint64(0), uint64(18446744073709551615), uint64(9223372036854775808)}},
	{"f", "FLOAT", [3]string{"-3.40282e38", "3.40282e38", "0.1"}, [3]cdc.Value{-3.40282e38, 3.40282e38, 0.1}},
	{"d", "DOUBLE", [3]string{"-1.7976931348623157e308", "1.7976931348623157e308", "-0.1"},
		[3]cdc.Value{-1.7976931348623157e308, 1.7976931348623157e308, -0.1}},
	{"dcu", "DECIMAL(20,0) UNSIGNED", [3]string{"0", "99999999999999999999", "1"}, [3]cdc.Value{"0", "99999999999999999999", "1"}},
	{"dc", "DECIMAL(30,10)", [3]string{"-99999999999999999999.9999999999", "99999999999999999999.9999999999", "-1.5"},
		[3]cdc.Value{"-99999999999999999999.9999999999", "99999999999999999999.9999999999", "-1.5000000000"}},
	{"y3", "YEAR", [3]string{"2155", "1901", "NULL"}, [3]cdc.Value{int64(2155), int64(1901), nil}},
	{"bt", "BIT(8)", [3]string{"b'0'", "b'11111111'", "b'1'"}, [3]cdc.Value{uint64(0), uint64(255), uint64(1)}},
	{"siu2", "SMALLINT UNSIGNED", [3]string{"0", "65535", "32768"}, [3]cdc.Value{uint64(0), uint64(65535), uint64(32768)}},
	{"si2", "SMALLINT", [3]string{"-32768", "32767", "-1"}, [3]cdc.Value{int64(-32768), int64(32767), int64(-1)}},
	{"biu2", "BIGINT UNSIGNED", [3]string{"18446744073709551615", "0", "1"}, [3]cdc.Value{uint64(18446744073709551615), uint64(0), uint64(1)}},
	{"y4", "YEAR", [3]string{"1901", "2155", "2000"}, [3]cdc.Value{int64(1901), int64(2155), int64(2000)}},
}

// TestNumericColumnsAroundYearKeepSignedness reads numeric columns mixed with YEAR columns
// through the snapshot, the stream (inserts, updates and deletes of every extreme value), and
// a replay of the stream after a DDL, when the schema is rebuilt from the table maps: every
// value must be the one written, the same on every path, and every column's kind must be the
// catalog's (UNSIGNED in INFORMATION_SCHEMA.COLUMNS exactly for the KindUint columns).
func TestNumericColumnsAroundYearKeepSignedness(t *testing.T) {
	s := testServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	table := "yearsign_" + suffix()
	q := quote(table)
	defs := []string{"id INT NOT NULL PRIMARY KEY"}
	for _, c := range signednessColumns {
		defs = append(defs, quote(c.name)+" "+c.typ)
	}
	if err := s.exec(fmt.Sprintf("CREATE TABLE %s (%s)", q, strings.Join(defs, ", "))); err != nil {
		t.Fatal(err)
	}
	src := s.newSource(t, cdc.SnapshotInitial, mysqlcdc.Options{}, table)

	// The catalog's word on each column's signedness.
	c, err := s.conn()
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Execute("SELECT COLUMN_NAME, COLUMN_TYPE FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", s.db, table)
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	unsigned := map[string]bool{}
	for i := range res.RowNumber() {
		name, _ := res.GetString(i, 0)
		typ, _ := res.GetString(i, 1)
		unsigned[name] = strings.Contains(strings.ToLower(typ), "unsigned")
	}
	c.Close()
	if len(unsigned) != len(signednessColumns)+1 {
		t.Fatalf("the catalog lists %d columns, want %d", len(unsigned), len(signednessColumns)+1)
	}

	row := func(id, r int) string {
		vals := []string{fmt.Sprint(id)}
		for _, c := range signednessColumns {
			vals = append(vals, c.lits[r])
		}
		return fmt.Sprintf("INSERT INTO %s VALUES (%s)", q, strings.Join(vals, ", "))
	}
	set := func(id, r int) string {
		var sets []string
		for _, c := range signednessColumns {
			sets = append(sets, quote(c.name)+" = "+c.lits[r])
		}
		return fmt.Sprintf("UPDATE %s SET %s WHERE id = %d", q, strings.Join(sets, ", "), id)
	}
	// check compares an image with row r of the literals; where names the image in failures.
	check := func(where string, ev cdc.Event, img []cdc.Value, id, r int) {
		t.Helper()
		if ev.Schema == nil || len(img) != len(ev.Schema.Columns) {
			t.Fatalf("%s: image of %d values for schema %v", where, len(img), ev.Schema)
		}
		for i, col := range ev.Schema.Columns {
			if isInt := col.Kind == cdc.KindInt || col.Kind == cdc.KindUint; isInt && (col.Kind == cdc.KindUint) != unsigned[col.Name] {
				t.Errorf("%s: column %s is %v, the catalog says unsigned=%v", where, col.Name, col.Kind, unsigned[col.Name])
			}
			want := cdc.Value(int64(id))
			if k := columnIndex(col.Name); k >= 0 {
				want = signednessColumns[k].want[r]
			} else if col.Name != "id" {
				want = nil // added by the DDL
			}
			if !reflect.DeepEqual(img[i], want) {
				t.Errorf("%s: column %s = %#v, want %#v", where, col.Name, img[i], want)
			}
		}
	}

	if err := s.exec(row(1, 0), row(2, 1), row(3, 2)); err != nil {
		t.Fatal(err)
	}
	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	snap := map[int64]cdc.Event{}
	var handOff cdc.Checkpoint
	for range 3 {
		ev := cdctest.NextEvent(ctx, t, st)
		if ev.Op != cdc.Read {
			t.Fatalf("snapshot delivered %v", ev.Op)
		}
		snap[ev.After[0].(int64)] = ev
		handOff = ev.Checkpoint
	}
	for id := int64(1); id <= 3; id++ {
		ev, ok := snap[id]
		if !ok {
			t.Fatalf("the snapshot has no row %d", id)
		}
		check(fmt.Sprintf("snapshot row %d", id), ev, ev.After, int(id), int(id-1))
	}

	// Streamed: the same rows as new ids, each moved to the next row's values, then deleted.
	if err := s.exec(row(11, 0), row(12, 1), row(13, 2)); err != nil {
		t.Fatal(err)
	}
	if err := s.execTx(set(11, 1), set(12, 2), set(13, 0)); err != nil {
		t.Fatal(err)
	}
	if err := s.exec(fmt.Sprintf("DELETE FROM %s WHERE id IN (11, 12, 13)", q)); err != nil {
		t.Fatal(err)
	}
	readChanges := func(st cdc.Stream, path string) {
		t.Helper()
		for k := range 3 {
			ev := cdctest.NextEvent(ctx, t, st)
			if ev.Op != cdc.Insert {
				t.Fatalf("%s: insert %d delivered as %v", path, k, ev.Op)
			}
			check(fmt.Sprintf("%s insert %d", path, 11+k), ev, ev.After, 11+k, k)
			// Equal to the snapshot's row of the same values, column by column.
			for i := 1; i < len(ev.After) && len(ev.Schema.Columns) == len(snap[int64(k+1)].Schema.Columns); i++ {
				if !reflect.DeepEqual(ev.After[i], snap[int64(k+1)].After[i]) {
					t.Errorf("%s insert %d column %s: %#v, the snapshot read %#v", path, 11+k, ev.Schema.Columns[i].Name, ev.After[i], snap[int64(k+1)].After[i])
				}
			}
		}
		for k := range 3 {
			ev := cdctest.NextEvent(ctx, t, st)
			if ev.Op != cdc.Update {
				t.Fatalf("%s: update %d delivered as %v", path, k, ev.Op)
			}
			check(fmt.Sprintf("%s update %d before", path, 11+k), ev, ev.Before, 11+k, k)
			check(fmt.Sprintf("%s update %d after", path, 11+k), ev, ev.After, 11+k, (k+1)%3)
		}
		for k := range 3 {
			ev := cdctest.NextEvent(ctx, t, st)
			if ev.Op != cdc.Delete {
				t.Fatalf("%s: delete %d delivered as %v", path, k, ev.Op)
			}
			check(fmt.Sprintf("%s delete %d", path, 11+k), ev, ev.Before, 11+k, (k+1)%3)
		}
	}
	readChanges(st, "stream")
	_ = st.Close()

	// The catalog moves past the images; replaying them rebuilds their schema from the table
	// maps, whose signedness bits must be read as the server wrote them.
	if err := s.exec(fmt.Sprintf("ALTER TABLE %s ADD COLUMN extra INT UNSIGNED", q)); err != nil {
		t.Fatal(err)
	}
	st2, err := src.Open(ctx, handOff)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	readChanges(st2, "replay")
}

func columnIndex(name string) int {
	for i, c := range signednessColumns {
		if c.name == name {
			return i
		}
	}
	return -1
}
