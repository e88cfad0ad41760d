package mysqlcdc_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/cdctest"
	"github.com/tributary-dev/tributary/cdc/mysqlcdc"
)

// TestSnapshotHandOffConverges takes a snapshot while another session keeps changing the table,
// then applies everything delivered the way Elasticsearch's external versioning does (a write
// wins only with a higher version). The mirror must equal the table: the hand-off from the
// snapshot to the binlog has neither a gap nor an overlap that versions get wrong.
func TestSnapshotHandOffConverges(t *testing.T) {
	eachPositioning(t, func(ctx context.Context, t *testing.T, s server, p mysqlcdc.Positioning) {
		table := "handoff_" + suffix()
		q := quote(table)
		stmts := []string{fmt.Sprintf("CREATE TABLE %s (id INT NOT NULL PRIMARY KEY, n INT NOT NULL)", q)}
		for i := 0; i < 200; i += 50 {
			ins := fmt.Sprintf("INSERT INTO %s VALUES ", q)
			for j := i; j < i+50; j++ {
				if j > i {
					ins += ", "
				}
				ins += fmt.Sprintf("(%d, 0)", j)
			}
			stmts = append(stmts, ins)
		}
		if err := s.exec(stmts...); err != nil {
			t.Fatal(err)
		}
		src := s.newSource(t, cdc.SnapshotInitial, mysqlcdc.Options{Positioning: p}, table)

		var wg sync.WaitGroup
		var writeErr error
		halfway := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				select {
				case <-halfway:
				default:
					close(halfway)
				}
			}()
			rng := rand.New(rand.NewPCG(1, 2))
			for i := 1; i <= 150 && writeErr == nil; i++ {
				id := rng.IntN(250)
				var tx []string
				switch rng.IntN(3) {
				case 0:
					tx = []string{fmt.Sprintf("UPDATE %s SET n = %d WHERE id = %d", q, i, id),
						fmt.Sprintf("UPDATE %s SET n = n + 1 WHERE id = %d", q, (id+7)%250)}
				case 1:
					tx = []string{fmt.Sprintf("DELETE FROM %s WHERE id = %d", q, id)}
				default:
					tx = []string{fmt.Sprintf("INSERT INTO %s VALUES (%d, %d) ON DUPLICATE KEY UPDATE n = %d", q, id, i, i)}
				}
				writeErr = s.execTx(tx...)
				if i == 50 {
					close(halfway) // the snapshot starts amid the writes
				}
			}
		}()
		<-halfway
		st, err := src.Open(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		wg.Wait()
		if writeErr != nil {
			t.Fatal(writeErr)
		}
		if err := s.exec(fmt.Sprintf("INSERT INTO %s VALUES (-1, -1)", q)); err != nil {
			t.Fatal(err)
		}

		type doc struct {
			version int64
			n       int64
			deleted bool
		}
		mirror := map[int64]doc{}
		reads := 0
		for {
			ev := cdctest.NextEvent(ctx, t, st)
			row, deleted := ev.After, false
			if ev.Op == cdc.Delete {
				row, deleted = ev.Before, true
			}
			if ev.Op == cdc.Read {
				reads++
			}
			id := row[0].(int64)
			if id == -1 {
				break
			}
			v := ev.Position.Version()
			if cur, ok := mirror[id]; ok && v <= cur.version {
				continue // Elasticsearch answers 409: the stored document is newer
			}
			mirror[id] = doc{version: v, n: row[1].(int64), deleted: deleted}
		}
		if reads == 0 {
			t.Fatal("no snapshot reads")
		}

		c, err := s.conn()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		r, err := c.Execute(fmt.Sprintf("SELECT id, n FROM %s WHERE id >= 0", q))
		if err != nil {
			t.Fatal(err)
		}
		want := map[int64]int64{}
		for i := 0; i < r.RowNumber(); i++ {
			id, _ := r.GetInt(i, 0)
			n, _ := r.GetInt(i, 1)
			want[id] = n
		}
		got := map[int64]int64{}
		for id, d := range mirror {
			if !d.deleted {
				got[id] = d.n
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("mirror diverged from the table (%d snapshot reads):\nmirror %v\ntable  %v", reads, got, want)
		}
		t.Logf("%d snapshot reads, %d rows converged", reads, len(want))
	})
}

