package mysqlcdc_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/cdctest"
	"github.com/tributary-dev/tributary/cdc/mysqlcdc"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// server is the test server from TRIBUTARY_MYSQL_DSN.
type server struct {
	user, pass, addr, db string
}

// eachPositioning runs fn as the subtests "gtid" and "file", one per positioning, each with
// the test server and a two-minute bound.
func eachPositioning(t *testing.T, fn func(ctx context.Context, t *testing.T, s server, p mysqlcdc.Positioning)) {
	for _, pos := range []struct {
		name string
		p    mysqlcdc.Positioning
	}{{"gtid", mysqlcdc.PositionGTID}, {"file", mysqlcdc.PositionFile}} {
		t.Run(pos.name, func(t *testing.T) {
			s := testServer(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			fn(ctx, t, s, pos.p)
		})
	}
}

func testServer(t *testing.T) server {
	t.Helper()
	dsn := testenv.Require(t, testenv.MySQLDSN)
	s, err := parseDSN(dsn)
	if err != nil {
		t.Fatalf("%s: %v", testenv.MySQLDSN, err)
	}
	return s
}

// parseDSN splits a go-sql-driver/mysql DSN, user:pass@tcp(host:port)/db[?...].
func parseDSN(dsn string) (server, error) {
	m, err := testenv.ParseMySQLDSN(dsn)
	if err != nil {
		return server{}, err
	}
	return server{user: m.User, pass: m.Password, addr: m.Addr, db: m.DB}, nil
}

var serverIDs atomic.Uint32

// nextServerID returns a replica id no other test run is likely to hold at the same time.
func nextServerID() uint32 {
	if serverIDs.Load() == 0 {
		var b [4]byte
		_, _ = rand.Read(b[:])
		serverIDs.CompareAndSwap(0, 1<<24+binary.BigEndian.Uint32(b[:])%(1<<30))
	}
	return serverIDs.Add(1)
}

func (s server) conn() (*client.Conn, error) {
	c, err := client.ConnectWithContext(context.Background(), s.addr, s.user, s.pass, s.db, 10*time.Second)
	if err != nil {
		return nil, err
	}
	c.ReadTimeout, c.WriteTimeout = time.Minute, time.Minute
	return c, nil
}

// exec runs statements on a fresh connection, each in its own transaction (autocommit).
func (s server) exec(stmts ...string) error {
	c, err := s.conn()
	if err != nil {
		return err
	}
	defer c.Close()
	for _, q := range stmts {
		if _, err := c.Execute(q); err != nil {
			return err
		}
	}
	return nil
}

// execTx runs statements in one transaction.
func (s server) execTx(stmts ...string) error {
	c, err := s.conn()
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
			return err
		}
	}
	_, err = c.Execute("COMMIT")
	return err
}

func quote(name string) string { return "`" + strings.ReplaceAll(name, "`", "``") + "`" }

// newSource builds a source for the test database's tables, dropping them at cleanup.
func (s server) newSource(t *testing.T, mode cdc.SnapshotMode, opts mysqlcdc.Options, tables ...string) *mysqlcdc.Source {
	t.Helper()
	return s.newSourceAfter(t, mode, opts, nil, tables...)
}

// newSourceAfter is newSource capturing first the tables of first, then the test database's
// tables.
func (s server) newSourceAfter(t *testing.T, mode cdc.SnapshotMode, opts mysqlcdc.Options, first []mysqlcdc.TableName, tables ...string) *mysqlcdc.Source {
	t.Helper()
	names := append([]mysqlcdc.TableName(nil), first...)
	for _, tb := range tables {
		names = append(names, mysqlcdc.TableName{Database: s.db, Table: tb})
	}
	opts.Snapshot = mode
	if opts.ServerID == 0 {
		opts.ServerID = nextServerID()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	src, err := mysqlcdc.New(s.addr, s.user, s.pass, names, &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, tb := range tables {
			if err := s.exec("DROP TABLE IF EXISTS " + quote(s.db) + "." + quote(tb)); err != nil {
				t.Logf("cleanup: drop %s: %v", tb, err)
			}
		}
	})
	return src
}

func TestConformance(t *testing.T) {
	t.Run("mysql", func(t *testing.T) {
		s := testServer(t)
		cdctest.Run(t, cdctest.Harness{
			Exec:   func(ctx context.Context, stmts ...string) error { return s.exec(stmts...) },
			ExecTx: func(ctx context.Context, stmts ...string) error { return s.execTx(stmts...) },
			Quote:  quote,
			NewSource: func(t *testing.T, mode cdc.SnapshotMode, tables ...string) cdc.Source {
				return s.newSource(t, mode, mysqlcdc.Options{SourceName: "conformance"}, tables...)
			},
			Types: mysqlTypes,
		})
	})
}

