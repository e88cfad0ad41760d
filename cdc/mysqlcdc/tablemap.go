package mysqlcdc

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/tributary-dev/tributary/cdc"
)

// binaryCollation is the collation id of the binary character set.
const binaryCollation = 63

// tmMeta is a table map's per-column metadata, extracted once (go-mysql builds each map anew).
type tmMeta struct {
	unsigned   map[int]bool
	collations map[int]uint64
	charsets   map[int]string // the character set of each character, ENUM and SET column with a known collation
	unknown    map[int]uint64 // the columns whose collation id the server does not list
	enums      map[int][]string
	sets       map[int][]string
}

// newTMMeta reads a table map's metadata; cs maps the server's collation ids to character sets
// (nil: none known, every collation but binary's is unknown). ENUM and SET labels are decoded
// from their column's character set.
func newTMMeta(tm *replication.TableMapEvent, flavor Flavor, cs collations) *tmMeta {
	md := &tmMeta{unsigned: unsignedMap(tm, flavor), collations: collationMap(tm, flavor),
		enums: tm.EnumStrValueMap(), sets: tm.SetStrValueMap()}
	resolve := func(i int, id uint64) {
		if name, ok := cs.charsetOf(id); ok {
			if md.charsets == nil {
				md.charsets = map[int]string{}
			}
			md.charsets[i] = name
			return
		}
		if md.unknown == nil {
			md.unknown = map[int]uint64{}
		}
		md.unknown[i] = id
	}
	for i, id := range md.collations {
		resolve(i, id)
	}
	if len(md.enums) > 0 || len(md.sets) > 0 {
		for i, id := range tm.EnumSetCollationMap() {
			resolve(i, id)
			if name := md.charsets[i]; name != "" && !isUTF8(name) && name != "binary" {
				if l, ok := md.enums[i]; ok {
					md.enums[i] = decodeLabels(name, l)
				}
				if l, ok := md.sets[i]; ok {
					md.sets[i] = decodeLabels(name, l)
				}
			}
		}
	}
	return md
}

// decodeLabels converts ENUM or SET labels from character set cs to UTF-8 (nil stays nil; a
// label that does not decode is kept as it is: the catalog's labels then differ and the table
// map's are not used).
func decodeLabels(cs string, labels []string) []string {
	if labels == nil {
		return nil
	}
	out := make([]string, len(labels))
	for k, l := range labels {
		s, err := decodeText(cs, []byte(l))
		if err != nil {
			s = l
		}
		out[k] = s
	}
	return out
}

// The optional metadata of a table map (binlog_row_metadata) lists some facts for a subset of
// the columns only, in column order: a SIGNEDNESS bit for each numeric column, a collation
// for each character column, labels for each ENUM and each SET column, a geometry type for
// each spatial column. Reading one of these lists means knowing exactly which columns the
// server counted -- one column too many or too few shifts every later column's entry -- and
// the servers do not count alike. Column names and the primary key cover every column;
// ENUM, SET and GEOMETRY are counted by their type codes alike on both servers, as go-mysql
// does. Signedness and character sets are walked here, by flavor:
//
//   - SIGNEDNESS. MariaDB writes a bit for every column whose binlog type information carries
//     a signedness (Table_map_log_event::init_signedness_field, Binlog_type_info::m_signedness),
//     which is every Field_num: the integers, DECIMAL, FLOAT, DOUBLE, and YEAR, a Field_tiny
//     that is always UNSIGNED; BIT and the temporal types have none. MySQL writes a bit for
//     the types its is_numeric_type lists: the integers, NEWDECIMAL, FLOAT and DOUBLE, not
//     YEAR. go-mysql's UnsignedMap follows MySQL's list for both flavors, so on MariaDB every
//     numeric column after a YEAR took the bit of the numeric column before it (an UNSIGNED
//     SMALLINT read as signed, a signed one as UNSIGNED), and the schema rebuilt from such a
//     table map decoded the values with the wrong signedness.
//   - Character sets (DEFAULT_CHARSET / COLUMN_CHARSET). MariaDB counts every column that has
//     a character set and is neither ENUM nor SET: CHAR, VARCHAR, BINARY, VARBINARY, the TEXT
//     and BLOB types, JSON (a LONGTEXT), GEOMETRY, and the BINARY-based UUID, INET4 and INET6.
//     MySQL counts CHAR, VARCHAR and the BLOB types (its JSON and GEOMETRY have own type codes
//     and are not counted).
//
// The MariaDB rules are read from its server source (sql/log_event_server.cc, sql/field.h) and
// verified against MariaDB 10.11: TestTableMapMetadataMatchesCatalog compares the walks with
// INFORMATION_SCHEMA for every column of a table mixing all types. (MariaDB's own mysqlbinlog,
// sql/log_event_client.cc, prints with MySQL's lists and shares go-mysql's mistake.) The MySQL
// rules are those of MySQL 8's Table_map_log_event::print_columns, which go-mysql follows; no
// MySQL server runs in the tests, so they are not exercised.

