package pgcdc

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/tributary-dev/tributary/cdc"
)

// ToastTable is a captured table with TOASTable columns and a replica identity other than
// FULL: an update that leaves one of those values unchanged (and stored out of line) arrives
// without it, since the server sends the old row only under REPLICA IDENTITY FULL.
type ToastTable struct {
	Table cdc.TableID
	// Columns are the published columns whose values can be stored out of line, in table
	// order (see toastable: a storage other than plain, and values that can be large enough).
	Columns         []string
	ReplicaIdentity string // "default", "index" or "nothing"
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
	cat := s.catalog(conn)
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
	toast, err := toastTables(ctx, conn, names, byName)
	if err != nil {
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

// toastTables finds, among the named tables (quoted schema.table) whose replica identity is
// not FULL, those with published columns whose values can be stored out of line (toastable),
// in a few queries whatever their number.
func toastTables(ctx context.Context, conn *pgx.Conn, names []string, byName map[Table]*cdc.TableSchema) ([]ToastTable, error) {
	var maxChar, blockSize int
	if err := conn.QueryRow(ctx, `SELECT pg_catalog.pg_encoding_max_length(d.encoding), current_setting('block_size')::int
		FROM pg_catalog.pg_database d WHERE d.datname = current_database()`).Scan(&maxChar, &blockSize); err != nil {
		return nil, err
	}
	// A domain's column is sized as its base type with the domain's typmod; a domain over a
	// domain counts as unbounded (toastable: the warning errs on the side of speaking).
	rows, err := conn.Query(ctx, `SELECT n.nspname::text, c.relname::text, c.relreplident::text,
			coalesce(c.reloptions, '{}')::text[], a.attname::text, a.attstorage::text, a.attlen, a.attgenerated <> '',
			CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE a.atttypid END,
			CASE WHEN t.typtype = 'd' AND a.atttypmod < 0 THEN t.typtypmod ELSE a.atttypmod END
		FROM pg_catalog.pg_class c
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid
		JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
		WHERE c.oid = ANY($1::text[]::regclass[]) AND c.relreplident <> 'f' AND a.attnum > 0 AND NOT a.attisdropped
		ORDER BY 1, 2, a.attnum`, names)
	if err != nil {
		return nil, err
	}
	type table struct {
		ident   string
		options []string
		cols    []toastColumn
	}
	var order []Table
	found := map[Table]*table{}
	for rows.Next() {
		var t Table
		var ident, storage string
		var options []string
		var c toastColumn
		if err := rows.Scan(&t.Schema, &t.Name, &ident, &options, &c.name, &storage, &c.length, &c.generated, &c.typ, &c.typmod); err != nil {
			rows.Close()
			return nil, err
		}
		if storage != "" {
			c.storage = storage[0]
		}
		tb := found[t]
		if tb == nil {
			tb = &table{ident: ident, options: options}
			found[t] = tb
			order = append(order, t)
		}
		tb.cols = append(tb.cols, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	threshold := toastThreshold(blockSize)
	var out []ToastTable
	for _, t := range order {
		sch := byName[t]
		if sch == nil {
			continue
		}
		tb := found[t]
		cols := toastable(tb.cols, maxChar, threshold, toastTarget(tb.options, threshold))
		cols = slices.DeleteFunc(cols, func(c string) bool { return sch.ColumnIndex(c) < 0 }) // not published
		if len(cols) > 0 {
			out = append(out, ToastTable{Table: sch.ID, Columns: cols, ReplicaIdentity: replicaIdentityName(tb.ident)})
		}
	}
	return out, nil
}

// toastColumn is what deciding whether a column's values can be stored out of line needs.
type toastColumn struct {
	name      string
	storage   byte   // attstorage: 'p' plain, 'm' main, 'e' external, 'x' extended
	length    int16  // attlen: > 0 fixed size, -1 varlena, -2 C string
	generated bool   // stored generated: in the row, never in a change
	typ       uint32 // type OID (a domain's base type)
	typmod    int32
}

// toastPointerSize is the size of an out-of-line value's pointer in the row (varattrib_1b_e
// of a varatt_external): the server moves only values larger than it.
const toastPointerSize = 18

// toastThreshold is TOAST_TUPLE_THRESHOLD for the server's block size: a row is TOASTed
// (values compressed, then moved out of line) only when it is larger (2032 bytes for 8 KiB
// blocks). MAXALIGN is 8 on every 64-bit server.
func toastThreshold(blockSize int) int {
	return (blockSize - 40) / 4 / 8 * 8
}

// toastTarget is the size the server shrinks a TOASTed row to: the table's
// toast_tuple_target, else the threshold.
func toastTarget(options []string, threshold int) int {
	for _, o := range options {
		if v, ok := strings.CutPrefix(o, "toast_tuple_target="); ok {
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				return n
			}
		}
	}
	return threshold
}

// maxSize is the most bytes a value of the column takes in a row, headers included, and
// false when its type does not bound it (text, bytea, json, jsonb, arrays, varchar and
// numeric without a typmod, and every type this does not know). maxChar is the database
// encoding's longest character in bytes.
func (c toastColumn) maxSize(maxChar int) (int, bool) {
	if c.length > 0 {
		return int(c.length), true
	}
	if c.length != -1 {
		return 0, false
	}
	const varhdr = 4
	switch c.typ {
	case pgtype.BPCharOID, pgtype.VarcharOID:
		if c.typmod >= varhdr {
			return int(c.typmod-varhdr)*maxChar + varhdr, true
		}
	case pgtype.NumericOID:
		if c.typmod >= varhdr {
			// Base-10000 digits of 2 bytes (one more for the decimal point's alignment,
			// one for rounding), after an 8-byte header at most.
			p := int(((c.typmod - varhdr) >> 16) & 0xffff)
			return varhdr + 4 + 2*(p/4+2), true
		}
	case pgtype.BitOID, pgtype.VarbitOID:
		if c.typmod > 0 {
			return varhdr + 4 + (int(c.typmod)+7)/8, true
		}
	case pgtype.InetOID, pgtype.CIDROID:
		return varhdr + 20, true // family, bits, flag and 16 address bytes
	}
	return 0, false
}

// toastable returns the names of the columns (generated ones excluded) whose values the
// server can store out of line: a storage other than plain, and values that can be large
// enough. A row is TOASTed only when it can exceed threshold; then the server moves its
// largest movable values out of line, one at a time, while the row exceeds target. A
// column's value is moved only when, with every larger value the server moves before it
// already moved (extended and external ones before main ones), the row can still exceed
// target: so char(84) in pgbench's
// rows never is, a text column always can be, and a varchar(8) beside a text column is not.
// Sizes are upper bounds (every column at its largest, worst alignment), so the rule errs
// on the side of warning.
func toastable(cols []toastColumn, maxChar, threshold, target int) []string {
	const unbounded = 1 << 30
	header := 24 + (len(cols)+7)/8 // heap tuple header, null bitmap, alignment
	sizes := make([]int, len(cols))
	total := header
	for i, c := range cols {
		n, ok := c.maxSize(maxChar)
		if !ok {
			n = unbounded
		}
		sizes[i] = n
		total = min(total+n+7, unbounded)
	}
	if total <= threshold {
		return nil
	}
	var out []string
	for i, c := range cols {
		if c.storage == 'p' || c.length != -1 || c.generated || sizes[i] <= toastPointerSize {
			continue
		}
		row := header + sizes[i] + 7
		for j, d := range cols {
			if j == i {
				continue
			}
			n := sizes[j]
			// A larger value goes out of line first when the server moves it in the same
			// pass or an earlier one: extended and external values before main ones.
			if d.length == -1 && (d.storage == 'x' || d.storage == 'e' || d.storage == 'm' && c.storage == 'm') {
				n = min(n, sizes[i])
			}
			row = min(row+n+7, unbounded)
		}
		if row > target {
			out = append(out, c.name)
		}
	}
	return out
}
