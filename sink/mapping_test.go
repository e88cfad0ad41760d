package sink

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/cdc"
)

// kindColumns is one column per kind (and per width where the mapping depends on it), the
// schema shared by the mapping, document and server tests.
func kindColumns() []cdc.Column {
	return []cdc.Column{
		{Name: "id", Kind: cdc.KindInt, Bits: 64},
		{Name: "b", Kind: cdc.KindBool},
		{Name: "i8", Kind: cdc.KindInt, Bits: 8},
		{Name: "i16", Kind: cdc.KindInt, Bits: 16},
		{Name: "i24", Kind: cdc.KindInt, Bits: 24},
		{Name: "i32", Kind: cdc.KindInt, Bits: 32},
		{Name: "u8", Kind: cdc.KindUint, Bits: 8},
		{Name: "u16", Kind: cdc.KindUint, Bits: 16},
		{Name: "u32", Kind: cdc.KindUint, Bits: 32},
		{Name: "u64", Kind: cdc.KindUint, Bits: 64},
		{Name: "f32", Kind: cdc.KindFloat, Bits: 32},
		{Name: "f64", Kind: cdc.KindFloat, Bits: 64},
		{Name: "dec", Kind: cdc.KindDecimal, Precision: 12, Scale: 2},
		{Name: "dec_unbounded", Kind: cdc.KindDecimal},
		{Name: "txt", Kind: cdc.KindText, Charset: "utf8mb4"},
		{Name: "bin", Kind: cdc.KindBinary},
		{Name: "d", Kind: cdc.KindDate},
		{Name: "tm", Kind: cdc.KindTime, Precision: 6},
		{Name: "dt", Kind: cdc.KindDateTime, Precision: 6},
		{Name: "ts", Kind: cdc.KindTimestamp, Precision: 6},
		{Name: "j", Kind: cdc.KindJSON},
		{Name: "e", Kind: cdc.KindEnum, Labels: []string{"a", "b"}},
		{Name: "st", Kind: cdc.KindSet, Labels: []string{"x", "y"}},
		{Name: "bits", Kind: cdc.KindBit, Bits: 4},
		{Name: "u", Kind: cdc.KindUUID},
		{Name: "arr", Kind: cdc.KindArray, Elem: &cdc.Column{Kind: cdc.KindInt, Bits: 32}},
		{Name: "other", Kind: cdc.KindOther},
	}
}

const (
	wantKeyword = `{"type":"keyword","ignore_above":8191}`
	wantDate    = `{"type":"date","format":"strict_date_optional_time||yyyy-MM-dd HH:mm:ss[.SSSSSS][.SSSSS][.SSSS][.SSS][.SS][.S]||epoch_millis","ignore_malformed":true}`
	// wantWideDecimal is the mapping of a decimal scaled_float cannot hold exactly.
	wantWideDecimal = `{"type":"keyword","ignore_above":8191,"fields":{"approx":{"type":"double","ignore_malformed":true}}}`
)

// wantScaled is the scaled_float mapping with the given scaling_factor digits.
func wantScaled(factor string) string {
	return `{"type":"scaled_float","scaling_factor":` + factor + `,"ignore_malformed":true,"fields":{"exact":` + wantKeyword + `}}`
}

// wantFieldMappings is the golden mapping of each kindColumns field under default options.
func wantFieldMappings(e Engine) map[string]string {
	_ = e // the default options give the same mapping on both engines
	return map[string]string{
		"id": `{"type":"long"}`, "b": `{"type":"boolean"}`,
		"i8": `{"type":"byte"}`, "i16": `{"type":"short"}`, "i24": `{"type":"integer"}`, "i32": `{"type":"integer"}`,
		"u8": `{"type":"short"}`, "u16": `{"type":"integer"}`, "u32": `{"type":"long"}`, "u64": `{"type":"unsigned_long"}`,
		"f32": `{"type":"float","ignore_malformed":true}`, "f64": `{"type":"double","ignore_malformed":true}`,
		"dec":           wantScaled("100"),
		"dec_unbounded": wantWideDecimal,
		"txt":           `{"type":"keyword","ignore_above":8191,"fields":{"text":{"type":"text"}}}`,
		"bin":           `{"type":"binary"}`,
		"d":             wantDate, "dt": wantDate, "ts": wantDate,
		"tm": wantKeyword, "e": wantKeyword, "st": wantKeyword, "bits": wantKeyword, "u": wantKeyword, "other": wantKeyword,
		"j":   `{"type":"object","enabled":false}`,
		"arr": `{"type":"integer"}`,
	}
}

func TestGenerateMappingPerKind(t *testing.T) {
	for _, e := range []Engine{Elasticsearch, OpenSearch} {
		t.Run(e.String(), func(t *testing.T) {
			cols := kindColumns()
			want := wantFieldMappings(e)
			var sb strings.Builder
			sb.WriteString(`{"properties":{`)
			for i, c := range cols {
				if i > 0 {
					sb.WriteByte(',')
				}
				sb.WriteString(`"` + c.Name + `":` + want[c.Name])
			}
			sb.WriteString(`}}`)
			got, err := GenerateMapping(&cdc.TableSchema{Columns: cols}, MappingOptions{Engine: e})
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != sb.String() {
				t.Fatalf("mapping:\n got %s\nwant %s", got, sb.String())
			}
			if !json.Valid(got) {
				t.Fatal("mapping is not valid JSON")
			}
		})
	}
}

