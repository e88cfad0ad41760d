package sink

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/internal/estest"
)

// These tests create indices directly with GenerateMapping's output (no fence: the mapping and
// the documents are under test here, not ownership), index AppendDocument's bytes and read
// them back. Index names are unique per run and deleted afterwards.

type mappingServer struct {
	*estest.Node
	engine Engine
	prefix string
}

func mappingServers(t *testing.T, fn func(t *testing.T, s *mappingServer)) {
	estest.EachEngine(t, func(t *testing.T, n *estest.Node) {
		e := Elasticsearch
		if n.Engine == estest.OpenSearch {
			e = OpenSearch
		}
		fn(t, &mappingServer{Node: n, engine: e, prefix: estest.UniqueName(t, "sink-a")})
	})
}

// call performs a request and returns its status and body.
func (s *mappingServer) call(t *testing.T, req esapi.Request) (int, []byte) {
	t.Helper()
	r := s.Do(t, req)
	return r.Status, r.Body
}

// createIndex creates index name with the mapping; it returns the status and the body.
func (s *mappingServer) createIndex(t *testing.T, name string, mapping json.RawMessage) (int, []byte) {
	t.Helper()
	body := `{"settings":{"number_of_shards":1,"number_of_replicas":0},"mappings":` + string(mapping) + `}`
	status, b := s.call(t, esapi.IndicesCreateRequest{Index: name, Body: strings.NewReader(body)})
	if status == http.StatusOK {
		s.DeleteAtCleanup(t, name)
	}
	return status, b
}

// serverOptions are the mapping options each engine of the test environment accepts for the
// full kind matrix: Elasticsearch's integration-test build has neither scaled_float nor
// unsigned_long (pinned in TestMappingServerMissingTypes).
func serverOptions(e Engine) MappingOptions {
	if e == Elasticsearch {
		return MappingOptions{Engine: e, DecimalAs: DecimalDouble, Uint64As: Uint64Keyword}
	}
	return MappingOptions{Engine: e}
}

// kindRows are documents covering every kind, typical and edge values.
func kindRows() [][]cdc.Value {
	return [][]cdc.Value{
		{int64(1), true, int64(-128), int64(-32768), int64(-8388608), int64(-2147483648),
			uint64(255), uint64(65535), uint64(4294967295), uint64(18446744073709551615),
			0.1, 1e300, "1234567890.12", "123456789012345678901234567890.123456789",
			b64("héllo \"wörld\"\n"), cdc.Base64("AAEC/w=="), "2024-02-29", "23:59:59.999999",
			"2024-01-02 03:04:05.123456", cdc.EpochMicros(1700000000123456), cdc.RawJSON(`{"a":[1,{"b":"c"}],"n":null}`),
			"b", "x,y", uint64(5), "0e37df36-f698-11e6-8dd4-cb9ced3df976", []cdc.Value{int64(1), nil, int64(3)}, "1 day 02:00:00"},
		{int64(2), false, nil, nil, nil, nil, nil, nil, nil, uint64(1 << 63), nil, -0.5, "-0.01", "0",
			"", cdc.Base64(""), "0000-00-00", "-838:59:59", "2024-01-02 03:04:05.120000", cdc.EpochMicros(-1500),
			nil, nil, "", "1010", nil, []cdc.Value{}, nil},
	}
}

