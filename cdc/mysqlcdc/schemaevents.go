package mysqlcdc

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/tributary-dev/tributary/cdc"
)

// Schema events (see the package documentation): a DDL statement that gives a captured name
// another relation -- RENAME TABLE, ALTER TABLE ... RENAME, CREATE TABLE -- becomes cdc.Truncate
// events at the statement's position, and the relation identity (cdc.TableSchema.Relation) of
// the name's later events changes. The reader keeps, for the session (one stream), the
// identities the DDL it read gave to captured names; a name no DDL of the session touched has
// none ("").

// relations is the reader's knowledge of captured names across DDL.
type relations struct {
	// ids are the identities this session's DDL gave captured names: the version of the
	// Truncate event that announced the relation under the name.
	ids map[TableName]string
	// last is the latest description of the relation each captured name has, kept across DDL
	// (the cache is not): the schema of the Truncate that vacates a renamed table's name, and
	// the columns a row image is read with once the catalog no longer knows its table. (After
	// a rename it is the relation's description under its old name: only its columns count.)
	last map[TableName]*table
	// stale holds the captured names whose last description predates an ALTER TABLE the
	// stream read since (no row of the name was decoded after it): the columns and their types
	// may have changed, so a Truncate of the name carries no columns (tableNow) rather than
	// outdated ones a sink would map a new index generation with.
	stale map[TableName]bool
	// exists holds the captured names known to exist: a CREATE TABLE IF NOT EXISTS of one
	// changes nothing (MySQL logs it all the same).
	exists map[TableName]bool
	// away follows the relations this session saw leave the capture: for each uncaptured
	// name holding one, the captured name it left and what the stream had for it there. When
	// the relation returns under another captured name, the name it left is vacated (its rows
	// moved with it). At most maxAway entries (see there).
	away map[TableName]awayRel
	// awayFull: the bound was reached and logged once.
	awayFull bool
	// fold: lower_case_table_names is 1, names in statements compare in lower case.
	fold bool
}

// awayRel is a relation gone out of the capture: from is the captured name it left, id the
// identity the session had given it there ("" if none), last its description there (or nil),
// stale that an ALTER TABLE changed it after that description (there or while away).
type awayRel struct {
	from  TableName
	id    string
	last  *table
	stale bool
}

// maxAway bounds the relations followed out of the capture. Past it a relation that leaves is
// not followed (a warning says so once): if it comes back under another captured name, the
// name it left keeps its documents, as for a stream reopened after the move out.
const maxAway = 4096

func newRelations() relations {
	return relations{ids: map[TableName]string{}, last: map[TableName]*table{}, stale: map[TableName]bool{},
		exists: map[TableName]bool{}, away: map[TableName]awayRel{}}
}

// describe records t as captured name n's last description, current as of the reader's place.
func (rl *relations) describe(n TableName, t *table) {
	rl.last[n] = t
	delete(rl.stale, n)
}

// altered records an ALTER TABLE (without RENAME) of n: the description the stream has of
// its relation, captured or followed out of the capture, may no longer match its columns.
func (rl *relations) altered(n TableName) {
	if rl.last[n] != nil {
		rl.stale[n] = true
	}
	if a, ok := rl.away[n]; ok {
		a.stale = true
		rl.away[n] = a
	}
}

// recreated records that a captured name received a new relation (CREATE, RENAME into it): a
// relation that left it earlier no longer vacates it when it comes back.
func (rl *relations) recreated(n TableName) {
	for k, a := range rl.away {
		if a.from == n {
			delete(rl.away, k)
		}
	}
}

// adopt records the description a captured name's rows were decoded with (the catalog's, or
// one rebuilt from their table map: never a catalog description they disagree with): it gets
// the name's current relation identity, and is the name's last description.
func (r *reader) adopt(name TableName, t *table) {
	t.schema.Relation = r.rel.ids[name]
	r.rel.describe(name, t)
	r.rel.exists[name] = true
}