// signednessColumn says whether a column of real type tp has a bit in the SIGNEDNESS bitmap.
func signednessColumn(flavor Flavor, tp byte) bool {
	switch tp {
	case mysql.MYSQL_TYPE_TINY, mysql.MYSQL_TYPE_SHORT, mysql.MYSQL_TYPE_INT24, mysql.MYSQL_TYPE_LONG,
		mysql.MYSQL_TYPE_LONGLONG, mysql.MYSQL_TYPE_NEWDECIMAL, mysql.MYSQL_TYPE_FLOAT, mysql.MYSQL_TYPE_DOUBLE:
		return true
	case mysql.MYSQL_TYPE_YEAR, mysql.MYSQL_TYPE_DECIMAL: // Field_year; the pre-5.0 DECIMAL's Field_decimal
		return flavor == MariaDB
	}
	return false
}

// characterColumn says whether a column of real type tp has an entry in the character set
// lists.
func characterColumn(flavor Flavor, tp byte) bool {
	switch tp {
	case mysql.MYSQL_TYPE_STRING, mysql.MYSQL_TYPE_VAR_STRING, mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_BLOB:
		return true
	case mysql.MYSQL_TYPE_GEOMETRY:
		return flavor == MariaDB
	}
	return false
}

// unsignedMap reads the SIGNEDNESS bitmap: column index -> UNSIGNED, for the numeric columns;
// nil without the metadata.
func unsignedMap(tm *replication.TableMapEvent, flavor Flavor) map[int]bool {
	if len(tm.SignednessBitmap) == 0 {
		return nil
	}
	ret := make(map[int]bool)
	bit := 0
	for i := range columns(tm) {
		tp, _ := realType(tm.ColumnType[i], tm.ColumnMeta[i])
		if !signednessColumn(flavor, tp) {
			continue
		}
		if bit>>3 >= len(tm.SignednessBitmap) {
			break // shorter than the columns say: the rest stay unknown (signed)
		}
		ret[i] = tm.SignednessBitmap[bit>>3]&(0x80>>(bit&7)) != 0
		bit++
	}
	return ret
}

// collationMap reads the character set metadata: column index -> collation id, for the
// character columns; nil without it. DEFAULT_CHARSET is the most common collation followed by
// (character column ordinal, collation) pairs for the others; COLUMN_CHARSET one collation per
// character column.
func collationMap(tm *replication.TableMapEvent, flavor Flavor) map[int]uint64 {
	def, list := tm.DefaultCharset, tm.ColumnCharset
	if len(def) == 0 && len(list) == 0 {
		return nil
	}
	var others map[uint64]uint64
	if len(def) > 0 {
		others = make(map[uint64]uint64, len(def)/2)
		for k := 1; k+1 < len(def); k += 2 {
			others[def[k]] = def[k+1]
		}
	}
	ret := make(map[int]uint64)
	var ord uint64
	for i := range columns(tm) {
		tp, _ := realType(tm.ColumnType[i], tm.ColumnMeta[i])
		if !characterColumn(flavor, tp) {
			continue
		}
		switch {
		case len(def) > 0:
			c, ok := others[ord]
			if !ok {
				c = def[0]
			}
			ret[i] = c
		case ord < uint64(len(list)):
			ret[i] = list[ord]
		}
		ord++
	}
	return ret
}

