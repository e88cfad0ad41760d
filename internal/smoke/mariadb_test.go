package smoke

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// mariaChange is one row event for the smoke table, with the GTID of its transaction.
type mariaChange struct {
	kind    replication.EnumRowsEventType
	rawType replication.EventType
	rows    [][]any
	columns []string
	gtid    mysql.MariadbGTID
}

// TestSmokeMariaDB proves the server writes the binlog a CDC source needs: ROW events with full
// before and after images, column names in the table map, and MariaDB GTIDs a reader can resume
// from.
func TestSmokeMariaDB(t *testing.T) {
	t.Parallel()
	dsn := testenv.Require(t, testenv.MySQLDSN)

	user, pass, addr, db, err := mariaParseDSN(dsn)
	if err != nil {
		t.Fatalf("%s: %v", testenv.MySQLDSN, err)
	}
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%s address %q: %v", testenv.MySQLDSN, addr, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		t.Fatalf("%s port %q: %v", testenv.MySQLDSN, portStr, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	table := "smoke_my_" + hex.EncodeToString(rnd[:6])
	// Replicas are told apart by server id; one the server already knows would be kicked off.
	replicaID := 1<<20 + binary.BigEndian.Uint32(rnd[4:])%(1<<30)

	conn, err := client.ConnectWithContext(ctx, addr, user, pass, db, 10*time.Second)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	// Bound every statement, so a stuck server fails the test rather than hanging it.
	conn.ReadTimeout = 30 * time.Second
	conn.WriteTimeout = 30 * time.Second
	t.Cleanup(func() {
		if _, err := conn.Execute("DROP TABLE IF EXISTS " + table); err != nil {
			t.Logf("cleanup: drop %s: %v", table, err)
		}
		// COM_QUIT first, so the server does not log the session as aborted.
		if err := conn.Quit(); err != nil {
			_ = conn.Close()
		}
	})

	// Syncers live until the whole test ends: the streamer of one subtest is read in later ones.
	// Each gets its own server id, or registering the second would end the first one's dump.
	newSyncer := func() *replication.BinlogSyncer {
		replicaID++
		s := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{
			ServerID:         replicaID,
			Flavor:           mysql.MariaDBFlavor,
			Host:             host,
			Port:             uint16(port),
			User:             user,
			Password:         pass,
			VerifyChecksum:   true,
			DisableRetrySync: true,
			ReadTimeout:      time.Minute,
			Logger:           slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		})
		t.Cleanup(s.Close)
		return s
	}

	step := func(name string, f func(t *testing.T)) {
		t.Helper()
		if !t.Run(name, f) {
			t.FailNow()
		}
	}

	var serverID uint64
	step("server variables", func(t *testing.T) {
		r, err := conn.Execute(`SELECT @@log_bin, @@binlog_format, @@binlog_row_image, @@binlog_row_metadata,
			@@binlog_checksum, @@version, @@server_id`)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"1", "ROW", "FULL", "FULL", "CRC32"}
		names := []string{"log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata", "binlog_checksum"}
		for i, w := range want {
			got, err := r.GetString(0, i)
			if err != nil {
				t.Fatalf("%s: %v", names[i], err)
			}
			if got != w {
				t.Errorf("@@%s = %q, want %q", names[i], got, w)
			}
		}
		version, _ := r.GetString(0, 5)
		if !strings.HasPrefix(version, "10.11.") || !strings.Contains(version, "MariaDB") {
			t.Errorf("@@version = %q, want MariaDB 10.11", version)
		}
		if serverID, err = r.GetUint(0, 6); err != nil || serverID == 0 {
			t.Errorf("@@server_id = %d (%v), want a non-zero id", serverID, err)
		}
	})

	var startPos mysql.Position
	var startGTID string
	step("binlog position", func(t *testing.T) {
		r, err := conn.Execute("SHOW BINLOG STATUS")
		if err != nil {
			t.Fatal(err)
		}
		if r.RowNumber() != 1 {
			t.Fatalf("SHOW BINLOG STATUS returned %d rows, want 1 (is log_bin on?)", r.RowNumber())
		}
		file, _ := r.GetStringByName(0, "File")
		pos, err := r.GetUintByName(0, "Position")
		if err != nil || file == "" || pos < 4 {
			t.Fatalf("binlog position %q:%d (%v)", file, pos, err)
		}
		startPos = mysql.Position{Name: file, Pos: uint32(pos)}

		g, err := conn.Execute("SELECT @@gtid_binlog_pos")
		if err != nil {
			t.Fatal(err)
		}
		startGTID, _ = g.GetString(0, 0)
		if _, err := mysql.ParseMariadbGTIDSet(startGTID); err != nil {
			t.Fatalf("@@gtid_binlog_pos %q does not parse: %v", startGTID, err)
		}
		t.Logf("start at %s, gtid_binlog_pos %q", startPos, startGTID)
	})

	step("create table", func(t *testing.T) {
		_, err := conn.Execute(fmt.Sprintf(`CREATE TABLE %s (id INT PRIMARY KEY, name VARCHAR(64) NOT NULL,
			qty BIGINT NOT NULL, note VARCHAR(64) NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`, table))
		if err != nil {
			t.Fatal(err)
		}
	})

	var streamer *replication.BinlogStreamer
	step("start sync from position", func(t *testing.T) {
		s, err := newSyncer().StartSync(startPos)
		if err != nil {
			t.Fatalf("StartSync(%s): %v", startPos, err)
		}
		streamer = s
	})

	step("insert update delete", func(t *testing.T) {
		// Three transactions, each with its own GTID.
		for _, q := range []string{
			fmt.Sprintf(`INSERT INTO %s VALUES (1, 'ålpha', 9007199254740993, NULL)`, table),
			fmt.Sprintf(`UPDATE %s SET name = 'beta', note = 'n1' WHERE id = 1`, table),
			fmt.Sprintf(`DELETE FROM %s WHERE id = 1`, table),
		} {
			r, err := conn.Execute(q)
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			if r.AffectedRows != 1 {
				t.Fatalf("%s: %d rows affected, want 1", q, r.AffectedRows)
			}
		}
	})

	first := []any{int64(1), "ålpha", int64(9007199254740993), nil}
	second := []any{int64(1), "beta", int64(9007199254740993), "n1"}

	var changes []mariaChange
	step("receive row events", func(t *testing.T) {
		changes, err = mariaCollect(ctx, streamer, db, table, 3)
		if err != nil {
			t.Fatal(err)
		}
		wantKinds := []replication.EnumRowsEventType{
			replication.EnumRowsEventTypeInsert, replication.EnumRowsEventTypeUpdate, replication.EnumRowsEventTypeDelete,
		}
		wantRows := [][][]any{{first}, {first, second}, {second}}
		for i, c := range changes {
			if c.kind != wantKinds[i] {
				t.Errorf("event %d is a %s (%s), want %s", i, c.kind, c.rawType, wantKinds[i])
				continue
			}
			if !reflect.DeepEqual(c.rows, wantRows[i]) {
				t.Errorf("%s rows = %#v, want %#v", c.kind, c.rows, wantRows[i])
			}
			// binlog_row_metadata=FULL puts the column names into every table map.
			if want := []string{"id", "name", "qty", "note"}; !reflect.DeepEqual(c.columns, want) {
				t.Errorf("%s table map columns = %q, want %q", c.kind, c.columns, want)
			}
			t.Logf("%s: event %s, gtid %s", c.kind, c.rawType, &c.gtid)
		}
	})

	step("gtids", func(t *testing.T) {
		for i, c := range changes {
			if c.gtid.ServerID != uint32(serverID) || c.gtid.SequenceNumber == 0 {
				t.Errorf("%s carried GTID %s, want server id %d and a sequence number", c.kind, &c.gtid, serverID)
			}
			if i > 0 {
				prev := changes[i-1].gtid
				if c.gtid.DomainID != prev.DomainID || c.gtid.SequenceNumber <= prev.SequenceNumber {
					t.Errorf("GTID %s does not follow %s in the same domain", &c.gtid, &prev)
				}
			}
		}
		r, err := conn.Execute("SELECT @@gtid_binlog_pos")
		if err != nil {
			t.Fatal(err)
		}
		pos, _ := r.GetString(0, 0)
		set, err := mysql.ParseMariadbGTIDSet(pos)
		if err != nil {
			t.Fatalf("@@gtid_binlog_pos %q: %v", pos, err)
		}
		last := changes[len(changes)-1].gtid
		lastSet, _ := mysql.ParseMariadbGTIDSet(last.String())
		if !set.Contain(lastSet) {
			t.Errorf("@@gtid_binlog_pos %q does not cover the last GTID seen, %s", pos, &last)
		}
	})

	step("resume from gtid", func(t *testing.T) {
		set, err := mysql.ParseMariadbGTIDSet(startGTID)
		if err != nil {
			t.Fatal(err)
		}
		s, err := newSyncer().StartSyncGTID(set)
		if err != nil {
			t.Fatalf("StartSyncGTID(%q): %v", startGTID, err)
		}
		got, err := mariaCollect(ctx, s, db, table, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got[0].kind != replication.EnumRowsEventTypeInsert || !reflect.DeepEqual(got[0].rows, [][]any{first}) {
			t.Errorf("first change after GTID %q is %s %#v, want the insert of %#v", startGTID, got[0].kind, got[0].rows, first)
		}
		if got[0].gtid != changes[0].gtid {
			t.Errorf("resumed insert carries GTID %s, the position-based read saw %s", &got[0].gtid, &changes[0].gtid)
		}
	})

	step("drop table", func(t *testing.T) {
		if _, err := conn.Execute("DROP TABLE " + table); err != nil {
			t.Fatal(err)
		}
		r, err := conn.Execute(`SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = ?`, db, table)
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := r.GetInt(0, 0); n != 0 {
			t.Errorf("table %s still exists after DROP TABLE", table)
		}
	})
}

