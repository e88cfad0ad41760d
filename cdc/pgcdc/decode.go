package pgcdc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/tributary-dev/tributary/cdc"
)

// walHook, when set, sees each pgoutput message before a stream decodes it. Only tests set
// it (TestCaptureFuzzSeeds records the messages the server sent as fuzz seeds); a stream costs
// one atomic load per message for it.
var walHook atomic.Pointer[func(wal []byte)]

// handleCopyData decodes XLogData. Keepalives normally never get here (the reader takes them
// out of the stream: frames.go); one that does and asks for a reply is answered the same way.
func (st *stream) handleCopyData(ctx context.Context, data []byte) error {
	if len(data) == 0 {
		return errors.New("pgcdc: empty replication message")
	}
	switch data[0] {
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return fmt.Errorf("pgcdc: keepalive: %w", err)
		}
		if ka.ReplyRequested {
			return st.answerPing(ka.ServerWALEnd)
		}
		// In band, after every frame that preceded it: once nothing delivered waits for its
		// ack, everything the server sent up to its WAL end is stored (Lag).
		if st.streaming && !st.inTx && !st.hasPending {
			st.passed(uint64(ka.ServerWALEnd))
		}
		return nil
	case pglogrepl.XLogDataByteID:
		xld, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return fmt.Errorf("pgcdc: XLogData: %w", err)
		}
		if len(xld.WALData) == 0 {
			return errors.New("pgcdc: empty pgoutput message")
		}
		if h := walHook.Load(); h != nil {
			(*h)(xld.WALData)
		}
		switch xld.WALData[0] {
		case 'I', 'U', 'D':
			return st.change(ctx, xld.WALStart, xld.WALData)
		}
		msg, err := parseMessage(xld.WALData)
		if err != nil {
			return err
		}
		return st.handleMessage(ctx, xld.WALStart, msg)
	}
	return nil
}

// errMessageFraming means a pgoutput message other than a row change does not parse; like
// errTupleFraming, the stream cannot go on. It never quotes the message: it may hold row data.
var errMessageFraming = errors.New("pgcdc: pgoutput: truncated or malformed message")

// parseMessage parses a pgoutput message that is not a row change through pglogrepl, guarding
// it against what it does not check: pglogrepl indexes past the end of some truncated
// messages (it panics), and sizes a Truncate message's relation list from the count the
// message states before reading it (a corrupt count allocates up to 16 GiB). A message
// pglogrepl cannot read is errMessageFraming, wrapping pglogrepl's error.
func parseMessage(wal []byte) (msg pglogrepl.Message, err error) {
	if len(wal) > 0 && wal[0] == 'T' {
		// 'T', Int32 relation count, Int8 options, then one Int32 relation id per relation.
		if len(wal) < 6 || uint64(len(wal)-6) != 4*uint64(binary.BigEndian.Uint32(wal[1:5])) {
			return nil, fmt.Errorf("%w (truncate relation count)", errMessageFraming)
		}
	}
	defer func() {
		if r := recover(); r != nil {
			msg, err = nil, fmt.Errorf("%w (cut short)", errMessageFraming)
		}
	}()
	msg, err = pglogrepl.Parse(wal)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errMessageFraming, err)
	}
	return msg, nil
}

// handleMessage turns pgoutput messages into events. A change's Position is the WAL position
// the server stamps its XLogData with: the LSN of the change's own record (doc.go, Versions).
func (st *stream) handleMessage(ctx context.Context, at pglogrepl.LSN, msg pglogrepl.Message) error {
	switch m := msg.(type) {
	case *pglogrepl.BeginMessage:
		st.tx = txState{xid: strconv.FormatUint(uint64(m.Xid), 10), xid32: m.Xid, commitLSN: m.FinalLSN, commitTime: m.CommitTime}
		st.pending, st.hasPending = cdc.Event{}, false
		st.inTx = true
	case *pglogrepl.RelationMessage:
		return st.handleRelation(ctx, m)
	case *pglogrepl.TruncateMessage:
		return st.truncate(ctx, at, m)
	case *pglogrepl.LogicalDecodingMessage:
		return st.handleLogicalMessage(ctx, m)
	case *pglogrepl.CommitMessage:
		st.inTx = false
		st.resnapCommit()
		if st.hasPending {
			ev := st.pending
			st.pending, st.hasPending = cdc.Event{}, false
			ev.Checkpoint = st.streamCheckpoint(m.TransactionEndLSN)
			// The idle period restarts once per transaction with captured changes rather than
			// per change: no idle note is written inside a transaction anyway.
			st.touchIdle()
			if err := st.emit(ctx, ev); err != nil {
				return err
			}
		}
		if cw := st.highAt; cw != nil {
			st.highAt = nil
			return st.resnapHigh(ctx, cw, m.TransactionEndLSN)
		}
	}
	return nil
}

