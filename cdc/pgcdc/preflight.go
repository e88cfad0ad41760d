package pgcdc

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/tributary-dev/tributary/cdc"
)

// ToastTable is a captured table with TOASTable columns and a replica identity other than
// FULL: an update that leaves one of those values unchanged (and stored out of line) arrives
// without it, since the server sends the old row only under REPLICA IDENTITY FULL.
type ToastTable struct {
	Table           cdc.TableID
	Columns         []string // the TOASTable columns (attstorage other than plain), in table order
	ReplicaIdentity string   // "default", "index" or "nothing"
}

// ToastTables returns what Open found about the captured tables of a stream this package
// opened (also logged at Warn, one line per table); nil for any other stream.
func ToastTables(st cdc.Stream) []ToastTable {
	if s, ok := st.(*stream); ok {
		return slices.Clone(s.plan.toast)
	}
	return nil
}

// Tables implements cdc.TableLister: the schemas of the tables captured as of Open, as Open read
// them from pg_catalog (restricted to a publication's column list): the named tables, the
// tables a pattern's schema held, or every table the publication published. Tables created or
// published later are not listed; their first relation message loads their schema, and a sink
// checks them when their rows first arrive.
func (st *stream) Tables() []*cdc.TableSchema { return slices.Clone(st.plan.schemas) }

// captures reports whether the stream delivers the changes of t: a named table, a table of a
// pattern's schema, or -- without Options.Tables -- any table the publication sends.
func (s *Source) captures(t Table) bool {
	if len(s.opts.Tables) == 0 {
		return true
	}
	return slices.Contains(s.patterns, t.Schema) || slices.Contains(s.named, t)
}

// snapshotTables are the tables a snapshot reads: with patterns, or without Options.Tables, the
// captured tables the publication publishes as the snapshot sees the catalog -- not as Open
// listed them a moment before the slot's snapshot was taken, which would miss a table created
// in between (its rows before the slot's consistent point would never arrive) and fail on one
// dropped in between. Named tables alone are what Open checked.
func (st *stream) snapshotTables(ctx context.Context) ([]Table, error) {
	src := st.src
	if len(src.opts.Tables) > 0 && len(src.patterns) == 0 {
		return st.plan.tables, nil
	}
	tables, err := src.publishedCaptured(ctx, st.sql)
	if err != nil {
		return nil, fmt.Errorf("pgcdc: in the snapshot: %w", err)
	}
	return tables, nil
}

// checkTables refuses named tables and pattern schemas of Options.Tables that do not exist as
// spelled: names are exact, so one that exists only in another case is missing, and the fix
// names it.
func (s *Source) checkTables(ctx context.Context, conn *pgx.Conn, database string) error {
	if len(s.opts.Tables) == 0 {
		return nil
	}
	probs, err := s.missingTables(ctx, conn, database)
	if err != nil {
		return err
	}
	more, err := s.missingSchemas(ctx, conn, database)
	if err != nil {
		return err
	}
	if probs = append(probs, more...); len(probs) > 0 {
		return &cdc.StartError{Component: "pgcdc", Problems: probs}
	}
	return nil
}

func (s *Source) missingTables(ctx context.Context, conn *pgx.Conn, database string) ([]cdc.StartProblem, error) {
	if len(s.named) == 0 {
		return nil, nil
	}
	schemas := make([]string, len(s.named))
	names := make([]string, len(s.named))
	for i, t := range s.named {
		schemas[i], names[i] = t.Schema, t.Name
	}
	rows, err := conn.Query(ctx, `SELECT n.nspname::text, c.relname::text
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'p') AND (lower(n.nspname), lower(c.relname)) IN
			(SELECT lower(s), lower(t) FROM unnest($1::text[], $2::text[]) AS w(s, t))
		ORDER BY 1, 2`, schemas, names)
	if err != nil {
		return nil, fmt.Errorf("pgcdc: look up the captured tables: %w", err)
	}
	found, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Table, error) {
		var t Table
		return t, r.Scan(&t.Schema, &t.Name)
	})
	if err != nil {
		return nil, fmt.Errorf("pgcdc: look up the captured tables: %w", err)
	}
	var probs []cdc.StartProblem
	for _, t := range s.named {
		if slices.Contains(found, t) {
			continue
		}
		p := cdc.StartProblem{Table: s.tableID(database, t), Problem: "the table does not exist (names are exact: no case folding)",
			Fix: "create it, or remove it from the captured tables"}
		var near []string
		for _, f := range found {
			if strings.EqualFold(f.Schema, t.Schema) && strings.EqualFold(f.Name, t.Name) {
				near = append(near, displayName(f))
			}
		}
		if len(near) > 0 {
			p.Fix = "did you mean " + strings.Join(near, " or ") + "?"
		}
		probs = append(probs, p)
	}
	return probs, nil
}