// schemaDDL handles a RENAME, ALTER, DROP or CREATE statement that may change which relation a
// captured name denotes. It runs before the schema cache is cleared for the statement.
func (r *reader) schemaDDL(ctx context.Context, h *replication.EventHeader, e *replication.QueryEvent, q string) error {
	d, ok := parseDDL(q, string(e.Schema), r.rel.fold)
	if !ok {
		// The schemas are reloaded all the same (the caller clears the cache); what cannot be
		// told is whether a captured name now denotes another relation. The statement itself
		// is not logged: it may carry data (defaults, a CREATE ... SELECT's query).
		r.src.log.Warn("mysqlcdc: cannot read which tables a DDL statement renames, drops or creates; "+
			"a captured table it renamed or re-created is not followed (no Truncate event, no new relation identity): "+
			"re-snapshot such a table (or rebuild its index)",
			"source", r.src.opts.SourceName, "database", string(e.Schema), "file", r.curFile, "pos", h.LogPos)
		return nil
	}
	switch d.kind {
	case ddlRename:
		return r.renamed(ctx, h, d.renames, d.alters)
	case ddlAlter:
		r.rel.altered(d.names[0])
	case ddlCreate:
		return r.created(ctx, h, d)
	case ddlDrop:
		for _, n := range d.names {
			r.rel.gone(n)
		}
	case ddlDropDatabase:
		for n := range r.rel.exists { // every name of ids and last exists
			if n.Database == d.database {
				r.rel.gone(n)
			}
		}
		for n := range r.rel.away {
			if n.Database == d.database {
				delete(r.rel.away, n)
			}
		}
	}
	return nil
}

// gone records that a name no longer denotes a relation: the reader forgets it (so the maps
// hold only names that exist, however many tables come and go). DROP emits nothing: the
// name's index keeps the last documents of the dropped table (the package documentation's rule).
func (rl *relations) gone(n TableName) {
	delete(rl.ids, n)
	delete(rl.exists, n)
	delete(rl.last, n)
	delete(rl.stale, n)
	delete(rl.away, n) // a relation followed out of the capture is dropped
}

// created handles CREATE TABLE of a captured name: the name starts empty with a new relation,
// announced by one Truncate carrying its identity. The rows of a CREATE ... SELECT follow in
// the same transaction, above the Truncate's version.
func (r *reader) created(ctx context.Context, h *replication.EventHeader, d ddl) error {
	n := d.names[0]
	if !r.src.captures(n) {
		if !d.ifNotExists {
			delete(r.rel.away, n) // OR REPLACE: a relation followed out of the capture is dropped
		}
		return nil
	}
	if d.ifNotExists && r.rel.exists[n] {
		return nil // the table existed: nothing was created (MySQL logs the statement anyway)
	}
	r.rel.recreated(n)
	t, err := r.tableNow(ctx, n, nil, false)
	if err != nil {
		return err
	}
	id, err := r.announce(ctx, h, n, t.schema, "", true)
	if err != nil {
		return err
	}
	r.rel.ids[n] = id
	r.rel.exists[n] = true
	if len(t.codecs) > 0 {
		r.rel.describe(n, t)
	}
	r.src.log.Info("mysqlcdc: a captured table was created; its name starts empty with a new relation",
		"source", r.src.opts.SourceName, "table", r.src.tableID(n).String(), "relation", id)
	return nil
}