// TestSnapshotResumesAfterCompletedTables interrupts a snapshot after its first table, changes
// every table, and resumes from the checkpoint the first table's last row carried: the snapshot
// goes on with the remaining tables only, streaming covers the changes made in between, and a
// mirror applying external versions converges on the tables' contents.
func TestSnapshotResumesAfterCompletedTables(t *testing.T) {
	s := testServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := "snapresume_" + suffix()
	names := []string{base + "_a", base + "_b", base + "_c"}
	for _, tb := range names {
		if err := s.exec(fmt.Sprintf("CREATE TABLE %s (id INT NOT NULL PRIMARY KEY, n INT NOT NULL)", quote(tb)),
			fmt.Sprintf("INSERT INTO %s VALUES (1, 1), (2, 2), (3, 3)", quote(tb))); err != nil {
			t.Fatal(err)
		}
	}
	src := s.newSource(t, cdc.SnapshotInitial, mysqlcdc.Options{}, names...)

	type key struct {
		table string
		id    int64
	}
	type doc struct {
		version int64
		n       int64
		deleted bool
	}
	mirror := map[key]doc{}
	apply := func(ev cdc.Event) {
		row, deleted := ev.After, false
		if ev.Op == cdc.Delete {
			row, deleted = ev.Before, true
		}
		k := key{ev.Table.Table, row[0].(int64)}
		if cur, ok := mirror[k]; ok && ev.Position.Version() <= cur.version {
			return
		}
		mirror[k] = doc{ev.Position.Version(), row[1].(int64), deleted}
	}

	st, err := src.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var cp cdc.Checkpoint
	for i := 0; i < 3; i++ {
		ev := cdctest.NextEvent(ctx, t, st)
		if ev.Op != cdc.Read || ev.Table.Table != names[0] {
			t.Fatalf("event %d is %v on %s, want a read of %s", i, ev.Op, ev.Table.Table, names[0])
		}
		if (ev.Checkpoint != nil) != (i == 2) {
			t.Fatalf("read %d of the first table: checkpoint set = %v", i, ev.Checkpoint != nil)
		}
		apply(ev)
		cp = ev.Checkpoint
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	if err := s.exec(
		fmt.Sprintf("UPDATE %s SET n = 100 WHERE id = 1", quote(names[0])),
		fmt.Sprintf("UPDATE %s SET n = 200 WHERE id = 1", quote(names[1])),
		fmt.Sprintf("DELETE FROM %s WHERE id = 3", quote(names[2])),
	); err != nil {
		t.Fatal(err)
	}

	st2, err := src.Open(ctx, cp)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	if err := s.exec(fmt.Sprintf("INSERT INTO %s VALUES (-1, -1)", quote(names[0]))); err != nil {
		t.Fatal(err)
	}
	reads := map[string]int{}
	readVersion := map[string]int64{names[0]: mirror[key{names[0], 1}].version}
	for {
		ev := cdctest.NextEvent(ctx, t, st2)
		if ev.Op == cdc.Read {
			reads[ev.Table.Table]++
			readVersion[ev.Table.Table] = ev.Position.Version()
		}
		if ev.After != nil && ev.After[0].(int64) == -1 {
			break
		}
		if ev.Op != cdc.Read {
			// The first table was read before the changes, the others after them: the stream
			// must win over the former and lose against the latter.
			older := ev.Position.Version() < readVersion[ev.Table.Table]
			if older != (ev.Table.Table != names[0]) {
				t.Errorf("streamed %v on %s has version %d, the table's snapshot read %d",
					ev.Op, ev.Table.Table, ev.Position.Version(), readVersion[ev.Table.Table])
			}
		}
		apply(ev)
	}
	if reads[names[0]] != 0 || reads[names[1]] != 3 || reads[names[2]] != 2 {
		t.Fatalf("resumed snapshot read %v, want the second and third tables only", reads)
	}
	c, err := s.conn()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tb := range names {
		r, err := c.Execute(fmt.Sprintf("SELECT id, n FROM %s WHERE id > 0", quote(tb)))
		if err != nil {
			t.Fatal(err)
		}
		want := map[int64]int64{}
		for i := 0; i < r.RowNumber(); i++ {
			id, _ := r.GetInt(i, 0)
			n, _ := r.GetInt(i, 1)
			want[id] = n
		}
		got := map[int64]int64{}
		for k, d := range mirror {
			if k.table == tb && !d.deleted {
				got[k.id] = d.n
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: mirror %v, table %v", tb, got, want)
		}
	}
}