// handleRelation resolves a relation message to a schema: the cached catalog schema when its
// columns are exactly the message's, else a fresh catalog load, else (the catalog already moved
// past this point of the WAL, or a publication column list) a projection onto the message's
// columns. A captured table Open did not list (created in a pattern's schema, or published,
// since) is not cached: its first relation message loads it.
//
// The schema's Relation is the message's relation's identity (identity.go), and its ID the
// name the message gives: a relation renamed or moved to another schema since its last
// relation message takes its new name at once (the server sends a new relation message before
// the first change after the DDL), captured when the new name is, skipped when it is not
// (doc.go, Relations and renames).
func (st *stream) handleRelation(ctx context.Context, m *pglogrepl.RelationMessage) error {
	t := Table{Schema: m.Namespace, Name: m.RelationName}
	id := st.src.tableID(st.plan.database, t)
	oid := m.RelationID
	prev := st.relations[oid]
	captured := st.src.captures(t)
	st.noteMembership(oid, prev, id, captured)
	rel := st.src.ident(oid)
	renamed := prev != nil && prev.id != id
	if renamed {
		st.renamed(prev, id, rel)
	}
	if !captured {
		delete(st.xmins, oid)
		st.relations[oid] = &relation{id: id}
		return nil
	}
	names := make([]string, len(m.Columns))
	oids := make([]uint32, len(m.Columns))
	typmods := make([]int32, len(m.Columns))
	keys := make([]bool, len(m.Columns))
	for i, c := range m.Columns {
		names[i], oids[i], typmods[i], keys[i] = c.Name, c.DataType, c.TypeModifier, c.Flags&1 != 0
	}
	repeated := !renamed && prev != nil && prev.info != nil && prev.info.schema.Relation == rel && prev.info.sameColumns(names, oids, typmods)
	bumped, err := st.checkSchemaReturn(ctx, oid, id, repeated)
	if err != nil {
		return err
	}
	if bumped {
		rel, repeated = st.src.ident(oid), false
	}
	if repeated {
		return nil
	}
	gone := false // the catalog no longer has the relation under this name
	ti := st.src.cached(id)
	if ti == nil || ti.schema.Relation != rel || !ti.sameColumns(names, oids, typmods) || (m.ReplicaIdentity == 'd' && !ti.keyIs(keys)) {
		fresh, err := st.cat.loadTable(ctx, id)
		if err == nil && fresh.oid != oid {
			// The name denotes another relation by now (renamed again, or dropped and
			// created anew since this point of the WAL): its catalog entry says nothing
			// about this one.
			err = errNoTable
		}
		switch {
		case errors.Is(err, errNoTable):
			// Dropped or renamed since this point of the WAL: the relation message describes
			// the columns, and the key is the one the stream or the cache saw, or else the
			// message's key flags -- the primary key only under the default replica identity.
			if fresh, err = st.knownInfo(ctx, oid, prev, id, rel); err != nil {
				return err
			}
			gone = true
		case err != nil:
			return err
		default:
			st.src.remember(fresh)
		}
		ti = fresh
		if fresh.deferrablePK {
			st.opts().Logger.Warn("pgcdc: deferrable primary key: versions may misorder changes of one key (see package doc, Limits)", "table", id.String())
		}
	}
	if !ti.sameColumns(names, oids, typmods) {
		var flags []bool
		if m.ReplicaIdentity == 'd' {
			flags = keys // under FULL or USING INDEX the flags are not the primary key
		}
		p, err := st.cat.project(ctx, ti, names, oids, typmods, flags)
		if err != nil {
			return err
		}
		ti = p
	}
	keyUnknown := gone && len(ti.schema.PrimaryKey) == 0 && m.ReplicaIdentity != 'd'
	if keyUnknown {
		st.opts().Logger.Warn("pgcdc: a table was dropped before its changes were read and its primary key is unknown: its row changes are dead-lettered",
			"table", id.String(), "relation", rel, "replica_identity", string(rune(m.ReplicaIdentity)))
	}
	if prev != nil && prev.info != nil || renamed {
		st.resnapInvalidate(id) // the table's columns or relation changed in the middle of a chunk
	}
	st.relations[oid] = &relation{id: id, captured: true, info: ti, keyUnknown: keyUnknown}
	return nil
}

