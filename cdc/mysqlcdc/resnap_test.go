package mysqlcdc

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/cdc"
)

// TestResnapCheckpointRoundTrip: a checkpoint carries the re-snapshot state through encode and
// decode, and one without it keeps the hand-written form.
func TestResnapCheckpointRoundTrip(t *testing.T) {
	st := &resnapState{Jobs: []resnapJob{{ID: "a", Tables: []TableName{{Database: "d", Table: "t"}, {Database: "d", Table: "u"}}, Total: 2, Where: "id > 3"},
		{ID: "b", All: true}}, Key: []string{hex.EncodeToString([]byte("42"))}, Rows: 7}
	c := checkpoint{File: "bin.000003", Pos: 1234, GTID: "0-1-9", UseGTID: true, Resnap: st}
	got, err := decodeCheckpoint(c.encode())
	if err != nil {
		t.Fatal(err)
	}
	if got.Resnap == nil || len(got.Resnap.Jobs) != 2 || got.Resnap.Jobs[0].Tables[1].Table != "u" || got.Resnap.Jobs[0].Where != "id > 3" ||
		!got.Resnap.Jobs[1].All || got.Resnap.Key[0] != st.Key[0] || got.Resnap.Rows != 7 || got.GTID != "0-1-9" || got.Pos != 1234 {
		t.Fatalf("round trip: %+v", got.Resnap)
	}
	c.Resnap = nil
	if b := string(c.encode()); strings.Contains(b, "resnap") {
		t.Fatalf("a checkpoint without a job mentions one: %s", b)
	}
	if (&resnapState{}).clone() != nil {
		t.Fatal("a state without jobs must not be carried")
	}
}

// TestKeyOf: the same key from the binlog's and a chunk's values; distinct keys stay distinct
// (no concatenation ambiguity); a missing value gives no key.
func TestKeyOf(t *testing.T) {
	s := &cdc.TableSchema{Columns: []cdc.Column{{Name: "a"}, {Name: "b"}, {Name: "c"}}, PrimaryKey: []int{0, 2}}
	k1, ok1 := keyOf(s, []cdc.Value{"ab", int64(1), "c"})
	k2, ok2 := keyOf(s, []cdc.Value{"a", int64(2), "bc"})
	k3, _ := keyOf(s, []cdc.Value{"ab", int64(9), "c"})
	if !ok1 || !ok2 || k1 == k2 || k1 != k3 {
		t.Fatalf("keys %q %q %q", k1, k2, k3)
	}
	if a, _ := keyOf(s, []cdc.Value{int64(1), nil, "x"}); a == "" {
		t.Fatal("no key")
	} else if b, _ := keyOf(s, []cdc.Value{uint64(1), nil, "x"}); a == b {
		t.Fatal("int64 and uint64 keys collide")
	}
	if _, ok := keyOf(s, []cdc.Value{nil, nil, "x"}); ok {
		t.Fatal("a NULL key value gave a key")
	}
	if _, ok := keyOf(s, []cdc.Value{"a"}); ok {
		t.Fatal("a short row gave a key")
	}
}

// TestChunkQuery: the bound is spelled out as ranges, strings compare under the column's
// collation, and a value of an unexpected form is refused rather than put into SQL.
func TestChunkQuery(t *testing.T) {
	tb := &table{schema: &cdc.TableSchema{Columns: []cdc.Column{{Name: "k"}, {Name: "id"}, {Name: "v"}}, PrimaryKey: []int{0, 1}},
		codecs: []colCodec{{class: classString, charset: "utf8mb4"}, {class: classInt}, {class: classTimestamp}}}
	name := TableName{Database: "d", Table: "t"}
	q, err := chunkQuery(name, tb, []string{"utf8mb4_general_ci", ""}, nil, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if want := "SELECT `k`, `id`, UNIX_TIMESTAMP(`v`), `k`, `id` FROM `d`.`t` ORDER BY `k`, `id` LIMIT 10"; q != want {
		t.Fatalf("first chunk:\n%s\nwant\n%s", q, want)
	}
	after := []string{hex.EncodeToString([]byte("O'x")), hex.EncodeToString([]byte("17"))}
	q, err = chunkQuery(name, tb, []string{"utf8mb4_general_ci", ""}, after, "v > 0", 10)
	if err != nil {
		t.Fatal(err)
	}
	want := "SELECT `k`, `id`, UNIX_TIMESTAMP(`v`), `k`, `id` FROM `d`.`t` WHERE ((`k` > _utf8mb4 X'4f2778' COLLATE utf8mb4_general_ci) OR " +
		"(`k` = _utf8mb4 X'4f2778' COLLATE utf8mb4_general_ci AND `id` > 17)) AND (v > 0) ORDER BY `k`, `id` LIMIT 10"
	if q != want {
		t.Fatalf("next chunk:\n%s\nwant\n%s", q, want)
	}
	for _, bad := range [][]string{
		{hex.EncodeToString([]byte("a")), hex.EncodeToString([]byte("1 OR 1=1"))},
		{hex.EncodeToString([]byte("a"))},
	} {
		if _, err := chunkQuery(name, tb, []string{"utf8mb4_general_ci", ""}, bad, "", 10); !errors.Is(err, cdc.ErrResnapshotRefused) {
			t.Errorf("bound %q: %v, want a refusal", bad, err)
		}
	}
	if _, err := keyLiteral(&colCodec{class: classTemporal}, []byte("2020-01-01' OR '1"), ""); err == nil {
		t.Error("a temporal value with a quote was accepted")
	}
	if _, err := keyLiteral(&colCodec{class: classString, charset: "utf8mb4"}, []byte("x"), "x; DROP"); err == nil {
		t.Error("a collation name with punctuation was accepted")
	}
}