// columns is the number of columns a table map describes completely.
func columns(tm *replication.TableMapEvent) int {
	return min(int(tm.ColumnCount), len(tm.ColumnType), len(tm.ColumnMeta))
}

// tmColumn describes column i of a table map from its binlog metadata (complete only with
// binlog_row_metadata=FULL). A character column's character set is its collation's (md); cat,
// when not nil, is the catalog's column of the same name, whose character set serves when the
// table map has no collations. The error (errUnknownCollation) says the character set of a
// character, ENUM or SET column cannot be told: its collation id is not one the server lists,
// or the table map has none and there is no catalog column -- never guessed.
func tmColumn(tm *replication.TableMapEvent, md *tmMeta, i int, name string, cat *cdc.Column) (col cdc.Column, c colCodec, err error) {
	tp, meta := tm.ColumnType[i], tm.ColumnMeta[i]
	strLen := int(meta)
	if tp == mysql.MYSQL_TYPE_STRING && meta >= 256 {
		// CHAR, ENUM and SET share a type code; the real type and the length hide in meta.
		b0, b1 := byte(meta>>8), byte(meta)
		if b0&0x30 != 0x30 {
			strLen = int(uint16(b1) | uint16((b0&0x30)^0x30)<<4)
			tp = b0 | 0x30
		} else {
			strLen = int(b1)
			tp = b0
		}
	}
	col = cdc.Column{Name: name, Nullable: true}
	if ok, null := tm.Nullable(i); ok {
		col.Nullable = null
	}
	c = colCodec{kind: cdc.KindOther, class: classOther}
	collation, hasCollation := md.collations[i]
	binaryData := hasCollation && collation == binaryCollation
	charset, known := md.charsets[i]
	var charsetErr error
	id, bad := md.unknown[i]
	if bad {
		charsetErr = fmt.Errorf("%w: column %q, collation id %d", errUnknownCollation, name, id)
	} else if !known && cat != nil {
		charset = cat.Charset
	}
	// characterErr fails a character column whose character set is unknown; labels only
	// need one when their collation is listed (decoded by newTMMeta).
	characterErr := func(labels bool) {
		switch {
		case err != nil:
		case charsetErr != nil:
			err = charsetErr
		case charset == "" && !labels:
			err = fmt.Errorf("%w: column %q has no collation in the table map (binlog_row_metadata is not FULL)", errUnknownCollation, name)
		}
	}
	setInt := func(bits int) {
		c.bits, col.Bits = bits, bits
		c.kind, c.class = cdc.KindInt, classInt
		if md.unsigned[i] {
			c.kind, c.class = cdc.KindUint, classUint
		}
	}
	switch tp {
	case mysql.MYSQL_TYPE_TINY:
		setInt(8)
	case mysql.MYSQL_TYPE_SHORT:
		setInt(16)
	case mysql.MYSQL_TYPE_INT24:
		setInt(24)
	case mysql.MYSQL_TYPE_LONG:
		setInt(32)
	case mysql.MYSQL_TYPE_LONGLONG:
		setInt(64)
	case mysql.MYSQL_TYPE_YEAR:
		c.kind, c.class, col.Bits = cdc.KindInt, classInt, 16
	case mysql.MYSQL_TYPE_NEWDECIMAL:
		c.kind, c.class = cdc.KindDecimal, classDecimal
		col.Precision, col.Scale = int(meta>>8), int(meta&0xff)
	case mysql.MYSQL_TYPE_FLOAT:
		c.kind, c.class, col.Bits = cdc.KindFloat, classFloat32, 32
	case mysql.MYSQL_TYPE_DOUBLE:
		c.kind, c.class, col.Bits = cdc.KindFloat, classFloat64, 64
	case mysql.MYSQL_TYPE_BIT:
		c.kind, c.class, col.Bits = cdc.KindBit, classBit, int(meta>>8)*8+int(meta&0xff)
	case mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_VAR_STRING, mysql.MYSQL_TYPE_STRING:
		if binaryData {
			c.kind, c.class = cdc.KindBinary, classBinary
			if tp == mysql.MYSQL_TYPE_STRING {
				c.padTo = strLen
			}
		} else {
			c.kind, c.class, c.charset, col.Charset = cdc.KindText, classString, charset, charset
			characterErr(false)
		}
	case mysql.MYSQL_TYPE_BLOB:
		if binaryData {
			c.kind, c.class = cdc.KindBinary, classBinary
		} else {
			c.kind, c.class, col.Charset = cdc.KindText, classText, charset
			characterErr(false)
		}
	case mysql.MYSQL_TYPE_GEOMETRY:
		c.kind, c.class = cdc.KindBinary, classBinary
	case mysql.MYSQL_TYPE_JSON:
		c.kind, c.class = cdc.KindJSON, classJSON
	case mysql.MYSQL_TYPE_ENUM:
		c.kind, c.class, c.labels = cdc.KindEnum, classEnum, md.enums[i]
		col.Labels, col.Charset = c.labels, charset
		characterErr(true)
	case mysql.MYSQL_TYPE_SET:
		c.kind, c.class, c.labels = cdc.KindSet, classSet, md.sets[i]
		col.Labels, col.Charset = c.labels, charset
		characterErr(true)
	case mysql.MYSQL_TYPE_DATE, mysql.MYSQL_TYPE_NEWDATE:
		c.kind, c.class = cdc.KindDate, classTemporal
	case mysql.MYSQL_TYPE_TIME, mysql.MYSQL_TYPE_TIME2:
		c.kind, c.class = cdc.KindTime, classTemporal
	case mysql.MYSQL_TYPE_DATETIME, mysql.MYSQL_TYPE_DATETIME2:
		c.kind, c.class = cdc.KindDateTime, classTemporal
	case mysql.MYSQL_TYPE_TIMESTAMP, mysql.MYSQL_TYPE_TIMESTAMP2:
		c.kind, c.class = cdc.KindTimestamp, classTimestamp
	}
	if tp == mysql.MYSQL_TYPE_TIME2 || tp == mysql.MYSQL_TYPE_DATETIME2 || tp == mysql.MYSQL_TYPE_TIMESTAMP2 {
		col.Precision = int(meta)
	}
	col.Kind = c.kind
	return col, c, err // not prepared: agrees only compares it; fromTableMap prepares what it keeps
}

