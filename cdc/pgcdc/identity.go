package pgcdc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/tributary-dev/tributary/cdc"
)

// relMark is what a stream remembers of a relation that left the captured names (doc.go,
// Relations and renames): a relation is marked away when a relation message names it under a
// name the source does not capture, and when it comes back to the name it left (or to any
// captured name, when the name it left is unknown) it takes a new identity, "<oid>.<n>" after
// its n-th such return, so that the sink resets that name's index and has it re-read: the
// changes made while it was away never reached the sink.
type relMark struct {
	// N counts the relation's returns that changed its identity.
	N int `json:"n,omitempty"`
	// Away: the relation bears a name the source does not capture.
	Away bool `json:"away,omitempty"`
	// From is the captured name it left, nil when the stream did not see it captured (it
	// started while the relation was away).
	From *tableRef `json:"from,omitempty"`
}

// identOf is a relation's identity as cdc.TableSchema.Relation carries it: its pg_class OID
// in decimal, followed by ".<n>" after its n-th return to the name it left.
func identOf(oid uint32, n int) string {
	if n == 0 {
		return relationID(oid)
	}
	return relationID(oid) + "." + strconv.Itoa(n)
}

// ident is the relation's current identity.
func (s *Source) ident(oid uint32) string {
	s.relMu.Lock()
	defer s.relMu.Unlock()
	return identOf(oid, s.marks[oid].N)
}

// catalog is a catalog whose schemas carry the relations' current identities.
func (s *Source) catalog(q querier) *catalog {
	c := newCatalog(q)
	c.ident = s.ident
	return c
}

// resetMarks installs the marks of the checkpoint an Open resumes from (none without one), so
// that the same WAL gives the same identities however often it is decoded.
func (s *Source) resetMarks(m map[uint32]relMark) {
	s.relMu.Lock()
	defer s.relMu.Unlock()
	s.marks = maps.Clone(m)
	if s.marks == nil {
		s.marks = map[uint32]relMark{}
	}
	s.marksJSON = encodeMarks(s.marks)
}

