package mysqlcdc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/jsonenc"
)

// Version layouts; doc.go explains them and their limits.
const (
	// GTID positioning: MariaDB GTID sequence number above a row ordinal within the transaction.
	gtidOrdinalBits = 20
	gtidSeqBits     = 63 - gtidOrdinalBits
	maxGTIDOrdinal  = 1<<gtidOrdinalBits - 1

	// File positioning: binlog file index, the rows event's end offset, the row within the event.
	fileOrdinalBits = 13
	filePosBits     = 32
	fileIndexBits   = 63 - filePosBits - fileOrdinalBits
	maxFileOrdinal  = 1<<fileOrdinalBits - 1
)

// gtidVersion packs a GTID sequence number and a row ordinal. ok is false when either does not
// fit; the result then saturates, which keeps versions monotonic but no longer strictly so.
func gtidVersion(seq uint64, ordinal int) (v int64, ok bool) {
	ok = true
	if seq >= 1<<gtidSeqBits {
		seq, ok = 1<<gtidSeqBits-1, false
	}
	if ordinal > maxGTIDOrdinal {
		ordinal, ok = maxGTIDOrdinal, false
	}
	return int64(seq<<gtidOrdinalBits | uint64(ordinal)), ok
}

// fileVersion packs a binlog file index, an offset in it and a row ordinal within one event.
func fileVersion(index uint64, pos uint32, ordinal int) (v int64, ok bool) {
	ok = true
	if index >= 1<<fileIndexBits {
		index, ok = 1<<fileIndexBits-1, false
	}
	if ordinal > maxFileOrdinal {
		ordinal, ok = maxFileOrdinal, false
	}
	return int64(index<<(filePosBits+fileOrdinalBits) | uint64(pos)<<fileOrdinalBits | uint64(ordinal)), ok
}

// binlogIndex is the numeric suffix of a binlog file name ("mariadb-bin.000042" -> 42).
func binlogIndex(file string) (uint64, error) {
	dot := strings.LastIndexByte(file, '.')
	n, err := strconv.ParseUint(file[dot+1:], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("mysqlcdc: binlog file name %q has no numeric suffix", file)
	}
	return n, nil
}

// Position is a change's place in the binlog. It implements cdc.Position.
type Position struct {
	File string // binlog file
	Pos  uint32 // end offset of the rows event; for a snapshot read, the snapshot's offset
	// GTID is the transaction's GTID; for a snapshot read, the GTID position it was taken at.
	GTID string
	Row  int  // the row's ordinal (in the transaction for GTID versions, in the event otherwise)
	Read bool // a snapshot read

	version int64
}

// Version returns the external version (see the package documentation).
func (p Position) Version() int64 { return p.version }

func (p Position) String() string {
	var b strings.Builder
	if p.Read {
		b.WriteString("snapshot@")
	}
	fmt.Fprintf(&b, "%s:%d", p.File, p.Pos)
	if p.GTID != "" {
		fmt.Fprintf(&b, " gtid=%s", p.GTID)
	}
	if !p.Read {
		fmt.Fprintf(&b, " row=%d", p.Row)
	}
	return b.String()
}

// checkpoint is the resume point a cdc.Checkpoint encodes: the binlog coordinates right after a
// transaction's commit event and, with GTID positioning, the GTID set executed up to it.
type checkpoint struct {
	Format int    `json:"v"`
	File   string `json:"file"`
	Pos    uint32 `json:"pos"`
	GTID   string `json:"gtid,omitempty"`
	// UseGTID records which coordinates the stream was positioned by, so that a resume keeps
	// deriving versions the same way.
	UseGTID bool `json:"use_gtid,omitempty"`
	// Snapshot is set on checkpoints inside an initial snapshot; the coordinates are then where
	// streaming will start once the snapshot is complete.
	Snapshot *snapshotMark `json:"snapshot,omitempty"`
	// Resnap is set while a re-snapshot job is not done (resnap.go).
	Resnap *resnapState `json:"resnap,omitempty"`
}

// snapshotMark records the tables an interrupted snapshot has delivered in full.
type snapshotMark struct {
	Done []TableName `json:"done"`
}

const checkpointFormat = 1