// TestMappingServerKinds indexes kindRows through an index created with GenerateMapping and
// checks _source byte for byte, the applied mapping field by field, and how the engine read the
// values that need parsing (dates, decimals, unsigned longs).
func TestMappingServerKinds(t *testing.T) {
	mappingServers(t, func(t *testing.T, s *mappingServer) {
		t.Parallel()
		o := serverOptions(s.engine)
		schema := &cdc.TableSchema{Columns: kindColumns()}
		mapping, err := GenerateMapping(schema, o)
		if err != nil {
			t.Fatal(err)
		}
		index := s.prefix + "-kinds"
		if status, b := s.createIndex(t, index, mapping); status != http.StatusOK {
			t.Fatalf("create: %d %s", status, b)
		}

		docs := map[string][]byte{}
		for _, row := range kindRows() {
			doc, err := o.AppendDocument(nil, schema, row)
			if err != nil {
				t.Fatal(err)
			}
			id := json.Number(strings.TrimPrefix(string(doc[:bytes.IndexByte(doc, ',')]), `{"id":`)).String()
			docs[id] = doc
			status, b := s.call(t, esapi.IndexRequest{Index: index, DocumentID: id, Body: bytes.NewReader(doc), Refresh: "true"})
			if status != http.StatusCreated {
				t.Fatalf("index doc %s: %d %s", id, status, b)
			}
		}

		// _source is the document exactly as sent.
		for id, doc := range docs {
			status, b := s.call(t, esapi.GetRequest{Index: index, DocumentID: id})
			if status != http.StatusOK {
				t.Fatalf("get %s: %d %s", id, status, b)
			}
			var got struct {
				Source json.RawMessage `json:"_source"`
			}
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Source, doc) {
				t.Errorf("doc %s _source:\n got %s\nwant %s", id, got.Source, doc)
			}
		}

		// The mapping the engine applied is the one generated, field by field.
		status, b := s.call(t, esapi.IndicesGetMappingRequest{Index: []string{index}})
		if status != http.StatusOK {
			t.Fatalf("get mapping: %d %s", status, b)
		}
		var applied map[string]struct {
			Mappings struct {
				Properties map[string]map[string]any `json:"properties"`
			} `json:"mappings"`
		}
		if err := json.Unmarshal(b, &applied); err != nil {
			t.Fatal(err)
		}
		var generated struct {
			Properties map[string]map[string]any `json:"properties"`
		}
		if err := json.Unmarshal(mapping, &generated); err != nil {
			t.Fatal(err)
		}
		props := applied[index].Mappings.Properties
		if len(props) != len(generated.Properties) {
			t.Errorf("applied %d fields, generated %d", len(props), len(generated.Properties))
		}
		for name, want := range generated.Properties {
			got := props[name]
			for k, v := range want {
				// Engines echo numbers as they parsed them (scaling_factor 100 -> 100.0).
				if gv, ok := got[k].(float64); ok {
					if wv, ok := v.(float64); ok && gv == wv {
						continue
					}
				}
				gj, _ := json.Marshal(got[k])
				wj, _ := json.Marshal(v)
				if string(gj) != string(wj) {
					t.Errorf("field %s: %s = %s, want %s", name, k, gj, wj)
				}
			}
		}

		// How the engine read the parsed kinds: doc values of row 1 and row 2.
		want := map[string]map[string]string{
			"1": {"d": "2024-02-29T00:00:00.000Z", "dt": "2024-01-02T03:04:05.123Z", "ts": "2023-11-14T22:13:20.123Z"},
			"2": {"dt": "2024-01-02T03:04:05.120Z", "ts": "1969-12-31T23:59:59.998Z"},
		}
		if s.engine == OpenSearch {
			want["1"]["u64"] = "18446744073709551615"
			want["2"]["u64"] = "9223372036854775808"
		}
		for id, fields := range want {
			body := `{"query":{"ids":{"values":["` + id + `"]}},"docvalue_fields":[`
			first := true
			for f := range fields {
				if !first {
					body += ","
				}
				first = false
				if f == "d" || f == "dt" || f == "ts" {
					body += `{"field":"` + f + `","format":"strict_date_optional_time"}`
				} else {
					body += `"` + f + `"`
				}
			}
			body += `]}`
			status, b := s.call(t, esapi.SearchRequest{Index: []string{index}, Body: strings.NewReader(body)})
			if status != http.StatusOK {
				t.Fatalf("search: %d %s", status, b)
			}
			var res struct {
				Hits struct {
					Hits []struct {
						Fields map[string][]any `json:"fields"`
					} `json:"hits"`
				} `json:"hits"`
			}
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.UseNumber()
			if err := dec.Decode(&res); err != nil || len(res.Hits.Hits) != 1 {
				t.Fatalf("search: %v %s", err, b)
			}
			checkDocValues(t, id, res.Hits.Hits[0].Fields, fields)
		}

		// The decimal's exact digits are a term of its keyword sub-field, and on scaled_float
		// the stored long is exact: a range pinned to the value on both ends finds it.
		queries := []string{`{"term":{"dec.exact":"1234567890.12"}}`}
		if s.engine == OpenSearch {
			queries = append(queries, `{"range":{"dec":{"gte":"1234567890.12","lte":"1234567890.12"}}}`,
				`{"term":{"u64":"18446744073709551615"}}`)
		} else {
			queries = append(queries, `{"term":{"u64":"18446744073709551615"}}`)
		}
		for _, q := range queries {
			status, b := s.call(t, esapi.SearchRequest{Index: []string{index}, Body: strings.NewReader(`{"query":` + q + `}`)})
			if status != http.StatusOK || !strings.Contains(string(b), `"_id":"1"`) || strings.Contains(string(b), `"_id":"2"`) {
				t.Errorf("query %s: %d %s", q, status, b)
			}
		}
	})
}

func checkDocValues(t *testing.T, id string, got map[string][]any, want map[string]string) {
	t.Helper()
	for f, w := range want {
		vs := got[f]
		if len(vs) != 1 {
			t.Errorf("doc %s field %s: doc values %v, want %s", id, f, vs, w)
			continue
		}
		var g string
		switch v := vs[0].(type) {
		case string:
			g = v
		case json.Number:
			g = v.String()
		}
		if g != w {
			t.Errorf("doc %s field %s: doc value %s, want %s", id, f, g, w)
		}
	}
}