func TestGenerateMappingOptions(t *testing.T) {
	cases := []struct {
		name string
		col  cdc.Column
		o    MappingOptions
		want string
	}{
		{"decimal_keyword", cdc.Column{Kind: cdc.KindDecimal, Precision: 10, Scale: 3}, MappingOptions{DecimalAs: DecimalKeyword}, wantKeyword},
		{"decimal_keyword_wide", cdc.Column{Kind: cdc.KindDecimal, Precision: 38, Scale: 10}, MappingOptions{DecimalAs: DecimalKeyword}, wantKeyword},
		{"decimal_double", cdc.Column{Kind: cdc.KindDecimal, Precision: 10, Scale: 3}, MappingOptions{DecimalAs: DecimalDouble}, `{"type":"double","ignore_malformed":true,"fields":{"exact":` + wantKeyword + `}}`},
		{"decimal_double_unbounded", cdc.Column{Kind: cdc.KindDecimal}, MappingOptions{DecimalAs: DecimalDouble}, `{"type":"double","ignore_malformed":true,"fields":{"exact":` + wantKeyword + `}}`},
		{"decimal_p1_scale0", cdc.Column{Kind: cdc.KindDecimal, Precision: 1}, MappingOptions{}, wantScaled("1")},
		{"decimal_p10_scale0", cdc.Column{Kind: cdc.KindDecimal, Precision: 10}, MappingOptions{}, wantScaled("1")},
		{"decimal_p15_scale15", cdc.Column{Kind: cdc.KindDecimal, Precision: 15, Scale: 15}, MappingOptions{}, wantScaled("1000000000000000")},
		{"decimal_p15_scale6", cdc.Column{Kind: cdc.KindDecimal, Precision: 15, Scale: 6}, MappingOptions{}, wantScaled("1000000")},
		{"decimal_p16_wide", cdc.Column{Kind: cdc.KindDecimal, Precision: 16, Scale: 2}, MappingOptions{}, wantWideDecimal},
		{"decimal_20_6_wide", cdc.Column{Kind: cdc.KindDecimal, Precision: 20, Scale: 6}, MappingOptions{}, wantWideDecimal},
		{"decimal_38_10_wide", cdc.Column{Kind: cdc.KindDecimal, Precision: 38, Scale: 10}, MappingOptions{}, wantWideDecimal},
		{"decimal_mysql_65_30_wide", cdc.Column{Kind: cdc.KindDecimal, Precision: 65, Scale: 30}, MappingOptions{}, wantWideDecimal},
		{"decimal_scale_above_precision_wide", cdc.Column{Kind: cdc.KindDecimal, Precision: 3, Scale: 5}, MappingOptions{}, wantWideDecimal},
		{"decimal_negative_scale_wide", cdc.Column{Kind: cdc.KindDecimal, Precision: 5, Scale: -2}, MappingOptions{}, wantWideDecimal},
		{"decimal_unbounded_wide", cdc.Column{Kind: cdc.KindDecimal}, MappingOptions{}, wantWideDecimal},
		{"decimal_array_of_scaled", cdc.Column{Kind: cdc.KindArray, Elem: &cdc.Column{Kind: cdc.KindDecimal, Precision: 4, Scale: 1}}, MappingOptions{}, wantScaled("10")},
		{"uint64_keyword", cdc.Column{Kind: cdc.KindUint, Bits: 64}, MappingOptions{Uint64As: Uint64Keyword}, `{"type":"keyword"}`},
		{"uint_unknown_width", cdc.Column{Kind: cdc.KindUint}, MappingOptions{}, `{"type":"unsigned_long"}`},
		{"int_unknown_width", cdc.Column{Kind: cdc.KindInt}, MappingOptions{}, `{"type":"long"}`},
		{"uint24", cdc.Column{Kind: cdc.KindUint, Bits: 24}, MappingOptions{}, `{"type":"integer"}`},
		{"json_flattened_elasticsearch", cdc.Column{Kind: cdc.KindJSON}, MappingOptions{JSONAs: JSONFlattened}, `{"type":"flattened"}`},
		{"json_flattened_opensearch", cdc.Column{Kind: cdc.KindJSON}, MappingOptions{Engine: OpenSearch, JSONAs: JSONFlattened}, `{"type":"flat_object"}`},
		{"array_of_text", cdc.Column{Kind: cdc.KindArray, Elem: &cdc.Column{Kind: cdc.KindText}}, MappingOptions{}, `{"type":"keyword","ignore_above":8191,"fields":{"text":{"type":"text"}}}`},
		{"array_without_elem", cdc.Column{Kind: cdc.KindArray}, MappingOptions{}, wantKeyword},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.col.Name = "c"
			got, err := GenerateMapping(&cdc.TableSchema{Columns: []cdc.Column{tc.col}}, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			if want := `{"properties":{"c":` + tc.want + `}}`; string(got) != want {
				t.Fatalf("got %s, want %s", got, want)
			}
		})
	}
}

func TestGenerateMappingRefusesColumnNames(t *testing.T) {
	for _, name := range []string{"a.b", ".a", "a.", "", "_id", "_source", "_routing", "_index"} {
		_, err := GenerateMapping(&cdc.TableSchema{Columns: []cdc.Column{{Name: name, Kind: cdc.KindInt}}}, MappingOptions{})
		if err == nil {
			t.Errorf("column %q: no error", name)
		}
	}
	// Leading underscores that are not metadata fields are ordinary fields on both engines.
	if _, err := GenerateMapping(&cdc.TableSchema{Columns: []cdc.Column{{Name: "_private", Kind: cdc.KindInt}}}, MappingOptions{}); err != nil {
		t.Errorf("_private: %v", err)
	}
}

func TestGenerateMappingUnknownKind(t *testing.T) {
	_, err := GenerateMapping(&cdc.TableSchema{Columns: []cdc.Column{{Name: "x", Kind: cdc.Kind(200)}}}, MappingOptions{})
	if err == nil {
		t.Fatal("no error for an unknown kind")
	}
}