// renamed handles the renames of one statement by their net effect (a statement is atomic: the
// name a swap passes through never held anything). A captured name whose relation leaves for
// another captured name is vacated: a Truncate with its old identity. A captured name that
// receives a relation gets a Truncate with a new identity, preceded by a Truncate with another
// new identity: the sink, whose binding of the name may be empty, then sees a relation
// different from the one it bound and re-snapshots the name. (Always two, whatever the session
// knows of the name: the statement's events, so its identities, are the same when a reopened
// stream reads it again.) A relation that leaves the capture leaves nothing (its index keeps
// its documents). alters says the statement also changed the relation's definition (ALTER
// TABLE ... RENAME with other clauses): what the session knew of its columns is outdated.
func (r *reader) renamed(ctx context.Context, h *replication.EventHeader, pairs []renamePair, alters bool) error {
	effects := netRenames(pairs)
	prior := make(map[TableName]string, len(effects))
	lastOf := make(map[TableName]*table, len(effects))
	backOf := map[TableName]awayRel{} // the relations followed out of the capture the statement moves
	for _, e := range effects {
		prior[e.name] = r.rel.ids[e.name]
		lastOf[e.name] = r.rel.last[e.name]
		if a, ok := r.rel.away[e.name]; ok && e.before != nil {
			backOf[e.name] = a
		}
	}
	// ownOf is the session's description of the relation that held name before the statement:
	// the one it tracked under that captured name, or out of the capture.
	ownOf := func(name TableName) *table {
		if t := lastOf[name]; t != nil {
			return t
		}
		return backOf[name].last
	}
	// stale says, per name of the statement, whether that description of the relation that held
	// it predates a change of the relation's columns.
	stale := make(map[TableName]bool, len(effects))
	for _, e := range effects {
		if lastOf[e.name] != nil {
			stale[e.name] = alters || r.rel.stale[e.name]
		} else {
			stale[e.name] = alters || backOf[e.name].stale
		}
	}
	// Vacated names first: their Truncate versions lie below those of the names entered.
	for _, e := range effects {
		if e.before == nil || !r.src.captures(e.name) || !r.src.captures(e.dest) {
			continue
		}
		t, err := r.tableNow(ctx, e.dest, lastOf[e.name], stale[e.name])
		if err != nil {
			return err
		}
		if _, err := r.announce(ctx, h, e.name, t.schema, prior[e.name], false); err != nil {
			return err
		}
		r.src.log.Info("mysqlcdc: a captured table was renamed to another captured name; its old name is vacated",
			"source", r.src.opts.SourceName, "table", r.src.tableID(e.name).String(), "to", r.src.tableID(e.dest).String())
	}
	entered := map[TableName]string{}
	for _, e := range effects {
		if e.after == nil || !r.src.captures(e.name) {
			continue
		}
		t, err := r.tableNow(ctx, e.name, ownOf(*e.after), stale[*e.after])
		if err != nil {
			return err
		}
		if _, err := r.announce(ctx, h, e.name, t.schema, "", true); err != nil {
			return err
		}
		id, err := r.announce(ctx, h, e.name, t.schema, "", true)
		if err != nil {
			return err
		}
		entered[e.name] = id
		from := "an uncaptured table"
		if r.src.captures(*e.after) {
			from = r.src.tableID(*e.after).String()
		}
		r.src.log.Info("mysqlcdc: a table was renamed to a captured name; the name now denotes another relation, whose rows need a re-snapshot",
			"source", r.src.opts.SourceName, "table", r.src.tableID(e.name).String(), "from", from, "relation", id)
	}
	// Relations coming back into the capture from where this session followed them out: the
	// captured name each left is vacated, after the names entered (so that the events before
	// are the same when a reopened stream, which did not see the move out, reads the statement),
	// unless a relation entered that name since (then it denotes another one).
	for _, e := range effects {
		a, ok := backOf[e.name]
		if !ok || e.before == nil || !r.src.captures(e.dest) || entered[a.from] != "" {
			continue
		}
		t, err := r.tableNow(ctx, e.dest, a.last, stale[e.name])
		if err != nil {
			return err
		}
		if _, err := r.announce(ctx, h, a.from, t.schema, a.id, false); err != nil {
			return err
		}
		r.src.log.Info("mysqlcdc: a table that had left the capture came back under another captured name; the name it left is vacated",
			"source", r.src.opts.SourceName, "table", r.src.tableID(a.from).String(), "to", r.src.tableID(e.dest).String())
	}
	for _, e := range effects {
		r.rel.gone(e.name)
	}
	for _, e := range effects {
		if e.after != nil && r.src.captures(e.name) {
			r.rel.exists[e.name] = true
			if s := ownOf(*e.after); s != nil {
				r.rel.last[e.name] = s
				if stale[*e.after] {
					r.rel.stale[e.name] = true
				}
			}
		}
	}
	r.followAway(effects, backOf, prior, lastOf, stale)
	for n, id := range entered {
		r.rel.ids[n] = id
		r.rel.recreated(n)
	}
	return nil
}

