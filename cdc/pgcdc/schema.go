package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/tributary-dev/tributary/cdc"
)

// tableInfo is a table's schema together with what decoding needs: each column's type OID,
// type modifier and text decoder. It is immutable once built, so events keep the schema they
// were made under when a later relation message replaces it.
type tableInfo struct {
	schema *cdc.TableSchema
	// oid is the relation's pg_class OID (0 when unknown).
	oid      uint32
	oids     []uint32
	typmods  []int32
	decoders []decodeFunc
	// shared holds, per column, the decoder that cuts values from the row's shared string
	// (sharedDecodeFunc), nil for columns decoded from their own bytes.
	shared []sharedDecodeFunc
	// deferrablePK marks a DEFERRABLE primary key, which breaks the row-lock ordering the
	// versions rely on (see doc.go, Limits).
	deferrablePK bool
}

// sameColumns reports whether the info describes exactly these columns (name, type, typmod, in
// order): a relation message matching the cached schema needs no catalog round trip.
func (ti *tableInfo) sameColumns(names []string, oids []uint32, typmods []int32) bool {
	if len(names) != len(ti.oids) {
		return false
	}
	for i := range names {
		if ti.schema.Columns[i].Name != names[i] || ti.oids[i] != oids[i] || ti.typmods[i] != typmods[i] {
			return false
		}
	}
	return true
}

// keyIs reports whether the primary key is exactly the flagged columns: with the default
// replica identity the relation message flags the primary key, so a difference means the key
// changed since the schema was loaded.
func (ti *tableInfo) keyIs(flags []bool) bool {
	n := 0
	for i, f := range flags {
		if f {
			n++
			if !slices.Contains(ti.schema.PrimaryKey, i) {
				return false
			}
		}
	}
	return n == len(ti.schema.PrimaryKey)
}

// typeDesc is a resolved (type OID, typmod): a Column template without name and nullability,
// and the decoder of its text form.
type typeDesc struct {
	col    cdc.Column
	decode decodeFunc
	shared sharedDecodeFunc // nil unless the values are strings cut from the text
}

// stringType describes a type whose values are its text form.
func stringType(col cdc.Column) *typeDesc {
	return &typeDesc{col: col, decode: decodeString, shared: decodeSharedString}
}

// arrayType describes an array of et; delim separates its elements.
func arrayType(et *typeDesc, delim byte) *typeDesc {
	ec := et.col
	td := &typeDesc{col: cdc.Column{Kind: cdc.KindArray, Elem: &ec}, decode: arrayDecoder(et.decode, delim)}
	if et.shared != nil {
		td.shared = sharedArrayDecoder(et.shared, delim)
	}
	return td
}

// sharedDecoder returns column i's shared-string decoder, nil when it has none.
func (ti *tableInfo) sharedDecoder(i int) sharedDecodeFunc {
	if i < len(ti.shared) {
		return ti.shared[i]
	}
	return nil
}

// querier is the part of *pgx.Conn the catalog needs.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// catalog resolves types and loads table schemas over one SQL connection, caching types.
type catalog struct {
	q     querier
	types map[[2]int64]*typeDesc
	// ident names a relation in the schemas it loads (Source.ident; relationID by default).
	ident func(oid uint32) string
}

func newCatalog(q querier) *catalog {
	return &catalog{q: q, types: map[[2]int64]*typeDesc{}, ident: relationID}
}

// errNoTable says the catalog has no such table.
var errNoTable = fmt.Errorf("pgcdc: %w", cdc.ErrTableNotFound)

const columnsSQL = `
SELECT n.nspname::text, c.relname::text, c.oid, a.attname::text, a.atttypid, a.atttypmod, a.attnotnull,
	format_type(a.atttypid, a.atttypmod)
FROM unnest($1::text[], $2::text[]) AS w(s, t)
JOIN pg_catalog.pg_namespace n ON n.nspname = w.s
JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = w.t
JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid
WHERE a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
ORDER BY 1, 2, a.attnum`

const primaryKeySQL = `
SELECT con.conrelid, a.attname::text, con.condeferrable
FROM pg_catalog.pg_constraint con
CROSS JOIN LATERAL unnest(con.conkey) WITH ORDINALITY AS k(attnum, ord)
JOIN pg_catalog.pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum
WHERE con.conrelid = ANY($1::oid[]) AND con.contype = 'p'
ORDER BY con.conrelid, k.ord`

// relationID is a relation's identity as cdc.TableSchema.Relation carries it: its pg_class
// OID in decimal (what a relation message calls its relation ID).
func relationID(oid uint32) string { return strconv.FormatUint(uint64(oid), 10) }

