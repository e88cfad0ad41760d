package faultsuite

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// The two captured tables every case writes: items has a simple bigint key, events a
// composite (text, integer) key whose text part holds the _id separator and the escape
// character. Between them they carry integers, text (quotes, backslashes, non-ASCII, empty),
// decimals, a boolean (PostgreSQL) or TINYINT (MariaDB), doubles, timestamps with and
// without fractions, dates and NULLs.

// colKind is how a column's value is written, read back and compared.
type colKind uint8

const (
	kInt      colKind = iota // integers: the JSON number's text equals the SQL text
	kText                    // a JSON string
	kDecimal                 // the source's digits as a JSON string
	kBool                    // PostgreSQL boolean: JSON true/false (MariaDB: TINYINT, an integer)
	kFloat                   // a JSON number equal in value
	kDateTime                // "2006-01-02 15:04:05[.ffffff]", trailing fraction zeros trimmed
	kDate                    // "2006-01-02"
)

type column struct {
	name string
	kind colKind
}

type tableDef struct {
	name string   // the SQL table name
	cols []column // the key columns first
	nKey int
}

func (t *tableDef) keyCols() []column { return t.cols[:t.nKey] }

// tablesFor returns the two tables of a case, named after its suffix.
func tablesFor(sfx string) []*tableDef {
	return []*tableDef{
		{name: "flt_" + sfx + "_items", nKey: 1, cols: []column{
			{"id", kInt}, {"n", kInt}, {"label", kText}, {"amount", kDecimal}, {"flag", kBool},
			{"ratio", kFloat}, {"seen", kDateTime},
		}},
		{name: "flt_" + sfx + "_events", nKey: 2, cols: []column{
			{"tenant", kText}, {"seq", kInt}, {"v", kInt}, {"note", kText}, {"day", kDate},
		}},
	}
}

// value is one column value in a form both dialects render as a literal: the canonical text
// of its kind (integers and decimals as digits, booleans "true"/"false", timestamps
// "2006-01-02 15:04:05.ffffff").
type value struct {
	null bool
	s    string
}

var nullValue = value{null: true}

var labels = []string{"", "plain", "it's", `back\slash`, `"quoted"`, "tab\there", "line\nbreak", "Größe",
	"名前", "emoji 🚀", "semi;colon", "percent %s", "<tag>", "  padded  "}

// genValue draws a value of kind k (col names the column, for NULL rules).
func genValue(r *rand.Rand, c column) value {
	if c.name != "id" && c.name != "seq" && c.name != "tenant" && r.IntN(8) == 0 {
		return nullValue
	}
	switch c.kind {
	case kInt:
		switch r.IntN(6) {
		case 0:
			return value{s: strconv.FormatInt(-1<<31, 10)}
		case 1:
			if c.name == "v" {
				return value{s: strconv.FormatInt(1<<63-1, 10)}
			}
		}
		if c.name == "v" {
			return value{s: strconv.FormatInt(r.Int64()-r.Int64(), 10)}
		}
		return value{s: strconv.FormatInt(int64(r.Int32())-int64(r.Int32()), 10)}
	case kText:
		s := labels[r.IntN(len(labels))]
		if r.IntN(2) == 0 {
			s += " " + strconv.Itoa(r.IntN(1000))
		}
		return value{s: s}
	case kDecimal:
		cents := r.Int64N(1e12) // numeric(12,2): up to 9999999999.99
		if r.IntN(3) == 0 {
			cents = r.Int64N(1000)
		}
		sign := ""
		if r.IntN(3) == 0 && cents != 0 {
			sign = "-"
		}
		return value{s: fmt.Sprintf("%s%d.%02d", sign, cents/100, cents%100)}
	case kBool:
		return value{s: strconv.FormatBool(r.IntN(2) == 0)}
	case kFloat:
		// Multiples of 1/8: exact in binary and short in decimal, so the source's text and
		// the document's number are the same double whatever digits each prints.
		return value{s: strconv.FormatFloat(float64(r.IntN(160001)-80000)/8, 'f', -1, 64)}
	case kDateTime:
		sec := 946684800 + r.Int64N(30*365*86400)
		frac := ""
		switch r.IntN(3) {
		case 0:
			frac = fmt.Sprintf(".%06d", r.IntN(1e6))
		case 1:
			frac = fmt.Sprintf(".%03d000", r.IntN(1000))
		}
		return value{s: unixText(sec, "2006-01-02 15:04:05") + frac}
	case kDate:
		return value{s: unixText(946684800+r.Int64N(30*365)*86400, "2006-01-02")}
	}
	panic("unknown column kind")
}

// tenants are the text key parts: the separator and the escape character included, so that
// composite _ids exercise the escaping (sink/doc.go, Documents and _id).
func tenantFor(writer int) string {
	return []string{"w", "w|", `w\`, "wé"}[writer%4] + strconv.Itoa(writer)
}

func unixText(sec int64, layout string) string { return time.Unix(sec, 0).UTC().Format(layout) }

// escapeID is one key part of a composite _id: a backslash becomes \\, and the separator's
// byte '|' gets a backslash before it (sink/doc.go, Documents and _id).
func escapeID(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' || s[i] == '|' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// docID is the _id of a row whose key values are keys (their text, in key order).
func docID(keys []string) string {
	if len(keys) == 1 {
		return keys[0]
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = escapeID(k)
	}
	return strings.Join(parts, "|")
}
