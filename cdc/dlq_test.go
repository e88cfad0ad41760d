package cdc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/cdc"
)

func TestFileDLQRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dlq.jsonl")
	d, err := cdc.OpenFileDLQ(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	sch := &cdc.TableSchema{ID: table, Columns: []cdc.Column{
		{Name: "id", Kind: cdc.KindInt}, {Name: "price", Kind: cdc.KindDecimal}, {Name: "blob", Kind: cdc.KindBinary},
		{Name: "at", Kind: cdc.KindTimestamp}, {Name: "doc", Kind: cdc.KindJSON}, {Name: "f", Kind: cdc.KindFloat},
		{Name: "tags", Kind: cdc.KindArray}, {Name: "gone", Kind: cdc.KindText},
	}}
	commit := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ev := cdc.Event{Op: cdc.Update, Table: table, Schema: sch, Position: pos{7, 2}, TxID: "tx7", CommitTime: commit,
		Before: []cdc.Value{int64(1), "9.10", cdc.Base64("AAE="), cdc.EpochMicros(1700000000000001), cdc.RawJSON(`{"a":1}`), math.NaN(), []cdc.Value{"x", nil}, "old"},
		After:  []cdc.Value{int64(1), "12.30", cdc.Base64("AAI="), cdc.EpochMicros(1700000000000002), cdc.RawJSON(`{"a":2}`), math.Inf(-1), []cdc.Value{}, cdc.Unchanged{}},
	}
	del := cdc.Event{Op: cdc.Delete, Table: table, Position: pos{8, 0}, Before: []cdc.Value{uint64(math.MaxUint64)}}
	now := time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)
	recs := []cdc.DeadLetterRecord{
		{Pipeline: "p", Reason: "mapping conflict", Time: now, Event: ev},
		{Pipeline: "p", Reason: "no primary key", Time: now, Event: del},
	}
	if err := d.WriteDeadLetters(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines, torn, err := cdc.ReadDeadLetters(f)
	if err != nil || torn != 0 || len(lines) != 2 {
		t.Fatalf("ReadDeadLetters: %d lines, %d torn, %v", len(lines), torn, err)
	}
	l := lines[0]
	if l.Pipeline != "p" || l.Reason != "mapping conflict" || l.Op != "update" || l.Position != "7/2" ||
		l.Version != (pos{7, 2}).Version() || l.TxID != "tx7" || !l.Time.Equal(now) || l.CommitTime == nil || !l.CommitTime.Equal(commit) ||
		l.Table.Table != "t" || l.Table.Connector != "fake" || len(l.Columns) != 8 || l.Columns[1] != (cdc.DeadLetterColumn{Name: "price", Kind: "decimal"}) {
		t.Fatalf("line %+v", l)
	}
	wantBefore := []string{`1`, `"9.10"`, `{"_base64":"AAE="}`, `1700000000000001`, `{"a":1}`, `"NaN"`, `["x",null]`, `"old"`}
	wantAfter := []string{`1`, `"12.30"`, `{"_base64":"AAI="}`, `1700000000000002`, `{"a":2}`, `"-Infinity"`, `[]`, `{"_unchanged":true}`}
	for i := range wantBefore {
		if got := string(l.Before[i]); got != wantBefore[i] {
			t.Errorf("before[%d] = %s, want %s", i, got, wantBefore[i])
		}
		if got := string(l.After[i]); got != wantAfter[i] {
			t.Errorf("after[%d] = %s, want %s", i, got, wantAfter[i])
		}
	}
	l = lines[1]
	if l.After != nil || string(l.Before[0]) != "18446744073709551615" || l.CommitTime != nil || l.Columns != nil {
		t.Fatalf("delete line %+v", l)
	}
}

// TestFileDLQRepairsATornLine: a crash in the middle of an append leaves a partial last line;
// reopening ends it, so later records stay readable and the torn one is counted.
func TestFileDLQRepairsATornLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dlq.jsonl")
	rec := cdc.DeadLetterRecord{Pipeline: "p", Reason: "r", Time: time.Unix(0, 0), Event: txEvents(1, 1)[0]}
	d, err := cdc.OpenFileDLQ(path, &cdc.FileDLQOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.WriteDeadLetters(context.Background(), []cdc.DeadLetterRecord{rec}); err != nil {
		t.Fatal(err)
	}
	d.Close()
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"time":"2026-`)
	f.Close()
	if d, err = cdc.OpenFileDLQ(path, nil); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteDeadLetters(context.Background(), []cdc.DeadLetterRecord{rec}); err != nil {
		t.Fatal(err)
	}
	d.Close()
	data, _ := os.ReadFile(path)
	lines, torn, err := cdc.ReadDeadLetters(bytes.NewReader(data))
	if err != nil || len(lines) != 2 || torn != 1 {
		t.Fatalf("%d lines, %d torn, %v", len(lines), torn, err)
	}
	if info, _ := os.Stat(path); info.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v, want 0600 (dead letters hold rows)", info.Mode().Perm())
	}
}

// TestFileDLQErrorsCarryNoRowData: a failing write names the file, never the row.
func TestFileDLQErrorsCarryNoRowData(t *testing.T) {
	d, err := cdc.OpenFileDLQ(filepath.Join(t.TempDir(), "dlq.jsonl"), nil)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	ev := txEvents(1, 1)[0]
	ev.After = []cdc.Value{int64(1), "secret-row-value"}
	err = d.WriteDeadLetters(context.Background(), []cdc.DeadLetterRecord{{Pipeline: "p", Reason: "r", Event: ev}})
	if err == nil || !errors.Is(err, os.ErrClosed) || strings.Contains(err.Error(), "secret") {
		t.Fatalf("write after Close: %v", err)
	}
	// The line form holds the row (for replay) -- the file is the one place it belongs.
	b, _ := json.Marshal(cdc.NewDeadLetterLine(cdc.DeadLetterRecord{Event: ev}))
	if !strings.Contains(string(b), "secret-row-value") {
		t.Fatal("the dead-letter line lost the row")
	}
}
