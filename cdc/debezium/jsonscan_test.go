package debezium

import (
	"bytes"
	"encoding/json"
	"testing"
)

// eachMember agrees with encoding/json on every valid object (keys and raw values), and never
// panics on anything else.
func FuzzEachMember(f *testing.F) {
	for _, seed := range []string{`{}`, `{"a":1}`, `{"a":{"b":[1,"x\"}",{"c":null}]},"k\u00e9y":"v"}`, ` { "a" : [ ] , "b" : true } `,
		`{"schema":{"type":"struct"},"payload":{"op":"c"}}`, `{"a":`, `[1]`, `{"a":1}x`, `{"a":"\\"}`} {
		f.Add([]byte(seed))
	}
	for _, r := range []string{"postgres-3.6.1-types.jsonl", "mariadb-3.5.0.jsonl"} {
		for _, rec := range fixture(f, r) {
			if rec.Value != nil {
				f.Add(rec.Value)
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got := map[string]json.RawMessage{}
		err := eachMember(b, func(k, v []byte) error {
			got[string(k)] = append(json.RawMessage(nil), v...)
			return nil
		})
		var want map[string]json.RawMessage
		if json.Valid(b) && json.Unmarshal(b, &want) == nil && bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) {
			if err != nil {
				t.Fatalf("a valid object refused: %v", err)
			}
			if len(got) != len(want) {
				t.Fatalf("%d members, encoding/json %d", len(got), len(want))
			}
			for k, w := range want {
				if !bytes.Equal(bytes.TrimSpace(got[k]), bytes.TrimSpace(w)) {
					t.Fatalf("member %q: %s, encoding/json %s", k, got[k], w)
				}
			}
		}
	})
}

// BenchmarkDecode decodes a captured record with its embedded schema (the shape cached after
// the first), the cost per event of the Debezium path before the sink.
func BenchmarkDecode(b *testing.B) {
	for _, file := range []string{"postgres-3.6.1-types.jsonl", "mariadb-3.5.0-types.jsonl"} {
		b.Run(file, func(b *testing.B) {
			rec := fixture(b, file)[0]
			d := fixtureDecoder("src", false, VersionsDefault)
			b.SetBytes(int64(len(rec.Value)))
			b.ReportAllocs()
			for b.Loop() {
				ev, _, err := d.decode(&rec)
				if err != nil || ev.Malformed != nil {
					b.Fatal(err, ev.Malformed)
				}
			}
		})
	}
}
