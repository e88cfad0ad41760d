package debezium

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
)

// TestEdgeValues pins the conversion of the edge values measured through the real connectors
// (debezium-connector-postgres 3.6.1.Final, debezium-connector-mariadb 3.5.0.Final): each
// raw value as the connector wrote it, and the native source's value for it, or the
// dead letter's reason.
func TestEdgeValues(t *testing.T) {
	intElem := &cdc.Column{Kind: cdc.KindInt, Bits: 32}
	textElem := &cdc.Column{Kind: cdc.KindText}
	cases := []struct {
		name string
		conv converter
		raw  string
		want cdc.Value
		err  string // a substring of the dead letter's reason
	}{
		{"date +infinity streamed", pgDateConv, "-2147472692", "infinity", ""},
		{"date -infinity streamed", pgDateConv, "-2147472691", "-infinity", ""},
		{"date +infinity snapshot", pgDateConv, "-622191234", "infinity", ""},
		{"date -infinity snapshot", pgDateConv, "-625821272", "-infinity", ""},
		{"date 1 BC streamed", pgDateConv, "-719528", "0001-01-01 BC", ""},
		{"date max", pgDateConv, "2145042905", "5874897-12-31", ""},
		{"date out of range", pgDateConv, "-3000000", nil, "outside PostgreSQL's range"},
		{"timestamp +infinity", pgDateTimeConv(time.Microsecond), "9223372036825200000", "infinity", ""},
		{"timestamp -infinity", pgDateTimeConv(time.Microsecond), "-9223372036832400000", "-infinity", ""},
		{"timestamp +infinity connect", pgDateTimeConv(time.Millisecond), "9223372036825200", "infinity", ""},
		{"timestamp -infinity connect", pgDateTimeConv(time.Millisecond), "-9223372036832400", "-infinity", ""},
		{"timestamp overflowed", pgDateTimeConv(time.Microsecond), "-9223372036853775810", nil, "overflowed"},
		{"timestamp 4713 BC", pgDateTimeConv(time.Microsecond), "-210863520000000000", "4713-01-01 00:00:00 BC", ""},
		{"timestamp 10000", pgDateTimeConv(time.Microsecond), "253402300800000000", "10000-01-01 00:00:00", ""},
		{"timestamptz 10000", zonedTimestampConv(), `"+10000-01-01T00:00:00.000000Z"`, cdc.EpochMicros(253402300800000000), ""},
		{"timestamptz 1 BC", zonedTimestampConv(), `"0000-01-01T00:00:00.000000Z"`, cdc.EpochMicros(-62167219200000000), ""},
		{"timestamptz infinity", zonedTimestampConv(), `"infinity"`, "infinity", ""},
		{"numeric NaN string", decimalStringConv, `"NAN"`, "NaN", ""},
		{"numeric +Inf string", decimalStringConv, `"POSITIVE_INFINITY"`, "Infinity", ""},
		{"numeric -Inf string", decimalStringConv, `"NEGATIVE_INFINITY"`, "-Infinity", ""},
		{"numeric trailing zeros string", decimalStringConv, `"1.50"`, "1.50", ""},
		{"numeric not a number", decimalStringConv, `"1e5"`, nil, "not a number"},
		{"int[][]", pgArrayConv(intConv(intElem), pgNullsAreNull(intElem)), `[null,null]`, nil, "multi-dimensional"},
		{"int[] with NULL", pgArrayConv(intConv(intElem), pgNullsAreNull(intElem)), `[null,1]`, nil, "multi-dimensional"},
		{"int[]", pgArrayConv(intConv(intElem), pgNullsAreNull(intElem)), `[1,2]`, []cdc.Value{int64(1), int64(2)}, ""},
		{"text[][]", pgArrayConv(stringConv, pgNullsAreNull(textElem)), `["[Ljava.lang.String;@4cb15355"]`, nil, "multi-dimensional"},
		{"uuid[][]", pgArrayConv(stringConv, true), `["[Ljava.util.UUID;@18735d42"]`, nil, "multi-dimensional"},
		{"text[] with NULL", pgArrayConv(stringConv, pgNullsAreNull(textElem)), `[null,"x"]`, []cdc.Value{nil, "x"}, ""},
		{"MariaDB TIME 838:59:59", timeConv(time.Microsecond), "3020399000000", "838:59:59", ""},
		{"MariaDB TIME -838:59:59", timeConv(time.Microsecond), "-3020399000000", "-838:59:59", ""},
		{"MariaDB TIME -1µs", timeConv(time.Microsecond), "-1", "-00:00:00.000001", ""},
	}
	for _, c := range cases {
		got, err := c.conv([]byte(c.raw))
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: got %#v, %v; want an error with %q", c.name, got, err, c.err)
		case c.err == "" && (err != nil || !reflect.DeepEqual(got, c.want)):
			t.Errorf("%s: got %#v, %v; want %#v", c.name, got, err, c.want)
		}
	}
}

