package mysqlcdc

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/tributary-dev/tributary/cdc"
)

// TestClassifyFailures: the server's refusals that no reopening cures are permanent, as the
// servers word them (messages copied from MariaDB 10.11 answers, and from MySQL 8's error
// list), also when go-mysql wraps them in its stack-carrying errors; everything else, lost
// connections and server shutdowns included, stays retryable.
func TestClassifyFailures(t *testing.T) {
	src, err := New("127.0.0.1:1", "u", "secret-pw", []TableName{{"d", "t"}}, &Options{ServerID: 4242})
	if err != nil {
		t.Fatal(err)
	}
	myErr := func(code uint16, msg string) error { return mysql.NewError(code, msg) }
	for _, c := range []struct {
		name      string
		err       error
		permanent bool
		says      string // the classified message must contain it
	}{
		{"access denied", myErr(1045, "Access denied for user 'tributary'@'127.0.0.1' (using password: YES)"), true, ""},
		{"database access denied", myErr(1044, "Access denied for user 'u'@'%' to database 'shop'"), true, ""},
		{"unknown database", myErr(1049, "Unknown database 'nosuchdb'"), true, ""},
		{"replication privilege missing", myErr(1227, "Access denied; you need (at least one of) the REPLICATION SLAVE privilege(s) for this operation"), true, ""},
		{"select denied", myErr(1142, "SELECT command denied to user 'u'@'localhost' for table `d`.`t`"), true, ""},
		{"password expired", myErr(1862, "Your password has expired. To log in you must change it using a client that supports expired passwords."), true, ""},
		{"file never existed", myErr(1236, "Could not find first log file name in binary log index file"), true, "no longer has the binlog"},
		{"position beyond the file", myErr(1236, "Client requested master to start replication from impossible position; the first event 'mariadb-bin.000001' at 99999999, the last event read from 'mariadb-bin.000001' at 4, the last byte read from 'mariadb-bin.000001' at 4."), true, "no longer has the binlog"},
		{"MariaDB GTIDs purged", myErr(1236, "Could not find GTID state requested by slave in any binlog files. Probably the slave state is too old and required binlog files have been purged."), true, "no longer has the binlog"},
		{"MariaDB GTID never logged", myErr(1236, "Error: connecting slave requested to start from GTID 0-1-999999999, which is not in the master's binlog"), true, "no longer has the binlog"},
		{"MariaDB GTIDs diverged", myErr(1236, "Error: connecting slave requested to start from GTID 0-99-2, which is not in the master's binlog. Since the master's binlog contains GTIDs with higher sequence numbers, it probably means that the slave has diverged due to executing extra erroneous transactions"), true, ""},
		{"MySQL GTIDs purged", myErr(1236, "Cannot replicate because the source purged required binary logs. Replicate the missing transactions from elsewhere, or provision a new replica from backup."), true, "no longer has the binlog"},
		{"MySQL 5.7 GTIDs purged", myErr(1236, "The slave is connecting using CHANGE MASTER TO MASTER_AUTO_POSITION = 1, but the master has purged binary logs containing GTIDs that the slave requires."), true, ""},
		{"MySQL position beyond the file", myErr(1236, "Client requested master to start replication from position > file size"), true, ""},
		{"MySQL replica ahead", myErr(1236, "Slave has more GTIDs than the master has, using the master's SERVER_UUID."), true, ""},
		{"MariaDB same server id", myErr(4052, "A slave with the same server_uuid/server_id is already connected; the first event 'mariadb-bin.000001' at 4"), true, "server id 4242"},
		{"MySQL same server id", myErr(1236, "A replica with the same server_uuid/server_id as this replica has connected to the source; the first event '' at 4"), true, "server id 4242"},
		{"truncated event", myErr(1236, "binlog truncated in the middle of event; consider out of disk space on master"), false, ""},
		{"shutdown", myErr(1053, "Server shutdown in progress"), false, ""},
		{"connection killed", myErr(1927, "Connection was killed"), false, ""},
		{"too many connections", myErr(1040, "Too many connections"), false, ""},
		{"lost connection", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), false, ""},
		{"unrecognized", errors.New("something else"), false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			// As go-mysql hands them over: wrapped, with stack lines, inside this package's
			// wrappers.
			for _, wrapped := range []error{c.err, &binlogError{err: traced{c.err}},
				&connectError{addr: "127.0.0.1:1", err: traced{c.err}}} {
				got := src.classify(wrapped)
				if cdc.IsPermanent(got) != c.permanent {
					t.Fatalf("classify(%v): permanent %v, want %v", wrapped, cdc.IsPermanent(got), c.permanent)
				}
				if !errors.Is(got, c.err) && !errors.Is(got, wrapped) {
					t.Fatalf("classify(%v) lost the cause", wrapped)
				}
				if msg := got.Error(); !strings.Contains(msg, c.says) || strings.Contains(msg, "secret-pw") ||
					strings.Contains(msg, "\t") {
					t.Fatalf("message %q", msg)
				}
			}
		})
	}
	if src.classify(nil) != nil {
		t.Fatal("classify(nil) is not nil")
	}
	p := cdc.Permanent(errors.New("x"))
	if src.classify(p) != p {
		t.Fatal("an already permanent error was wrapped again")
	}
}