// compatible says whether values described by the table map (tc, tcol) decode correctly with
// the catalog's column (cc, ccol).
func compatible(ccol *cdc.Column, cc *colCodec, tcol *cdc.Column, tc *colCodec) bool {
	if cc.class != tc.class {
		// MariaDB's JSON is a LONGTEXT in the binlog, its UUID and INET types are BINARY; only
		// the catalog knows better.
		switch cc.class {
		case classJSON:
			return tc.class == classText
		case classUUID, classInet4, classInet6:
			return tc.class == classBinary
		}
		return false
	}
	switch cc.class {
	case classInt, classUint:
		return cc.bits == tc.bits || tc.bits == 0
	case classDecimal:
		return ccol.Precision == tcol.Precision && ccol.Scale == tcol.Scale
	case classBit:
		return ccol.Bits == tcol.Bits
	case classEnum, classSet:
		return tc.labels == nil || slices.Equal(cc.labels, tc.labels)
	case classString, classText:
		// Another relation's column of the same name and type may hold another character set.
		return tcol.Charset == "" || strings.EqualFold(ccol.Charset, tcol.Charset)
	}
	return true
}

// agrees says whether a table map describes t: same column count and, as far as the table map
// tells (binlog_row_metadata=FULL), the same names, compatible types (character sets included)
// and, where t has a primary key, the same one. (A description without a primary key is not
// compared: MariaDB's table map names a UNIQUE NOT NULL index as the primary key of a table
// that has none, and the catalog does not.) cs maps collation ids to character sets.
func (t *table) agrees(tm *replication.TableMapEvent, flavor Flavor, cs collations) bool {
	if t.verified == tm || t.verified != nil && sameTableMap(t.verified, tm) {
		t.verified = tm
		return true
	}
	if int(tm.ColumnCount) != len(t.schema.Columns) {
		return false
	}
	if len(tm.PrimaryKey) > 0 && len(t.schema.PrimaryKey) > 0 && !samePrimaryKey(tm.PrimaryKey, t.schema.PrimaryKey) {
		return false
	}
	names := tm.ColumnNameString()
	md := newTMMeta(tm, flavor, cs)
	if len(md.unknown) > 0 {
		return false // decoded by fromTableMap, which refuses it
	}
	for i := range t.schema.Columns {
		if names != nil && t.schema.Columns[i].Name != names[i] {
			return false
		}
		tcol, tc, err := tmColumn(tm, md, i, t.schema.Columns[i].Name, &t.schema.Columns[i])
		if err != nil || !compatible(&t.schema.Columns[i], &t.codecs[i], &tcol, &tc) {
			return false
		}
	}
	t.verified = tm
	return true
}

