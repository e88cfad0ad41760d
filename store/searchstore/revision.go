package searchstore

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tributary-dev/tributary/store/driver"
)

// A revision is the document's _seq_no and _primary_term, the pair both engines compare in
// if_seq_no / if_primary_term: one format byte, then each as a big-endian uint64 (17 bytes).
// The format byte lets a later format, or a revision from another adapter, be told apart.
const (
	revisionFormat = 'S'
	revisionLen    = 1 + 8 + 8
)

type revision struct {
	seqNo, primaryTerm int64
}

func (r revision) encode() []byte {
	b := make([]byte, revisionLen)
	b[0] = revisionFormat
	binary.BigEndian.PutUint64(b[1:], uint64(r.seqNo))
	binary.BigEndian.PutUint64(b[9:], uint64(r.primaryTerm))
	return b
}

// decodeRevision refuses, as KindInvalid, bytes this adapter cannot have produced: a wrong
// length or format byte, a negative sequence number, a primary term below 1.
func decodeRevision(b []byte) (revision, error) {
	if len(b) != revisionLen || b[0] != revisionFormat {
		return revision{}, driver.NewError(driver.KindInvalid, fmt.Sprintf("searchstore: malformed revision (%d bytes)", len(b)), nil)
	}
	seq, term := binary.BigEndian.Uint64(b[1:]), binary.BigEndian.Uint64(b[9:])
	if seq > math.MaxInt64 || term < 1 || term > math.MaxInt64 {
		return revision{}, driver.NewError(driver.KindInvalid, "searchstore: malformed revision (out of range)", nil)
	}
	return revision{seqNo: int64(seq), primaryTerm: int64(term)}, nil
}