// followAway updates the relations followed out of the capture for a statement's renames: a
// captured name's relation moved to an uncaptured name is followed from there, one followed
// already moves along among uncaptured names, and one that came back is no longer followed.
// stale says, per name, whether the description of the relation that left it is outdated.
func (r *reader) followAway(effects []renameEffect, backOf map[TableName]awayRel, prior map[TableName]string, lastOf map[TableName]*table, stale map[TableName]bool) {
	for _, e := range effects {
		delete(r.rel.away, e.name)
	}
	for _, e := range effects {
		if e.before == nil || r.src.captures(e.dest) {
			continue
		}
		a, ok := backOf[e.name]
		if r.src.captures(e.name) {
			a, ok = awayRel{from: e.name, id: prior[e.name], last: lastOf[e.name]}, true
			if len(r.rel.away) >= maxAway {
				if !r.rel.awayFull {
					r.rel.awayFull = true
					r.src.log.Warn("mysqlcdc: too many tables moved out of the capture to follow; one that comes back under another captured name "+
						"leaves its documents in the index of the name it left: rebuild that index (logged once)",
						"source", r.src.opts.SourceName, "table", r.src.tableID(e.name).String(), "followed", maxAway)
				}
				continue
			}
		}
		if ok {
			a.stale = a.stale || stale[e.name]
			r.rel.away[e.dest] = a
		}
	}
}

// tableNow returns the description for a Truncate of a captured name at the statement: own,
// the stream's own description of the relation concerned (tracked through the DDL it read),
// when it has one; else the catalog's for the name now; else one without columns. The catalog
// comes last since it describes the name as it is now, not as of the statement: a reader
// behind the DDL (a replay, a slow reader) would find a later relation there, or none, and
// the Truncate would carry another relation's columns and key. One without columns tells a
// sink the columns are not known here (package sink maps a new relation's generation from the
// rows to come, see its Schema events); the rows that follow carry their own. stale says own
// predates an ALTER TABLE of the relation: then the columns are not known either (own's types
// may be outdated, and the catalog is no better than above).
func (r *reader) tableNow(ctx context.Context, n TableName, own *table, stale bool) (*table, error) {
	switch {
	case own != nil && stale:
		return &table{schema: &cdc.TableSchema{ID: r.src.tableID(n)}}, nil
	case own != nil:
		return own, nil
	}
	t, err := r.cat.load(ctx, r.src.tableID(n))
	switch {
	case err == nil:
		return t, nil
	case !errors.Is(err, errNoTable):
		return nil, err
	}
	return &table{schema: &cdc.TableSchema{ID: r.src.tableID(n)}}, nil
}

// goneTable returns the description of a row image of a captured table the catalog no longer
// knows (renamed or dropped since: the reader is behind): rebuilt from the table map, with the
// columns of the last description the stream had for the name where they fit. Nil when the
// table map has no column names (binlog_row_metadata is not FULL); an error when a column's
// character set cannot be told (errUnknownCollation).
func (r *reader) goneTable(name TableName, id cdc.TableID, tm *replication.TableMapEvent, cs collations) (*table, error) {
	base := &table{schema: &cdc.TableSchema{ID: id}}
	if l := r.rel.last[name]; l != nil && len(l.codecs) == len(l.schema.Columns) {
		base.schema.Columns, base.schema.PrimaryKey, base.codecs = l.schema.Columns, l.schema.PrimaryKey, l.codecs
	}
	p, err := fromTableMap(base, tm, r.src.opts.Flavor, cs)
	if p != nil {
		p.schema.Relation = r.rel.ids[name]
	}
	return p, err
}

// announce emits a Truncate of a captured name at the statement's next version ordinal, with a
// copy of schema naming the table and carrying relation, or with fresh a new identity: the
// event's version. It returns the identity.
func (r *reader) announce(ctx context.Context, h *replication.EventHeader, n TableName, schema *cdc.TableSchema, relation string, fresh bool) (string, error) {
	if r.txID == "" {
		r.txID = fmt.Sprintf("%s:%d", r.curFile, h.LogPos-h.EventSize)
	}
	pos := r.position(h, r.txRows)
	r.txRows++
	if fresh {
		relation = strconv.FormatInt(pos.Version(), 10)
	}
	s := *schema
	s.ID = r.src.tableID(n)
	s.Relation = relation
	return relation, r.emit(ctx, cdc.Event{Op: cdc.Truncate, Table: s.ID, Schema: &s, CommitTime: r.txTime, TxID: r.txID, Position: pos})
}