// TestEdgeRefusals: a column whose values the connector's settings make impossible to tell
// apart refuses its table at its first record (a *cdc.StartError naming the column and the
// setting, never a value); one whose null may stand for a value dead-letters that null.
func TestEdgeRefusals(t *testing.T) {
	id := cdc.TableID{Connector: "postgres", Source: "s", Database: "d", Schema: "public", Table: "t"}
	param := func(typ, length, scale string) map[string]string {
		return map[string]string{paramSourceType: typ, paramSourceLength: length, paramSourceScale: scale}
	}
	key := &connectSchema{Type: "struct", Fields: []connectSchema{{Field: "id", Type: "int32", Parameters: param("INT4", "10", "0")}}}
	cases := []struct {
		name, connector string
		f               connectSchema
		refused         string // a substring of the refusal; "" for none
	}{
		{"numeric precise nullable", "postgresql", connectSchema{Type: "struct", Name: logicalVariableDecimal, Optional: true, Parameters: param("NUMERIC", "0", "0")}, "decimal.handling.mode=string"},
		{"numeric(10,2) precise nullable", "postgresql", connectSchema{Type: "bytes", Name: logicalDecimal, Optional: true, Parameters: map[string]string{"scale": "2", paramSourceType: "NUMERIC", paramSourceLength: "10", paramSourceScale: "2"}}, "decimal.handling.mode=string"},
		{"numeric precise NOT NULL", "postgresql", connectSchema{Type: "struct", Name: logicalVariableDecimal, Parameters: param("NUMERIC", "0", "0")}, "trailing zeros"},
		{"numeric(10,2) precise NOT NULL", "postgresql", connectSchema{Type: "bytes", Name: logicalDecimal, Parameters: map[string]string{"scale": "2", paramSourceType: "NUMERIC", paramSourceLength: "10", paramSourceScale: "2"}}, ""},
		{"numeric string", "postgresql", connectSchema{Type: "string", Optional: true, Parameters: param("NUMERIC", "0", "0")}, ""},
		{"numeric double", "postgresql", connectSchema{Type: "double", Optional: true, Parameters: param("NUMERIC", "10", "2")}, "decimal.handling.mode=double"},
		{"DECIMAL double", "mariadb", connectSchema{Type: "double", Optional: true, Parameters: param("DECIMAL", "10", "2")}, "decimal.handling.mode=double"},
		{"timestamp(6) connect", "postgresql", connectSchema{Type: "int64", Name: logicalConnectTS, Optional: true, Parameters: param("TIMESTAMP", "29", "6")}, "time.precision.mode=adaptive"},
		{"time(6) connect", "postgresql", connectSchema{Type: "int32", Name: logicalConnectTime, Optional: true, Parameters: param("TIME", "15", "6")}, "time.precision.mode=adaptive"},
		{"timestamp(3) connect", "postgresql", connectSchema{Type: "int64", Name: logicalConnectTS, Optional: true, Parameters: param("TIMESTAMP", "26", "3")}, ""},
		{"time(0) connect", "postgresql", connectSchema{Type: "int32", Name: logicalConnectTime, Optional: true, Parameters: param("TIME", "8", "0")}, ""},
		{"DATETIME(6) connect", "mariadb", connectSchema{Type: "int64", Name: logicalConnectTS, Optional: true, Parameters: map[string]string{paramSourceType: "DATETIME", paramSourceLength: "6"}}, "time.precision.mode=adaptive_time_microseconds"},
		{"DATETIME(3) connect", "mariadb", connectSchema{Type: "int64", Name: logicalConnectTS, Optional: true, Parameters: map[string]string{paramSourceType: "DATETIME", paramSourceLength: "3"}}, ""},
		{"TIME connect", "mariadb", connectSchema{Type: "int32", Name: logicalConnectTime, Optional: true, Parameters: map[string]string{paramSourceType: "TIME"}}, "beyond 24:00:00"},
		{"timetz", "postgresql", connectSchema{Type: "string", Name: logicalZonedTime, Optional: true, Parameters: param("TIMETZ", "21", "6")}, "offset is lost"},
		{"money", "postgresql", connectSchema{Type: "bytes", Name: logicalDecimal, Optional: true, Parameters: map[string]string{"scale": "2", paramSourceType: "MONEY", paramSourceLength: "2147483647", paramSourceScale: "0"}}, "currency format"},
		{"varbit", "postgresql", connectSchema{Type: "bytes", Name: logicalBits, Optional: true, Parameters: map[string]string{"length": "8", paramSourceType: "VARBIT", paramSourceLength: "8", paramSourceScale: "0"}}, "column.exclude.list"},
		{"bit(4)", "postgresql", connectSchema{Type: "bytes", Name: logicalBits, Optional: true, Parameters: map[string]string{"length": "4", paramSourceType: "BIT", paramSourceLength: "4", paramSourceScale: "0"}}, ""},
		{"TIME adaptive", "mariadb", connectSchema{Type: "int64", Name: logicalMicroTime, Optional: true, Parameters: map[string]string{paramSourceType: "TIME"}}, ""},
	}
	for _, c := range cases {
		c.f.Field = "v"
		row := &connectSchema{Type: "struct", Fields: []connectSchema{key.Fields[0], c.f}}
		_, err := buildShape(id, c.connector, row, key, false, edgeOptions{})
		var se *cdc.StartError
		switch {
		case c.refused == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.refused != "" && (!errors.As(err, &se) || !strings.Contains(err.Error(), c.refused) || !strings.Contains(err.Error(), `column "v"`)):
			t.Errorf("%s: got %v, want a refusal naming the column and %q", c.name, err, c.refused)
		}
	}

	// The catalog names types as format_type does.
	for typ, lossy := range map[string]bool{"time with time zone": true, "time(3) with time zone": true, "money[]": true,
		"bit varying(8)": true, "_varbit": true, "timestamp with time zone": false, "bit(4)": false, "time without time zone": false} {
		if (pgLossyType(typ) != "") != lossy {
			t.Errorf("pgLossyType(%q) = %q", typ, pgLossyType(typ))
		}
	}

	// Nulls that may stand for a value are dead-lettered; with Options.PlainDates MariaDB's
	// are taken for NULL.
	nullable := func(connector string, f connectSchema, o edgeOptions, snapshot bool) error {
		f.Field = "v"
		row := &connectSchema{Type: "struct", Fields: []connectSchema{key.Fields[0], f}}
		sh, err := buildShape(id, connector, row, key, false, o)
		if err != nil {
			t.Fatal(err)
		}
		return sh.checkAfter([]cdc.Value{int64(1), nil}, snapshot)
	}
	notNullDate := connectSchema{Field: "v", Type: "int32", Name: logicalDate, Parameters: map[string]string{paramSourceType: "DATE"}}
	for _, plain := range []bool{false, true} {
		sh, err := buildShape(id, "mariadb", &connectSchema{Type: "struct", Fields: []connectSchema{key.Fields[0], notNullDate}}, key, false, edgeOptions{plainDates: plain})
		if err != nil {
			t.Fatal(err)
		}
		if err := sh.checkAfter([]cdc.Value{int64(1), "1970-01-01"}, false); (err != nil) == plain || (err != nil && !strings.Contains(err.Error(), "zero dates")) {
			t.Errorf("PlainDates %v: 1970-01-01 in a NOT NULL MariaDB DATE: %v", plain, err)
		}
		if err := sh.checkAfter([]cdc.Value{int64(1), "1970-01-02"}, false); err != nil {
			t.Errorf("1970-01-02 in a NOT NULL MariaDB DATE: %v", err)
		}
	}
	date := connectSchema{Type: "int32", Name: logicalDate, Optional: true, Parameters: map[string]string{paramSourceType: "DATE"}}
	if err := nullable("mariadb", date, edgeOptions{}, false); err == nil || !strings.Contains(err.Error(), "PlainDates") {
		t.Errorf("a null MariaDB DATE: %v", err)
	}
	if err := nullable("mariadb", date, edgeOptions{plainDates: true}, false); err != nil {
		t.Errorf("a null MariaDB DATE with PlainDates: %v", err)
	}
	ts := connectSchema{Type: "string", Name: logicalZonedTimestamp, Optional: true, Parameters: map[string]string{paramSourceType: "TIMESTAMP"}}
	if nullable("mariadb", ts, edgeOptions{}, false) != nil || nullable("mariadb", ts, edgeOptions{}, true) == nil {
		t.Error("a null MariaDB TIMESTAMP: dead-lettered in snapshot reads only")
	}
	dec := connectSchema{Type: "bytes", Name: logicalDecimal, Parameters: map[string]string{"scale": "2", paramSourceType: "NUMERIC", paramSourceLength: "10", paramSourceScale: "2"}}
	if err := nullable("postgresql", dec, edgeOptions{}, false); err == nil || !strings.Contains(err.Error(), "decimal.handling.mode=string") {
		t.Errorf("a null in a NOT NULL numeric under precise: %v", err)
	}
	arr := connectSchema{Type: "array", Optional: true, Items: &connectSchema{Type: "string", Optional: true}, Parameters: param("_NUMERIC", "0", "0")}
	if err := nullable("postgresql", arr, edgeOptions{}, false); err == nil || !strings.Contains(err.Error(), "numeric array") {
		t.Errorf("a null numeric array: %v", err)
	}
	// A PostgreSQL table with a date column refuses its snapshot reads without PlainDates.
	pgDate := connectSchema{Field: "v", Type: "int32", Name: logicalDate, Optional: true, Parameters: param("DATE", "13", "0")}
	for _, plain := range []bool{false, true} {
		sh, err := buildShape(id, "postgresql", &connectSchema{Type: "struct", Fields: []connectSchema{key.Fields[0], pgDate}}, key, false, edgeOptions{plainDates: plain})
		if err != nil {
			t.Fatal(err)
		}
		if err := sh.refuseSnapshot(); (err != nil) == plain || (err != nil && !strings.Contains(err.Error(), "BC date")) {
			t.Errorf("PlainDates %v: snapshot refusal %v", plain, err)
		}
	}
}