// TestMappingServerMissingTypes pins what each engine says about scaled_float and
// unsigned_long: Elasticsearch's integration-test build refuses both at index creation,
// OpenSearch 2.19 has both.
func TestMappingServerMissingTypes(t *testing.T) {
	mappingServers(t, func(t *testing.T, s *mappingServer) {
		t.Parallel()
		for _, tc := range []struct {
			name, field, typ string
			col              cdc.Column
		}{
			{"decimal_scaled_float", "price", "scaled_float", cdc.Column{Name: "price", Kind: cdc.KindDecimal, Precision: 10, Scale: 2}},
			{"uint64_unsigned_long", "views", "unsigned_long", cdc.Column{Name: "views", Kind: cdc.KindUint, Bits: 64}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				mapping, err := GenerateMapping(&cdc.TableSchema{Columns: []cdc.Column{tc.col}}, MappingOptions{Engine: s.engine})
				if err != nil {
					t.Fatal(err)
				}
				status, b := s.createIndex(t, s.prefix+"-"+strings.ReplaceAll(tc.name, "_", "-"), mapping)
				if s.engine == OpenSearch {
					if status != http.StatusOK {
						t.Fatalf("create: %d %s", status, b)
					}
					return
				}
				if status != http.StatusBadRequest {
					t.Fatalf("create: status %d %s, want 400", status, b)
				}
				var e struct {
					Error struct {
						Type     string `json:"type"`
						CausedBy struct {
							Type   string `json:"type"`
							Reason string `json:"reason"`
						} `json:"caused_by"`
					} `json:"error"`
				}
				if err := json.Unmarshal(b, &e); err != nil {
					t.Fatal(err)
				}
				wantReason := "The mapper type [" + tc.typ + "] declared on field [" + tc.field + "] does not exist. " +
					"It might have been created within a future version or requires a plugin to be installed. Check the documentation."
				if e.Error.Type != "mapper_parsing_exception" || e.Error.CausedBy.Type != "mapper_parsing_exception" || e.Error.CausedBy.Reason != wantReason {
					t.Fatalf("error %s", b)
				}
			})
		}
	})
}

// TestMappingServerJSONShapes pins which top-level JSON shapes each engine accepts in a
// JSONStored ("enabled": false object) field: both keep any JSON value, scalars and arrays of
// scalars included, since a disabled object is not parsed at all.
func TestMappingServerJSONShapes(t *testing.T) {
	mappingServers(t, func(t *testing.T, s *mappingServer) {
		t.Parallel()
		schema := &cdc.TableSchema{Columns: []cdc.Column{{Name: "id", Kind: cdc.KindInt, Bits: 64}, {Name: "j", Kind: cdc.KindJSON}}}
		mapping, err := GenerateMapping(schema, MappingOptions{Engine: s.engine})
		if err != nil {
			t.Fatal(err)
		}
		index := s.prefix + "-json"
		if status, b := s.createIndex(t, index, mapping); status != http.StatusOK {
			t.Fatalf("create: %d %s", status, b)
		}
		for i, j := range []string{`{"a":{"b":[1,"x",null]}}`, `[{"a":1},{"a":"x"}]`, `null`, `[1,2]`, `3`, `"x"`, `{"a":1}`} {
			doc, err := AppendDocument(nil, schema, []cdc.Value{int64(i), cdc.RawJSON(j)})
			if err != nil {
				t.Fatal(err)
			}
			status, b := s.call(t, esapi.IndexRequest{Index: index, DocumentID: json.Number(rune('0' + i)).String(), Body: bytes.NewReader(doc)})
			if status != http.StatusCreated {
				t.Errorf("json %s: status %d %s", j, status, b)
			}
		}
	})
}

// TestMappingServerJSONFlattened pins the opt-in JSONFlattened mapping: flattened
// (Elasticsearch) and flat_object (OpenSearch) index objects and arrays of objects, and refuse
// any other top-level value, which then fails that one document.
func TestMappingServerJSONFlattened(t *testing.T) {
	mappingServers(t, func(t *testing.T, s *mappingServer) {
		t.Parallel()
		schema := &cdc.TableSchema{Columns: []cdc.Column{{Name: "id", Kind: cdc.KindInt, Bits: 64}, {Name: "j", Kind: cdc.KindJSON}}}
		mapping, err := GenerateMapping(schema, MappingOptions{Engine: s.engine, JSONAs: JSONFlattened})
		if err != nil {
			t.Fatal(err)
		}
		index := s.prefix + "-flat"
		if status, b := s.createIndex(t, index, mapping); status != http.StatusOK {
			t.Fatalf("create: %d %s", status, b)
		}
		for i, tc := range []struct {
			j  string
			ok bool
		}{{`{"a":{"b":[1,"x"]}}`, true}, {`[{"a":1},{"b":"x"}]`, true}, {`[1,2]`, false}, {`3`, false}, {`"x"`, false}} {
			doc, err := AppendDocument(nil, schema, []cdc.Value{int64(i), cdc.RawJSON(tc.j)})
			if err != nil {
				t.Fatal(err)
			}
			status, b := s.call(t, esapi.IndexRequest{Index: index, DocumentID: json.Number(rune('0' + i)).String(), Body: bytes.NewReader(doc)})
			if (status == http.StatusCreated) != tc.ok || !tc.ok && status != http.StatusBadRequest {
				t.Errorf("json %s: status %d %s, want accepted=%v", tc.j, status, b, tc.ok)
			}
		}
	})
}