// loadTable reads a table's columns (generated columns excluded: pgoutput never sends them),
// types and primary key from pg_catalog. Names are exact: no case folding, no quoting. The
// schema's Relation is the OID of the relation the name denotes in the catalog read, which
// may be another relation than the one a stream's relation message names (renamed, dropped
// and re-created since).
func (c *catalog) loadTable(ctx context.Context, id cdc.TableID) (*tableInfo, error) {
	m, err := c.loadTables(ctx, []cdc.TableID{id})
	if err != nil {
		return nil, err
	}
	if ti := m[id]; ti != nil {
		return ti, nil
	}
	return nil, fmt.Errorf("%w: %s", errNoTable, id)
}

// loadTables is loadTable for many tables in two catalog queries (and one per type not yet
// resolved), whatever their number: a pattern may capture many tables. Tables the catalog
// does not have are absent from the result.
func (c *catalog) loadTables(ctx context.Context, ids []cdc.TableID) (map[cdc.TableID]*tableInfo, error) {
	out := make(map[cdc.TableID]*tableInfo, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	what := "the captured tables"
	if len(ids) == 1 {
		what = ids[0].String()
	}
	schemas := make([]string, len(ids))
	names := make([]string, len(ids))
	byName := make(map[Table]cdc.TableID, len(ids))
	for i, id := range ids {
		schemas[i], names[i] = id.Schema, id.Table
		byName[Table{Schema: id.Schema, Name: id.Table}] = id
	}
	type rawCol struct {
		id      cdc.TableID
		rel     uint32
		name    string
		oid     uint32
		typmod  int32
		notnull bool
		format  string
	}
	rows, err := c.q.Query(ctx, columnsSQL, schemas, names)
	if err != nil {
		return nil, fmt.Errorf("pgcdc: load columns of %s: %w", what, err)
	}
	var raw []rawCol
	for rows.Next() {
		var r rawCol
		var t Table
		if err := rows.Scan(&t.Schema, &t.Name, &r.rel, &r.name, &r.oid, &r.typmod, &r.notnull, &r.format); err != nil {
			rows.Close()
			return nil, fmt.Errorf("pgcdc: load columns of %s: %w", what, err)
		}
		r.id = byName[t]
		raw = append(raw, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgcdc: load columns of %s: %w", what, err)
	}
	byRel := map[uint32]*tableInfo{}
	var rels []uint32
	for _, r := range raw {
		ti := byRel[r.rel]
		if ti == nil {
			ti = &tableInfo{schema: &cdc.TableSchema{ID: r.id, Relation: c.ident(r.rel)}, oid: r.rel}
			byRel[r.rel] = ti
			rels = append(rels, r.rel)
		}
		td, err := c.resolve(ctx, r.oid, r.typmod)
		if err != nil {
			return nil, fmt.Errorf("pgcdc: column %q of %s: %w", r.name, r.id, err)
		}
		col := td.col
		col.Name, col.Nullable, col.SourceType = r.name, !r.notnull, r.format
		ti.schema.Columns = append(ti.schema.Columns, col)
		ti.oids = append(ti.oids, r.oid)
		ti.typmods = append(ti.typmods, r.typmod)
		ti.decoders = append(ti.decoders, td.decode)
		ti.shared = append(ti.shared, td.shared)
	}
	if len(rels) == 0 {
		return out, nil
	}
	pk, err := c.q.Query(ctx, primaryKeySQL, rels)
	if err != nil {
		return nil, fmt.Errorf("pgcdc: load primary keys of %s: %w", what, err)
	}
	for pk.Next() {
		var rel uint32
		var name string
		var deferrable bool
		if err := pk.Scan(&rel, &name, &deferrable); err != nil {
			pk.Close()
			return nil, fmt.Errorf("pgcdc: load primary keys of %s: %w", what, err)
		}
		ti := byRel[rel]
		if ti == nil {
			continue
		}
		ti.deferrablePK = ti.deferrablePK || deferrable
		if i := ti.schema.ColumnIndex(name); i >= 0 {
			ti.schema.PrimaryKey = append(ti.schema.PrimaryKey, i)
		}
	}
	if err := pk.Err(); err != nil {
		return nil, fmt.Errorf("pgcdc: load primary keys of %s: %w", what, err)
	}
	for _, ti := range byRel {
		out[ti.schema.ID] = ti
	}
	return out, nil
}

// project builds the info for exactly the given columns (a relation message's, or a
// publication's column list): catalog columns of the same name and type are kept with their
// nullability; others (a relation message older than the catalog) are described from their
// type alone and marked nullable. The primary key survives when all its columns do, else the
// key flags of the relation message stand in (keyFlags may be nil).
func (c *catalog) project(ctx context.Context, base *tableInfo, names []string, oids []uint32, typmods []int32, keyFlags []bool) (*tableInfo, error) {
	id := base.schema.ID
	ti := &tableInfo{schema: &cdc.TableSchema{ID: id, Relation: base.schema.Relation}, oid: base.oid, deferrablePK: base.deferrablePK}
	for i, name := range names {
		j := base.schema.ColumnIndex(name)
		if j >= 0 && base.oids[j] == oids[i] && base.typmods[j] == typmods[i] {
			ti.schema.Columns = append(ti.schema.Columns, base.schema.Columns[j])
			ti.decoders = append(ti.decoders, base.decoders[j])
			ti.shared = append(ti.shared, base.sharedDecoder(j))
		} else {
			td, err := c.resolve(ctx, oids[i], typmods[i])
			if err != nil {
				return nil, fmt.Errorf("pgcdc: column %q of %s: %w", name, id, err)
			}
			col := td.col
			col.Name, col.Nullable = name, true
			var format string
			if err := c.q.QueryRow(ctx, `SELECT format_type($1, $2)`, oids[i], typmods[i]).Scan(&format); err == nil {
				col.SourceType = format
			}
			ti.schema.Columns = append(ti.schema.Columns, col)
			ti.decoders = append(ti.decoders, td.decode)
			ti.shared = append(ti.shared, td.shared)
		}
		ti.oids = append(ti.oids, oids[i])
		ti.typmods = append(ti.typmods, typmods[i])
	}
	for _, k := range base.schema.PrimaryKey {
		i := ti.schema.ColumnIndex(base.schema.Columns[k].Name)
		if i < 0 {
			ti.schema.PrimaryKey = nil
			break
		}
		ti.schema.PrimaryKey = append(ti.schema.PrimaryKey, i)
	}
	if len(ti.schema.PrimaryKey) == 0 {
		for i, key := range keyFlags {
			if key {
				ti.schema.PrimaryKey = append(ti.schema.PrimaryKey, i)
			}
		}
	}
	return ti, nil
}

const typeSQL = `
SELECT t.typname, t.typtype::text, t.typcategory::text, t.typelem, t.typbasetype, t.typtypmod, t.typdelim::text
FROM pg_catalog.pg_type t WHERE t.oid = $1`

// resolve describes a type: built-in ones from a table, the rest (arrays, domains, enums,
// extension types) from pg_type. Type modifiers carry precision, scale and lengths.
func (c *catalog) resolve(ctx context.Context, oid uint32, typmod int32) (*typeDesc, error) {
	key := [2]int64{int64(oid), int64(typmod)}
	if td, ok := c.types[key]; ok {
		return td, nil
	}
	td, err := c.resolveUncached(ctx, oid, typmod, 0)
	if err != nil {
		return nil, err
	}
	c.types[key] = td
	return td, nil
}

func (c *catalog) resolveUncached(ctx context.Context, oid uint32, typmod int32, depth int) (*typeDesc, error) {
	if td, ok := builtinType(oid, typmod); ok {
		return td, nil
	}
	if depth > 8 {
		return nil, errors.New("type nesting too deep")
	}
	var name, typtype, category, delim string
	var elem, base uint32
	var baseMod int32
	err := c.q.QueryRow(ctx, typeSQL, oid).Scan(&name, &typtype, &category, &elem, &base, &baseMod, &delim)
	if errors.Is(err, pgx.ErrNoRows) {
		// A type dropped since the change was written: its text form is all there is.
		return stringType(cdc.Column{Kind: cdc.KindOther}), nil
	}
	if err != nil {
		return nil, fmt.Errorf("load type %d: %w", oid, err)
	}
	switch {
	case typtype == "d":
		// A domain reads and prints like its base type; the domain's own typmod applies.
		if typmod < 0 {
			typmod = baseMod
		}
		return c.resolveUncached(ctx, base, typmod, depth+1)
	case typtype == "e":
		rows, err := c.q.Query(ctx, `SELECT enumlabel FROM pg_catalog.pg_enum WHERE enumtypid = $1 ORDER BY enumsortorder`, oid)
		if err != nil {
			return nil, fmt.Errorf("load enum %d: %w", oid, err)
		}
		labels, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, fmt.Errorf("load enum %d: %w", oid, err)
		}
		return stringType(cdc.Column{Kind: cdc.KindEnum, Labels: labels}), nil
	case category == "A" && elem != 0:
		// An array column's typmod belongs to its element type (varchar(10)[] has 14).
		et, err := c.resolveUncached(ctx, elem, typmod, depth+1)
		if err != nil {
			return nil, err
		}
		d := byte(',')
		if len(delim) == 1 {
			d = delim[0]
		}
		return arrayType(et, d), nil
	}
	return stringType(cdc.Column{Kind: cdc.KindOther}), nil
}

// Built-in type OIDs pgtype does not name.
const (
	int2vectorOID = 22
	oidvectorOID  = 30
)

// builtinType describes the built-in scalar types and their arrays without a catalog query.
func builtinType(oid uint32, typmod int32) (*typeDesc, bool) {
	if elem, ok := builtinArrays[oid]; ok {
		et, _ := builtinType(elem, typmod)
		return arrayType(et, ','), true
	}
	fracDigits := func() int {
		if typmod >= 0 {
			return int(typmod)
		}
		return 6
	}
	charLength := func() int {
		if typmod >= 4 {
			return int(typmod - 4)
		}
		return 0
	}
	var col cdc.Column
	var dec decodeFunc // nil: the value is the text (stringType)
	switch oid {
	case pgtype.BoolOID:
		col, dec = cdc.Column{Kind: cdc.KindBool}, decodeBool
	case pgtype.Int2OID:
		col, dec = cdc.Column{Kind: cdc.KindInt, Bits: 16}, decodeInt
	case pgtype.Int4OID:
		col, dec = cdc.Column{Kind: cdc.KindInt, Bits: 32}, decodeInt
	case pgtype.Int8OID:
		col, dec = cdc.Column{Kind: cdc.KindInt, Bits: 64}, decodeInt
	case pgtype.OIDOID, pgtype.XIDOID, pgtype.CIDOID:
		col, dec = cdc.Column{Kind: cdc.KindUint, Bits: 32}, decodeUint
	case pgtype.Float4OID:
		col, dec = cdc.Column{Kind: cdc.KindFloat, Bits: 32}, decodeFloat
	case pgtype.Float8OID:
		col, dec = cdc.Column{Kind: cdc.KindFloat, Bits: 64}, decodeFloat
	case pgtype.NumericOID:
		col = cdc.Column{Kind: cdc.KindDecimal}
		if typmod >= 4 {
			// numeric's typmod is ((precision << 16) | scale) + 4; the scale is an 11-bit
			// signed field since PostgreSQL 15 allows negative scales.
			m := typmod - 4
			col.Precision = int((m >> 16) & 0xffff)
			col.Scale = int((m&0x7ff)^1024) - 1024
		}
	case pgtype.TextOID, pgtype.NameOID, pgtype.QCharOID:
		col = cdc.Column{Kind: cdc.KindText}
	case pgtype.VarcharOID, pgtype.BPCharOID:
		col = cdc.Column{Kind: cdc.KindText, Length: charLength()}
	case pgtype.ByteaOID:
		col, dec = cdc.Column{Kind: cdc.KindBinary}, decodeBytea
	case pgtype.DateOID:
		col = cdc.Column{Kind: cdc.KindDate}
	case pgtype.TimeOID:
		col = cdc.Column{Kind: cdc.KindTime, Precision: fracDigits()}
	case pgtype.TimestampOID:
		col = cdc.Column{Kind: cdc.KindDateTime, Precision: fracDigits()}
	case pgtype.TimestamptzOID:
		col, dec = cdc.Column{Kind: cdc.KindTimestamp, Precision: fracDigits()}, decodeTimestamptz
	case pgtype.JSONOID, pgtype.JSONBOID:
		col, dec = cdc.Column{Kind: cdc.KindJSON}, decodeJSON
	case pgtype.UUIDOID:
		col = cdc.Column{Kind: cdc.KindUUID}
	case pgtype.BitOID, pgtype.VarbitOID:
		// Bit strings stay their "0101" text: they can be longer than any integer.
		col = cdc.Column{Kind: cdc.KindBit}
		if typmod > 0 {
			col.Bits = int(typmod)
		}
	case pgtype.TimetzOID, pgtype.IntervalOID, pgtype.InetOID, pgtype.CIDROID, pgtype.MacaddrOID,
		pgtype.XMLOID, pgtype.PointOID, pgtype.TSVectorOID, int2vectorOID, oidvectorOID:
		col = cdc.Column{Kind: cdc.KindOther}
	default:
		return nil, false
	}
	if dec == nil {
		return stringType(col), true
	}
	return &typeDesc{col: col, decode: dec}, true
}

// builtinArrays maps the array types of the built-in scalars to their element types.
var builtinArrays = map[uint32]uint32{
	pgtype.BoolArrayOID:        pgtype.BoolOID,
	pgtype.Int2ArrayOID:        pgtype.Int2OID,
	pgtype.Int4ArrayOID:        pgtype.Int4OID,
	pgtype.Int8ArrayOID:        pgtype.Int8OID,
	pgtype.Float4ArrayOID:      pgtype.Float4OID,
	pgtype.Float8ArrayOID:      pgtype.Float8OID,
	pgtype.NumericArrayOID:     pgtype.NumericOID,
	pgtype.TextArrayOID:        pgtype.TextOID,
	pgtype.VarcharArrayOID:     pgtype.VarcharOID,
	pgtype.BPCharArrayOID:      pgtype.BPCharOID,
	pgtype.ByteaArrayOID:       pgtype.ByteaOID,
	pgtype.DateArrayOID:        pgtype.DateOID,
	pgtype.TimeArrayOID:        pgtype.TimeOID,
	pgtype.TimestampArrayOID:   pgtype.TimestampOID,
	pgtype.TimestamptzArrayOID: pgtype.TimestamptzOID,
	pgtype.JSONArrayOID:        pgtype.JSONOID,
	pgtype.JSONBArrayOID:       pgtype.JSONBOID,
	pgtype.UUIDArrayOID:        pgtype.UUIDOID,
}

// forget drops the cached schema of id when it describes relation rel, which no longer bears
// the name (renamed): a later load of the name reads the catalog again.
func (s *Source) forget(id cdc.TableID, rel string) {
	s.mu.Lock()
	if ti := s.schemas[id]; ti != nil && ti.schema.Relation == rel {
		delete(s.schemas, id)
	}
	s.mu.Unlock()
}

// columnNames lists a schema's column names.
func columnNames(s *cdc.TableSchema) []string {
	out := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		out[i] = c.Name
	}
	return out
}