// knownInfo is what the stream knows of a relation the catalog does not have under the name
// the relation message gives (id): dropped, or renamed since this point of the WAL. Under that
// name and its identity (rel): the schema of its previous relation message, or one cached
// under any name, or the catalog's under the name it bears now, so that its primary key
// survives; else (dropped, never seen) a schema without columns and key (the relation
// message's describe them).
func (st *stream) knownInfo(ctx context.Context, oid uint32, prev *relation, id cdc.TableID, rel string) (*tableInfo, error) {
	var known *tableInfo
	if prev != nil && prev.info != nil && prev.info.oid == oid && len(prev.info.schema.PrimaryKey) > 0 {
		known = prev.info
	} else if known = st.src.cachedRelation(oid); known == nil {
		var t Table
		var xmin int64 // not needed here
		err := st.sess.QueryRow(ctx, classXminSQL, oid).Scan(&t.Schema, &t.Name, &xmin)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return nil, fmt.Errorf("pgcdc: read the catalog entry of %s: %w", id, err)
		default:
			ti, err := st.cat.loadTable(ctx, st.src.tableID(st.plan.database, t))
			if err != nil && !errors.Is(err, errNoTable) {
				return nil, err
			}
			if err == nil && ti.oid == oid {
				known = ti
			}
		}
	}
	if known == nil {
		return &tableInfo{schema: &cdc.TableSchema{ID: id, Relation: rel}, oid: oid}, nil
	}
	k := *known
	sc := *known.schema
	sc.ID, sc.Relation = id, rel
	k.schema = &sc
	return &k, nil
}

// ErrKeyUnknown is the Malformed reason of the row changes of a table dropped before the
// stream read them, whose primary key the stream never saw: under REPLICA IDENTITY FULL (or
// USING INDEX, or NOTHING) the relation message does not say which columns form it (doc.go,
// Schemas).
var ErrKeyUnknown = errors.New("pgcdc: the table was dropped before its changes were read and its primary key is unknown " +
	"(its replica identity is not the primary key): the change cannot be given its document id")

// renamed notes a relation whose name changed since its last relation message (ALTER TABLE
// ... RENAME or SET SCHEMA): a chunk of either name in flight is read again, the old name's
// cached schema (this relation's) is forgotten, and a captured name the relation leaves is
// logged -- a FOR TABLE publication follows the relation, not its name, so a table created
// later under a named table's old name is not published.
func (st *stream) renamed(prev *relation, id cdc.TableID, rel string) {
	st.resnapInvalidate(prev.id)
	st.resnapInvalidate(id)
	if !prev.captured {
		switch {
		case !st.src.captures(Table{Schema: id.Schema, Name: id.Table}):
		default:
			st.opts().Logger.Info("pgcdc: table renamed into the captured tables", "from", prev.id.String(), "table", id.String(), "relation", rel)
		}
		return
	}
	st.src.forget(prev.id, rel)
	log := st.opts().Logger
	if st.src.captures(Table{Schema: id.Schema, Name: id.Table}) {
		log.Info("pgcdc: captured table renamed", "from", prev.id.String(), "table", id.String(), "relation", rel)
	} else {
		log.Warn("pgcdc: captured table renamed to a name not captured: its later changes are not delivered (its destination keeps what it has)",
			"from", prev.id.String(), "to", id.String(), "relation", rel)
	}
	if old := (Table{Schema: prev.id.Schema, Name: prev.id.Table}); slices.Contains(st.src.named, old) && !slices.Contains(st.src.patterns, old.Schema) {
		log.Warn("pgcdc: a captured table's name is free: a table created under it later is captured only once the publication publishes it "+
			"(a publication FOR TABLE follows the renamed relation, not its name)",
			"table", prev.id.String(), "fix", fmt.Sprintf("ALTER PUBLICATION %s ADD TABLE %s", quoteIdent(st.opts().Publication), displayName(old)))
	}
}

