package difftest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
)

// postgres is the PostgreSQL 15 dialect: its types (those of cdc/pgcdc's conformance matrix
// and more), literals, and the read-back the oracle starts from.
type postgres struct{ dsn string }

func (postgres) name() string { return "postgres" }

func (postgres) quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// lit quotes a string literal (standard_conforming_strings is on: backslashes are literal).
func pgLit(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func (p postgres) conn(ctx context.Context) (*pgx.Conn, error) {
	c, err := pgx.Connect(ctx, p.dsn)
	if err != nil {
		return nil, err
	}
	// The read-back's text forms: ISO dates; the other settings are the server's defaults,
	// which the replication session prints with too.
	if _, err := c.Exec(ctx, "SET DateStyle = 'ISO, MDY'"); err != nil {
		c.Close(ctx)
		return nil, err
	}
	return c, nil
}

func (p postgres) exec(ctx context.Context, stmts ...string) error {
	c, err := p.conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	for _, s := range stmts {
		if _, err := c.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", short(s), err)
		}
	}
	return nil
}

func (p postgres) execTx(ctx context.Context, stmts ...string) error {
	c, err := p.conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	tx, err := c.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	for _, s := range stmts {
		if _, err := tx.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", short(s), err)
		}
	}
	return tx.Commit(ctx)
}

func (postgres) keyTypes() []keyType {
	return []keyType{
		{sql: "bigint", lo: -1 << 63, hi: 1<<63 - 1},
		{sql: "integer", lo: -1 << 31, hi: 1<<31 - 1},
		{sql: "smallint", lo: -1 << 15, hi: 1<<15 - 1},
		{sql: "text", text: true},
		{sql: "varchar(40)", text: true, maxLen: 40},
	}
}

func (postgres) keyLiteral(k keyType, v string) string {
	if k.text {
		return pgLit(v)
	}
	return v
}

func (p postgres) createTable(r *rand.Rand, qt string, cols []*column) ([]string, string) {
	defs, keys := columnDefs(p.quote, cols)
	stmts := []string{fmt.Sprintf("CREATE TABLE %s (%s, PRIMARY KEY (%s))", qt, strings.Join(defs, ", "), strings.Join(keys, ", "))}
	identity := "DEFAULT"
	if chance(r, 0.5) {
		identity = "FULL"
		stmts = append(stmts, "ALTER TABLE "+qt+" REPLICA IDENTITY FULL")
	}
	return stmts, "replica identity " + identity
}

func (p postgres) dropTable(qt string) []string {
	return []string{"DROP TABLE IF EXISTS " + qt}
}

// readExpr is the SQL whose text output the oracle reads for a column: the column itself
// (every type's own output function, through the simple protocol), except timestamptz, read
// as exact epoch seconds so that no time zone takes part.
func (p postgres) readExpr(c *column) string {
	q := p.quote(c.name)
	switch {
	case c.t.fam == famEpoch:
		return "extract(epoch from " + q + ")::text"
	case c.t.fam == famArray && c.t.elem.fam == famEpoch:
		return "CASE WHEN " + q + " IS NULL THEN NULL WHEN cardinality(" + q + ") = 0 THEN '{}' ELSE " +
			"(SELECT array_agg(extract(epoch from e) ORDER BY o) FROM unnest(" + q + ") WITH ORDINALITY u(e, o))::text END"
	}
	return q
}

