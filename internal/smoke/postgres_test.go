package smoke

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// pgRow is one row of the smoke table as text, the form pgoutput uses for every column;
// a nil field stands for SQL NULL.
type pgRow struct {
	id, name, qty, note *string
}

func pgText(s string) *string { return &s }

// TestSmokePostgres proves the server decodes changes with pgoutput the way a CDC source needs
// them: full old rows (REPLICA IDENTITY FULL) on UPDATE and DELETE, transaction framing, and a
// slot position that advances only when the client acknowledges it.
func TestSmokePostgres(t *testing.T) {
	t.Parallel()
	dsn := testenv.Require(t, testenv.PostgresDSN)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var sfx [6]byte
	if _, err := rand.Read(sfx[:]); err != nil {
		t.Fatal(err)
	}
	suffix := hex.EncodeToString(sfx[:])
	table := "smoke_pg_" + suffix
	pub := "smoke_pub_" + suffix
	slot := "smoke_slot_" + suffix

	replDSN, err := pgReplicationDSN(dsn)
	if err != nil {
		t.Fatalf("cannot derive the replication DSN from %s: %v", testenv.PostgresDSN, err)
	}

	sqlConn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer ccancel()
		// The slot goes first: while it exists the walsender may still hold the publication.
		// A slot still marked active belongs to a walsender that is exiting; wait for it.
		for i := 0; i < 50; i++ {
			var active *bool
			err := sqlConn.QueryRow(cctx, `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&active)
			if errors.Is(err, pgx.ErrNoRows) {
				break
			}
			if err == nil && active != nil && !*active {
				if _, err := sqlConn.Exec(cctx, `SELECT pg_drop_replication_slot($1)`, slot); err != nil {
					t.Logf("cleanup: drop slot %s: %v", slot, err)
				}
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		for _, q := range []string{"DROP PUBLICATION IF EXISTS " + pub, "DROP TABLE IF EXISTS " + table} {
			if _, err := sqlConn.Exec(cctx, q); err != nil {
				t.Logf("cleanup: %s: %v", q, err)
			}
		}
		_ = sqlConn.Close(cctx)
	})

	replConn, err := pgconn.Connect(ctx, replDSN)
	if err != nil {
		t.Fatalf("replication connect: %v", err)
	}
	// Registered after the SQL cleanup, so it runs before it and the slot becomes inactive.
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer ccancel()
		_ = replConn.Close(cctx)
	})

	step := func(name string, f func(t *testing.T)) {
		t.Helper()
		if !t.Run(name, f) {
			t.FailNow()
		}
	}

	step("server settings", func(t *testing.T) {
		want := map[string]string{"wal_level": "logical", "synchronous_commit": "on"}
		for name, v := range want {
			var got string
			if err := sqlConn.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&got); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if got != v {
				t.Errorf("%s = %q, want %q", name, got, v)
			}
		}
		var version, slots int
		if err := sqlConn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int,
			current_setting('max_replication_slots')::int`).Scan(&version, &slots); err != nil {
			t.Fatal(err)
		}
		if version/10000 != 15 {
			t.Errorf("server_version_num = %d, want PostgreSQL 15", version)
		}
		if slots < 1 {
			t.Errorf("max_replication_slots = %d, want at least 1", slots)
		}
	})

	step("identify system", func(t *testing.T) {
		sys, err := pglogrepl.IdentifySystem(ctx, replConn)
		if err != nil {
			t.Fatalf("IDENTIFY_SYSTEM: %v", err)
		}
		u, _ := url.Parse(dsn)
		if want := u.Path[1:]; sys.DBName != want {
			t.Errorf("replication connection is bound to database %q, want %q", sys.DBName, want)
		}
		if sys.XLogPos == 0 || sys.SystemID == "" {
			t.Errorf("IDENTIFY_SYSTEM returned an empty position or system id: %+v", sys)
		}
	})

	step("create table and publication", func(t *testing.T) {
		for _, q := range []string{
			fmt.Sprintf(`CREATE TABLE %s (id int4 PRIMARY KEY, name text NOT NULL, qty int8 NOT NULL, note text)`, table),
			fmt.Sprintf(`ALTER TABLE %s REPLICA IDENTITY FULL`, table),
			fmt.Sprintf(`CREATE PUBLICATION %s FOR TABLE %s`, pub, table),
		} {
			if _, err := sqlConn.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	})

	var startLSN pglogrepl.LSN
	step("create slot", func(t *testing.T) {
		res, err := pglogrepl.CreateReplicationSlot(ctx, replConn, slot, "pgoutput",
			pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.LogicalReplication, SnapshotAction: "NOEXPORT_SNAPSHOT"})
		if err != nil {
			t.Fatalf("CREATE_REPLICATION_SLOT: %v", err)
		}
		if res.SlotName != slot || res.OutputPlugin != "pgoutput" {
			t.Errorf("slot %q plugin %q, want %q pgoutput", res.SlotName, res.OutputPlugin, slot)
		}
		startLSN, err = pglogrepl.ParseLSN(res.ConsistentPoint)
		if err != nil {
			t.Fatalf("consistent point %q: %v", res.ConsistentPoint, err)
		}
	})

	step("start replication", func(t *testing.T) {
		err := pglogrepl.StartReplication(ctx, replConn, slot, startLSN, pglogrepl.StartReplicationOptions{
			Mode:       pglogrepl.LogicalReplication,
			PluginArgs: []string{"proto_version '1'", fmt.Sprintf("publication_names '%s'", pub)},
		})
		if err != nil {
			t.Fatalf("START_REPLICATION: %v", err)
		}
	})

	step("insert update delete", func(t *testing.T) {
		// Three transactions, so each change arrives in its own Begin/Commit frame.
		for _, q := range []string{
			fmt.Sprintf(`INSERT INTO %s VALUES (1, 'ålpha', 9007199254740993, NULL)`, table),
			fmt.Sprintf(`UPDATE %s SET name = 'beta', note = 'n1' WHERE id = 1`, table),
			fmt.Sprintf(`DELETE FROM %s WHERE id = 1`, table),
		} {
			if _, err := sqlConn.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	})

	var msgs []pglogrepl.Message
	var lastCommit *pglogrepl.CommitMessage
	step("receive and decode", func(t *testing.T) {
		commits := 0
		for commits < 3 {
			m, err := pgReceive(ctx, replConn, startLSN)
			if err != nil {
				t.Fatalf("after %d messages: %v", len(msgs), err)
			}
			if m == nil {
				continue
			}
			msgs = append(msgs, m)
			if c, ok := m.(*pglogrepl.CommitMessage); ok {
				commits++
				lastCommit = c
			}
		}

		// PG 15's pgoutput skips transactions without published changes, so nothing else
		// may show up between ours.
		var kinds []pglogrepl.MessageType
		for _, m := range msgs {
			kinds = append(kinds, m.Type())
		}
		wantKinds := []pglogrepl.MessageType{
			pglogrepl.MessageTypeBegin, pglogrepl.MessageTypeRelation, pglogrepl.MessageTypeInsert, pglogrepl.MessageTypeCommit,
			pglogrepl.MessageTypeBegin, pglogrepl.MessageTypeUpdate, pglogrepl.MessageTypeCommit,
			pglogrepl.MessageTypeBegin, pglogrepl.MessageTypeDelete, pglogrepl.MessageTypeCommit,
		}
		if fmt.Sprint(kinds) != fmt.Sprint(wantKinds) {
			t.Fatalf("message sequence %v, want %v", kinds, wantKinds)
		}

		rel := msgs[1].(*pglogrepl.RelationMessage)
		if rel.Namespace != "public" || rel.RelationName != table || rel.ReplicaIdentity != 'f' {
			t.Errorf("relation %s.%s replica identity %q, want public.%s 'f'", rel.Namespace, rel.RelationName, rel.ReplicaIdentity, table)
		}
		// Type OIDs: int4 23, text 25, int8 20.
		wantCols := []struct {
			name string
			oid  uint32
		}{{"id", 23}, {"name", 25}, {"qty", 20}, {"note", 25}}
		if len(rel.Columns) != len(wantCols) {
			t.Fatalf("relation has %d columns, want %d", len(rel.Columns), len(wantCols))
		}
		for i, c := range rel.Columns {
			if c.Name != wantCols[i].name || c.DataType != wantCols[i].oid {
				t.Errorf("column %d = %s oid %d, want %s oid %d", i, c.Name, c.DataType, wantCols[i].name, wantCols[i].oid)
			}
		}
		// With REPLICA IDENTITY FULL every column counts as part of the identity.
		for _, c := range rel.Columns {
			if c.Flags != 1 {
				t.Errorf("column %s flags = %d, want 1 (part of the replica identity)", c.Name, c.Flags)
			}
		}

		// Each Begin announces the LSN its Commit carries, and transactions arrive in commit order.
		var prevEnd pglogrepl.LSN
		for i := 0; i < len(msgs); i++ {
			b, ok := msgs[i].(*pglogrepl.BeginMessage)
			if !ok {
				continue
			}
			for j := i + 1; j < len(msgs); j++ {
				if c, ok := msgs[j].(*pglogrepl.CommitMessage); ok {
					if c.CommitLSN != b.FinalLSN {
						t.Errorf("begin xid %d final LSN %s, commit LSN %s", b.Xid, b.FinalLSN, c.CommitLSN)
					}
					if c.TransactionEndLSN <= prevEnd {
						t.Errorf("commit end LSN %s not after the previous %s", c.TransactionEndLSN, prevEnd)
					}
					prevEnd = c.TransactionEndLSN
					break
				}
			}
		}

		first := pgRow{pgText("1"), pgText("ålpha"), pgText("9007199254740993"), nil}
		second := pgRow{pgText("1"), pgText("beta"), pgText("9007199254740993"), pgText("n1")}

		ins := msgs[2].(*pglogrepl.InsertMessage)
		if ins.RelationID != rel.RelationID {
			t.Errorf("insert relation %d, want %d", ins.RelationID, rel.RelationID)
		}
		pgAssertTuple(t, "insert new", ins.Tuple, first)

		upd := msgs[5].(*pglogrepl.UpdateMessage)
		if upd.OldTupleType != pglogrepl.UpdateMessageTupleTypeOld {
			t.Errorf("update old tuple type %q, want 'O' (full old row)", upd.OldTupleType)
		}
		pgAssertTuple(t, "update old", upd.OldTuple, first)
		pgAssertTuple(t, "update new", upd.NewTuple, second)

		del := msgs[8].(*pglogrepl.DeleteMessage)
		if del.OldTupleType != pglogrepl.DeleteMessageTupleTypeOld {
			t.Errorf("delete old tuple type %q, want 'O' (full old row)", del.OldTupleType)
		}
		pgAssertTuple(t, "delete old", del.OldTuple, second)
	})

	step("standby status update", func(t *testing.T) {
		if lastCommit == nil {
			t.Fatal("no commit received")
		}
		ack := lastCommit.TransactionEndLSN
		var before pglogrepl.LSN
		if err := sqlConn.QueryRow(ctx, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&before); err != nil {
			t.Fatal(err)
		}
		if before >= ack {
			t.Fatalf("slot already confirmed %s before the acknowledgement of %s", before, ack)
		}
		if err := pglogrepl.SendStandbyStatusUpdate(ctx, replConn, pglogrepl.StandbyStatusUpdate{WALWritePosition: ack}); err != nil {
			t.Fatalf("send standby status: %v", err)
		}
		// The walsender applies the feedback asynchronously; poll until the slot reflects it.
		for {
			var confirmed pglogrepl.LSN
			if err := sqlConn.QueryRow(ctx, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&confirmed); err != nil {
				t.Fatal(err)
			}
			if confirmed >= ack {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("confirmed_flush_lsn stayed at %s, acknowledged %s", confirmed, ack)
			case <-time.After(50 * time.Millisecond):
			}
		}
	})

	step("drop slot, publication and table", func(t *testing.T) {
		if _, err := pglogrepl.SendStandbyCopyDone(ctx, replConn); err != nil {
			t.Fatalf("end of streaming: %v", err)
		}
		if err := pglogrepl.DropReplicationSlot(ctx, replConn, slot, pglogrepl.DropReplicationSlotOptions{Wait: true}); err != nil {
			t.Fatalf("DROP_REPLICATION_SLOT: %v", err)
		}
		for _, q := range []string{"DROP PUBLICATION " + pub, "DROP TABLE " + table} {
			if _, err := sqlConn.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		var n int
		if err := sqlConn.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1)
			+ (SELECT count(*) FROM pg_publication WHERE pubname = $2)
			+ (SELECT count(*) FROM pg_class WHERE relname = $3)`, slot, pub, table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%d of slot, publication and table still exist after dropping them", n)
		}
	})
}

// pgReplicationDSN turns the SQL DSN into one that opens a logical walsender connection.
func pgReplicationDSN(dsn string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", err
	}
	if len(u.Path) < 2 {
		return "", errors.New("the DSN names no database")
	}
	q := u.Query()
	q.Set("replication", "database")
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// pgReceive reads one CopyData frame of the replication stream and returns the decoded pgoutput
// message, or nil for a keepalive (answered when the server asks, acknowledging only the start
// position so nothing unprocessed is confirmed).
func pgReceive(ctx context.Context, conn *pgconn.PgConn, ackLSN pglogrepl.LSN) (pglogrepl.Message, error) {
	raw, err := conn.ReceiveMessage(ctx)
	if err != nil {
		return nil, err
	}
	switch msg := raw.(type) {
	case *pgproto3.ErrorResponse:
		return nil, pgconn.ErrorResponseToPgError(msg)
	case *pgproto3.CopyData:
		if len(msg.Data) == 0 {
			return nil, errors.New("empty CopyData")
		}
		switch msg.Data[0] {
		case pglogrepl.PrimaryKeepaliveMessageByteID:
			ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(msg.Data[1:])
			if err != nil {
				return nil, err
			}
			if ka.ReplyRequested {
				err = pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: ackLSN})
			}
			return nil, err
		case pglogrepl.XLogDataByteID:
			xld, err := pglogrepl.ParseXLogData(msg.Data[1:])
			if err != nil {
				return nil, err
			}
			return pglogrepl.Parse(xld.WALData)
		default:
			return nil, fmt.Errorf("unexpected CopyData kind %q", msg.Data[0])
		}
	default:
		return nil, fmt.Errorf("unexpected message %T", raw)
	}
}

// pgAssertTuple compares a decoded tuple with the expected row, column by column.
func pgAssertTuple(t *testing.T, what string, tup *pglogrepl.TupleData, want pgRow) {
	t.Helper()
	if tup == nil {
		t.Errorf("%s: no tuple", what)
		return
	}
	wantCols := []*string{want.id, want.name, want.qty, want.note}
	if len(tup.Columns) != len(wantCols) {
		t.Errorf("%s: %d columns, want %d", what, len(tup.Columns), len(wantCols))
		return
	}
	for i, c := range tup.Columns {
		w := wantCols[i]
		switch {
		case w == nil && c.DataType != pglogrepl.TupleDataTypeNull:
			t.Errorf("%s: column %d = %q (kind %q), want NULL", what, i, c.Data, c.DataType)
		case w != nil && (c.DataType != pglogrepl.TupleDataTypeText || string(c.Data) != *w):
			t.Errorf("%s: column %d = %q (kind %q), want %q", what, i, c.Data, c.DataType, *w)
		}
	}
}