// truncate turns one Truncate message into a cdc.Truncate event per captured table it names
// (one TRUNCATE statement may name several tables, and CASCADE adds the tables referencing
// them). The events share the message's WAL position: each is the only change of its table
// at that point, so versions stay strictly increasing per table. The CASCADE and RESTART
// IDENTITY options are not carried: every named table lost all of its rows either way.
func (st *stream) truncate(ctx context.Context, at pglogrepl.LSN, m *pglogrepl.TruncateMessage) error {
	for _, id := range m.RelationIDs {
		rel := st.relations[id]
		if rel == nil {
			return fmt.Errorf("pgcdc: truncate of relation %d before its relation message", id)
		}
		if !rel.captured {
			continue
		}
		if err := st.verifyCaptured(); err != nil {
			return err
		}
		st.resnapInvalidate(rel.info.schema.ID)
		st.truncated(id)
		ev := st.rowEvent(cdc.Truncate, rel.info, Position{LSN: at, Commit: st.tx.commitLSN})
		ev.CommitTime, ev.TxID = st.tx.commitTime, st.tx.xid
		if err := st.hold(ctx, ev); err != nil {
			return err
		}
	}
	return nil
}

// hold delivers the transaction's previous event and keeps ev back, so that the commit can
// put the checkpoint on the transaction's last event.
func (st *stream) hold(ctx context.Context, ev cdc.Event) error {
	if st.hasPending {
		if err := st.emit(ctx, st.pending); err != nil {
			return err
		}
	}
	st.pending, st.hasPending = ev, true
	return nil
}

// change builds the event of one row change (an Insert, Update or Delete message, read
// directly: tuple.go) and delivers the previous one of the transaction: each event is held
// back until the next arrives or the commit says it was the last.
func (st *stream) change(ctx context.Context, at pglogrepl.LSN, wal []byte) error {
	f, err := parseChangeFrame(wal)
	if err != nil {
		return err
	}
	rel := st.relations[f.relID]
	if rel == nil {
		return fmt.Errorf("pgcdc: change of relation %d before its relation message", f.relID)
	}
	if !rel.captured {
		return nil
	}
	if err := st.verifyCaptured(); err != nil {
		return err
	}
	if st.rs != nil {
		st.resnapChange(rel.info, f)
	}
	op := cdc.Insert
	switch wal[0] {
	case 'U':
		op = cdc.Update
	case 'D':
		op = cdc.Delete
	}
	ev := st.rowEvent(op, rel.info, Position{LSN: at, Commit: st.tx.commitLSN})
	ev.CommitTime, ev.TxID = st.tx.commitTime, st.tx.xid
	before, after, bad, err := decodeChange(rel.info, f)
	if err != nil {
		return err
	}
	ev.Before, ev.After = before, after
	if op == cdc.Delete && ev.Before == nil {
		bad = errors.New("pgcdc: delete without an old key (REPLICA IDENTITY NOTHING?)")
	}
	if rel.keyUnknown {
		bad = ErrKeyUnknown
	}
	ev.Malformed = bad
	return st.hold(ctx, ev)
}

// errUnchangedToast marks an unchanged TOASTed value where only a complete value can be: the
// server sends one only in the new row of an update (which becomes cdc.Unchanged{}), never in
// an insert or an old row, so this is a server or protocol surprise.
var errUnchangedToast = errors.New("unchanged TOAST value outside the new row of an update")

func (st *stream) rowEvent(op cdc.Op, ti *tableInfo, pos Position) cdc.Event {
	return cdc.Event{Op: op, Table: ti.schema.ID, Schema: ti.schema, Position: pos}
}
