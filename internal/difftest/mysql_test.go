package difftest

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/mysqlcdc"
)

// mariadb is the MariaDB 10.11 dialect: the types of cdc/mysqlcdc's conformance matrix with
// random widths, hex literals, and a read-back in which every value travels as HEX() of its
// canonical text so that no connection character set takes part.
type mariadb struct{ user, pass, addr, db string }

func (mariadb) name() string { return "mysql" }

func (mariadb) quote(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// myText is a string literal that survives any connection character set.
func myText(s string) string {
	if s == "" {
		return "''"
	}
	return "_utf8mb4 X'" + hex.EncodeToString([]byte(s)) + "'"
}

func (m mariadb) conn() (*client.Conn, error) {
	c, err := client.ConnectWithContext(context.Background(), m.addr, m.user, m.pass, m.db, 10*time.Second)
	if err != nil {
		return nil, err
	}
	c.ReadTimeout, c.WriteTimeout = time.Minute, time.Minute
	// Zero dates and out-of-range ENUM values are allowed (stored as the server stores them);
	// TIMESTAMP literals are UTC.
	for _, q := range []string{"SET SESSION sql_mode = ''", "SET SESSION time_zone = '+00:00'"} {
		if _, err := c.Execute(q); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

func (m mariadb) exec(_ context.Context, stmts ...string) error {
	c, err := m.conn()
	if err != nil {
		return err
	}
	defer c.Close()
	for _, q := range stmts {
		if _, err := c.Execute(q); err != nil {
			return fmt.Errorf("%s: %w", short(q), err)
		}
	}
	return nil
}

func (m mariadb) execTx(_ context.Context, stmts ...string) error {
	c, err := m.conn()
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Execute("BEGIN"); err != nil {
		return err
	}
	for _, q := range stmts {
		if _, err := c.Execute(q); err != nil {
			_, _ = c.Execute("ROLLBACK")
			return fmt.Errorf("%s: %w", short(q), err)
		}
	}
	_, err = c.Execute("COMMIT")
	return err
}

func (mariadb) keyTypes() []keyType {
	return []keyType{
		{sql: "BIGINT", lo: -1 << 63, hi: 1<<63 - 1},
		{sql: "INT", lo: -1 << 31, hi: 1<<31 - 1},
		{sql: "BIGINT UNSIGNED", lo: 0, hi: 1<<63 - 1, unsigned: true},
		// A binary collation: keys differing in case or accents are different rows, as they
		// are different _ids.
		{sql: "VARCHAR(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", text: true, maxLen: 40, noTrailingSpace: true},
	}
}

func (mariadb) keyLiteral(k keyType, v string) string {
	if k.text {
		return myText(v)
	}
	return v
}

func (m mariadb) createTable(r *mrand.Rand, qt string, cols []*column) ([]string, string) {
	defs, keys := columnDefs(m.quote, cols)
	charset := pick(r, "utf8mb4", "latin1")
	return []string{fmt.Sprintf("CREATE TABLE %s (%s, PRIMARY KEY (%s)) DEFAULT CHARSET=%s", qt,
		strings.Join(defs, ", "), strings.Join(keys, ", "), charset)}, "default charset " + charset
}

func (m mariadb) dropTable(qt string) []string {
	return []string{"DROP TABLE IF EXISTS " + qt}
}

func (m mariadb) readExpr(c *column) string {
	q := m.quote(c.name)
	if c.t.read != nil {
		return c.t.read(q)
	}
	switch c.t.fam {
	case famText, famJSON, famSet:
		return "HEX(CONVERT(" + q + " USING utf8mb4))"
	case famBinary:
		return "HEX(" + q + ")"
	case famEpoch:
		return "HEX(CAST(UNIX_TIMESTAMP(" + q + ") AS CHAR))"
	case famFloat:
		if c.t.bits == 32 {
			// FLOAT prints with 6 digits; as DOUBLE it prints its exact value's shortest form.
			return "HEX(CAST(CAST(" + q + " AS DOUBLE) AS CHAR))"
		}
	}
	return "HEX(CAST(" + q + " AS CHAR))"
}

func (m mariadb) readBack(_ context.Context, qt string, cols []*column) ([][]*string, error) {
	c, err := m.conn()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	exprs := make([]string, len(cols))
	for i, col := range cols {
		exprs[i] = m.readExpr(col)
	}
	res, err := c.Execute("SELECT " + strings.Join(exprs, ", ") + " FROM " + qt)
	if err != nil {
		return nil, err
	}
	defer res.Close()
	var out [][]*string
	for _, vals := range res.Values {
		row := make([]*string, len(vals))
		for i, v := range vals {
			if v.Type == mysql.FieldValueTypeNull {
				continue
			}
			b, err := hex.DecodeString(string(v.AsString()))
			if err != nil {
				return nil, fmt.Errorf("column %s: read-back is not hex: %w", cols[i].name, err)
			}
			s := string(b)
			row[i] = &s
		}
		out = append(out, row)
	}
	return out, nil
}

func (m mariadb) newSource(t *testing.T, table, _ string) (cdc.Source, error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return mysqlcdc.New(m.addr, m.user, m.pass, []mysqlcdc.TableName{{Database: m.db, Table: table}}, &mysqlcdc.Options{SourceName: "h4diff",
		ServerID: 1<<24 + binary.BigEndian.Uint32(b[:])%(1<<30)})
}

func (mariadb) keyText(c *column, raw string) string { return raw }

func zeroDate(s string) bool {
	return len(s) >= 10 && (s[0:4] == "0000" || s[5:7] == "00" || s[8:10] == "00")
}

func (m mariadb) expect(c *column, raw *string, o mapOpts) (want, string, error) {
	if raw == nil {
		return want{k: wNull}, "", nil
	}
	s := *raw
	switch c.t.fam {
	case famInt:
		w, err := intWant(s)
		return w, "", err
	case famFloat:
		w, err := floatWant(s, c.t.bits)
		return w, "", err
	case famDecimal, famText, famString:
		return want{k: wStr, s: s}, "", nil
	case famBinary:
		return want{k: wStr, s: b64([]byte(s))}, "", nil
	case famDate, famDateTime:
		// sink.AppendDocument: "MySQL zero dates (a zero year, month or day, "0000-00-00")
		// name no instant and become null."
		if zeroDate(s) {
			return want{k: wNull}, "", nil
		}
		if !plainDate.MatchString(s) && !plainDateTime.MatchString(s) {
			return want{}, "", fmt.Errorf("unexpected date text %q", s)
		}
		return want{k: wStr, s: trimFrac(s)}, "", nil
	case famEpoch:
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
	case famSet:
		// "SET: an array of its labels ("a,b" -> ["a","b"])".
		w := want{k: wArr, arr: []want{}}
		if s != "" {
			for _, l := range strings.Split(s, ",") {
				w.arr = append(w.arr, want{k: wStr, s: l})
			}
		}
		return w, "", nil
	}
	return want{}, "", fmt.Errorf("no rule for family %d", c.t.fam)
}

// myCatalogue is every MariaDB type the generator draws from: cdc/mysqlcdc's conformance
// matrix (whose edge literals it reuses) with random widths and precisions.
func myCatalogue() []func(r *mrand.Rand, sfx string) *colType {
	intType := func(sql string, lo, hi int64, edges ...string) func(*mrand.Rand, string) *colType {
		return func(*mrand.Rand, string) *colType {
			return &colType{sql: sql, fam: famInt, gen: func(r *mrand.Rand) string {
				if chance(r, 0.3) {
					return pick(r, edges...)
				}
				return strconv.FormatInt(lo+int64(r.Uint64N(uint64(hi-lo))), 10)
			}}
		}
	}
	decimal := func(prec, scale int) *colType {
		return &colType{sql: fmt.Sprintf("DECIMAL(%d,%d)", prec, scale), fam: famDecimal, gen: func(r *mrand.Rand) string {
			return randDecimal(r, prec-scale, scale)
		}}
	}
	text := func(sql string, maxChars int, latin, big bool) *colType {
		return &colType{sql: sql, fam: famText, big: big, gen: func(r *mrand.Rand) string {
			return myText(randText(r, textLength(r, maxChars), latin))
		}}
	}
	binary := func(sql string, maxBytes int, big bool) *colType {
		return &colType{sql: sql, fam: famBinary, big: big, gen: func(r *mrand.Rand) string {
			n := textLength(r, maxBytes)
			if n == 0 {
				return "''"
			}
			return "X'" + hex.EncodeToString(randBytes(r, n)) + "'"
		}}
	}
	date := func(r *mrand.Rand) string {
		y, m, d := randDateParts(r, 1000, 9999)
		return fmt.Sprintf("%04d-%02d-%02d", y, m, d)
	}
	datetime := func(frac int) *colType {
		sql := "DATETIME"
		if frac > 0 {
			sql += "(" + strconv.Itoa(frac) + ")"
		}
		return &colType{sql: sql, fam: famDateTime, gen: func(r *mrand.Rand) string {
			if chance(r, 0.2) {
				return pick(r, "'0000-00-00 00:00:00'", "'2024-00-10 01:02:03'", "'1000-01-01 00:00:00'",
					"'9999-12-31 23:59:59.999999'", "'0001-01-01 00:00:00'", "'2024-01-02 03:04:05.123456'")
			}
			return "'" + date(r) + " " + randClock(r, frac) + "'"
		}}
	}
	timestamp := func(frac int) *colType {
		sql := "TIMESTAMP"
		if frac > 0 {
			sql += "(" + strconv.Itoa(frac) + ")"
		}
		return &colType{sql: sql + " NULL", fam: famEpoch, gen: func(r *mrand.Rand) string {
			if chance(r, 0.2) {
				return pick(r, "'0000-00-00 00:00:00'", "'1970-01-01 00:00:01'", "'2038-01-19 03:14:07.999999'", "'2024-06-01 12:00:00'")
			}
			y, m, d := randDateParts(r, 1971, 2037)
			return fmt.Sprintf("'%04d-%02d-%02d %s'", y, m, d, randClock(r, frac))
		}}
	}
	timeType := func(frac int) *colType {
		sql := "TIME"
		if frac > 0 {
			sql += "(" + strconv.Itoa(frac) + ")"
		}
		return &colType{sql: sql, fam: famTime, gen: func(r *mrand.Rand) string {
			if chance(r, 0.2) {
				return pick(r, "'-838:59:59'", "'838:59:59'", "'00:00:00'", "'-00:00:00.001'", "'12:34:56.789'")
			}
			s := fmt.Sprintf("%s%d:%02d:%02d", pick(r, "", "-"), r.IntN(839), r.IntN(60), r.IntN(60))
			if frac > 0 && chance(r, 0.7) {
				s += "." + randDigits(r, 1+r.IntN(frac))
			}
			return "'" + s + "'"
		}}
	}
	fixedType := func(t *colType) func(*mrand.Rand, string) *colType {
		return func(*mrand.Rand, string) *colType { c := *t; return &c }
	}
	return []func(r *mrand.Rand, sfx string) *colType{
		intType("TINYINT", -128, 127, "-128", "127", "0"),
		intType("TINYINT UNSIGNED", 0, 255, "255", "0"),
		intType("SMALLINT", -32768, 32767, "-32768", "32767"),
		intType("SMALLINT UNSIGNED", 0, 65535, "65535", "0"),
		intType("MEDIUMINT", -8388608, 8388607, "-8388608", "8388607"),
		intType("MEDIUMINT UNSIGNED", 0, 16777215, "16777215"),
		intType("INT", -1<<31, 1<<31-1, "-2147483648", "2147483647"),
		intType("INT UNSIGNED", 0, 1<<32-1, "4294967295", "0"),
		intType("BIGINT", -1<<63, 1<<63-1, "-9223372036854775808", "9223372036854775807", "9007199254740993"),
		func(*mrand.Rand, string) *colType {
			return &colType{sql: "BIGINT UNSIGNED", fam: famInt, uint64: true, gen: func(r *mrand.Rand) string {
				if chance(r, 0.4) {
					return pick(r, "18446744073709551615", "9223372036854775808", "0", "9007199254740993")
				}
				return strconv.FormatUint(r.Uint64(), 10)
			}}
		},
		intType("TINYINT(1)", 0, 2, "1", "0", "-128", "127"),
		intType("YEAR", 1901, 2155, "0", "1901", "2155", "2024"),
		func(r *mrand.Rand, _ string) *colType {
			prec := 1 + r.IntN(65)
			return decimal(prec, r.IntN(min(prec, 30)+1))
		},
		fixedType(decimal(65, 30)),
		fixedType(decimal(38, 10)),
		fixedType(decimal(20, 0)),
		fixedType(decimal(12, 3)),
		fixedType(&colType{sql: "FLOAT", fam: famFloat, bits: 32, gen: func(r *mrand.Rand) string { return randFloat(r, 32) }}),
		fixedType(&colType{sql: "DOUBLE", fam: famFloat, bits: 64, gen: func(r *mrand.Rand) string { return randFloat(r, 64) }}),
		func(r *mrand.Rand, _ string) *colType {
			n := 1 + r.IntN(64)
			return &colType{sql: fmt.Sprintf("BIT(%d)", n), fam: famString, bits: n,
				read: func(q string) string { return fmt.Sprintf("HEX(LPAD(BIN(%s + 0), %d, '0'))", q, n) },
				gen: func(r *mrand.Rand) string {
					var b strings.Builder
					for range 1 + r.IntN(n) {
						b.WriteByte(byte('0' + r.IntN(2)))
					}
					return "b'" + b.String() + "'"
				}}
		},
		func(r *mrand.Rand, _ string) *colType {
			n := 1 + r.IntN(20)
			latin := chance(r, 0.3)
			cs := pick(r, " CHARACTER SET utf8mb4", "")
			if latin {
				cs = " CHARACTER SET latin1"
			}
			return text(fmt.Sprintf("CHAR(%d)%s", n, cs), n, latin, false)
		},
		func(r *mrand.Rand, _ string) *colType {
			n := 1 + r.IntN(200)
			latin := chance(r, 0.3)
			cs := pick(r, " CHARACTER SET utf8mb4", "")
			if latin {
				cs = " CHARACTER SET latin1"
			}
			return text(fmt.Sprintf("VARCHAR(%d)%s", n, cs), n, latin, false)
		},
		fixedType(text("TINYTEXT CHARACTER SET utf8mb4", 60, false, false)),
		fixedType(text("TINYTEXT CHARACTER SET latin1", 255, true, false)),
		fixedType(text("TEXT CHARACTER SET utf8mb4", 16000, false, true)),
		fixedType(text("MEDIUMTEXT", 0, false, true)),
		fixedType(text("LONGTEXT CHARACTER SET latin1", 0, true, true)),
		func(r *mrand.Rand, _ string) *colType {
			n := 1 + r.IntN(16)
			return binary(fmt.Sprintf("BINARY(%d)", n), n, false)
		},
		func(r *mrand.Rand, _ string) *colType {
			n := 1 + r.IntN(100)
			return binary(fmt.Sprintf("VARBINARY(%d)", n), n, false)
		},
		fixedType(binary("TINYBLOB", 255, false)),
		fixedType(binary("BLOB", 65535, true)),
		fixedType(binary("MEDIUMBLOB", 0, true)),
		fixedType(&colType{sql: "ENUM('a','b c','it''s','☃')", fam: famString,
			read: func(q string) string { return "HEX(CONVERT(" + q + " USING utf8mb4))" },
			gen: func(r *mrand.Rand) string {
				// 'zz' is no label: without a strict sql_mode it is stored as '' (index 0).
				return pick(r, "'a'", "'b c'", "'it''s'", myText("☃"), "'zz'")
			}}),
		fixedType(&colType{sql: "SET('x','y','z','w v')", fam: famSet, gen: func(r *mrand.Rand) string {
			var ls []string
			for _, l := range []string{"z", "x", "w v", "y"} {
				if chance(r, 0.4) {
					ls = append(ls, l)
				}
			}
			return "'" + strings.Join(ls, ",") + "'"
		}}),
		fixedType(&colType{sql: "DATE", fam: famDate, gen: func(r *mrand.Rand) string {
			if chance(r, 0.2) {
				return pick(r, "'0000-00-00'", "'2024-00-10'", "'2024-05-00'", "'1000-01-01'", "'9999-12-31'", "'2024-02-29'")
			}
			return "'" + date(r) + "'"
		}}),
		fixedType(datetime(0)),
		fixedType(datetime(3)),
		fixedType(datetime(6)),
		fixedType(timestamp(0)),
		fixedType(timestamp(3)),
		fixedType(timestamp(6)),
		fixedType(timeType(0)),
		fixedType(timeType(3)),
		fixedType(timeType(6)),
		fixedType(&colType{sql: "JSON", fam: famJSON, big: true, gen: func(r *mrand.Rand) string {
			if chance(r, 0.1) {
				parts := make([]string, 50+r.IntN(100))
				for i := range parts {
					parts[i] = fmt.Sprintf("%q: %s", "k"+strconv.Itoa(i), jsonQuote(randText(r, 40, false)))
				}
				return myText("{" + strings.Join(parts, ", ") + "}")
			}
			return myText(randJSON(r, 3, true))
		}}),
		fixedType(&colType{sql: "UUID", fam: famString, gen: func(r *mrand.Rand) string {
			if chance(r, 0.2) {
				return pick(r, "'123e4567-e89b-12d3-a456-426614174000'", "'00000000-0000-0000-0000-000000000000'", "'0f8fad5b-d9cb-469f-a165-70867728950e'")
			}
			b := randBytes(r, 16)
			return fmt.Sprintf("'%x-%x-%x-%x-%x'", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
		}}),
		fixedType(&colType{sql: "INET4", fam: famString, gen: func(r *mrand.Rand) string {
			return fmt.Sprintf("'%d.%d.%d.%d'", r.IntN(256), r.IntN(256), r.IntN(256), r.IntN(256))
		}}),
		fixedType(&colType{sql: "INET6", fam: famString, gen: func(r *mrand.Rand) string {
			return pick(r, "'::1'", "'::ffff:1.2.3.4'", fmt.Sprintf("'2001:db8::%x'", r.IntN(65536)))
		}}),
	}
}