// mariaCollect reads binlog events until it has seen n row events for db.table, and returns them
// with the GTID of the transaction each belongs to.
func mariaCollect(ctx context.Context, s *replication.BinlogStreamer, db, table string, n int) ([]mariaChange, error) {
	var out []mariaChange
	var gtid mysql.MariadbGTID
	for len(out) < n {
		ev, err := s.GetEvent(ctx)
		if err != nil {
			return out, fmt.Errorf("after %d row events: %w", len(out), err)
		}
		switch e := ev.Event.(type) {
		case *replication.MariadbGTIDEvent:
			gtid = e.GTID
		case *replication.RowsEvent:
			if e.Table == nil || string(e.Table.Schema) != db || string(e.Table.Table) != table {
				continue
			}
			rows := make([][]any, len(e.Rows))
			for i, r := range e.Rows {
				rows[i] = make([]any, len(r))
				for j, v := range r {
					rows[i][j] = mariaNorm(v)
				}
			}
			out = append(out, mariaChange{
				kind: e.Type(), rawType: ev.Header.EventType, rows: rows,
				columns: e.Table.ColumnNameString(), gtid: gtid,
			})
		}
	}
	return out, nil
}

// mariaNorm maps the decoder's per-width integer types and byte strings onto int64 and string,
// so rows compare by value.
func mariaNorm(v any) any {
	switch x := v.(type) {
	case int8:
		return int64(x)
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case int:
		return int64(x)
	case []byte:
		return string(x)
	}
	return v
}

// mariaParseDSN splits a go-sql-driver/mysql DSN of the form user:pass@tcp(host:port)/db[?...].
func mariaParseDSN(dsn string) (user, pass, addr, db string, err error) {
	m, err := testenv.ParseMySQLDSN(dsn)
	return m.User, m.Password, m.Addr, m.DB, err
}
