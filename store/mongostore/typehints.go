package mongostore

import (
	"container/list"
	"encoding/binary"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tributary-dev/tributary/store/driver"
)

// typeHints maps the JSON Pointers of a read document's values whose BSON type their JSON text
// does not give back -- an int64 within the int32 range (its text is an int32's), a Decimal128
// whose text the encoder would store as an int32, int64 or double (5, 1.5, 0.1) -- to that type.
// Only other applications write such values: the encoder never produces them.
type typeHints map[string]byte

// appendHinted appends the number lit with the hinted type t when t holds it exactly: an int64
// for an integer within int64 ("-0" excepted: int64 has no negative zero), a Decimal128 for a
// number of at most 34 significant digits within its exponent range. ok is false otherwise, and
// the number is then stored by the ordinary rule.
func appendHinted(out []byte, typePos int, t byte, lit string, integer bool) ([]byte, bool) {
	switch t {
	case bsonInt64:
		if !integer || lit == "-0" {
			return out, false
		}
		n, err := strconv.ParseInt(lit, 10, 64)
		if err != nil {
			return out, false
		}
		out[typePos] = bsonInt64
		return binary.LittleEndian.AppendUint64(out, uint64(n)), true
	case bsonDecimal128:
		hi, lo, ok := decimal128Of(lit)
		if !ok {
			return out, false
		}
		out[typePos] = bsonDecimal128
		out = binary.LittleEndian.AppendUint64(out, lo)
		return binary.LittleEndian.AppendUint64(out, hi), true
	}
	return out, false
}

// decimalTextKeepsType reports whether s, the JSON text a read gives the finite Decimal128
// (hi, lo), is stored again as that same Decimal128 by the ordinary rule.
func decimalTextKeepsType(s string, hi, lo uint64) bool {
	var buf [24]byte
	out, err := appendNumber(buf[:1], 0, s, !strings.ContainsAny(s, ".eE"))
	return err == nil && out[0] == bsonDecimal128 && len(out) == 17 &&
		binary.LittleEndian.Uint64(out[1:]) == lo && binary.LittleEndian.Uint64(out[9:]) == hi
}

// Bounds of the hint cache: the bytes its entries may hold in all (estimated), and what one
// hint and one entry count for besides their strings.
const (
	hintCacheBytes = 4 << 20
	hintOverhead   = 48
	entryOverhead  = 160
)

// hintCache keeps the type hints of recent reads, one entry per record with the revision it was
// read at, so that a put conditioned on that revision -- the write of a merge, or of any
// read-modify-write -- stores the values at those pointers with the types the read found.
// Entries go oldest first once the cache holds hintCacheBytes; a record whose hints alone are
// larger is not kept. A read that finds no hints removes its record's entry.
type hintCache struct {
	n       atomic.Int64 // entries, read without the lock on the paths that find none
	mu      sync.Mutex
	entries map[hintKey]*list.Element // of *hintEntry
	age     list.List                 // oldest first
	bytes   int
}

type hintKey struct {
	ns, ds string
	key    driver.Key
}

type hintEntry struct {
	k     hintKey
	rev   string
	hints typeHints
	size  int
}

// record stores the hints of a read of (ns, ds, key) at revision rev; nil hints drop the
// record's entry.
func (c *hintCache) record(ns, ds string, key driver.Key, rev []byte, hints typeHints) {
	if len(hints) == 0 && c.n.Load() == 0 {
		return
	}
	k := hintKey{ns, ds, key}
	size := entryOverhead + len(ns) + len(ds) + len(rev)
	for p := range hints {
		size += hintOverhead + len(p)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[k]; ok {
		c.remove(el)
	}
	if len(hints) == 0 || size > hintCacheBytes {
		return
	}
	if c.entries == nil {
		c.entries = make(map[hintKey]*list.Element)
	}
	for c.bytes+size > hintCacheBytes {
		c.remove(c.age.Front())
	}
	c.entries[k] = c.age.PushBack(&hintEntry{k: k, rev: string(rev), hints: hints, size: size})
	c.bytes += size
	c.n.Store(int64(len(c.entries)))
}

func (c *hintCache) remove(el *list.Element) {
	e := c.age.Remove(el).(*hintEntry)
	delete(c.entries, e.k)
	c.bytes -= e.size
	c.n.Store(int64(len(c.entries)))
}

// lookup returns the hints of the last read of (ns, ds, key) when it was at revision rev.
func (c *hintCache) lookup(ns, ds string, key driver.Key, rev []byte) typeHints {
	if c.n.Load() == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[hintKey{ns, ds, key}]
	if !ok {
		return nil
	}
	if e := el.Value.(*hintEntry); e.rev == string(rev) {
		return e.hints
	}
	return nil
}
