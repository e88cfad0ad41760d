package pgcdc_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// BenchmarkPostgresStream compares the source's decoded event rate with the raw replication
// stream of the same changes (CopyData frames counted, nothing parsed): the ratio of the two
// ns/op is the cost of decoding. Rows are committed before the timer starts, so both read WAL
// the server has to decode anyway.
func BenchmarkPostgresStream(b *testing.B) {
	dsn := testenv.Require(b, testenv.PostgresDSN)
	for _, mode := range []string{"raw", "pgcdc"} {
		b.Run(mode, func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			tb := "bench_" + suffix(b)
			if err := execSQL(ctx, dsn, false, fmt.Sprintf(`CREATE TABLE %s (id int PRIMARY KEY, name text, qty int8, price numeric(12,2), at timestamptz)`, quote(tb))); err != nil {
				b.Fatal(err)
			}
			src, err := pgcdc.New(dsn, pgcdc.Options{Name: "bench", Slot: "pgcdc_bench_" + tb[len("bench_"):], Publication: "pgcdc_bench_" + tb[len("bench_"):],
				Snapshot: cdc.SnapshotNever, Tables: []pgcdc.Table{{Name: tb}}})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer ccancel()
				_ = src.Drop(cctx)
				_ = execSQL(cctx, dsn, false, "DROP TABLE IF EXISTS "+quote(tb))
			})
			// Open creates the slot and publication; both readers start from it after the
			// rows are committed, so each pays for connecting and for the server's decoding.
			st, err := src.Open(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			_ = st.Close()
			if err := execSQL(ctx, dsn, false, fmt.Sprintf(`INSERT INTO %s SELECT g, 'name ' || g, g * 7, g / 100.0, now() FROM generate_series(1, %d) g`, quote(tb), b.N)); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			if mode == "pgcdc" {
				st, err := src.Open(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer st.Close()
				for range b.N {
					if ev := <-st.Events(); ev.Malformed != nil || ev.Op != cdc.Insert {
						b.Fatalf("event %v: %v (%v)", ev.Op, ev.Malformed, st.Err())
					}
				}
				return
			}
			rawInserts(ctx, b, dsn, src, b.N)
		})
	}
}

// rawInserts reads the slot's stream until n Insert messages arrived, parsing nothing but
// the message type.
func rawInserts(ctx context.Context, b *testing.B, dsn string, src *pgcdc.Source, n int) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	cfg.RuntimeParams["replication"] = "database"
	var conn *pgconn.PgConn
	for {
		if conn, err = pgconn.ConnectConfig(ctx, cfg); err != nil {
			b.Fatal(err)
		}
		err = pglogrepl.StartReplication(ctx, conn, src.Slot(), 0, pglogrepl.StartReplicationOptions{
			Mode: pglogrepl.LogicalReplication, PluginArgs: []string{"proto_version '1'", "publication_names '" + src.Publication() + "'"},
		})
		if err == nil {
			break
		}
		_ = conn.Close(ctx) // the closed stream's walsender may still hold the slot
		time.Sleep(20 * time.Millisecond)
	}
	defer conn.Close(context.Background())
	for seen := 0; seen < n; {
		msg, err := conn.ReceiveMessage(context.Background()) // a ctx would cost a watcher goroutine per message
		if err != nil {
			b.Fatal(err)
		}
		if cd, ok := msg.(*pgproto3.CopyData); ok && len(cd.Data) > 25 && cd.Data[0] == pglogrepl.XLogDataByteID && cd.Data[25] == 'I' {
			seen++
		}
	}
}
