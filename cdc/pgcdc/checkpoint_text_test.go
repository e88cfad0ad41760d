package pgcdc

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/jackc/pglogrepl"
)

// TestLSNTextMatchesPglogrepl: appendLSN writes what pglogrepl.LSN.String does, Position.String
// its two forms, and encodeCheckpoint without a snapshot what json.Marshal writes.
func TestLSNTextMatchesPglogrepl(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	lsns := []pglogrepl.LSN{0, 1, 0xF, 0x10, math.MaxUint32, math.MaxUint32 + 1, math.MaxUint64, 0x16B3748}
	for range 2000 {
		lsns = append(lsns, pglogrepl.LSN(r.Uint64()>>r.IntN(64)))
	}
	for _, l := range lsns {
		if got, want := string(appendLSN(nil, l)), l.String(); got != want {
			t.Fatalf("appendLSN(%d) = %s, want %s", uint64(l), got, want)
		}
		if got, want := (Position{LSN: l, Commit: l + 1}).String(), l.String()+"/commit "+(l+1).String(); got != want {
			t.Fatalf("Position.String = %s, want %s", got, want)
		}
		if got, want := (Position{LSN: l, Snapshot: true}).String(), "snapshot@"+l.String(); got != want {
			t.Fatalf("snapshot Position.String = %s, want %s", got, want)
		}
		want, err := json.Marshal(checkpoint{V: checkpointVersion, LSN: l.String()})
		if err != nil {
			t.Fatal(err)
		}
		if got := encodeCheckpoint(l, nil, nil, nil); !bytes.Equal(got, want) {
			t.Fatalf("encodeCheckpoint = %s, want %s", got, want)
		}
	}
}