// TestBinlogSettingsProblem: only a binlog of ROW events with FULL images is accepted.
func TestBinlogSettingsProblem(t *testing.T) {
	for _, c := range []struct {
		logBin        bool
		format, image string
		refused       string
	}{
		{true, "ROW", "FULL", ""},
		{true, "row", "full", ""},
		{false, "ROW", "FULL", "log_bin"},
		{true, "STATEMENT", "FULL", "binlog_format=STATEMENT"},
		{true, "MIXED", "FULL", "binlog_format=MIXED"},
		{true, "ROW", "MINIMAL", "binlog_row_image=MINIMAL"},
		{true, "ROW", "NOBLOB", "binlog_row_image=NOBLOB"},
	} {
		err := binlogSettingsProblem(c.logBin, c.format, c.image)
		if c.refused == "" {
			if err != nil {
				t.Errorf("%+v refused: %v", c, err)
			}
			continue
		}
		if err == nil || !cdc.IsPermanent(err) || !strings.Contains(err.Error(), c.refused) {
			t.Errorf("%+v: %v, want a permanent refusal naming %s", c, err, c.refused)
		}
	}
}

// TestLagAcrossRotations: Bytes is the binlog between the checkpoint and the end, counting
// the rest of the checkpoint's file, every file between and the head file up to the head.
func TestLagAcrossRotations(t *testing.T) {
	logs := []binlogFile{{"bin.000007", 1000}, {"bin.000008", 5000}, {"bin.000009", 300}, {"bin.000010", 900}}
	at := func(file string, pos uint32) *checkpoint { return &checkpoint{File: file, Pos: pos} }
	for _, c := range []struct {
		name   string
		cp     *checkpoint
		head   string
		pos    uint32
		bytes  int64
		errHas string
	}{
		{"caught up", at("bin.000010", 800), "bin.000010", 800, 0, ""},
		{"same file", at("bin.000010", 100), "bin.000010", 800, 700, ""},
		{"one rotation", at("bin.000009", 100), "bin.000010", 800, 200 + 800, ""},
		{"several rotations", at("bin.000007", 4), "bin.000010", 800, 996 + 5000 + 300 + 800, ""},
		{"head file listed larger than the status", at("bin.000009", 300), "bin.000009", 300, 0, ""},
		{"no checkpoint", nil, "bin.000010", 800, 1000 + 5000 + 300 + 800, ""},
		{"GTID checkpoint without a file", &checkpoint{UseGTID: true}, "bin.000010", 800, 1000 + 5000 + 300 + 800, ""},
		{"purged", at("bin.000003", 4), "bin.000010", 800, 0, "purged"},
		{"beyond the end", at("bin.000010", 900), "bin.000010", 800, 0, "beyond the end"},
		{"head not listed", at("bin.000010", 4), "bin.000011", 4, 0, "does not list"},
	} {
		t.Run(c.name, func(t *testing.T) {
			lag, err := lagOf(c.head, c.pos, logs, c.cp)
			if c.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), c.errHas) {
					t.Fatalf("lagOf: %v, want an error saying %q", err, c.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			headIndex, _ := binlogIndex(c.head)
			if lag.Bytes != c.bytes || lag.Retained != -1 || lag.Head != headIndex<<32|uint64(c.pos) {
				t.Fatalf("lag %+v, want Bytes %d, Head %d", lag, c.bytes, headIndex<<32|uint64(c.pos))
			}
			wantApplied := uint64(0)
			if c.cp != nil && c.cp.File != "" {
				idx, _ := binlogIndex(c.cp.File)
				wantApplied = idx<<32 | uint64(c.cp.Pos)
			}
			if lag.Applied != wantApplied {
				t.Fatalf("Applied %d, want %d", lag.Applied, wantApplied)
			}
		})
	}
}

// TestBinlogStatusStatementByVersion: each server gets the spelling it understands.
func TestBinlogStatusStatementByVersion(t *testing.T) {
	for version, want := range map[string]string{
		"10.11.19-MariaDB-0+deb12u1-log": "SHOW BINLOG STATUS",
		"5.5.5-10.11.6-MariaDB":          "SHOW BINLOG STATUS",
		"10.5.2-MariaDB":                 "SHOW BINLOG STATUS",
		"10.5.1-MariaDB":                 "SHOW MASTER STATUS",
		"10.4.30-MariaDB-log":            "SHOW MASTER STATUS",
		"8.4.3":                          "SHOW BINARY LOG STATUS",
		"9.1.0-commercial":               "SHOW BINARY LOG STATUS",
		"8.2.0":                          "SHOW BINARY LOG STATUS",
		"8.0.40-0ubuntu0.22.04.1":        "SHOW MASTER STATUS",
		"5.7.44-log":                     "SHOW MASTER STATUS",
		"":                               "SHOW MASTER STATUS",
	} {
		if got := binlogStatusStatement(version); got != want {
			t.Errorf("%q: %s, want %s", version, got, want)
		}
	}
}

// TestCapturesPatterns: a database captured whole captures every table of it, by exact name.
func TestCapturesPatterns(t *testing.T) {
	src, err := New("127.0.0.1:1", "u", "p", []TableName{{"shop", AllTables}, {"crm", "Users"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[TableName]bool{
		{"shop", "orders"}: true, {"shop", "later_created"}: true, {"Shop", "orders"}: false,
		{"crm", "Users"}: true, {"crm", "users"}: false, {"crm", "other"}: false, {"other", "Users"}: false,
	} {
		if got := src.captures(name); got != want {
			t.Errorf("captures(%v) = %v, want %v", name, got, want)
		}
	}
	if _, err := New("127.0.0.1:1", "u", "p", []TableName{{"", AllTables}}, nil); err == nil {
		t.Error("a pattern without a database was accepted")
	}
}

// traced wraps an error as go-mysql's traced errors do: the cause reachable, stack frames in
// the text.
type traced struct{ err error }

func (e traced) Error() string {
	return e.err.Error() + "\ngithub.com/go-mysql-org/go-mysql/client.(*Conn).handshake\n\t/go/client/conn.go:200"
}
func (e traced) Unwrap() error { return e.err }