// samePrimaryKey compares a table map's primary key columns with a schema's.
func samePrimaryKey(tm []uint64, pk []int) bool {
	return slices.EqualFunc(tm, pk, func(a uint64, b int) bool { return a == uint64(b) })
}

// fromTableMap builds the schema a row image was written with, for an image older than the
// catalog: the catalog's description where it still fits, the table map's elsewhere. Nil when
// the table map has no column names; an error (errUnknownCollation) when a column's character
// set cannot be told.
func fromTableMap(cat *table, tm *replication.TableMapEvent, flavor Flavor, cs collations) (*table, error) {
	names := tm.ColumnNameString()
	if len(names) != int(tm.ColumnCount) {
		return nil, nil
	}
	t := &table{schema: &cdc.TableSchema{ID: cat.schema.ID, Relation: cat.schema.Relation}}
	md := newTMMeta(tm, flavor, cs)
	var ambiguous []string
	for i, n := range names {
		var ccol *cdc.Column
		k := cat.schema.ColumnIndex(n)
		if k >= 0 {
			ccol = &cat.schema.Columns[k]
		}
		tcol, tc, err := tmColumn(tm, md, i, n, ccol)
		if err != nil {
			return nil, err
		}
		if k >= 0 && compatible(ccol, &cat.codecs[k], &tcol, &tc) {
			tcol, tc = *ccol, cat.codecs[k]
		} else {
			tc.prepare()
			if ccol != nil {
				tcol.SourceType = "" // the catalog's spelling is of a later type
			}
			if flavor == MariaDB {
				if maybe := catalogOnlyCandidates(tm, md, i, &tc); maybe != "" {
					ambiguous = append(ambiguous, fmt.Sprintf("%q (%s)", n, maybe))
				}
			}
		}
		t.schema.Columns = append(t.schema.Columns, tcol)
		t.codecs = append(t.codecs, tc)
	}
	if len(ambiguous) > 0 {
		t.ambiguous = fmt.Errorf("%w: column %s", ErrAmbiguousType, strings.Join(ambiguous, ", column "))
	}
	if len(tm.PrimaryKey) > 0 {
		for _, k := range tm.PrimaryKey {
			t.schema.PrimaryKey = append(t.schema.PrimaryKey, int(k))
		}
	} else {
		for _, k := range cat.schema.PrimaryKey {
			if i := t.schema.ColumnIndex(cat.schema.Columns[k].Name); i >= 0 {
				t.schema.PrimaryKey = append(t.schema.PrimaryKey, i)
			}
		}
	}
	return t, nil
}

