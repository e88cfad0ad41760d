package esfence

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseMarker(t *testing.T) {
	good := `{"format":1,"owner":{"deployment":"d","pipeline":"p","sink":"s"},` +
		`"source":{"connector":"postgres","source":"shop","database":"shop","schema":"public","table":"orders"},` +
		`"index":{"cluster_uuid":"u","name":"orders"},"encoding":"doc-v1","instance":"` + strings.Repeat("0f", 16) + `"}`
	for _, c := range []struct {
		name string
		meta string
		want Class
	}{
		{"good", `{"deltaforge":` + good + `,"other":1}`, ""},
		{"missing", `{"other":1}`, MarkerMissing},
		{"no_meta", `null`, MarkerMissing},
		{"string", `{"deltaforge":"x"}`, MarkerMalformed},
		{"no_format", `{"deltaforge":{"owner":{}}}`, MarkerMalformed},
		{"format_string", `{"deltaforge":{"format":"1"}}`, MarkerMalformed},
		{"format_zero", `{"deltaforge":{"format":0}}`, MarkerMalformed},
		{"future", `{"deltaforge":{"format":2}}`, MarkerUnsupportedVersion},
		{"unknown_field", `{"deltaforge":` + strings.Replace(good, `"format":1,`, `"format":1,"x":1,`, 1) + `}`, MarkerMalformed},
		{"no_owner", `{"deltaforge":` + strings.Replace(good, `"deployment":"d"`, `"deployment":""`, 1) + `}`, MarkerMalformed},
		{"bad_instance", `{"deltaforge":` + strings.Replace(good, "0f0f", "0F0F", 1) + `}`, MarkerMalformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			var meta map[string]json.RawMessage
			if err := json.Unmarshal([]byte(c.meta), &meta); err != nil {
				t.Fatal(err)
			}
			m, class, _ := parseMarker(meta)
			if class != c.want || (class == "") != (m != nil) {
				t.Fatalf("class %q marker %v, want %q", class, m, c.want)
			}
		})
	}
}

func TestMappingWithMarker(t *testing.T) {
	out, err := mappingWithMarker(json.RawMessage(`{"_meta":{"team":"x"},"properties":{}}`), Marker{Format: 1})
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(out["_meta"], &meta); err != nil || string(meta["team"]) != `"x"` || meta[MarkerKey] == nil {
		t.Fatalf("_meta %s: %v", out["_meta"], err)
	}
	for _, bad := range []string{`[]`, `{"_meta":[]}`, `{"_meta":{"deltaforge":{}}}`} {
		if _, err := mappingWithMarker(json.RawMessage(bad), Marker{}); err == nil {
			t.Errorf("mapping %s accepted", bad)
		}
	}
}

func TestConflictErrorText(t *testing.T) {
	e := &ConflictError{Class: OwnedByOther, Index: "orders", OwnerDigest: OwnerDigest("secret-identity", "p", "s")}
	if s := e.Error(); strings.Contains(s, "secret-identity") || !strings.HasPrefix(s, "sink_destination_conflict (owned_by_other)") {
		t.Fatalf("%q", s)
	}
	if ClassOf(e) != OwnedByOther || ClassOf(nil) != "" {
		t.Fatal("ClassOf")
	}
}