// readBack returns every row of the table: per column the text the oracle starts from, nil
// for NULL.
func (p postgres) readBack(ctx context.Context, qt string, cols []*column) ([][]*string, error) {
	c, err := p.conn(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close(context.WithoutCancel(ctx))
	exprs := make([]string, len(cols))
	for i, col := range cols {
		exprs[i] = p.readExpr(col)
	}
	rows, err := c.Query(ctx, "SELECT "+strings.Join(exprs, ", ")+" FROM "+qt, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]*string
	for rows.Next() {
		raw := rows.RawValues()
		row := make([]*string, len(raw))
		for i, v := range raw {
			if v != nil {
				s := string(v)
				row[i] = &s
			}
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

func (p postgres) newSource(t *testing.T, table, sfx string) (cdc.Source, error) {
	src, err := pgcdc.New(p.dsn, &pgcdc.Options{Name: "h4diff", Slot: "h4diff_" + sfx, Publication: "h4diff_" + sfx,
		Tables: []pgcdc.Table{{Name: table}}, StatusInterval: 200 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := src.Drop(ctx); err != nil {
			t.Errorf("drop slot and publication h4diff_%s: %v", sfx, err)
		}
	})
	return src, nil
}

// keyText is a key column's text in the _id ("gives its text as is").
func (postgres) keyText(c *column, raw string) string { return raw }

// expect derives a column's expected field from its PostgreSQL text, or the rule refusing it.
func (p postgres) expect(c *column, raw *string, o mapOpts) (want, string, error) {
	if raw == nil {
		return want{k: wNull}, "", nil
	}
	return pgWant(c.t, *raw, o)
}

func pgWant(t *colType, s string, o mapOpts) (want, string, error) {
	switch t.fam {
	case famBool:
		return want{k: wBool, b: s == "t"}, "", nil
	case famInt:
		w, err := intWant(s)
		return w, "", err
	case famFloat:
		w, err := floatWant(s, t.bits)
		return w, "", err
	case famDecimal, famText, famString:
		return want{k: wStr, s: s}, "", nil
	case famBinary:
		b, err := pgBytea(s)
		return want{k: wStr, s: b64(b)}, "", err
	case famDate:
		// A date no format parses (infinity, BC, a year past 9999) is written as the source's
		// text: sink/doc.go, Decimals, "PostgreSQL dates and timestamps no date format parses
		// -- infinity, -infinity, BC dates, years past 9999 ... -- are written as PostgreSQL's
		// text into date fields created with ignore_malformed". The output function's text is
		// that text.
		return want{k: wStr, s: s}, "", nil
	case famDateTime:
		if !plainDateTime.MatchString(s) {
			return want{k: wStr, s: s}, "", nil // the source's text, as for famDate
		}
		return want{k: wStr, s: trimFrac(s)}, "", nil
	case famEpoch:
		// extract(epoch ...) gives Infinity for timestamptz's infinities, which name no instant
		// and stay PostgreSQL's text, "infinity" and "-infinity" (same sentence as famDate).
		switch s {
		case "Infinity":
			return want{k: wStr, s: "infinity"}, "", nil
		case "-Infinity":
			return want{k: wStr, s: "-infinity"}, "", nil
		}
		ms, err := epochMillis(s)
		return want{k: wNum, s: ms}, "", err
	case famTime:
		return want{k: wStr, s: trimFrac(s)}, "", nil
	case famJSON:
		cj, err := expectedJSON([]byte(s))
		if err != nil {
			return want{}, "", err
		}
		if o.json == "flattened" && flattenedRefuses([]byte(s)) {
			return want{}, ruleFlattened, nil
		}
		return want{k: wJSON, s: cj}, "", nil
	case famArray:
		a, err := parsePGArray(s)
		if err != nil {
			return want{}, "", err
		}
		return pgArrayWant(t.elem, a, o)
	}
	return want{}, "", fmt.Errorf("no rule for family %d", t.fam)
}

func pgArrayWant(elem *colType, a pgArray, o mapOpts) (want, string, error) {
	if !a.isArr {
		if a.val == nil {
			return want{k: wNull}, "", nil
		}
		return pgWant(elem, *a.val, o)
	}
	w := want{k: wArr, arr: []want{}}
	for _, e := range a.elems {
		ew, rule, err := pgArrayWant(elem, e, o)
		if err != nil || rule != "" {
			return want{}, rule, err
		}
		w.arr = append(w.arr, ew)
	}
	return w, "", nil
}

// pgCatalogue is every PostgreSQL type the generator draws from: cdc/pgcdc's conformance
// matrix (whose edge literals it reuses) plus random precisions, lengths and other types.
func pgCatalogue() []func(r *rand.Rand, sfx string) *colType {
	simple := func(sql string, fam family, gen func(r *rand.Rand) string) func(*rand.Rand, string) *colType {
		return func(*rand.Rand, string) *colType { return &colType{sql: sql, fam: fam, gen: gen} }
	}
	intGen := func(lo, hi int64, edges ...string) func(r *rand.Rand) string {
		return func(r *rand.Rand) string {
			if chance(r, 0.3) {
				return pick(r, edges...)
			}
			return strconv.FormatInt(lo+int64(r.Uint64N(uint64(hi-lo))), 10)
		}
	}
	floatGen := func(bits int) func(r *rand.Rand) string {
		return func(r *rand.Rand) string {
			if chance(r, 0.25) {
				return pick(r, "'NaN'", "'Infinity'", "'-Infinity'")
			}
			return "'" + randFloat(r, bits) + "'"
		}
	}
	numeric := func(prec, scale int) func(r *rand.Rand) string {
		return func(r *rand.Rand) string {
			if chance(r, 0.1) {
				return "'NaN'"
			}
			if scale < 0 {
				return randDecimal(r, prec-scale-1, 0)
			}
			return randDecimal(r, prec-scale, scale)
		}
	}
	textGen := func(max int) func(r *rand.Rand) string {
		return func(r *rand.Rand) string { return pgLit(randText(r, textLength(r, max), false)) }
	}
	date := func(r *rand.Rand) string {
		y, m, d := randDateParts(r, 1, 9999)
		return fmt.Sprintf("%04d-%02d-%02d", y, m, d)
	}
	dateGen := func(r *rand.Rand) string {
		if chance(r, 0.15) {
			return pick(r, "'infinity'", "'-infinity'", "'0044-03-15 BC'", "'10000-01-01'", "'0001-01-01'", "'9999-12-31'")
		}
		return "'" + date(r) + "'"
	}
	tsGen := func(frac int) func(r *rand.Rand) string {
		return func(r *rand.Rand) string {
			if chance(r, 0.15) {
				return pick(r, "'infinity'", "'-infinity'", "'0044-03-15 07:08:09 BC'", "'294276-12-31 23:59:59'",
					"'0001-01-01 00:00:00'", "'9999-12-31 23:59:59.999999'", "'2024-05-06 07:08:09.5'")
			}
			return "'" + date(r) + " " + randClock(r, frac) + "'"
		}
	}
	offset := func(r *rand.Rand) string { return pick(r, "+00", "+02", "-08", "+05:30", "+14", "-12") }
	tstzGen := func(frac int) func(r *rand.Rand) string {
		return func(r *rand.Rand) string {
			if chance(r, 0.15) {
				return pick(r, "'infinity'", "'-infinity'", "'1969-12-31 23:59:59.999999+00'", "'0044-03-15 12:00:00+00 BC'",
					"'0001-01-01 00:00:00+00'", "'9999-12-31 23:59:59.999999+00'", "'2024-05-06 07:08:09.123456+02'", "'12345-01-01 00:00:00+00'")
			}
			return "'" + date(r) + " " + randClock(r, frac) + offset(r) + "'"
		}
	}
	timeGen := func(r *rand.Rand) string {
		if chance(r, 0.2) {
			return pick(r, "'24:00:00'", "'00:00:00'", "'23:59:59.999999'", "'13:14:15.25'")
		}
		return "'" + randClock(r, 6) + "'"
	}
	jsonGen := func(dups bool) func(r *rand.Rand) string {
		return func(r *rand.Rand) string {
			if chance(r, 0.1) {
				// Large enough to be TOASTed.
				parts := make([]string, 50+r.IntN(100))
				for i := range parts {
					parts[i] = fmt.Sprintf("%q: %s", "k"+strconv.Itoa(i), jsonQuote(randText(r, 40, false)))
				}
				return pgLit("{" + strings.Join(parts, ", ") + "}")
			}
			return pgLit(randJSON(r, 3, dups))
		}
	}
	uuidGen := func(r *rand.Rand) string {
		if chance(r, 0.1) {
			return pick(r, "'00000000-0000-0000-0000-000000000000'", "'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'")
		}
		b := randBytes(r, 16)
		return fmt.Sprintf("'%x-%x-%x-%x-%x'", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
	}
	bitGen := func(n int, vary bool) func(r *rand.Rand) string {
		return func(r *rand.Rand) string {
			k := n
			if vary {
				k = r.IntN(n + 1)
			}
			var b strings.Builder
			for range k {
				b.WriteByte(byte('0' + r.IntN(2)))
			}
			return "B'" + b.String() + "'"
		}
	}
	array := func(elem *colType, sql string, dims int) *colType {
		t := &colType{sql: sql, fam: famArray, elem: elem}
		t.gen = func(r *rand.Rand) string {
			one := func(n int) string {
				parts := make([]string, n)
				for i := range parts {
					if chance(r, 0.15) {
						parts[i] = "NULL"
					} else {
						parts[i] = "(" + elem.gen(r) + ")::" + elem.sql
					}
				}
				return "ARRAY[" + strings.Join(parts, ", ") + "]"
			}
			n := r.IntN(5)
			if n == 0 {
				return "'{}'::" + sql
			}
			if dims == 2 {
				rows := make([]string, 1+r.IntN(3))
				for i := range rows {
					rows[i] = one(n)
				}
				return "ARRAY[" + strings.Join(rows, ", ") + "]::" + sql
			}
			return one(n) + "::" + sql
		}
		return t
	}
	otherGen := func(vals ...func(r *rand.Rand) string) func(r *rand.Rand) string {
		return func(r *rand.Rand) string { return pick(r, vals...)(r) }
	}
	fixed := func(s string) func(*rand.Rand) string { return func(*rand.Rand) string { return s } }
	elemOf := func(f func(*rand.Rand, string) *colType) *colType { return f(nil, "") }

	cat := []func(r *rand.Rand, sfx string) *colType{
		simple("smallint", famInt, intGen(-1<<15, 1<<15-1, "-32768", "32767", "0")),
		simple("integer", famInt, intGen(-1<<31, 1<<31-1, "-2147483648", "2147483647", "42")),
		simple("bigint", famInt, intGen(-1<<63, 1<<63-1, "-9223372036854775808", "9223372036854775807", "9007199254740993")),
		simple("oid", famInt, func(r *rand.Rand) string {
			return "'" + pick(r, "0", "4294967295", strconv.FormatUint(r.Uint64N(1<<32), 10)) + "'"
		}),
		simple("real", famFloat, floatGen(32)),
		simple("double precision", famFloat, floatGen(64)),
		func(r *rand.Rand, _ string) *colType {
			prec := 1 + r.IntN(38)
			scale := r.IntN(prec + 1)
			return &colType{sql: fmt.Sprintf("numeric(%d,%d)", prec, scale), fam: famDecimal, gen: numeric(prec, scale)}
		},
		simple("numeric(38,10)", famDecimal, numeric(38, 10)),
		simple("numeric(30,20)", famDecimal, numeric(30, 20)),
		simple("numeric(5,-2)", famDecimal, numeric(5, -2)),
		simple("numeric", famDecimal, func(r *rand.Rand) string {
			if chance(r, 0.3) {
				return pick(r, "'NaN'", "'Infinity'", "'-Infinity'", "123456789012345678901234567890.000000000000000000001",
					"9007199254740993", "-0.000000000000000000000000000001")
			}
			return randDecimal(r, 1+r.IntN(45), r.IntN(30))
		}),
		func(r *rand.Rand, sfx string) *colType {
			dom := `"h4diff_price_` + sfx + `"`
			return &colType{sql: dom, fam: famDecimal, gen: numeric(7, 2),
				setup: []string{"CREATE DOMAIN " + dom + " AS numeric(7,2)"}, teardown: []string{"DROP DOMAIN IF EXISTS " + dom}}
		},
		simple("boolean", famBool, func(r *rand.Rand) string { return pick(r, "true", "false") }),
		func(r *rand.Rand, _ string) *colType {
			return &colType{sql: "text", fam: famText, big: true, gen: textGen(0)}
		},
		func(r *rand.Rand, _ string) *colType {
			n := 1 + r.IntN(64)
			return &colType{sql: fmt.Sprintf("varchar(%d)", n), fam: famText, gen: textGen(n)}
		},
		func(r *rand.Rand, _ string) *colType {
			n := 1 + r.IntN(10)
			return &colType{sql: fmt.Sprintf("char(%d)", n), fam: famText, gen: textGen(n)}
		},
		func(r *rand.Rand, _ string) *colType {
			return &colType{sql: "bytea", fam: famBinary, big: true, gen: func(r *rand.Rand) string {
				return fmt.Sprintf(`'\x%x'`, randBytes(r, textLength(r, 0)))
			}}
		},
		simple("date", famDate, dateGen),
		simple("time", famTime, timeGen),
		simple("time(3)", famTime, timeGen),
		simple("timetz", famString, func(r *rand.Rand) string { return "'" + randClock(r, 6) + offset(r) + "'" }),
		simple("timestamp", famDateTime, tsGen(6)),
		simple("timestamp(3)", famDateTime, tsGen(6)),
		simple("timestamptz", famEpoch, tstzGen(6)),
		simple("timestamptz(2)", famEpoch, tstzGen(6)),
		func(r *rand.Rand, _ string) *colType {
			return &colType{sql: "json", fam: famJSON, big: true, gen: jsonGen(true)}
		},
		func(r *rand.Rand, _ string) *colType {
			return &colType{sql: "jsonb", fam: famJSON, big: true, gen: jsonGen(false)}
		},
		simple("uuid", famString, uuidGen),
		func(r *rand.Rand, sfx string) *colType {
			typ := `"h4diff_mood_` + sfx + `"`
			return &colType{sql: typ, fam: famString, gen: func(r *rand.Rand) string { return pick(r, "'sad'", "'ok'", "'happy'", "'it''s ☃'") },
				setup: []string{"CREATE TYPE " + typ + " AS ENUM ('sad', 'ok', 'happy', 'it''s ☃')"}, teardown: []string{"DROP TYPE IF EXISTS " + typ}}
		},
		func(r *rand.Rand, _ string) *colType {
			n := 1 + r.IntN(70)
			return &colType{sql: fmt.Sprintf("bit(%d)", n), fam: famString, gen: bitGen(n, false)}
		},
		func(r *rand.Rand, _ string) *colType {
			n := 1 + r.IntN(70)
			return &colType{sql: fmt.Sprintf("varbit(%d)", n), fam: famString, gen: bitGen(n, true)}
		},
		simple("interval", famString, otherGen(fixed("'1 day 02:03:04'"), fixed("'-1 mons'"), fixed("'00:00:00.000001'"),
			fixed("'-178000000 years'"), func(r *rand.Rand) string {
				return fmt.Sprintf("'%d years %d mons %d days %02d:%02d:%02d.%d'", r.IntN(100), r.IntN(12), r.IntN(40)-20, r.IntN(24), r.IntN(60), r.IntN(60), r.IntN(1000))
			})),
		simple("inet", famString, otherGen(fixed("'::1'"), fixed("'192.168.0.1/24'"), func(r *rand.Rand) string {
			return fmt.Sprintf("'%d.%d.%d.%d'", r.IntN(256), r.IntN(256), r.IntN(256), r.IntN(256))
		}, func(r *rand.Rand) string { return fmt.Sprintf("'2001:db8::%x/%d'", r.IntN(65536), 64+r.IntN(65)) })),
		simple("cidr", famString, func(r *rand.Rand) string { return fmt.Sprintf("'10.%d.0.0/16'", r.IntN(256)) }),
		simple("macaddr", famString, func(r *rand.Rand) string {
			b := randBytes(r, 6)
			return fmt.Sprintf("'%x:%x:%x:%x:%x:%x'", b[0], b[1], b[2], b[3], b[4], b[5])
		}),
		simple("point", famString, func(r *rand.Rand) string { return fmt.Sprintf("'(%s,%s)'", randFloat(r, 64), randFloat(r, 64)) }),
		simple("int4range", famString, otherGen(fixed("'empty'"), func(r *rand.Rand) string {
			a := r.IntN(1000) - 500
			return fmt.Sprintf("'[%d,%d)'", a, a+1+r.IntN(100))
		})),
		simple("tsvector", famString, func(r *rand.Rand) string {
			words := make([]string, r.IntN(5))
			for i := range words {
				words[i] = pick(r, "fat", "cat", "a", "rat:1A", "ünï", "x")
			}
			return pgLit(strings.Join(words, " "))
		}),
		simple("xml", famString, otherGen(fixed("'<a>x</a>'"), fixed("'<a b=\"1\">&amp;é</a>'"), fixed("'plain text'"))),
		simple("money", famString, func(r *rand.Rand) string { return fmt.Sprintf("'%d.%02d'", r.IntN(2000000)-1000000, r.IntN(100)) }),
		func(r *rand.Rand, _ string) *colType {
			return array(elemOf(simple("integer", famInt, intGen(-1<<31, 1<<31-1, "-2147483648", "2147483647"))), "integer[]", 1)
		},
		func(r *rand.Rand, _ string) *colType {
			return array(elemOf(simple("bigint", famInt, intGen(-1<<63, 1<<63-1, "9223372036854775807"))), "bigint[]", 2)
		},
		func(r *rand.Rand, _ string) *colType {
			return array(&colType{sql: "text", fam: famText, gen: textGen(40)}, "text[]", 1)
		},
		func(r *rand.Rand, _ string) *colType {
			return array(&colType{sql: "numeric(5,2)", fam: famDecimal, gen: numeric(5, 2)}, "numeric(5,2)[]", 1)
		},
		func(r *rand.Rand, _ string) *colType {
			return array(&colType{sql: "bytea", fam: famBinary, gen: func(r *rand.Rand) string { return fmt.Sprintf(`'\x%x'`, randBytes(r, r.IntN(8))) }}, "bytea[]", 1)
		},
		func(r *rand.Rand, _ string) *colType {
			return array(&colType{sql: "timestamptz", fam: famEpoch, gen: tstzGen(6)}, "timestamptz[]", 1)
		},
		func(r *rand.Rand, _ string) *colType {
			return array(&colType{sql: "double precision", fam: famFloat, bits: 64, gen: floatGen(64)}, "double precision[]", 1)
		},
		func(r *rand.Rand, _ string) *colType {
			return array(&colType{sql: "date", fam: famDate, gen: dateGen}, "date[]", 1)
		},
		func(r *rand.Rand, _ string) *colType {
			return array(&colType{sql: "boolean", fam: famBool, gen: func(r *rand.Rand) string { return pick(r, "true", "false") }}, "boolean[]", 1)
		},
		func(r *rand.Rand, _ string) *colType {
			return array(&colType{sql: "uuid", fam: famString, gen: uuidGen}, "uuid[]", 1)
		},
	}
	// Widths the constructors above leave to the family.
	for i, f := range cat {
		cat[i] = func(r *rand.Rand, sfx string) *colType {
			t := f(r, sfx)
			fillBits(t)
			return t
		}
	}
	return cat
}

// fillBits sets float widths from the type name where the constructor did not.
func fillBits(t *colType) {
	if t.elem != nil {
		fillBits(t.elem)
	}
	if t.fam == famFloat && t.bits == 0 {
		t.bits = 64
		if t.sql == "real" || t.sql == "FLOAT" {
			t.bits = 32
		}
	}
}
