package sink

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"unicode/utf8"
)

// decodeItems is the reference reading of an answer's items, with encoding/json.
func decodeItems(t *testing.T, ans string) []itemView {
	t.Helper()
	out, err := referenceItems(ans)
	if err != nil {
		t.Fatalf("reference decode: %v", err)
	}
	return out
}

func referenceItems(ans string) ([]itemView, error) {
	var full struct {
		Items []map[string]struct {
			Status int             `json:"status"`
			Error  json.RawMessage `json:"error"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(ans), &full); err != nil {
		return nil, err
	}
	var out []itemView
	for _, m := range full.Items {
		if len(m) != 1 {
			return nil, errors.New("not one action per item")
		}
		for _, it := range m {
			v := itemView{status: it.Status}
			if len(it.Error) > 0 {
				var e struct {
					Type     string `json:"type"`
					CausedBy struct {
						Type string `json:"type"`
					} `json:"caused_by"`
				}
				if json.Unmarshal(it.Error, &e) != nil || e.Type == "" {
					e.Type = "error"
				}
				v.errType = []byte(e.Type)
				if e.CausedBy.Type != "" {
					v.causedBy = []byte(e.CausedBy.Type)
				}
			}
			out = append(out, v)
		}
	}
	return out, nil
}

func scanAll(ans string) ([]itemView, bool) {
	sc, ok := newItemScanner([]byte(ans))
	if !ok {
		return nil, false
	}
	var out []itemView
	for k := 0; ; k++ {
		it, more, ok := sc.next(k == 0)
		if !ok {
			return nil, false
		}
		if !more {
			return out, true
		}
		out = append(out, it)
	}
}

// The scanner reads every layout an engine may send -- filtered or not, any key order,
// whitespace, unknown fields, nested values -- exactly as encoding/json does, and refuses
// what is not an answer (judge then falls back to encoding/json).
func TestItemScannerAgreesWithDecoder(t *testing.T) {
	for _, ans := range []string{
		`{"errors":true,"items":[{"index":{"status":201}},{"index":{"status":409,"error":{"type":"version_conflict_engine_exception"}}},{"index":{"status":400,"error":{"type":"document_parsing_exception","caused_by":{"type":"illegal_argument_exception"}}}},{"delete":{"status":404}}]}`,
		`{"took":3,"errors":true,"items":[]}`,
		`{"took":3,"errors":true,"items":[{"create":{"_index":"x","_id":"a\"b","_version":2,"result":"created","_shards":{"total":2,"successful":1,"failed":0},"_seq_no":7,"_primary_term":1,"status":201}},` +
			`{"update":{"error":{"root_cause":[{"type":"x","reason":"r]},{"}],"type":"mapper_parsing_exception","reason":"failed to parse [a] \\\"quoted\\\" {x}","caused_by":{"type":"illegal_argument_exception","reason":"For input string: \"x\"","caused_by":{"type":"deeper"}}},"_index":"x","status":400}},` +
			`{"index":{"_index":"x","status":429,"error":{"type":"es_rejected_execution_exception","reason":"rejected","extra":[1,2.5e3,-4,true,false,null,{"a":[]}]}}}]}`,
		"{\n  \"errors\" : true,\n  \"items\" : [\n    {\n      \"delete\" : {\n        \"status\" : 404,\n        \"error\" : {\n          \"type\" : \"index_not_found_exception\"\n        }\n      }\n    }\n  ]\n}",
		`{"items":[{"index":{"error":"a bare string","status":500}}],"errors":true}`,
	} {
		want := decodeItems(t, ans)
		got, ok := scanAll(ans)
		if !ok {
			t.Errorf("scanner refused %s", ans)
			continue
		}
		if len(got) == 0 && len(want) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", ans, got, want)
		}
	}
	for _, bad := range []string{
		``, `[]`, `{"errors":true}`, `{"errors":true,"items":{}}`, `{"items":[{"index":{"status":"201"}}]}`,
		`{"items":[{"index":{"status":201.5}}]}`, `{"items":[{"index":{}}]}`, `{"items":[{"index":{"status":201}}`,
		`{"items":[{"index":{"status":201}} {"index":{"status":201}}]}`, `{"items":[{"index":{"status":201,"x":"unterminated}}]}`,
	} {
		if _, ok := scanAll(bad); ok {
			t.Errorf("scanner accepted %q", bad)
		}
	}
}

// FuzzItemScanner: whenever encoding/json reads an answer of plain items and the scanner
// accepts it too, both read the same items.
func FuzzItemScanner(f *testing.F) {
	f.Add(`{"errors":true,"items":[{"index":{"status":201}},{"index":{"status":409,"error":{"type":"version_conflict_engine_exception"}}}]}`)
	f.Add(`{"took":1,"errors":true,"items":[{"delete":{"_id":"x","status":400,"error":{"type":"a","caused_by":{"type":"b","reason":"\\\"}"}}}}]}`)
	f.Add(`{"items":[{"index":{"status":500,"error":"x"}}]}`)
	f.Fuzz(func(t *testing.T, ans string) {
		want, err := referenceItems(ans)
		if err != nil || bytes.Contains([]byte(ans), []byte(`\`)) || !utf8.ValidString(ans) {
			return // not an answer, or escapes or bad UTF-8, which the scanner passes on raw
		}
		lower := bytes.ToLower([]byte(ans))
		for _, k := range []string{"items", "status", "error", "type", "caused_by"} {
			if bytes.Count(lower, []byte(k)) != bytes.Count([]byte(ans), []byte(k)) {
				return // encoding/json matches keys in any case; the engines send them lower-case
			}
		}
		got, ok := scanAll(ans)
		if !ok {
			return // the fallback decides
		}
		if len(got) == 0 && len(want) == 0 {
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n got %+v\nwant %+v", ans, got, want)
		}
	})
}
