package mysqlcdc_test

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
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
	at := strings.LastIndex(dsn, "@")
	if at < 0 {
		return server{}, errors.New("no user@ part in the DSN")
	}
	var s server
	s.user, s.pass, _ = strings.Cut(dsn[:at], ":")
	rest, ok := strings.CutPrefix(dsn[at+1:], "tcp(")
	if !ok {
		return server{}, errors.New("the DSN's address is not tcp(host:port)")
	}
	s.addr, rest, ok = strings.Cut(rest, ")")
	if !ok || !strings.HasPrefix(rest, "/") {
		return server{}, errors.New("the DSN has no /database")
	}
	s.db, _, _ = strings.Cut(rest[1:], "?")
	return s, nil
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
	for _, tb := range tables {
		opts.Tables = append(opts.Tables, mysqlcdc.TableName{Database: s.db, Table: tb})
	}
	opts.Snapshot = mode
	if opts.ServerID == 0 {
		opts.ServerID = nextServerID()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	src, err := mysqlcdc.New(s.addr, s.user, s.pass, opts)
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
		})
	})
}