// attnamesSQL reads a published table's column list through to_jsonb, which has attnames
// only from PostgreSQL 15 on (column lists): older servers give NULL, every column.
const attnamesSQL = `SELECT t.schemaname::text, t.tablename::text, to_jsonb(t) -> 'attnames'
	FROM pg_catalog.pg_publication_tables t WHERE t.pubname = $1`

// publishedColumns returns the publication's column list for the table, or nil when it
// publishes every column (PostgreSQL 15 column lists).
func publishedColumns(ctx context.Context, q querier, publication string, id cdc.TableID) ([]string, error) {
	var s, t string
	var names []string
	err := q.QueryRow(ctx, attnamesSQL+` AND t.schemaname = $2 AND t.tablename = $3`, publication, id.Schema, id.Table).Scan(&s, &t, &names)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("pgcdc: publication %q does not publish %s", publication, id)
	}
	if err != nil {
		return nil, fmt.Errorf("pgcdc: columns published for %s: %w", id, err)
	}
	return names, nil
}

// publishedColumnLists returns the column list of every table the publication publishes
// (nil: every column), in one query.
func publishedColumnLists(ctx context.Context, q querier, publication string) (map[Table][]string, error) {
	rows, err := q.Query(ctx, attnamesSQL, publication)
	if err != nil {
		return nil, fmt.Errorf("pgcdc: columns published by %q: %w", publication, err)
	}
	out := map[Table][]string{}
	for rows.Next() {
		var t Table
		var names []string
		if err := rows.Scan(&t.Schema, &t.Name, &names); err != nil {
			rows.Close()
			return nil, fmt.Errorf("pgcdc: columns published by %q: %w", publication, err)
		}
		out[t] = names
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgcdc: columns published by %q: %w", publication, err)
	}
	return out, nil
}

// restrictTo narrows ti to the published columns, keeping catalog order.
func (c *catalog) restrictTo(ctx context.Context, ti *tableInfo, published []string) (*tableInfo, error) {
	if len(published) == 0 || len(published) == len(ti.schema.Columns) {
		return ti, nil
	}
	var names []string
	var oids []uint32
	var typmods []int32
	for i, col := range ti.schema.Columns {
		if slices.Contains(published, col.Name) {
			names = append(names, col.Name)
			oids = append(oids, ti.oids[i])
			typmods = append(typmods, ti.typmods[i])
		}
	}
	return c.project(ctx, ti, names, oids, typmods, nil)
}
