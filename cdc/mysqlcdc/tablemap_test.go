package mysqlcdc

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/testenv"
)

// testCollations are collation ids of MariaDB 10.11 and their character sets, for readers
// that never query a server.
var testCollations = collations{8: "latin1", 9: "latin2", 11: "ascii", 33: "utf8mb3", 45: "utf8mb4", 46: "utf8mb4",
	47: "latin1", 48: "latin1", 63: "binary", 83: "utf8mb3", 192: "utf8mb3", 224: "utf8mb4", 2048: "utf8mb3", 2304: "utf8mb4"}

// TestTableMapWalksByFlavor reads the signedness and character set metadata of a table map
// (id INT, a YEAR, c SMALLINT UNSIGNED, d SMALLINT, g GEOMETRY, v VARCHAR) as each server
// writes it: MariaDB gives YEAR a signedness bit and GEOMETRY a collation, MySQL neither.
func TestTableMapWalksByFlavor(t *testing.T) {
	signedClasses := []class{classInt, classInt, classUint, classInt}
	tm := func(signedness []byte, def, cols []uint64) *replication.TableMapEvent {
		return &replication.TableMapEvent{ColumnCount: 6,
			ColumnType: []byte{mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_YEAR, mysql.MYSQL_TYPE_SHORT, mysql.MYSQL_TYPE_SHORT,
				mysql.MYSQL_TYPE_GEOMETRY, mysql.MYSQL_TYPE_VARCHAR},
			ColumnMeta:       []uint16{0, 0, 0, 0, 4, 40},
			SignednessBitmap: signedness, DefaultCharset: def, ColumnCharset: cols}
	}
	for _, c := range []struct {
		name       string
		flavor     Flavor
		tm         *replication.TableMapEvent
		unsigned   map[int]bool
		collations map[int]uint64
		classes    []class // of id, a, c, d
	}{
		// MariaDB: bits id=0 a=1 c=1 d=0; collations g=63 v=8.
		{"mariadb/column-charset", MariaDB, tm([]byte{0b0110_0000}, nil, []uint64{63, 8}),
			map[int]bool{0: false, 1: true, 2: true, 3: false}, map[int]uint64{4: 63, 5: 8}, signedClasses},
		{"mariadb/default-charset", MariaDB, tm([]byte{0b0110_0000}, []uint64{63, 1, 8}, nil),
			map[int]bool{0: false, 1: true, 2: true, 3: false}, map[int]uint64{4: 63, 5: 8}, signedClasses},
		// MySQL: bits id=0 c=1 d=0; collation v=8.
		{"mysql/column-charset", MySQL, tm([]byte{0b0100_0000}, nil, []uint64{8}),
			map[int]bool{0: false, 2: true, 3: false}, map[int]uint64{5: 8}, signedClasses},
		{"mysql/default-charset", MySQL, tm([]byte{0b0100_0000}, []uint64{8}, nil),
			map[int]bool{0: false, 2: true, 3: false}, map[int]uint64{5: 8}, signedClasses},
		// Metadata shorter than the columns need: what is there is read, no panic; without
		// signedness, every integer is signed.
		{"mariadb/short", MariaDB, tm([]byte{}, nil, []uint64{63}), nil, map[int]uint64{4: 63},
			[]class{classInt, classInt, classInt, classInt}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := unsignedMap(c.tm, c.flavor); !reflect.DeepEqual(got, c.unsigned) {
				t.Errorf("unsigned: %v, want %v", got, c.unsigned)
			}
			if got := collationMap(c.tm, c.flavor); !reflect.DeepEqual(got, c.collations) {
				t.Errorf("collations: %v, want %v", got, c.collations)
			}
			md := newTMMeta(c.tm, c.flavor, testCollations)
			for i, want := range c.classes {
				if _, codec, _ := tmColumn(c.tm, md, i, fmt.Sprint("c", i), nil); codec.class != want {
					t.Errorf("column %d: class %v, want %v", i, codec.class, want)
				}
			}
		})
	}
}

