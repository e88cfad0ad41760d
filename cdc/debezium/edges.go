package debezium

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/cdc"
)

// Debezium's edge values: what the connectors write for values their representation cannot
// carry, measured through the real connectors (debezium-connector-postgres 3.6.1.Final,
// debezium-connector-mariadb 3.5.0.Final; the package documentation's value table). Each is
// decoded exactly where the value can be told apart, dead-lettered where one value cannot
// (naming the setting that fixes it, if any), and refused at a table's first record where the
// connector's settings make a column's values impossible to tell apart.

// PostgreSQL's infinities of date and timestamp, as the PostgreSQL connector writes them: the
// days of LocalDate -5877611-06-21 and -22 when streamed, those of java.sql.Date's
// DATE_POSITIVE_INFINITY and DATE_NEGATIVE_INFINITY in the JVM's zone when read by the
// snapshot; PGStatement's DATE_POSITIVE_INFINITY and DATE_NEGATIVE_INFINITY as microseconds
// (adaptive) or milliseconds (connect) for timestamp, both paths.
const (
	pgDatePosInfStream   = -2147472692
	pgDateNegInfStream   = -2147472691
	pgDatePosInfSnapshot = -622191234
	pgDateNegInfSnapshot = -625821272
	pgTSPosInfMicros     = 9223372036825200000
	pgTSNegInfMicros     = -9223372036832400000
	pgTSPosInfMillis     = 9223372036825200
	pgTSNegInfMillis     = -9223372036832400
	// PostgreSQL's range: 4714-11-24 BC (Julian day 0) to 5874897-12-31 for dates; timestamps
	// from 4714-11-24 00:00 BC.
	pgMinDate       = -2440588
	pgMaxDate       = 2145042905
	pgMinTSMicros   = pgMinDate * 86400 * 1_000_000
	pgSnapshotSlack = 1 // the snapshot's sentinels depend on the worker JVM's time zone
)

// pgDateConv converts a PostgreSQL date: the connector's infinities become "infinity" and
// "-infinity", as pgcdc reports them; any other day outside PostgreSQL's range is no date the
// column can hold.
func pgDateConv(raw []byte) (cdc.Value, error) {
	n, err := jsonInt(raw)
	if err != nil {
		return nil, err
	}
	near := func(a, b int64) bool { return a-b <= pgSnapshotSlack && b-a <= pgSnapshotSlack }
	switch {
	case n == pgDatePosInfStream || near(n, pgDatePosInfSnapshot):
		return "infinity", nil
	case n == pgDateNegInfStream || near(n, pgDateNegInfSnapshot):
		return "-infinity", nil
	case n < pgMinDate || n > pgMaxDate:
		return nil, errors.New("a date outside PostgreSQL's range (not a form of an infinity this package knows)")
	}
	return dateConv(raw)
}

// pgDateTimeConv converts a PostgreSQL timestamp in unit (milliseconds or microseconds) since
// the epoch: the connector's infinities become "infinity" and "-infinity". A timestamp after
// 294247-01-10 04:00:25.2 overflows the connector's 64-bit microseconds and wraps below
// PostgreSQL's range: dead-lettered. The one instant 294247-01-10 04:00:25.2 itself is
// written as the infinity is, and read as the infinity (documented).
func pgDateTimeConv(unit time.Duration) converter {
	inner := dateTimeConv(unit)
	pos, neg, min := int64(pgTSPosInfMicros), int64(pgTSNegInfMicros), int64(pgMinTSMicros)
	if unit == time.Millisecond {
		pos, neg, min = pgTSPosInfMillis, pgTSNegInfMillis, pgMinTSMicros/1000
	}
	return func(raw []byte) (cdc.Value, error) {
		n, err := jsonInt(raw)
		if err != nil {
			return nil, err
		}
		switch {
		case n == pos:
			return "infinity", nil
		case n == neg:
			return "-infinity", nil
		case n < min:
			return nil, errors.New("a timestamp the connector's 64-bit microseconds overflowed (after 294247 AD; no connector setting carries it)")
		}
		return inner(raw)
	}
}

// parseISOInstant parses the connector's ZonedTimestamp text, RFC 3339 with years beyond 9999
// signed ("+10000-01-01T00:00:00Z") and year 0 and below for BC.
func parseISOInstant(s string) (time.Time, bool) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, true
	}
	sign := 1
	switch {
	case strings.HasPrefix(s, "+"):
		s = s[1:]
	case strings.HasPrefix(s, "-"):
		sign, s = -1, s[1:]
	}
	i := strings.IndexByte(s, '-')
	if i < 4 {
		return time.Time{}, false
	}
	year, err := strconv.Atoi(s[:i])
	if err != nil {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, "2000"+s[i:]) // a leap year: February 29 parses
	if err != nil {
		return time.Time{}, false
	}
	return t.AddDate(sign*year-2000, 0, 0), true
}

