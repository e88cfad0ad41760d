package sink

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/mysqlcdc"
	"github.com/tributary-dev/tributary/internal/estest"
	"github.com/tributary-dev/tributary/internal/testenv"
	"github.com/tributary-dev/tributary/statestore"
)

var (
	digits60  = strings.Repeat("1234567890", 6) + "." + strings.Repeat("9", 10)
	digits400 = "-9" + strings.Repeat("0", 399) // beyond a double's range ("1e400" as digits)
)

// searchIDs runs a query and returns the _ids it matches.
func (s *mappingServer) searchIDs(t *testing.T, index, query string) []string {
	t.Helper()
	status, b := s.call(t, esapi.SearchRequest{Index: []string{index}, Body: strings.NewReader(`{"size":100,"query":` + query + `}`)})
	if status != http.StatusOK {
		t.Fatalf("search %s: %d %s", query, status, b)
	}
	var res struct {
		Hits struct {
			Hits []struct {
				ID string `json:"_id"`
			} `json:"hits"`
		} `json:"hits"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, h := range res.Hits.Hits {
		ids = append(ids, h.ID)
	}
	slices.Sort(ids)
	return ids
}

// TestMappingServerUnparsableValues pins what both engines do with the values the sink writes
// as text because no number or date holds them -- NaN, the infinities, decimals beyond a
// double's range, PostgreSQL's infinite, BC and five-digit-year dates -- in the generated
// fields (all with ignore_malformed): the document is created and _source is exact; the
// numeric or date field leaves the value out (an exists query does not find it); a keyword
// field and the keyword sub-field "exact" index the text (a term query finds it); a numeric
// sub-field "approx" indexes a wide decimal a double can hold. scaled_float only on OpenSearch
// (Elasticsearch's test build lacks it).
func TestMappingServerUnparsableValues(t *testing.T) {
	mappingServers(t, func(t *testing.T, s *mappingServer) {
		t.Parallel()
		cols := []struct {
			col cdc.Column
			o   MappingOptions
		}{
			{cdc.Column{Name: "id", Kind: cdc.KindInt, Bits: 64}, MappingOptions{}},
			{cdc.Column{Name: "dd", Kind: cdc.KindDecimal, Precision: 12, Scale: 2}, MappingOptions{DecimalAs: DecimalDouble}},
			{cdc.Column{Name: "dk", Kind: cdc.KindDecimal, Precision: 12, Scale: 2}, MappingOptions{DecimalAs: DecimalKeyword}},
			{cdc.Column{Name: "wide", Kind: cdc.KindDecimal, Precision: 38, Scale: 10}, MappingOptions{}},
			{cdc.Column{Name: "unb", Kind: cdc.KindDecimal}, MappingOptions{}},
			{cdc.Column{Name: "f4", Kind: cdc.KindFloat, Bits: 32}, MappingOptions{}},
			{cdc.Column{Name: "f8", Kind: cdc.KindFloat, Bits: 64}, MappingOptions{}},
			{cdc.Column{Name: "d", Kind: cdc.KindDate}, MappingOptions{}},
			{cdc.Column{Name: "dt", Kind: cdc.KindDateTime}, MappingOptions{}},
			{cdc.Column{Name: "ts", Kind: cdc.KindTimestamp}, MappingOptions{}},
		}
		if s.engine == OpenSearch {
			cols = append(cols, struct {
				col cdc.Column
				o   MappingOptions
			}{cdc.Column{Name: "sc", Kind: cdc.KindDecimal, Precision: 12, Scale: 2}, MappingOptions{}})
		}
		sch := &cdc.TableSchema{}
		props := map[string]json.RawMessage{}
		for _, c := range cols {
			sch.Columns = append(sch.Columns, c.col)
			m, err := FieldMapping(&c.col, c.o)
			if err != nil {
				t.Fatal(err)
			}
			props[c.col.Name] = m
		}
		mapping, _ := json.Marshal(map[string]any{"properties": props})
		index := s.prefix + "-unparsable"
		if status, b := s.createIndex(t, index, mapping); status != http.StatusOK {
			t.Fatalf("create: %d %s", status, b)
		}
		guards := guardsFor(sch, props, MappingOptions{})
		rows := map[string][]cdc.Value{
			"nan":  {int64(1), "NaN", "NaN", "NaN", "NaN", math.NaN(), math.NaN(), "infinity", "0044-03-15 12:00:00 BC", "-infinity", "NaN"},
			"inf":  {int64(2), "Infinity", "Infinity", "Infinity", "Infinity", math.Inf(1), math.Inf(1), "2000-01-01 BC", "10000-01-01 00:00:00", "infinity", "Infinity"},
			"ninf": {int64(3), "-Infinity", "-Infinity", "-Infinity", "-Infinity", math.Inf(-1), math.Inf(-1), "10000-01-01", nil, nil, "-Infinity"},
			"wide": {int64(4), digits60, digits60, digits60, digits400, 1.5, 2.5, "2024-02-29", "2024-02-29 01:02:03", cdc.EpochMicros(0), "12.50"},
		}
		for id, r := range rows {
			r = r[:len(sch.Columns)]
			doc, err := appendDocument(nil, sch, r, MappingOptions{}, guards)
			if err != nil {
				t.Fatalf("row %s: %v", id, err)
			}
			status, b := s.call(t, esapi.IndexRequest{Index: index, DocumentID: id, Body: bytes.NewReader(doc), Refresh: "true"})
			if status != http.StatusCreated {
				t.Fatalf("row %s: %d %s", id, status, b)
			}
			if got := s.GetDoc(t, index, id).Source; !bytes.Equal(got, doc) {
				t.Errorf("row %s _source:\n got %s\nwant %s", id, got, doc)
			}
		}
		exists := func(field string) []string { return s.searchIDs(t, index, `{"exists":{"field":"`+field+`"}}`) }
		term := func(field, v string) []string {
			q, _ := json.Marshal(map[string]any{"term": map[string]string{field: v}})
			return s.searchIDs(t, index, string(q))
		}
		want := func(what string, got []string, ids ...string) {
			t.Helper()
			slices.Sort(ids)
			if !slices.Equal(got, ids) {
				t.Errorf("%s: %v, want %v", what, got, ids)
			}
		}
		// The numeric and date fields leave every unparsable value out.
		for _, f := range []string{"dd", "wide.approx", "f4", "f8"} {
			want("exists "+f, exists(f), "wide")
		}
		want("exists unb.approx", exists("unb.approx")) // -9e399 is beyond a double
		for _, f := range []string{"d", "dt", "ts"} {
			want("exists "+f, exists(f), "wide")
		}
		// The text stays searchable where a keyword holds it.
		want("dd.exact NaN", term("dd.exact", "NaN"), "nan")
		want("dk Infinity", term("dk", "Infinity"), "inf")
		want("wide -Infinity", term("wide", "-Infinity"), "ninf")
		want("wide 60 digits", term("wide", digits60), "wide")
		want("unb 400 digits", term("unb", digits400), "wide")
		want("dd.exact 60 digits", term("dd.exact", digits60), "wide")
		if s.engine == OpenSearch {
			want("exists sc", exists("sc"), "wide")
			want("sc.exact NaN", term("sc.exact", "NaN"), "nan")
			want("sc range", s.searchIDs(t, index, `{"range":{"sc":{"gte":12.5,"lte":12.5}}}`), "wide")
		}
		// The wide decimal's approx sub-field serves ranges.
		want("wide.approx range", s.searchIDs(t, index, `{"range":{"wide.approx":{"gte":1.2e59}}}`), "wide")
	})
}

// decimalSchema is a table of the decimal, float and date columns issue 13 is about.
func decimalSchema(table string, withScaled bool) *cdc.TableSchema {
	sch := &cdc.TableSchema{
		ID: cdc.TableID{Connector: "postgres", Source: "shop", Database: "shop", Schema: "public", Table: table},
		Columns: []cdc.Column{
			{Name: "id", Kind: cdc.KindInt, Bits: 64, SourceType: "bigint"},
			{Name: "d20_6", Kind: cdc.KindDecimal, Precision: 20, Scale: 6, SourceType: "numeric(20,6)", Nullable: true},
			{Name: "d38_10", Kind: cdc.KindDecimal, Precision: 38, Scale: 10, SourceType: "numeric(38,10)", Nullable: true},
			{Name: "dn", Kind: cdc.KindDecimal, SourceType: "numeric", Nullable: true},
			{Name: "f8", Kind: cdc.KindFloat, Bits: 64, SourceType: "double precision", Nullable: true},
			{Name: "day", Kind: cdc.KindDate, SourceType: "date", Nullable: true},
			{Name: "ts", Kind: cdc.KindTimestamp, SourceType: "timestamptz", Nullable: true},
		},
		PrimaryKey: []int{0},
	}
	if withScaled {
		sch.Columns = append(sch.Columns, cdc.Column{Name: "d12_2", Kind: cdc.KindDecimal, Precision: 12, Scale: 2,
			SourceType: "numeric(12,2)", Nullable: true})
	}
	return sch
}

// decimalRows are values the old sink dead-lettered: beyond 2^53 units, wider than a double,
// NaN and the infinities, infinite and BC dates. The JSON each column's _source must hold is
// the source's text exactly (floats: the strings for NaN and the infinities).
func decimalRows(withScaled bool) (rows [][]cdc.Value, want []map[string]string) {
	rows = [][]cdc.Value{
		{int64(1), "9007199254.740993", "1234567890123456789012345678.1234567890", digits60, 0.1, "2026-11-30", cdc.EpochMicros(1700000000123456), "9999999999.99"},
		{int64(2), "-99999999999999.999999", "-0.0000000001", "NaN", math.NaN(), "infinity", "-infinity", "NaN"},
		{int64(3), "NaN", "NaN", "Infinity", math.Inf(1), "2000-01-01 BC", "infinity", "-0.01"},
		{int64(4), nil, nil, "-Infinity", math.Inf(-1), "-infinity", nil, nil},
	}
	want = []map[string]string{
		{"d20_6": "9007199254.740993", "d38_10": "1234567890123456789012345678.1234567890", "dn": digits60, "day": "2026-11-30", "d12_2": "9999999999.99"},
		{"d20_6": "-99999999999999.999999", "d38_10": "-0.0000000001", "dn": "NaN", "f8": "NaN", "day": "infinity", "ts": "-infinity", "d12_2": "NaN"},
		{"d20_6": "NaN", "d38_10": "NaN", "dn": "Infinity", "f8": "Infinity", "day": "2000-01-01 BC", "ts": "infinity", "d12_2": "-0.01"},
		{"dn": "-Infinity", "f8": "-Infinity", "day": "-infinity"},
	}
	if !withScaled {
		for i := range rows {
			rows[i] = rows[i][:7]
			delete(want[i], "d12_2")
		}
	}
	return rows, want
}

// checkDecimalDocs checks that each document's _source holds the wanted text exactly.
func checkDecimalDocs(t *testing.T, docs map[string]map[string]any, ids []string, want []map[string]string) {
	t.Helper()
	for i, id := range ids {
		d := docs[id]
		if d == nil {
			t.Errorf("document %s missing", id)
			continue
		}
		for f, w := range want[i] {
			if got, ok := d[f].(string); !ok || got != w {
				t.Errorf("document %s field %s: %v, want the string %q", id, f, d[f], w)
			}
		}
	}
}

// TestSinkDecimalsServer (issue 13, items 1 and 3) writes the values the old sink dead-lettered
// through the real Sink, as snapshot reads and as streamed inserts and updates, under each
// decimal option the engine supports (scaled_float, the default, only on OpenSearch): no dead
// letter, and every document's _source holds the source's digits exactly.
func TestSinkDecimalsServer(t *testing.T) {
	engines(t, func(t *testing.T, s *server) {
		options := []string{"keyword", "double"}
		if s.Engine == estest.OpenSearch {
			options = append(options, "")
		}
		for _, opt := range options {
			t.Run("decimal_"+opt, func(t *testing.T) {
				withScaled := opt == "" // numeric(12,2) maps to scaled_float only by default
				cfg := s.config("dec" + opt)
				cfg.Mapping = MappingConfig{Decimal: opt, Uint64: "keyword"}
				k := s.sink(t, cfg, nil, nil)
				sch := decimalSchema("decimals", withScaled)
				rows, want := decimalRows(withScaled)
				var snapshot, stream []cdc.Event
				for i, r := range rows {
					snapshot = append(snapshot, ev(cdc.Read, sch, int64(1+i), nil, r))
					streamed := append([]cdc.Value{r[0].(int64) + 10}, r[1:]...)
					stream = append(stream, ev(cdc.Insert, sch, int64(100+i), nil, streamed))
					// An update carrying the same values in a newer version, as after DDL.
					stream = append(stream, ev(cdc.Update, sch, int64(200+i), nil, r))
				}
				if dead := write(t, k, snapshot); len(dead) != 0 {
					t.Fatalf("snapshot: dead letters %+v", dead)
				}
				if dead := write(t, k, stream); len(dead) != 0 {
					t.Fatalf("stream: dead letters %+v", dead)
				}
				idx, err := IndexName(k.cfg.Index, sch.ID)
				if err != nil {
					t.Fatal(err)
				}
				ids := []string{"1", "2", "3", "4", "11", "12", "13", "14"}
				docs, vers := s.docs(t, idx, ids)
				checkDecimalDocs(t, docs, ids, append(want, want...))
				if vers["1"] != 200 || vers["11"] != 100 {
					t.Fatalf("versions %v: the stream did not overwrite the snapshot", vers)
				}
			})
		}
	})
}

// TestSinkGuardWidenedColumnServer: on OpenSearch (scaled_float), a column created as
// numeric(10,2) and widened to numeric(12,4) keeps its scaled_float with factor 100; the
// value with 4 fractional digits is dead-lettered with a reason naming the column, the
// values the field holds exactly are written.
func TestSinkGuardWidenedColumnServer(t *testing.T) {
	engines(t, func(t *testing.T, s *server) {
		if s.Engine != estest.OpenSearch {
			t.Skip("scaled_float: OpenSearch only (Elasticsearch's test build lacks it)")
		}
		k := s.sink(t, s.config("widen"), nil, nil)
		narrow := priceSchema("orders", 10, 2)
		if dead := write(t, k, []cdc.Event{ev(cdc.Insert, narrow, 1, nil, priceRow(1, "12.50"))}); len(dead) != 0 {
			t.Fatalf("dead letters %+v", dead)
		}
		wide := priceSchema("orders", 12, 4)
		dead := write(t, k, []cdc.Event{ev(cdc.Update, wide, 2, nil, priceRow(1, "1.2345")), ev(cdc.Insert, wide, 3, nil, priceRow(2, "1.2300"))})
		if len(dead) != 1 || dead[0].Index != 0 || !strings.Contains(dead[0].Reason, `column "price"`) || !strings.Contains(dead[0].Reason, "scaled_float") {
			t.Fatalf("dead letters %+v, want event 0 refused for its price", dead)
		}
		docs, _ := s.docs(t, indexOf(t, k, "orders"), []string{"1", "2"})
		if docs["1"]["price"] != "12.50" || docs["2"]["price"] != "1.2300" {
			t.Fatalf("documents %v", docs)
		}
	})
}

// TestSinkPostgresDecimalsPipeline runs the columns from a real PostgreSQL through the
// cdc.Runner: numeric(20,6), numeric(38,10) and unbounded numeric beyond 2^53 units, NaN and
// the infinities, double precision NaN and infinities, infinite and BC dates and timestamps,
// by snapshot and by stream. Nothing is dead-lettered and _source holds PostgreSQL's text.
func TestSinkPostgresDecimalsPipeline(t *testing.T) {
	engines(t, func(t *testing.T, s *server) {
		dsn := testenv.Require(t, testenv.PostgresDSN)
		sfx := estest.RandomHex(t, 5)
		table := "snk_dec_" + sfx
		pgExec(t, dsn, `CREATE TABLE `+table+` (id bigint PRIMARY KEY, d20_6 numeric(20,6), d38_10 numeric(38,10),
			dn numeric, f8 double precision, day date, ts timestamptz, d12_2 numeric(12,2))`)
		values := []string{
			`(%d, 9007199254.740993, 1234567890123456789012345678.1234567890, ` + digits60 + `, 0.1, '2026-11-30', '2023-11-14 22:13:20.123456+00', 9999999999.99)`,
			`(%d, -99999999999999.999999, -0.0000000001, 'NaN', 'NaN', 'infinity', '-infinity', 'NaN')`,
			`(%d, 'NaN', 'NaN', 'Infinity', 'Infinity', '2000-01-01 BC', 'infinity', -0.01)`,
			`(%d, NULL, NULL, '-Infinity', '-Infinity', '-infinity', NULL, NULL)`,
		}
		insert := func(base int) string {
			var vs []string
			for i, v := range values {
				vs = append(vs, strings.Replace(v, "%d", strconv.Itoa(base+i), 1))
			}
			return `INSERT INTO ` + table + ` VALUES ` + strings.Join(vs, ", ")
		}
		pgExec(t, dsn, insert(1))
		src := pgSource(t, dsn, "snk_"+sfx, table)
		cfg := s.config("pgdec")
		if s.Engine == estest.Elasticsearch {
			cfg.Mapping = MappingConfig{Decimal: "keyword", Uint64: "keyword"}
		}
		k, done, stop := runPipelineConfig(t, s, src, statestore.NewMemory(), cfg)
		defer stop()
		idx, err := IndexName(k.cfg.Index, cdc.TableID{Database: "postgres", Schema: "public", Table: table})
		if err != nil {
			t.Fatal(err)
		}
		ids := []string{"1", "2", "3", "4", "11", "12", "13", "14"}
		waitDocs(t, s, done, idx, ids, "snapshot", func(d map[string]map[string]any) bool { return len(d) == 4 })
		pgExec(t, dsn, insert(11))
		docs := waitDocs(t, s, done, idx, ids, "stream", func(d map[string]map[string]any) bool { return len(d) == 8 })
		_, want := decimalRows(true)
		checkDecimalDocs(t, docs, ids, append(want, want...))
		for _, id := range []string{"1", "11"} {
			if got := jsonNum(docs[id]["ts"]); got != "1700000000123.456" {
				t.Errorf("document %s ts %s", id, got)
			}
		}
		k.dlqForTest.mu.Lock()
		defer k.dlqForTest.mu.Unlock()
		if len(k.dlqForTest.recs) != 0 {
			t.Fatalf("dead letters: %v", k.dlqForTest.recs[0].Reason)
		}
	})
}

// TestSinkMariaDBDecimalsPipeline is the issue's own case from MariaDB: DECIMAL(20,6) values
// from 9007199254.740993 on (beyond 2^53 millionths), DECIMAL(65,30) at its limits and a
// DECIMAL(10,2), by snapshot and by binlog, under decimal: keyword on Elasticsearch (the
// README's advice for its test build) and the default mapping on OpenSearch.
func TestSinkMariaDBDecimalsPipeline(t *testing.T) {
	engines(t, func(t *testing.T, s *server) {
		m := mysqlServer(t)
		table := "snk_dec_" + estest.RandomHex(t, 5)
		m.exec(t, "CREATE TABLE "+table+` (id INT PRIMARY KEY, d20_6 DECIMAL(20,6), d65_30 DECIMAL(65,30), d10_2 DECIMAL(10,2))`)
		t.Cleanup(func() { m.exec(t, "DROP TABLE IF EXISTS "+table) })
		max65 := strings.Repeat("9", 35) + "." + strings.Repeat("9", 30)
		want := []map[string]string{
			{"d20_6": "9007199254.740993", "d65_30": "-" + max65, "d10_2": "99999999.99"},
			{"d20_6": "-99999999999999.999999", "d65_30": "0.000000000000000000000000000001", "d10_2": "-0.01"},
			{"d20_6": "90071992547409.930000", "d65_30": "12345678901234567890.123456789012345678901234567890", "d10_2": "0.00"},
		}
		insert := func(base int) string {
			var vs []string
			for i, w := range want {
				vs = append(vs, "("+strconv.Itoa(base+i)+", "+w["d20_6"]+", "+w["d65_30"]+", "+w["d10_2"]+")")
			}
			return "INSERT INTO " + table + " VALUES " + strings.Join(vs, ", ")
		}
		m.exec(t, insert(1))
		src, err := mysqlcdc.New(m.addr, m.user, m.pass, []mysqlcdc.TableName{{Database: m.db, Table: table}}, &mysqlcdc.Options{SourceName: "shop", ServerID: 1<<24 + uint32(time.Now().UnixNano()%(1<<29))})
		if err != nil {
			t.Fatal(err)
		}
		k, done, stop := runPipeline(t, s, src, statestore.NewMemory(), "mydec")
		defer stop()
		idx, err := IndexName(k.cfg.Index, cdc.TableID{Database: m.db, Table: table})
		if err != nil {
			t.Fatal(err)
		}
		ids := []string{"1", "2", "3", "11", "12", "13"}
		waitDocs(t, s, done, idx, ids, "snapshot", func(d map[string]map[string]any) bool { return len(d) == 3 })
		m.exec(t, insert(11))
		docs := waitDocs(t, s, done, idx, ids, "binlog", func(d map[string]map[string]any) bool { return len(d) == 6 })
		checkDecimalDocs(t, docs, ids, append(want, want...))
		k.dlqForTest.mu.Lock()
		defer k.dlqForTest.mu.Unlock()
		if len(k.dlqForTest.recs) != 0 {
			t.Fatalf("dead letters: %v", k.dlqForTest.recs[0].Reason)
		}
	})
}