// missingSchemas refuses patterns whose schema does not exist. An existing schema without
// tables is fine: the tables created in it later are captured.
func (s *Source) missingSchemas(ctx context.Context, conn *pgx.Conn, database string) ([]cdc.StartProblem, error) {
	if len(s.patterns) == 0 {
		return nil, nil
	}
	rows, err := conn.Query(ctx, `SELECT nspname::text FROM pg_catalog.pg_namespace
		WHERE lower(nspname) IN (SELECT lower(s) FROM unnest($1::text[]) AS w(s)) ORDER BY 1`, s.patterns)
	if err != nil {
		return nil, fmt.Errorf("pgcdc: look up the captured schemas: %w", err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("pgcdc: look up the captured schemas: %w", err)
	}
	var probs []cdc.StartProblem
	for _, sch := range s.patterns {
		if slices.Contains(found, sch) {
			continue
		}
		pat := Table{Schema: sch, Name: AllTables}
		p := cdc.StartProblem{Table: s.tableID(database, pat), Problem: "the schema does not exist (names are exact: no case folding)",
			Fix: "create it, or remove " + displayName(pat) + " from the captured tables"}
		var near []string
		for _, f := range found {
			if strings.EqualFold(f, sch) {
				near = append(near, displayName(Table{Schema: f, Name: AllTables}))
			}
		}
		if len(near) > 0 {
			p.Fix = "did you mean " + strings.Join(near, " or ") + "?"
		}
		probs = append(probs, p)
	}
	return probs, nil
}

// checkSchemasPublished refuses patterns whose schema an existing publication does not publish
// as a whole (FOR ALL TABLES or TABLES IN SCHEMA): the server would not send the changes of
// the tables created there later. Publishing each of the schema's tables is not enough.
func (s *Source) checkSchemasPublished(ctx context.Context, conn *pgx.Conn, database string, allTables bool) error {
	if len(s.patterns) == 0 || allTables {
		return nil
	}
	v, err := serverVersion(ctx, conn)
	if err != nil {
		return err
	}
	var whole []string
	if v >= 150000 { // pg_publication_namespace: PostgreSQL 15
		rows, err := conn.Query(ctx, `SELECT n.nspname::text FROM pg_catalog.pg_publication_namespace pn
			JOIN pg_catalog.pg_publication p ON p.oid = pn.pnpubid
			JOIN pg_catalog.pg_namespace n ON n.oid = pn.pnnspid
			WHERE p.pubname = $1`, s.opts.Publication)
		if err != nil {
			return fmt.Errorf("pgcdc: read publication schemas: %w", err)
		}
		if whole, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return fmt.Errorf("pgcdc: read publication schemas: %w", err)
		}
	}
	e := &cdc.StartError{Component: "pgcdc"}
	for _, sch := range s.patterns {
		if slices.Contains(whole, sch) {
			continue
		}
		pat := Table{Schema: sch, Name: AllTables}
		p := cdc.StartProblem{Table: s.tableID(database, pat),
			Problem: fmt.Sprintf("publication %q does not publish the schema as a whole, so the tables created in it later would not be captured", s.opts.Publication),
			Fix:     fmt.Sprintf("ALTER PUBLICATION %s ADD TABLES IN SCHEMA %s, or name the tables instead of %s", quoteIdent(s.opts.Publication), displayIdent(sch), displayName(pat))}
		if v < 150000 {
			p.Fix = "name the tables instead of " + displayName(pat) + " (schema publications need PostgreSQL 15), or use a FOR ALL TABLES publication"
		}
		e.Problems = append(e.Problems, p)
	}
	if len(e.Problems) > 0 {
		return e
	}
	return nil
}

// patternsNeed15 refuses patterns on a server older than PostgreSQL 15, which cannot create a
// publication FOR TABLES IN SCHEMA.
func (s *Source) patternsNeed15(database string) error {
	e := &cdc.StartError{Component: "pgcdc"}
	for _, sch := range s.patterns {
		pat := Table{Schema: sch, Name: AllTables}
		e.Problems = append(e.Problems, cdc.StartProblem{Table: s.tableID(database, pat),
			Problem: "a table pattern needs a publication FOR TABLES IN SCHEMA, which PostgreSQL 15 introduced",
			Fix:     "name the tables instead of " + displayName(pat) + ", or create a FOR ALL TABLES publication beforehand"})
	}
	return e
}

// plainIdent is an identifier PostgreSQL reads back unchanged without quotes.
var plainIdent = regexp.MustCompile(`^[a-z_][a-z0-9_$]*$`)

// displayName writes a table as SQL would need it, parts quoted only when necessary; a
// pattern as schema.*.
func displayName(t Table) string {
	if t.IsPattern() {
		return displayIdent(t.Schema) + ".*"
	}
	return displayIdent(t.Schema) + "." + displayIdent(t.Name)
}

// displayIdent writes an identifier as SQL would need it: quoted only when necessary.
func displayIdent(s string) string {
	if plainIdent.MatchString(s) {
		return s
	}
	return quoteIdent(s)
}