// decimalStringConv converts a decimal as text (decimal.handling.mode=string): the digits as
// they are, the PostgreSQL connector's NaN and infinities (written as Java's enum names NAN,
// POSITIVE_INFINITY, NEGATIVE_INFINITY) as PostgreSQL prints them.
func decimalStringConv(raw []byte) (cdc.Value, error) {
	s, err := jsonString(raw)
	if err != nil {
		return nil, err
	}
	switch s {
	case "NAN", "NaN":
		return "NaN", nil
	case "POSITIVE_INFINITY", "Infinity":
		return "Infinity", nil
	case "NEGATIVE_INFINITY", "-Infinity":
		return "-Infinity", nil
	}
	if !decimalText.MatchString(s) {
		return nil, errors.New("a decimal that is not a number")
	}
	return s, nil
}

var decimalText = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)

// javaArrayText matches what the PostgreSQL connector writes for a sub-array of a
// multi-dimensional array whose elements it carries as strings: Java's Object.toString of the
// array ("[Ljava.lang.String;@4cb15355", "[Ljava.util.UUID;@18735d42").
var javaArrayText = regexp.MustCompile(`^"\[+(L[A-Za-z0-9_.$]+;|[BCDFIJSZ])@[0-9a-f]+"$`)

// errMultiDim is the reason of a PostgreSQL array the connector wrote without its sub-arrays.
const errMultiDim = "Debezium writes each sub-array of a multi-dimensional array as null (or as Java object text), " +
	"which cannot be told from a NULL element; no connector setting carries them (capture the table with pgcdc)"

// pgArrayConv converts a PostgreSQL array whose element conversion is elem. A sub-array of a
// multi-dimensional array arrives as Java object text when the connector reads the elements as
// Java strings or UUIDs (text types, uuid: measured), as null otherwise. nullsAreNull says the
// former: a null element is then a NULL; otherwise it cannot be told from a sub-array, and the
// value is dead-lettered.
func pgArrayConv(elem converter, nullsAreNull bool) converter {
	inner := arrayConv(func(raw []byte) (cdc.Value, error) {
		if javaArrayText.Match(raw) {
			return nil, errors.New(errMultiDim)
		}
		return elem(raw)
	})
	return func(raw []byte) (cdc.Value, error) {
		v, err := inner(raw)
		if err != nil {
			return nil, err
		}
		if !nullsAreNull {
			for _, e := range v.([]cdc.Value) {
				if e == nil {
					return nil, errors.New("an array holding a null element: " + errMultiDim)
				}
			}
		}
		return v, nil
	}
}

// pgNullsAreNull says whether the connector writes a multi-dimensional array of elem's type
// with its sub-arrays as Java object text (so a null element is a NULL).
func pgNullsAreNull(elem *cdc.Column) bool {
	return elem != nil && (elem.Kind == cdc.KindText || elem.Kind == cdc.KindUUID)
}

// Refusals and per-value checks of a column, from its schema and the connector's settings.

// columnRules are the checks of one column beyond its conversion.
type columnRules struct {
	// nullReason, when set, dead-letters a null in the column's after image: the connector
	// writes a value it cannot carry as null, and the column's null cannot be a NULL.
	nullReason string
	// nullSnapshotOnly limits nullReason to snapshot reads.
	nullSnapshotOnly bool
	// epochReason, when set, dead-letters 1970-01-01 (00:00:00) in the after image: the value
	// a NOT NULL MariaDB DATE or DATETIME gets for a zero date.
	epochReason string
}

// edgeOptions are the settings and assurances the checks depend on.
type edgeOptions struct {
	plainDates bool // Options.PlainDates
	// preciseNulls reads PostgreSQL numerics under decimal.handling.mode=precise as they
	// come (a null for a NULL, an unconstrained numeric without its trailing zeros), and
	// timetz, money and varbit as the connector writes them: only the tests set it, to read
	// fixtures captured that way.
	preciseNulls bool
}

// msTemporal reports whether the logical type carries milliseconds.
func msTemporal(name string) bool {
	switch name {
	case logicalConnectTime, logicalConnectTS, logicalTime, logicalTimestamp:
		return true
	}
	return false
}