func (c checkpoint) encode() []byte {
	c.Format = checkpointFormat
	if c.Snapshot != nil || c.Resnap != nil {
		b, _ := json.Marshal(c) // a struct of strings and integers always marshals
		return b
	}
	// A streamed transaction's checkpoint, written once per transaction: by hand, in the
	// form json.Marshal gives it (field order and omitempty; strings are escaped for JSON,
	// not for HTML, which decodes the same).
	b := make([]byte, 0, 64+len(c.File)+len(c.GTID))
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, int64(c.Format), 10)
	b = append(b, `,"file":`...)
	b = jsonenc.AppendString(b, c.File)
	b = append(b, `,"pos":`...)
	b = strconv.AppendUint(b, uint64(c.Pos), 10)
	if c.GTID != "" {
		b = append(b, `,"gtid":`...)
		b = jsonenc.AppendString(b, c.GTID)
	}
	if c.UseGTID {
		b = append(b, `,"use_gtid":true`...)
	}
	return append(b, '}')
}

// gtidText renders a MariaDB GTID as go-mysql's String does ("domain-server-sequence", "" for
// the zero GTID), without fmt: it is rendered once or twice per transaction.
func gtidText(g mysql.MariadbGTID) string {
	if g.DomainID == 0 && g.ServerID == 0 && g.SequenceNumber == 0 {
		return ""
	}
	var buf [64]byte
	b := strconv.AppendUint(buf[:0], uint64(g.DomainID), 10)
	b = append(b, '-')
	b = strconv.AppendUint(b, uint64(g.ServerID), 10)
	b = append(b, '-')
	b = strconv.AppendUint(b, g.SequenceNumber, 10)
	return string(b)
}

// ErrForeignCheckpoint is what a *ForeignCheckpointError is (errors.Is): the stored checkpoint
// is another kind of source's. It is cdc.ErrForeignCheckpoint.
var ErrForeignCheckpoint = cdc.ErrForeignCheckpoint

// ForeignCheckpointError is the refusal (permanent at Open) of a checkpoint that another kind
// of source wrote ("debezium" or "pgcdc"): see cdc.ForeignCheckpointError.
type ForeignCheckpointError = cdc.ForeignCheckpointError

// foreignCheckpoint recognises a checkpoint another kind of source wrote: a Debezium source's
// ("debezium1:<session>:<seq>") or pgcdc's (JSON with an LSN). nil when b is neither.
func foreignCheckpoint(b []byte) error {
	if bytes.HasPrefix(b, []byte("debezium")) {
		return &ForeignCheckpointError{Reader: "mysqlcdc", Writer: "debezium"}
	}
	var keys map[string]json.RawMessage
	if json.Unmarshal(b, &keys) != nil {
		return nil
	}
	if _, ok := keys["lsn"]; ok {
		return &ForeignCheckpointError{Reader: "mysqlcdc", Writer: "pgcdc"}
	}
	return nil
}

func decodeCheckpoint(b []byte) (checkpoint, error) {
	if len(b) == 0 || b[0] != '{' || bytes.Contains(b, []byte(`"lsn"`)) {
		if err := foreignCheckpoint(b); err != nil {
			return checkpoint{}, err
		}
	}
	var c checkpoint
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("mysqlcdc: malformed checkpoint: %w", err)
	}
	if c.Format != checkpointFormat {
		return c, fmt.Errorf("mysqlcdc: checkpoint format %d, want %d", c.Format, checkpointFormat)
	}
	if c.UseGTID {
		return c, nil // an empty GTID set is a valid start: the beginning of the binlog
	}
	if c.File == "" || c.Pos < 4 {
		return c, errors.New("mysqlcdc: checkpoint has no binlog coordinates")
	}
	return c, nil
}

// SwitchCheckpoint returns a checkpoint at the server's current binlog position (in the
// source's positioning) for a pipeline that moves to this source from another kind of source
// while the other still runs (mirror.Switch's prepare step). With snapshot, Open reads every
// captured table in a new read view and then streams from that position, as it resumes an
// interrupted snapshot: the view's rows carry its version, above every change up to it, and
// the changes between the position and the view that the stream delivers again are below
// them -- void, except deletes of rows the view no longer has, which apply. Without, Open
// streams from the position.
func (s *Source) SwitchCheckpoint(ctx context.Context, snapshot bool) (cdc.Checkpoint, error) {
	c, err := s.currentPosition(ctx)
	if err != nil {
		return nil, s.classify(err)
	}
	if snapshot {
		c.Snapshot = &snapshotMark{}
	}
	return c.encode(), nil
}

// IsCheckpoint says whether cp is a checkpoint of this package (one Open would resume from).
func IsCheckpoint(cp cdc.Checkpoint) bool {
	_, err := decodeCheckpoint(cp)
	return err == nil
}
