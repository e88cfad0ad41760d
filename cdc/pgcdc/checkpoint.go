package pgcdc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pglogrepl"
	"github.com/tributary-dev/tributary/cdc"
)

// Position is a change's place in the WAL.
type Position struct {
	// LSN is the WAL position of the change's own record; for a snapshot read, the snapshot's
	// version floor (see doc.go, Versions).
	LSN pglogrepl.LSN
	// Commit is the LSN of the transaction's commit record (zero for snapshot reads).
	Commit pglogrepl.LSN
	// Snapshot marks a row of the initial snapshot.
	Snapshot bool
}

// Version is the change's own LSN as an int64 (see doc.go, Versions).
func (p Position) Version() int64 { return int64(p.LSN) }

func (p Position) String() string {
	var b []byte
	if p.Snapshot {
		b = appendLSN(append(make([]byte, 0, 32), "snapshot@"...), p.LSN)
	} else {
		b = appendLSN(make([]byte, 0, 48), p.LSN)
		b = appendLSN(append(b, "/commit "...), p.Commit)
	}
	return string(b)
}

// appendLSN appends lsn in PostgreSQL's text form, as pglogrepl.LSN.String writes it (%X/%X)
// without fmt: positions are rendered per dead letter and per checkpoint.
func appendLSN(b []byte, lsn pglogrepl.LSN) []byte {
	b = appendUpperHex(b, uint32(lsn>>32))
	b = append(b, '/')
	return appendUpperHex(b, uint32(lsn))
}

func appendUpperHex(b []byte, v uint32) []byte {
	const digits = "0123456789ABCDEF"
	var buf [8]byte
	i := len(buf)
	for {
		i--
		buf[i] = digits[v&0xf]
		v >>= 4
		if v == 0 {
			break
		}
	}
	return append(b, buf[i:]...)
}

// checkpointVersion is the format version written into every checkpoint.
const checkpointVersion = 1

// checkpoint is what a cdc.Checkpoint holds, as JSON. Resume streams from LSN: the end of the
// last complete transaction's commit record, so that transaction is not decoded again and the
// next one is. Snap is set while an initial snapshot is incomplete: LSN is then the slot's
// consistent point the stream will start from once the snapshot is done.
type checkpoint struct {
	V    int            `json:"v"`
	LSN  string         `json:"lsn"`
	Snap *snapshotState `json:"snap,omitempty"`
	// Resnap is set while a re-snapshot (resnap.go) is not done: its jobs and position.
	Resnap *resnapState `json:"resnap,omitempty"`
	// Rels are the relations that left the captured names, or came back to them under a new
	// identity (identity.go), by OID. Absent from checkpoints written before it existed.
	Rels json.RawMessage `json:"rels,omitempty"`
}

// snapshotState is how far an interrupted snapshot came. Key holds the primary key of the last
// delivered row in text form; checkpoints are stored by the runner and never logged.
type snapshotState struct {
	Floor string     `json:"floor"`           // the version of every snapshot row, an LSN
	Done  []tableRef `json:"done,omitempty"`  // tables read completely
	Table *tableRef  `json:"table,omitempty"` // the table being read
	Key   []string   `json:"key,omitempty"`   // its last delivered row's primary key
	Rows  int64      `json:"rows"`            // rows delivered up to here
}

// tableRef names a table in a checkpoint.
type tableRef struct {
	Schema string `json:"schema"`
	Name   string `json:"name"`
}

// ErrBadCheckpoint is returned for a checkpoint this package did not write.
var ErrBadCheckpoint = errors.New("pgcdc: malformed checkpoint")

// ErrForeignCheckpoint is what a *ForeignCheckpointError is (errors.Is): the stored checkpoint
// is another kind of source's. It is cdc.ErrForeignCheckpoint.
var ErrForeignCheckpoint = cdc.ErrForeignCheckpoint

// ForeignCheckpointError is the permanent refusal of a checkpoint that another kind of source
// wrote ("debezium" or "mysqlcdc"): see cdc.ForeignCheckpointError. pgcdc's is also an
// ErrBadCheckpoint (its Err), so permanent.
type ForeignCheckpointError = cdc.ForeignCheckpointError