// refusal returns why the column's values cannot be carried exactly under the connector's
// settings, and the fix ("" when they can). f is the column's field schema (nil for a column
// from the catalog, whose representation is Debezium's default).
func refusal(connector string, c *cdc.Column, f *connectSchema, o edgeOptions) (problem, fix string) {
	pg := connector == "postgresql"
	if f == nil {
		return "", ""
	}
	if pg && !o.preciseNulls {
		if why := pgLossyType(c.SourceType); why != "" {
			return fmt.Sprintf("column %q: %s", c.Name, why), lossyFix
		}
	}
	switch {
	case c.Kind == cdc.KindDecimal && (f.Type == "double" || f.Type == "float64" || f.Type == "float" || f.Type == "float32"):
		return fmt.Sprintf("column %q: decimal.handling.mode=double carries decimals as binary doubles, which lose digits", c.Name),
			"set decimal.handling.mode=string (or precise) on the connector"
	case pg && !o.preciseNulls && (f.Name == logicalVariableDecimal || (f.Items != nil && f.Items.Name == logicalVariableDecimal)):
		return fmt.Sprintf("column %q: decimal.handling.mode=precise drops an unconstrained numeric's trailing zeros (1.50 arrives as 1.5) and writes NaN and Infinity as null", c.Name),
			"set decimal.handling.mode=string on the connector"
	case pg && c.Kind == cdc.KindDecimal && c.Nullable && !o.preciseNulls && f.Name == logicalDecimal:
		return fmt.Sprintf("column %q: decimal.handling.mode=precise writes numeric NaN as null, which cannot be told from NULL", c.Name),
			"set decimal.handling.mode=string on the connector"
	case (c.Kind == cdc.KindTime || c.Kind == cdc.KindDateTime) && msTemporal(f.Name) && c.Precision > 3:
		mode := "adaptive_time_microseconds"
		if pg {
			mode = "adaptive (or adaptive_time_microseconds)"
		}
		return fmt.Sprintf("column %q: time.precision.mode=connect carries milliseconds, and the column has %d fractional digits", c.Name, c.Precision),
			"set time.precision.mode=" + mode + " on the connector"
	case !pg && c.Kind == cdc.KindTime && f.Name == logicalConnectTime:
		return fmt.Sprintf("column %q: time.precision.mode=connect writes a TIME beyond 24:00:00 or below zero as null", c.Name),
			"set time.precision.mode=adaptive_time_microseconds on the connector"
	}
	return "", ""
}

// rulesFor returns the per-value checks of a column; decimalPrecise says its decimals arrive
// in the precise form (which has no NaN).
func rulesFor(connector string, c *cdc.Column, decimalPrecise bool, o edgeOptions) columnRules {
	pg := connector == "postgresql"
	switch {
	case pg && c.Kind == cdc.KindDecimal && decimalPrecise && !c.Nullable && !o.preciseNulls:
		return columnRules{nullReason: "decimal.handling.mode=precise writes numeric NaN and Infinity as null (fix: set decimal.handling.mode=string on the connector)"}
	case pg && c.Kind == cdc.KindArray && c.Elem != nil && c.Elem.Kind == cdc.KindDecimal:
		return columnRules{nullReason: "Debezium writes a numeric array holding NaN or Infinity as null, which cannot be told from NULL under any decimal.handling.mode (capture the table with pgcdc, or leave the column out: column.exclude.list)"}
	case !pg && !o.plainDates && !c.Nullable && (c.Kind == cdc.KindDate || c.Kind == cdc.KindDateTime):
		return columnRules{epochReason: "Debezium writes MariaDB's zero dates in a NOT NULL column as 1970-01-01, which cannot be told from that date (fix: Options.PlainDates once the server's sql_mode holds NO_ZERO_DATE and NO_ZERO_IN_DATE, or no zero date is ever written)"}
	case !pg && !o.plainDates && c.Nullable && (c.Kind == cdc.KindDate || c.Kind == cdc.KindDateTime):
		return columnRules{nullReason: "Debezium writes MariaDB's zero dates (0000-00-00, a zero month or day, year 0) as null, which cannot be told from NULL (fix: Options.PlainDates once the server's sql_mode holds NO_ZERO_DATE and NO_ZERO_IN_DATE, or no zero date is ever written)"}
	case !pg && !o.plainDates && c.Nullable && c.Kind == cdc.KindTimestamp:
		return columnRules{nullReason: "Debezium's snapshot writes MariaDB's zero TIMESTAMP as null, which cannot be told from NULL (fix: Options.PlainDates once no zero TIMESTAMP is ever written)", nullSnapshotOnly: true}
	}
	return columnRules{}
}