// metadataColumn is a column of TestTableMapMetadataMatchesCatalog: its definition and which of
// the table map's per-column lists MariaDB puts it in.
type metadataColumn struct {
	def       string
	numeric   bool // has a SIGNEDNESS bit
	character bool // has a collation in DEFAULT_CHARSET / COLUMN_CHARSET
}

// TestTableMapMetadataMatchesCatalog reads the table map MariaDB writes for a table mixing every
// column type -- YEARs between the numeric columns, character columns with distinct character
// sets after each column kind whose counting differs between servers -- and checks the
// metadata walks against INFORMATION_SCHEMA: each numeric column's signedness, each character
// column's collation (binary for the binary and spatial types), ENUM and SET labels, names;
// and that the table map agrees with the catalog's schema and rebuilds it column for column.
func TestTableMapMetadataMatchesCatalog(t *testing.T) {
	dsn := testenv.Require(t, testenv.MySQLDSN)
	user, pass, addr, db, err := splitDSN(dsn)
	if err != nil {
		t.Fatalf("%s: %v", testenv.MySQLDSN, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := client.ConnectWithContext(ctx, addr, user, pass, db, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.ReadTimeout, conn.WriteTimeout = 30*time.Second, 30*time.Second
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := fmt.Sprintf("tmmeta_%08x", binary.BigEndian.Uint32(rnd[:]))

	n, c, o := func(d string) metadataColumn { return metadataColumn{def: d, numeric: true} },
		func(d string) metadataColumn { return metadataColumn{def: d, character: true} },
		func(d string) metadataColumn { return metadataColumn{def: d} }
	cols := []metadataColumn{
		n("id INT NOT NULL PRIMARY KEY"), n("y0 YEAR"), n("ti TINYINT"), n("tiu TINYINT UNSIGNED"), o("bt BIT(5)"),
		n("si SMALLINT"), n("y1 YEAR"), n("siu SMALLINT UNSIGNED"), n("mi MEDIUMINT"), n("miu MEDIUMINT UNSIGNED"),
		n("i INT"), n("iu INT UNSIGNED"), n("bi BIGINT"), n("biu BIGINT UNSIGNED"), n("f FLOAT"), n("fu FLOAT UNSIGNED"),
		n("d DOUBLE"), n("du DOUBLE UNSIGNED"), n("dc DECIMAL(10,2)"), n("dcu DECIMAL(10,2) UNSIGNED"),
		o("dt DATE"), o("tm TIME(2)"), o("dtm DATETIME(3)"), o("ts TIMESTAMP NULL"), n("y2 YEAR"),
		c("c0 CHAR(3) CHARACTER SET latin1"), c("v0 VARCHAR(3) CHARACTER SET latin2"), c("bn BINARY(4)"), c("vb VARBINARY(4)"),
		c("tx TEXT CHARACTER SET ascii"), c("bl BLOB"), c("v1 VARCHAR(3) CHARACTER SET hebrew"), c("j JSON"),
		c("v2 VARCHAR(3) CHARACTER SET greek"), c("g GEOMETRY"), c("v3 VARCHAR(3) CHARACTER SET cp1250"), c("p POINT"),
		c("v4 VARCHAR(3) CHARACTER SET cp1251"), o("en ENUM('a','b c') CHARACTER SET latin1"), c("v5 VARCHAR(3) CHARACTER SET koi8r"),
		o("st SET('x','y') CHARACTER SET utf8mb4"), c("v6 VARCHAR(3) CHARACTER SET koi8u"), c("u UUID"),
		c("v7 VARCHAR(3) CHARACTER SET cp866"), c("i4 INET4"), c("v8 VARCHAR(3) CHARACTER SET swe7"), c("i6 INET6"),
		c("v9 VARCHAR(3) CHARACTER SET keybcs2"), n("y3 YEAR"), n("siu2 SMALLINT UNSIGNED"), n("si2 SMALLINT"),
		c("lt LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"), n("y4 YEAR"),
	}
	defs := make([]string, len(cols))
	for i, col := range cols {
		defs[i] = col.def
	}
	exec := func(q string, args ...any) *mysql.Result {
		t.Helper()
		r, err := conn.Execute(q, args...)
		if err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
		return r
	}
	exec(fmt.Sprintf("CREATE TABLE `%s` (%s) DEFAULT CHARSET=utf8mb4", name, strings.Join(defs, ", ")))
	defer func() { _, _ = conn.Execute("DROP TABLE IF EXISTS `" + name + "`") }()

	// The catalog: signedness from COLUMN_TYPE, collation ids through COLLATIONS.
	res := exec(`SELECT c.COLUMN_NAME, c.COLUMN_TYPE, IFNULL(k.ID, 63) FROM INFORMATION_SCHEMA.COLUMNS c
		LEFT JOIN INFORMATION_SCHEMA.COLLATIONS k ON k.COLLATION_NAME = c.COLLATION_NAME
		WHERE c.TABLE_SCHEMA = ? AND c.TABLE_NAME = ? ORDER BY c.ORDINAL_POSITION`, db, name)
	if res.RowNumber() != len(cols) {
		t.Fatalf("the catalog lists %d columns, want %d", res.RowNumber(), len(cols))
	}
	catUnsigned, catCollation := make([]bool, len(cols)), make([]uint64, len(cols))
	for i := range cols {
		typ, _ := res.GetString(i, 1)
		catUnsigned[i] = strings.Contains(strings.ToLower(typ), "unsigned")
		catCollation[i], _ = res.GetUint(i, 2)
	}

	file, pos, _, err := binlogStatus(conn)
	if err != nil {
		t.Fatal(err)
	}
	exec(fmt.Sprintf("INSERT INTO `%s` (id) VALUES (1)", name))

	src, err := New(addr, user, pass, []TableName{{Database: db, Table: name}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cat := &catalog{src: src}
	defer cat.close()
	tbl, err := cat.load(ctx, src.tableID(TableName{Database: db, Table: name}))
	if err != nil {
		t.Fatal(err)
	}

	var rid [4]byte
	_, _ = rand.Read(rid[:])
	syncer := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{
		ServerID: 1<<24 + binary.BigEndian.Uint32(rid[:])%(1<<30),
		Flavor:   string(MariaDB), Host: src.host, Port: src.port, User: user, Password: pass,
		Logger: libraryLogger(src.log),
	})
	defer syncer.Close()
	streamer, err := syncer.StartSync(mysql.Position{Name: file, Pos: pos})
	if err != nil {
		t.Fatal(err)
	}
	var tm *replication.TableMapEvent
	for tm == nil {
		ev, err := streamer.GetEvent(ctx)
		if err != nil {
			t.Fatalf("no table map of %s: %v", name, err)
		}
		if e, ok := ev.Event.(*replication.TableMapEvent); ok && string(e.Table) == name {
			tm = e
		}
	}
	if int(tm.ColumnCount) != len(cols) || len(tm.ColumnName) != len(cols) {
		t.Fatalf("table map of %d columns, %d names; want %d (is binlog_row_metadata FULL?)", tm.ColumnCount, len(tm.ColumnName), len(cols))
	}

	unsigned, collations := unsignedMap(tm, MariaDB), collationMap(tm, MariaDB)
	names := tm.ColumnNameString()
	for i, col := range cols {
		colName := tbl.schema.Columns[i].Name
		if names[i] != colName {
			t.Errorf("column %d: the table map names it %q, the catalog %q", i, names[i], colName)
		}
		u, hasBit := unsigned[i]
		switch {
		case hasBit != col.numeric:
			t.Errorf("column %s: signedness bit %v, want %v", colName, hasBit, col.numeric)
		case !col.numeric:
		case strings.HasPrefix(col.def, colName+" YEAR"):
			if !u {
				t.Errorf("column %s: MariaDB writes YEAR as UNSIGNED, the walk read signed", colName)
			}
		case u != catUnsigned[i]:
			t.Errorf("column %s: the table map says unsigned=%v, the catalog %v", colName, u, catUnsigned[i])
		}
		k, hasCollation := collations[i]
		switch {
		case hasCollation != col.character:
			t.Errorf("column %s: collation listed %v, want %v", colName, hasCollation, col.character)
		case col.character && k != catCollation[i]:
			t.Errorf("column %s: the table map's collation %d, the catalog's %d", colName, k, catCollation[i])
		}
	}
	cs, err := cat.collations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	md := newTMMeta(tm, MariaDB, cs)
	if len(md.unknown) > 0 {
		t.Errorf("collation ids the server does not list: %v", md.unknown)
	}
	for i := range cols {
		if lab := tbl.codecs[i].labels; lab != nil {
			got := md.enums[i]
			if got == nil {
				got = md.sets[i]
			}
			if !reflect.DeepEqual(got, lab) {
				t.Errorf("column %s: table map labels %q, the catalog's %q", tbl.schema.Columns[i].Name, got, lab)
			}
		}
	}
	if !tbl.agrees(tm, MariaDB, cs) {
		for i := range tbl.codecs {
			ccol := &tbl.schema.Columns[i]
			tcol, tc, err := tmColumn(tm, md, i, ccol.Name, ccol)
			if err != nil || !compatible(ccol, &tbl.codecs[i], &tcol, &tc) {
				// Listed, with what each side says, before the test stops.
				t.Errorf("column %s: the table map describes %v (%+v), the catalog %v (%+v)", ccol.Name, tc.class, tcol, tbl.codecs[i].class, *ccol)
			}
		}
		t.Fatal("the table map does not agree with the catalog's schema")
	}
	// The schema rebuilt from the table map alone (as for an image older than a DDL) has the
	// catalog's kinds.
	rebuilt, err := fromTableMap(&table{schema: tbl.schema, codecs: make([]colCodec, len(tbl.codecs))}, tm, MariaDB, cs)
	if err != nil || rebuilt == nil {
		t.Fatalf("no schema rebuilt from the table map: %v", err)
	}
	for i, col := range rebuilt.schema.Columns {
		want := tbl.schema.Columns[i]
		if col.Kind != want.Kind && !isCatalogOnly(want.Kind) || col.Bits != want.Bits || col.Charset != want.Charset && !isCatalogOnly(want.Kind) {
			t.Errorf("column %s rebuilt from the table map: %v bits %d charset %q; the catalog's %v bits %d charset %q",
				col.Name, col.Kind, col.Bits, col.Charset, want.Kind, want.Bits, want.Charset)
		}
	}
	// Rebuilt without descriptions, the columns of the types only the catalog tells -- and the
	// BINARY(4), which the binlog cannot tell from an INET4 -- are named ambiguous, no other.
	if !errors.Is(rebuilt.ambiguous, ErrAmbiguousType) {
		t.Fatalf("rebuilt without descriptions: ambiguous %v", rebuilt.ambiguous)
	}
	for _, name := range []string{"j", "bn", "u", "i4", "i6"} {
		if !strings.Contains(rebuilt.ambiguous.Error(), fmt.Sprintf("column %q (", name)) {
			t.Errorf("column %s not named ambiguous: %v", name, rebuilt.ambiguous)
		}
	}
	for _, col := range rebuilt.schema.Columns {
		if n := col.Name; !slices.Contains([]string{"j", "bn", "u", "i4", "i6"}, n) && strings.Contains(rebuilt.ambiguous.Error(), fmt.Sprintf("column %q (", n)) {
			t.Errorf("column %s named ambiguous: %v", n, rebuilt.ambiguous)
		}
	}
}

// isCatalogOnly says whether a kind is one only the catalog tells (the binlog has MariaDB's JSON
// as LONGTEXT, its UUID, INET4 and INET6 as BINARY).
func isCatalogOnly(k cdc.Kind) bool {
	return k == cdc.KindJSON || k == cdc.KindUUID || k == cdc.KindOther
}

// TestTableMapAgreesCharsetAndKey: a description agrees with a table map only with the same
// character sets (latin1 text is not utf8mb4 text) and, where it has a primary key, the same
// key; a rebuilt schema takes the table map's character set and key; a collation id the
// server does not list is refused (errUnknownCollation), never decoded as utf8mb4.
func TestTableMapAgreesCharsetAndKey(t *testing.T) {
	tm := func(collation uint64, pk ...uint64) *replication.TableMapEvent {
		return &replication.TableMapEvent{ColumnCount: 3, Schema: []byte("d"), Table: []byte("t"),
			ColumnType: []byte{mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_BLOB, mysql.MYSQL_TYPE_VARCHAR},
			ColumnMeta: []uint16{0, 4, 80}, ColumnCharset: []uint64{collation, collation},
			ColumnName: [][]byte{[]byte("k1"), []byte("c3"), []byte("v")}, PrimaryKey: pk}
	}
	desc := func(cs string, pk ...int) *table {
		tb := &table{schema: &cdc.TableSchema{ID: cdc.TableID{Database: "d", Table: "t"}, PrimaryKey: pk}}
		for _, c := range [][5]string{{"k1", "int", "int(11)", "", ""}, {"c3", "longtext", "longtext", cs, ""}, {"v", "varchar", "varchar(20)", cs, ""}} {
			col, codec := describeColumn(c[0], c[1], c[2], c[3], 20, 10, 0, 0)
			codec.prepare()
			tb.schema.Columns = append(tb.schema.Columns, col)
			tb.codecs = append(tb.codecs, codec)
		}
		return tb
	}
	const latin1, utf8mb4 = 8, 45
	if !desc("latin1", 0).agrees(tm(latin1, 0), MariaDB, testCollations) {
		t.Error("the same description does not agree")
	}
	if desc("utf8mb4", 0).agrees(tm(latin1, 0), MariaDB, testCollations) {
		t.Error("a utf8mb4 description agrees with latin1 columns")
	}
	if desc("latin1", 1).agrees(tm(latin1, 0), MariaDB, testCollations) {
		t.Error("a description keyed by v agrees with a table map keyed by k1")
	}
	if !desc("latin1").agrees(tm(latin1, 0), MariaDB, testCollations) {
		// MariaDB names a UNIQUE NOT NULL index the key of a table the catalog says has none.
		t.Error("a description without a key does not agree")
	}
	p, err := fromTableMap(desc("utf8mb4", 1), tm(latin1, 0), MariaDB, testCollations)
	if err != nil || p == nil {
		t.Fatalf("rebuilt: %v", err)
	}
	if p.schema.Columns[1].Charset != "latin1" || p.schema.Columns[2].Charset != "latin1" || p.codecs[2].charset != "latin1" ||
		!reflect.DeepEqual(p.schema.PrimaryKey, []int{0}) {
		t.Errorf("rebuilt from a latin1 table map: %+v key %v", p.schema.Columns, p.schema.PrimaryKey)
	}
	if got, _ := p.codecs[2].fromBinlog([]byte("caf\xe9")); got != "café" {
		t.Errorf("latin1 VARCHAR decoded as %q", got)
	}
	if !desc("utf8mb4", 0).agrees(tm(utf8mb4, 0), MariaDB, testCollations) {
		t.Error("utf8mb4 does not agree")
	}
	const unlisted = 4000
	if desc("latin1", 0).agrees(tm(unlisted, 0), MariaDB, testCollations) {
		t.Error("a table map with an unlisted collation agrees")
	}
	if _, err := fromTableMap(desc("latin1", 0), tm(unlisted, 0), MariaDB, testCollations); !errors.Is(err, errUnknownCollation) {
		t.Errorf("rebuilt with an unlisted collation: %v", err)
	}
	// Without a catalog column or a collation, a character column's set is not guessed.
	bare := tm(latin1, 0)
	bare.ColumnCharset = nil
	if _, err := fromTableMap(&table{schema: &cdc.TableSchema{}}, bare, MariaDB, testCollations); !errors.Is(err, errUnknownCollation) {
		t.Errorf("rebuilt without collations: %v", err)
	}
}

// TestTableMapTypesOnlyTheCatalogTells: a MariaDB table map has JSON as a LONGTEXT of
// utf8mb4_bin, INET4 as BINARY(4), INET6 and UUID as BINARY(16). Rebuilt without a description
// of such a column, the schema says its type cannot be told (ErrAmbiguousType, naming the
// columns and no value); with one (JSON, INET4, or the plain type itself) it does not, nor for
// other lengths, character sets or MySQL, whose binlog has a JSON type.
func TestTableMapTypesOnlyTheCatalogTells(t *testing.T) {
	const binary, latin1 = 63, 8
	tm := &replication.TableMapEvent{ColumnCount: 6, Schema: []byte("d"), Table: []byte("t"),
		ColumnType: []byte{mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_BLOB, mysql.MYSQL_TYPE_STRING, mysql.MYSQL_TYPE_STRING,
			mysql.MYSQL_TYPE_BLOB, mysql.MYSQL_TYPE_STRING},
		ColumnMeta:    []uint16{0, 4, 0xfe04, 0xfe10, 4, 0xfe08},
		ColumnCharset: []uint64{utf8mb4Bin, binary, binary, latin1, binary},
		ColumnName:    [][]byte{[]byte("k"), []byte("j"), []byte("ip"), []byte("u"), []byte("lt"), []byte("b8")}, PrimaryKey: []uint64{0}}
	bare := &table{schema: &cdc.TableSchema{ID: cdc.TableID{Database: "d", Table: "t"}}}
	p, err := fromTableMap(bare, tm, MariaDB, testCollations)
	if err != nil || p == nil {
		t.Fatalf("rebuilt: %v", err)
	}
	if !errors.Is(p.ambiguous, ErrAmbiguousType) {
		t.Fatalf("rebuilt without descriptions: ambiguous %v", p.ambiguous)
	}
	msg := p.ambiguous.Error()
	for _, want := range []string{`"j" (LONGTEXT COLLATE utf8mb4_bin, or JSON)`, `"ip" (BINARY(4), or INET4)`, `"u" (BINARY(16), or INET6 or UUID)`} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not name %s", msg, want)
		}
	}
	for _, not := range []string{`"k"`, `"lt"`, `"b8"`} {
		if strings.Contains(msg, not) {
			t.Errorf("%q names %s, which the table map tells", msg, not)
		}
	}
	// The values still decode as the table map has them: they go to the dead letter.
	if got, _ := p.codecs[2].fromBinlog([]byte{10, 1, 2, 3}); got == nil {
		t.Error("BINARY(4) value not decoded")
	}

	described := &table{schema: &cdc.TableSchema{ID: bare.schema.ID}}
	for _, c := range [][3]string{{"k", "int", "int(11)"}, {"j", "longtext", "longtext"}, {"ip", "inet4", "inet4"}, {"u", "binary", "binary(16)"}} {
		col, codec := describeColumn(c[0], c[1], c[2], "", 16, 0, 0, 0)
		if c[0] == "j" {
			col.Kind, codec = cdc.KindJSON, colCodec{kind: cdc.KindJSON, class: classJSON} // as the catalog reads json_valid()
		}
		codec.prepare()
		described.schema.Columns = append(described.schema.Columns, col)
		described.codecs = append(described.codecs, codec)
	}
	if p, err := fromTableMap(described, tm, MariaDB, testCollations); err != nil || p.ambiguous != nil {
		t.Errorf("rebuilt with descriptions of j, ip and u: %v, ambiguous %v", err, p.ambiguous)
	} else if p.codecs[1].class != classJSON || p.codecs[2].class != classInet4 || p.codecs[3].class != classBinary {
		t.Errorf("rebuilt with descriptions: classes %v %v %v", p.codecs[1].class, p.codecs[2].class, p.codecs[3].class)
	}
	if p, err := fromTableMap(bare, tm, MySQL, testCollations); err != nil || p.ambiguous != nil {
		t.Errorf("rebuilt for MySQL: %v, ambiguous %v", err, p.ambiguous)
	}
}