// encodeMarks is the marks as a checkpoint's "rels" object (nil when there are none), keys in
// OID order so that equal marks encode equally.
func encodeMarks(m map[uint32]relMark) []byte {
	if len(m) == 0 {
		return nil
	}
	oids := slices.Sorted(maps.Keys(m))
	var b bytes.Buffer
	b.WriteByte('{')
	for i, oid := range oids {
		if i > 0 {
			b.WriteByte(',')
		}
		v, err := json.Marshal(m[oid])
		if err != nil {
			panic(err) // ints, bools and strings always marshal
		}
		b.WriteString(`"` + relationID(oid) + `":`)
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// decodeMarks parses a checkpoint's "rels" object.
func decodeMarks(raw map[string]relMark) (map[uint32]relMark, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	out := make(map[uint32]relMark, len(raw))
	for k, v := range raw {
		oid, err := strconv.ParseUint(k, 10, 32)
		if err != nil || oid == 0 || v.N < 0 {
			return nil, fmt.Errorf("%w: bad relation mark", ErrBadCheckpoint)
		}
		out[uint32(oid)] = v
	}
	return out, nil
}

// marksCheckpoint returns the encoded marks for a checkpoint, and marks them as carried.
func (st *stream) marksCheckpoint() []byte {
	st.src.relMu.Lock()
	defer st.src.relMu.Unlock()
	st.marksDirty = false
	return st.src.marksJSON
}

// noteMembership follows a relation in and out of the captured names as its relation messages
// come (t is the name one gives it). Leaving marks it away, with the captured name it left when
// the stream saw it under one; coming back to that name -- or to any captured name when that
// is unknown -- gives it a new identity. Coming back under another captured name keeps its
// identity, so that the sink empties the name it left (the identity is bound to it) and has
// the new one re-read. The marks go into every later checkpoint; until one carries them,
// the slot is not moved by idle notes (a restart must decode the relation message again).
func (st *stream) noteMembership(oid uint32, prev *relation, id cdc.TableID, captured bool) {
	s := st.src
	s.relMu.Lock()
	mk := s.marks[oid]
	if !captured {
		if mk.Away || (prev != nil && !prev.captured) {
			s.relMu.Unlock()
			return
		}
		mk.Away, mk.From = true, nil
		if prev != nil {
			mk.From = &tableRef{Schema: prev.id.Schema, Name: prev.id.Table}
		}
		s.marks[oid] = mk
		s.marksJSON = encodeMarks(s.marks)
		s.relMu.Unlock()
		st.marksDirty = true
		return
	}
	if !mk.Away {
		s.relMu.Unlock()
		return
	}
	if mk.From == nil || (mk.From.Schema == id.Schema && mk.From.Name == id.Table) {
		st.renew(oid, id, "pgcdc: a table came back into the captured tables after changes under a name not captured: "+
			"it gets a new relation identity, so that its destination is reset and read again (the changes made while it was away were not streamed)")
		return
	}
	mk.Away, mk.From = false, nil
	if mk.N == 0 {
		delete(s.marks, oid)
	} else {
		s.marks[oid] = mk
	}
	s.marksJSON = encodeMarks(s.marks)
	s.relMu.Unlock()
	st.marksDirty = true
}

// forgetRelation drops every cached schema of the relation identity rel.
func (s *Source) forgetRelation(rel string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, ti := range s.schemas {
		if ti.schema.Relation == rel {
			delete(s.schemas, id)
		}
	}
}

// cachedRelation is a cached schema of the relation with this OID, under any name.
func (s *Source) cachedRelation(oid uint32) *tableInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ti := range s.schemas {
		if ti.oid == oid && len(ti.schema.PrimaryKey) > 0 {
			return ti
		}
	}
	return nil
}

// classXminSQL reads a relation's name now and the transaction that last rewrote its
// pg_class row: ALTER TABLE ... SET SCHEMA and RENAME do, as do most other ALTER TABLEs, GRANT,
// TRUNCATE and VACUUM FULL; VACUUM, ANALYZE and CREATE INDEX update it in place and do not.
const classXminSQL = `SELECT n.nspname::text, c.relname::text, c.xmin::text::bigint
	FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1`

// checkSchemaReturn covers what the stream cannot see: a publication FOR TABLES IN SCHEMA
// (patterns) does not send the changes of a table moved out of the schema, so a table moved
// out and back under its own name comes back with nothing in the stream to show it left --
// only a relation message like the one before. When such a repeated relation message (same
// name and columns) finds the relation's pg_class row rewritten since the previous one (its
// xmin changed, and no TRUNCATE of it came between) while the catalog gives it the message's
// name, the table may have been away: it gets a new identity, and so is read again. A catalog
// that already gives it another name is further on in the relation's history than the stream
// (a rename the stream has not reached): it proves nothing, and the next message is compared
// with nothing. Tables outside the patterns' schemas, and publications FOR ALL TABLES, need
// no such check: their moves reach the stream. bumped: the relation got a new identity.
func (st *stream) checkSchemaReturn(ctx context.Context, oid uint32, id cdc.TableID, repeated bool) (bumped bool, err error) {
	if !slices.Contains(st.src.patterns, id.Schema) || st.src.pubAllTables.Load() {
		return false, nil
	}
	var sch, name string
	var xmin int64
	err = st.sess.QueryRow(ctx, classXminSQL, oid).Scan(&sch, &name, &xmin)
	if errors.Is(err, pgx.ErrNoRows) {
		delete(st.xmins, oid) // dropped since
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("pgcdc: read the catalog entry of %s: %w", id, err)
	}
	if sch != id.Schema || name != id.Table {
		delete(st.xmins, oid)
		return false, nil
	}
	was, seen := st.xmins[oid]
	st.xmins[oid] = uint32(xmin)
	if !repeated || !seen || was == uint32(xmin) {
		return false, nil
	}
	st.src.relMu.Lock()
	st.renew(oid, id, "pgcdc: a table of a captured schema may have been moved out of it and back (its catalog entry was rewritten, its name and columns are the same): "+
		"it gets a new relation identity, so that its destination is reset and read again")
	return true, nil
}

// truncated notes a TRUNCATE of the relation, which rewrites its pg_class row.
func (st *stream) truncated(oid uint32) { delete(st.xmins, oid) }

// renew gives a relation, back among the captured names, its next identity and warns with
// msg: its mark counts one more return and is no longer away; the marks wait for a checkpoint,
// and the cached schemas of the identity it had are forgotten. relMu is held on entry and
// released on return.
func (st *stream) renew(oid uint32, id cdc.TableID, msg string) {
	s := st.src
	mk := s.marks[oid]
	old := identOf(oid, mk.N)
	mk.N++
	mk.Away, mk.From = false, nil
	s.marks[oid] = mk
	s.marksJSON = encodeMarks(s.marks)
	nu := identOf(oid, mk.N)
	s.relMu.Unlock()
	st.marksDirty = true
	s.forgetRelation(old)
	st.opts().Logger.Warn(msg, "table", id.String(), "relation", nu, "was", old)
}