// snapshotDateProblem says why a PostgreSQL table's snapshot reads cannot be taken when it
// has a date column (Options.PlainDates unset): Debezium's snapshot reads dates through JDBC
// and drops a BC date's era (1 BC arrives as 0001-01-01), so every snapshot date could be
// either. Streamed changes carry BC dates right.
func snapshotDateProblem(s *cdc.TableSchema) (problem, fix string) {
	for _, c := range s.Columns {
		if c.Kind == cdc.KindDate || (c.Kind == cdc.KindArray && c.Elem != nil && c.Elem.Kind == cdc.KindDate) {
			return fmt.Sprintf("column %q: Debezium's snapshot reads a BC date as the AD date of the same digits, which cannot be told apart", c.Name),
				"set Options.PlainDates (mirror: source.plain_dates) when the table holds no BC date, or snapshot with pgcdc and start the connector with snapshot.mode=no_data"
		}
	}
	return "", ""
}

// checkAfter dead-letters a value the connector may have written for one it cannot carry
// (columnRules) in a row's after image; snapshot says the row is a snapshot read. Before
// images are not checked: the sink takes only their key (and, PostgreSQL, unchanged values
// from the index, not from them).
func (sh *tableShape) checkAfter(after []cdc.Value, snapshot bool) error {
	if after == nil {
		return nil
	}
	for i := range sh.columns {
		r := &sh.columns[i].rules
		switch {
		case r.nullReason != "" && after[i] == nil && (snapshot || !r.nullSnapshotOnly):
			return fmt.Errorf("column %q is null: %s", sh.columns[i].col.Name, r.nullReason)
		case r.epochReason != "" && (after[i] == "1970-01-01" || after[i] == "1970-01-01 00:00:00"):
			return fmt.Errorf("column %q is 1970-01-01: %s", sh.columns[i].col.Name, r.epochReason)
		}
	}
	return nil
}

// refuseSnapshot is the refusal of a table's snapshot reads (tableShape.snapshotProblem).
func (sh *tableShape) refuseSnapshot() error {
	if sh.snapshotProblem == "" {
		return nil
	}
	return &configError{&cdc.StartError{Component: "debezium", Problems: []cdc.StartProblem{{Table: sh.schema.ID, Problem: sh.snapshotProblem, Fix: sh.snapshotFix}}}}
}

// catalogRefusal is refusal for a column the catalog describes, read in Debezium's default
// representations (decimals precise unless decimalString).
func catalogRefusal(connector string, c *cdc.Column, decimalString bool, o edgeOptions) (problem, fix string) {
	if connector != "postgresql" || o.preciseNulls {
		return "", ""
	}
	if why := pgLossyType(c.SourceType); why != "" {
		return fmt.Sprintf("column %q: %s", c.Name, why), lossyFix
	}
	if decimalString {
		return "", ""
	}
	const toString = "set decimal.handling.mode=string on the connector and Options.DecimalStrings (mirror: source.decimal_handling: string)"
	switch {
	case (c.Kind == cdc.KindDecimal && c.Precision == 0) || (c.Kind == cdc.KindArray && c.Elem != nil && c.Elem.Kind == cdc.KindDecimal && c.Elem.Precision == 0):
		return fmt.Sprintf("column %q: decimal.handling.mode=precise drops an unconstrained numeric's trailing zeros (1.50 arrives as 1.5) and writes NaN and Infinity as null", c.Name), toString
	case c.Kind == cdc.KindDecimal && c.Nullable:
		return fmt.Sprintf("column %q: decimal.handling.mode=precise writes numeric NaN as null, which cannot be told from NULL", c.Name), toString
	}
	return "", ""
}

// lossyFix is the fix of a PostgreSQL type whose values no connector setting carries exactly.
const lossyFix = "no connector setting carries it: leave the column out of the capture (column.exclude.list) or capture the table with pgcdc"

// pgLossyType says why the PostgreSQL connector cannot carry values of the type named
// sourceType (Debezium's type name, or format_type's in a catalog; arrays included) exactly,
// or "".
func pgLossyType(sourceType string) string {
	t := strings.TrimSuffix(strings.TrimPrefix(strings.ToLower(sourceType), "_"), "[]")
	switch {
	case t == "timetz" || strings.HasPrefix(t, "time with time zone") || (strings.HasPrefix(t, "time(") && strings.HasSuffix(t, "with time zone")):
		return "Debezium converts a timetz to UTC, so its offset is lost"
	case t == "money":
		return "Debezium writes money as digits, without its currency format"
	case t == "varbit" || strings.HasPrefix(t, "bit varying"):
		return "Debezium writes a varbit without its length, so a value shorter than the declared length cannot be told from one padded with zeros"
	}
	return ""
}