func b64(s string) cdc.Base64 { return cdc.Base64(base64.StdEncoding.EncodeToString([]byte(s))) }

// mysqlTypes is MariaDB's type matrix: every common column type with its schema, extreme
// values, and zeros, empty strings and zero dates (inserted under a permissive sql_mode).
func mysqlTypes(string) cdctest.TypeMatrix {
	v := func(lit string, want cdc.Value) cdctest.TypeValue { return cdctest.TypeValue{Literal: lit, Want: want} }
	micros := func(t time.Time) cdc.EpochMicros { return cdc.EpochMicros(t.UnixMicro()) }
	col := func(k cdc.Kind, bits int) cdc.Column { return cdc.Column{Kind: k, Bits: bits} }
	text := func(k cdc.Kind, length int, charset string) cdc.Column {
		return cdc.Column{Kind: k, Length: length, Charset: charset}
	}
	return cdctest.TypeMatrix{
		TableOptions:  " DEFAULT CHARSET=utf8mb4",
		InsertSession: []string{"SET SESSION sql_mode = ''"},
		Cases: []cdctest.TypeCase{
			// First, so that every numeric column comes after a YEAR: MariaDB's table map gives
			// YEAR a signedness bit (see tablemap.go).
			{Name: "yr0", Type: "YEAR", Column: col(cdc.KindInt, 16), Values: []cdctest.TypeValue{v("2155", int64(2155)), v("0", int64(0))}},
			{Name: "ti", Type: "TINYINT", Column: col(cdc.KindInt, 8), Values: []cdctest.TypeValue{v("-128", int64(-128)), v("0", int64(0))}},
			{Name: "tiu", Type: "TINYINT UNSIGNED", Column: col(cdc.KindUint, 8), Values: []cdctest.TypeValue{v("255", uint64(255)), v("0", uint64(0))}},
			{Name: "si", Type: "SMALLINT", Column: col(cdc.KindInt, 16), Values: []cdctest.TypeValue{v("-32768", int64(-32768)), v("0", int64(0))}},
			{Name: "siu", Type: "SMALLINT UNSIGNED", Column: col(cdc.KindUint, 16), Values: []cdctest.TypeValue{v("65535", uint64(65535)), v("0", uint64(0))}},
			{Name: "mi", Type: "MEDIUMINT", Column: col(cdc.KindInt, 24), Values: []cdctest.TypeValue{v("-8388608", int64(-8388608)), v("0", int64(0))}},
			{Name: "miu", Type: "MEDIUMINT UNSIGNED", Column: col(cdc.KindUint, 24), Values: []cdctest.TypeValue{v("16777215", uint64(16777215)), v("0", uint64(0))}},
			{Name: "i", Type: "INT", Column: col(cdc.KindInt, 32), Values: []cdctest.TypeValue{v("-2147483648", int64(-2147483648)), v("0", int64(0))}},
			{Name: "iu", Type: "INT UNSIGNED", Column: col(cdc.KindUint, 32), Values: []cdctest.TypeValue{v("4294967295", uint64(4294967295)), v("0", uint64(0))}},
			{Name: "bi", Type: "BIGINT", Column: col(cdc.KindInt, 64), Values: []cdctest.TypeValue{v("-9223372036854775808", int64(-9223372036854775808)), v("0", int64(0))}},
			{Name: "biu", Type: "BIGINT UNSIGNED", Column: col(cdc.KindUint, 64), Values: []cdctest.TypeValue{v("18446744073709551615", uint64(18446744073709551615)), v("0", uint64(0))}},
			{Name: "b1", Type: "TINYINT(1)", Column: col(cdc.KindInt, 8), Values: []cdctest.TypeValue{v("1", int64(1)), v("0", int64(0))}},
			{Name: "dec", Type: "DECIMAL(12,3)", Column: cdc.Column{Kind: cdc.KindDecimal, Precision: 12, Scale: 3},
				Values: []cdctest.TypeValue{v("-123456789.125", "-123456789.125"), v("0", "0.000")}},
			{Name: "dec0", Type: "DECIMAL(20,0)", Column: cdc.Column{Kind: cdc.KindDecimal, Precision: 20},
				Values: []cdctest.TypeValue{v("12345678901234567890", "12345678901234567890"), v("0", "0")}},
			{Name: "decs", Type: "DECIMAL(5,2)", Column: cdc.Column{Kind: cdc.KindDecimal, Precision: 5, Scale: 2},
				Values: []cdctest.TypeValue{v("0.5", "0.50"), v("-0.01", "-0.01")}},
			{Name: "f", Type: "FLOAT", Column: col(cdc.KindFloat, 32), Values: []cdctest.TypeValue{v("0.1", 0.1), v("3.4028235e38", 3.4028235e38)}},
			{Name: "d", Type: "DOUBLE", Column: col(cdc.KindFloat, 64), Values: []cdctest.TypeValue{v("0.1", 0.1), v("-1.2345678901234567e300", -1.2345678901234567e300)}},
			{Name: "bit1", Type: "BIT(1)", Column: col(cdc.KindBit, 1), Values: []cdctest.TypeValue{v("b'1'", uint64(1)), v("b'0'", uint64(0))}},
			{Name: "bit12", Type: "BIT(12)", Column: col(cdc.KindBit, 12), Values: []cdctest.TypeValue{v("b'101010101010'", uint64(0xAAA)), v("b'0'", uint64(0))}},
			{Name: "bit64", Type: "BIT(64)", Column: col(cdc.KindBit, 64),
				Values: []cdctest.TypeValue{v("b'1111111111111111111111111111111111111111111111111111111111111111'", uint64(18446744073709551615)), v("b'0'", uint64(0))}},
			{Name: "c", Type: "CHAR(4)", Column: text(cdc.KindText, 4, "utf8mb4"), Values: []cdctest.TypeValue{v("'ab'", "ab"), v("''", "")}},
			{Name: "vc", Type: "VARCHAR(32)", Column: text(cdc.KindText, 32, "utf8mb4"), Values: []cdctest.TypeValue{v("'ålpha ☃'", "ålpha ☃"), v("''", "")}},
			{Name: "vcl", Type: "VARCHAR(16) CHARACTER SET latin1", Column: text(cdc.KindText, 16, "latin1"),
				Values: []cdctest.TypeValue{v("'café €'", "café €"), v("''", "")}},
			{Name: "tx", Type: "TEXT", Column: text(cdc.KindText, 65535, "utf8mb4"), Values: []cdctest.TypeValue{v("'long text ☃'", b64("long text ☃")), v("''", b64(""))}},
			// TEXT comes as the binlog's bytes: latin1 here.
			{Name: "txl", Type: "TINYTEXT CHARACTER SET latin1", Column: text(cdc.KindText, 255, "latin1"),
				Values: []cdctest.TypeValue{v("'déjà'", b64("d\xe9j\xe0")), v("''", b64(""))}},
			{Name: "bn", Type: "BINARY(4)", Column: text(cdc.KindBinary, 4, ""), Values: []cdctest.TypeValue{v("'ab'", b64("ab\x00\x00")), v("''", b64("\x00\x00\x00\x00"))}},
			{Name: "vb", Type: "VARBINARY(8)", Column: text(cdc.KindBinary, 8, ""), Values: []cdctest.TypeValue{v("x'00ff00'", b64("\x00\xff\x00")), v("''", b64(""))}},
			{Name: "bl", Type: "BLOB", Column: text(cdc.KindBinary, 65535, ""), Values: []cdctest.TypeValue{v("x'deadbeef'", b64("\xde\xad\xbe\xef")), v("''", b64(""))}},
			{Name: "en", Type: "ENUM('a','b c','it''s')", Column: cdc.Column{Kind: cdc.KindEnum, Charset: "utf8mb4", Labels: []string{"a", "b c", "it's"}},
				Values: []cdctest.TypeValue{v("'it''s'", "it's"), v("'a'", "a")}},
			{Name: "st", Type: "SET('x','y','z')", Column: cdc.Column{Kind: cdc.KindSet, Charset: "utf8mb4", Labels: []string{"x", "y", "z"}},
				Values: []cdctest.TypeValue{v("'z,x'", "x,z"), v("''", "")}},
			{Name: "dt", Type: "DATE", Column: col(cdc.KindDate, 0), Values: []cdctest.TypeValue{v("'2024-02-29'", "2024-02-29"), v("'0000-00-00'", "0000-00-00")}},
			{Name: "tm", Type: "TIME", Column: col(cdc.KindTime, 0), Values: []cdctest.TypeValue{v("'-838:59:59'", "-838:59:59"), v("'00:00:00'", "00:00:00")}},
			{Name: "tm3", Type: "TIME(3)", Column: cdc.Column{Kind: cdc.KindTime, Precision: 3},
				Values: []cdctest.TypeValue{v("'12:34:56.789'", "12:34:56.789"), v("'-00:00:00.001'", "-00:00:00.001")}},
			{Name: "dtm", Type: "DATETIME", Column: col(cdc.KindDateTime, 0),
				Values: []cdctest.TypeValue{v("'2024-01-02 03:04:05'", "2024-01-02 03:04:05"), v("'0000-00-00 00:00:00'", "0000-00-00 00:00:00")}},
			{Name: "dtm6", Type: "DATETIME(6)", Column: cdc.Column{Kind: cdc.KindDateTime, Precision: 6},
				Values: []cdctest.TypeValue{v("'2024-01-02 03:04:05.123456'", "2024-01-02 03:04:05.123456"), v("'0000-00-00 00:00:00.000000'", "0000-00-00 00:00:00.000000")}},
			{Name: "ts", Type: "TIMESTAMP NULL", Column: col(cdc.KindTimestamp, 0),
				Values: []cdctest.TypeValue{v("'2024-06-01 12:00:00'", micros(time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC))), v("'1970-01-01 00:00:01'", cdc.EpochMicros(1e6))}},
			{Name: "ts3", Type: "TIMESTAMP(3) NULL", Column: cdc.Column{Kind: cdc.KindTimestamp, Precision: 3},
				Values: []cdctest.TypeValue{v("'2038-01-19 03:14:07.999'", micros(time.Date(2038, 1, 19, 3, 14, 7, 999e6, time.UTC))), v("'0000-00-00 00:00:00'", cdc.EpochMicros(0))}},
			{Name: "yr", Type: "YEAR", Column: col(cdc.KindInt, 16), Values: []cdctest.TypeValue{v("2024", int64(2024)), v("1901", int64(1901))}},
			{Name: "siuy", Type: "SMALLINT UNSIGNED", Column: col(cdc.KindUint, 16), Values: []cdctest.TypeValue{v("46761", uint64(46761)), v("65535", uint64(65535))}},
			{Name: "siy", Type: "SMALLINT", Column: col(cdc.KindInt, 16), Values: []cdctest.TypeValue{v("-5", int64(-5)), v("-32768", int64(-32768))}},
			// Spatial values in the server's internal form: a 4-byte SRID, then WKB.
			{Name: "pt", Type: "POINT", Column: col(cdc.KindBinary, 0),
				Values: []cdctest.TypeValue{v("ST_GeomFromText('POINT(1 2)')", b64("\x00\x00\x00\x00\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\xf0\x3f\x00\x00\x00\x00\x00\x00\x00\x40"))}},
			// MariaDB's JSON is LONGTEXT with a validity check; the catalog says so.
			{Name: "j", Type: "JSON", Column: cdc.Column{Kind: cdc.KindJSON, SourceType: "longtext", Length: 4294967295, Charset: "utf8mb4"},
				Values: []cdctest.TypeValue{v(`'{"a": [1, 2.5, "x"], "b": null}'`, cdc.RawJSON(`{"a":[1,2.5,"x"],"b":null}`)), v("'[]'", cdc.RawJSON("[]"))}},
			// A version-1 UUID: MariaDB reorders it in storage.
			{Name: "u1", Type: "UUID", Column: col(cdc.KindUUID, 0),
				Values: []cdctest.TypeValue{v("'123e4567-e89b-12d3-a456-426614174000'", "123e4567-e89b-12d3-a456-426614174000"), v("'00000000-0000-0000-0000-000000000000'", "00000000-0000-0000-0000-000000000000")}},
			{Name: "u4", Type: "UUID", Column: col(cdc.KindUUID, 0),
				Values: []cdctest.TypeValue{v("'0f8fad5b-d9cb-469f-a165-70867728950e'", "0f8fad5b-d9cb-469f-a165-70867728950e"), v("'00000000-0000-0000-0000-000000000001'", "00000000-0000-0000-0000-000000000001")}},
			{Name: "ip4", Type: "INET4", Column: col(cdc.KindOther, 0), Values: []cdctest.TypeValue{v("'10.1.2.3'", "10.1.2.3"), v("'0.0.0.0'", "0.0.0.0")}},
			{Name: "ip6", Type: "INET6", Column: col(cdc.KindOther, 0), Values: []cdctest.TypeValue{v("'2001:db8::1'", "2001:db8::1"), v("'::ffff:1.2.3.4'", "::ffff:1.2.3.4")}},
		},
	}
}

func suffix() string {
	return fmt.Sprintf("%08x", nextServerID()*2654435761)
}