// notPublished is the refusal of captured tables an existing publication does not publish.
func (s *Source) notPublished(database string, missing []Table) error {
	e := &cdc.StartError{Component: "pgcdc"}
	for _, t := range missing {
		e.Problems = append(e.Problems, cdc.StartProblem{Table: s.tableID(database, t),
			Problem: fmt.Sprintf("publication %q does not publish the table", s.opts.Publication),
			Fix:     fmt.Sprintf("ALTER PUBLICATION %s ADD TABLE %s, or remove it from the captured tables", quoteIdent(s.opts.Publication), displayName(t))})
	}
	return e
}

// inspect reads the captured tables' schemas (what Tables returns; the catalog's also go into
// the Source's cache, so the first relation messages need no catalog round trip) and finds
// those with TOASTable columns but no REPLICA IDENTITY FULL, logging one warning for each. It
// costs a few queries whatever the number of tables.
func (s *Source) inspect(ctx context.Context, conn *pgx.Conn, database string, tables []Table) ([]*cdc.TableSchema, []ToastTable, error) {
	cat := newCatalog(conn)
	ids := make([]cdc.TableID, len(tables))
	for i, t := range tables {
		ids[i] = s.tableID(database, t)
	}
	loaded, err := cat.loadTables(ctx, ids)
	if err != nil {
		return nil, nil, err
	}
	var lists map[Table][]string
	if len(loaded) > 0 {
		if lists, err = publishedColumnLists(ctx, conn, s.opts.Publication); err != nil {
			return nil, nil, err
		}
	}
	schemas := make([]*cdc.TableSchema, 0, len(tables))
	byName := make(map[Table]*cdc.TableSchema, len(tables))
	for i, t := range tables {
		ti := loaded[ids[i]]
		if ti == nil {
			continue // dropped since the publication was read; its events, if any, say more
		}
		s.remember(ti)
		if ti.deferrablePK {
			s.opts.Logger.Warn("pgcdc: deferrable primary key: versions may misorder changes of one key (see package doc, Limits)", "table", ids[i].String())
		}
		published, ok := lists[t]
		if !ok {
			continue // no longer published since the publication was read
		}
		if ti, err = cat.restrictTo(ctx, ti, published); err != nil {
			return nil, nil, err
		}
		schemas = append(schemas, ti.schema)
		byName[t] = ti.schema
	}
	if len(schemas) == 0 {
		return schemas, nil, nil
	}
	names := make([]string, 0, len(byName))
	for _, t := range tables {
		if byName[t] != nil {
			names = append(names, quoteIdent(t.Schema)+"."+quoteIdent(t.Name))
		}
	}
	// attstorage 'p' (plain) is never stored out of line; every varlena type (text, bytea,
	// json, jsonb, arrays, numeric, ...) defaults to another strategy.
	rows, err := conn.Query(ctx, `SELECT n.nspname::text, c.relname::text, c.relreplident::text,
			array_agg(a.attname::text ORDER BY a.attnum)
		FROM pg_catalog.pg_class c
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid
		WHERE c.oid = ANY($1::text[]::regclass[]) AND c.relreplident <> 'f'
			AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = '' AND a.attstorage <> 'p'
		GROUP BY 1, 2, 3 ORDER BY 1, 2`, names)
	if err != nil {
		return nil, nil, fmt.Errorf("pgcdc: read the captured tables' storage: %w", err)
	}
	var toast []ToastTable
	for rows.Next() {
		var t Table
		var ident string
		var cols []string
		if err := rows.Scan(&t.Schema, &t.Name, &ident, &cols); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("pgcdc: read the captured tables' storage: %w", err)
		}
		sch := byName[t]
		if sch == nil {
			continue
		}
		cols = slices.DeleteFunc(cols, func(c string) bool { return sch.ColumnIndex(c) < 0 }) // not published
		if len(cols) == 0 {
			continue
		}
		toast = append(toast, ToastTable{Table: sch.ID, Columns: cols, ReplicaIdentity: replicaIdentityName(ident)})
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("pgcdc: read the captured tables' storage: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.toastWarned == nil {
		s.toastWarned = map[string]string{}
	}
	for _, t := range toast {
		// Once per table and column set for the Source's life: a reopened stream finds the
		// same tables, and a warning per reconnection would drown the log.
		key, cols := t.Table.String(), strings.Join(t.Columns, ",")+"/"+t.ReplicaIdentity
		if s.toastWarned[key] == cols {
			continue
		}
		s.toastWarned[key] = cols
		s.opts.Logger.Warn("pgcdc: captured table has TOASTable columns without REPLICA IDENTITY FULL: an update that leaves "+
			"such a value unchanged arrives without it, and the sink must fill it from the stored document (one read per "+
			"such row); ALTER TABLE ... REPLICA IDENTITY FULL sends the old row instead and avoids those reads",
			"table", t.Table.String(), "columns", strings.Join(t.Columns, ","), "replica_identity", t.ReplicaIdentity)
	}
	return schemas, toast, nil
}

func replicaIdentityName(c string) string {
	switch c {
	case "d":
		return "default"
	case "n":
		return "nothing"
	case "i":
		return "index"
	case "f":
		return "full"
	}
	return c
}