// ErrAmbiguousType marks (Event.Malformed) the rows of a MariaDB table map one of whose columns has no
// description (the catalog's or the stream's) and may be of a type only the catalog tells:
// MariaDB writes JSON as LONGTEXT, INET4 as BINARY(4), INET6 and UUID as BINARY(16). Decoded
// as the table map has them, their documents would differ silently from a JSON object or an
// address; so they go out Malformed (dead-lettered), their values kept as the binlog has them.
var ErrAmbiguousType = errors.New("mysqlcdc: a column's type cannot be told: the table is gone from the catalog " +
	"or changed since, the stream has no description of the column, and MariaDB's binlog writes JSON as LONGTEXT, " +
	"INET4, INET6 and UUID as BINARY")

// utf8mb4Bin is the collation id of utf8mb4_bin, the collation of MariaDB's JSON (its alias
// takes no other).
const utf8mb4Bin = 46

// catalogOnlyCandidates names the types only the catalog tells that column i of a MariaDB table
// map (decoded as tc) may be: JSON for a LONGTEXT of utf8mb4_bin, INET4 for a BINARY(4),
// INET6 or UUID for a BINARY(16); "" for none.
func catalogOnlyCandidates(tm *replication.TableMapEvent, md *tmMeta, i int, tc *colCodec) string {
	switch {
	case tc.class == classText && tm.ColumnType[i] == mysql.MYSQL_TYPE_BLOB && tm.ColumnMeta[i] == 4 && md.collations[i] == utf8mb4Bin:
		return "LONGTEXT COLLATE utf8mb4_bin, or JSON"
	case tc.class == classBinary && tc.padTo == 4:
		return "BINARY(4), or INET4"
	case tc.class == classBinary && tc.padTo == 16:
		return "BINARY(16), or INET6 or UUID"
	}
	return ""
}

// tableMapKey identifies a table map's column layout, for caching schemas built from it.
func tableMapKey(id cdc.TableID, tm *replication.TableMapEvent) string {
	return fmt.Sprint(id.String(), tm.ColumnNameString(), tm.ColumnType, tm.ColumnMeta,
		tm.EnumStrValueString(), tm.SetStrValueString(), tm.SignednessBitmap, tm.DefaultCharset, tm.ColumnCharset,
		tm.EnumSetDefaultCharset, tm.EnumSetColumnCharset, tm.PrimaryKey)
}

// sameTableMap says whether two table maps describe the same columns the same way: each
// transaction brings a table map of its own, nearly always equal to the last one, and
// comparing bytes is much cheaper than checking one against the schema again.
func sameTableMap(a, b *replication.TableMapEvent) bool {
	return a.ColumnCount == b.ColumnCount && string(a.Schema) == string(b.Schema) && string(a.Table) == string(b.Table) &&
		string(a.ColumnType) == string(b.ColumnType) && slices.Equal(a.ColumnMeta, b.ColumnMeta) &&
		string(a.NullBitmap) == string(b.NullBitmap) && string(a.SignednessBitmap) == string(b.SignednessBitmap) &&
		slices.Equal(a.DefaultCharset, b.DefaultCharset) && slices.Equal(a.ColumnCharset, b.ColumnCharset) &&
		slices.Equal(a.EnumSetDefaultCharset, b.EnumSetDefaultCharset) && slices.Equal(a.EnumSetColumnCharset, b.EnumSetColumnCharset) &&
		sameByteLists(a.ColumnName, b.ColumnName) && sameLabelLists(a.EnumStrValue, b.EnumStrValue) &&
		sameLabelLists(a.SetStrValue, b.SetStrValue) && slices.Equal(a.PrimaryKey, b.PrimaryKey) &&
		slices.Equal(a.PrimaryKeyPrefix, b.PrimaryKeyPrefix) && slices.Equal(a.GeometryType, b.GeometryType) &&
		string(a.VisibilityBitmap) == string(b.VisibilityBitmap)
}

func sameByteLists(a, b [][]byte) bool {
	return slices.EqualFunc(a, b, func(x, y []byte) bool { return string(x) == string(y) })
}

func sameLabelLists(a, b [][][]byte) bool {
	return slices.EqualFunc(a, b, sameByteLists)
}
