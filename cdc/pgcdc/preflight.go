package pgcdc

import (
	"context"
	"errors"
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

// Tables implements cdc.TableLister: the captured tables' schemas as Open read them from
// pg_catalog (restricted to a publication's column list). With a FOR ALL TABLES publication
// these are the tables it published at Open; tables created later are not listed.
func (st *stream) Tables() []*cdc.TableSchema { return slices.Clone(st.plan.schemas) }

// checkTables refuses Options.Tables that do not exist as spelled: names are exact, so a
// table that exists only in another case is missing, and the fix names it.
func (s *Source) checkTables(ctx context.Context, conn *pgx.Conn, database string) error {
	if len(s.opts.Tables) == 0 {
		return nil
	}
	schemas := make([]string, len(s.opts.Tables))
	names := make([]string, len(s.opts.Tables))
	for i, t := range s.opts.Tables {
		schemas[i], names[i] = t.Schema, t.Name
	}
	rows, err := conn.Query(ctx, `SELECT n.nspname::text, c.relname::text
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'p') AND (lower(n.nspname), lower(c.relname)) IN
			(SELECT lower(s), lower(t) FROM unnest($1::text[], $2::text[]) AS w(s, t))
		ORDER BY 1, 2`, schemas, names)
	if err != nil {
		return fmt.Errorf("pgcdc: look up the captured tables: %w", err)
	}
	found, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Table, error) {
		var t Table
		return t, r.Scan(&t.Schema, &t.Name)
	})
	if err != nil {
		return fmt.Errorf("pgcdc: look up the captured tables: %w", err)
	}
	var probs []cdc.StartProblem
	for _, t := range s.opts.Tables {
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
	if len(probs) > 0 {
		return &cdc.StartError{Component: "pgcdc", Problems: probs}
	}
	return nil
}

// plainIdent is an identifier PostgreSQL reads back unchanged without quotes.
var plainIdent = regexp.MustCompile(`^[a-z_][a-z0-9_$]*$`)

// displayName writes a table as SQL would need it: parts quoted only when necessary.
func displayName(t Table) string {
	q := func(s string) string {
		if plainIdent.MatchString(s) {
			return s
		}
		return quoteIdent(s)
	}
	return q(t.Schema) + "." + q(t.Name)
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

// inspect reads the captured tables' schemas (what Tables returns) and finds those with
// TOASTable columns but no REPLICA IDENTITY FULL, logging one warning for each.
func (s *Source) inspect(ctx context.Context, conn *pgx.Conn, database string, tables []Table) ([]*cdc.TableSchema, []ToastTable, error) {
	cat := newCatalog(conn)
	schemas := make([]*cdc.TableSchema, 0, len(tables))
	byName := make(map[Table]*cdc.TableSchema, len(tables))
	for _, t := range tables {
		id := s.tableID(database, t)
		ti, err := cat.loadTable(ctx, id)
		if errors.Is(err, errNoTable) {
			continue // dropped since the publication was read; its events, if any, say more
		}
		if err != nil {
			return nil, nil, err
		}
		published, err := publishedColumns(ctx, conn, s.opts.Publication, id)
		if err != nil {
			return nil, nil, err
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
	for _, t := range toast {
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