// foreignCheckpoint recognises a checkpoint another kind of source wrote: a Debezium source's
// ("debezium1:<session>:<seq>") or mysqlcdc's (JSON with binlog coordinates, no LSN). nil
// when cp is neither.
func foreignCheckpoint(cp cdc.Checkpoint) error {
	if bytes.HasPrefix(cp, []byte("debezium")) {
		return &ForeignCheckpointError{Reader: "pgcdc", Writer: "debezium", Err: ErrBadCheckpoint}
	}
	var keys map[string]json.RawMessage
	if json.Unmarshal(cp, &keys) != nil {
		return nil
	}
	if _, ok := keys["lsn"]; ok {
		return nil
	}
	for _, k := range []string{"file", "use_gtid", "gtid"} {
		if _, ok := keys[k]; ok {
			return &ForeignCheckpointError{Reader: "pgcdc", Writer: "mysqlcdc", Err: ErrBadCheckpoint}
		}
	}
	return nil
}

func encodeCheckpoint(lsn pglogrepl.LSN, snap *snapshotState, resnap *resnapState, rels []byte) cdc.Checkpoint {
	if snap == nil && resnap == nil { // every transaction's: what json.Marshal writes, without reflection
		b := append(make([]byte, 0, 40+len(rels)), `{"v":`...)
		b = strconv.AppendInt(b, checkpointVersion, 10)
		b = appendLSN(append(b, `,"lsn":"`...), lsn)
		if len(rels) > 0 {
			b = append(append(b, `","rels":`...), rels...)
			return append(b, '}')
		}
		return append(b, `"}`...)
	}
	b, err := json.Marshal(checkpoint{V: checkpointVersion, LSN: lsn.String(), Snap: snap, Resnap: resnap, Rels: rels})
	if err != nil {
		panic(err) // plain strings and numbers always marshal
	}
	return b
}

// decodedCheckpoint is a parsed checkpoint.
type decodedCheckpoint struct {
	lsn    pglogrepl.LSN
	snap   *snapshotState
	floor  pglogrepl.LSN
	resnap *resnapState
	marks  map[uint32]relMark
}

func decodeCheckpoint(cp cdc.Checkpoint) (decodedCheckpoint, error) {
	if len(cp) == 0 || cp[0] != '{' || !bytes.Contains(cp, []byte(`"lsn"`)) {
		if err := foreignCheckpoint(cp); err != nil {
			return decodedCheckpoint{}, err
		}
	}
	var c checkpoint
	if err := json.Unmarshal(cp, &c); err != nil {
		return decodedCheckpoint{}, fmt.Errorf("%w: not JSON", ErrBadCheckpoint)
	}
	if c.V != checkpointVersion {
		return decodedCheckpoint{}, fmt.Errorf("%w: format version %d", ErrBadCheckpoint, c.V)
	}
	lsn, err := pglogrepl.ParseLSN(c.LSN)
	if err != nil || lsn == 0 {
		return decodedCheckpoint{}, fmt.Errorf("%w: bad LSN", ErrBadCheckpoint)
	}
	d := decodedCheckpoint{lsn: lsn, snap: c.Snap, resnap: c.Resnap}
	if len(c.Rels) > 0 {
		var raw map[string]relMark
		if err := json.Unmarshal(c.Rels, &raw); err != nil {
			return decodedCheckpoint{}, fmt.Errorf("%w: bad relation marks", ErrBadCheckpoint)
		}
		if d.marks, err = decodeMarks(raw); err != nil {
			return decodedCheckpoint{}, err
		}
	}
	if r := c.Resnap; r != nil {
		if len(r.Jobs) == 0 {
			d.resnap = nil
		}
		for _, j := range r.Jobs {
			if j.ID == "" || (len(j.Tables) == 0 && !j.All) {
				return decodedCheckpoint{}, fmt.Errorf("%w: re-snapshot job without an id or tables", ErrBadCheckpoint)
			}
		}
	}
	if c.Snap != nil {
		if d.floor, err = pglogrepl.ParseLSN(c.Snap.Floor); err != nil {
			return decodedCheckpoint{}, fmt.Errorf("%w: bad snapshot floor", ErrBadCheckpoint)
		}
		if c.Snap.Table == nil && len(c.Snap.Key) > 0 {
			return decodedCheckpoint{}, fmt.Errorf("%w: snapshot key without a table", ErrBadCheckpoint)
		}
	}
	return d, nil
}

// CheckpointLSN returns the WAL position a checkpoint resumes streaming from (for an
// interrupted snapshot, the slot's consistent point), for logs and operators.
func CheckpointLSN(cp cdc.Checkpoint) (pglogrepl.LSN, error) {
	d, err := decodeCheckpoint(cp)
	return d.lsn, err
}
