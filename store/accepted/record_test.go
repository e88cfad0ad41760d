package accepted_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/accepted"
)

func recordSamples(t testing.TB) []accepted.Record {
	t.Helper()
	rev, err := store.ParseRevision("AAECAwQ")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 30, 7, 1, 2, 123456789, time.UTC)
	weird := store.Address{Store: "s/1%", Namespace: "ns/x", Dataset: "d%2F", Key: store.StringKey("k/é\"\\\n\x01")}
	return []accepted.Record{
		{RequestID: "00112233445566778899aabbccddeeff", Index: 0, AcceptedAt: at,
			Op: store.Put(addr("m", "a"), store.Document{JSON: []byte(`{"a":1,"t":"2026-01-02T03:04:05Z","n":12345678901234567890}`), Times: []string{"/t"}})},
		{RequestID: "r", Index: 7, AcceptedAt: at.Add(time.Hour).In(time.FixedZone("x", 3600)),
			Op: store.Merge(store.Address{Store: "m", Namespace: "n", Dataset: "d", Key: store.Int64Key(-1 << 63)},
				"return function(c, i, x)\n  return i -- \"quoted\" \t\u2028\nend", store.Document{JSON: []byte(`{ "x" : [1, {"y": null}] }`)})},
		{RequestID: "r", Index: 2, AcceptedAt: at,
			Op: store.Delete(store.Address{Store: "m", Namespace: "n", Dataset: "d", Key: store.BytesKey([]byte{0, 0xff, '/'})}).WithPrecondition(store.IfRevision(rev))},
		{RequestID: "r", Index: 3, AcceptedAt: at,
			Op: store.Put(store.Address{Store: "m", Namespace: "n", Dataset: "d", Key: store.ObjectIDKey([12]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})},
				store.Document{JSON: []byte(`{}`)}).WithPrecondition(store.IfAbsent())},
		{RequestID: "r", Index: 4, AcceptedAt: at, Op: store.Delete(weird).WithPrecondition(store.IfAbsent())},
		{RequestID: "r", Index: 5, AcceptedAt: at, Op: store.Put(weird, store.Document{JSON: []byte("\n {\"k\":\"v\"}\t")})},
	}
}

func encode(r *accepted.Record) []byte {
	hash := ""
	if r.Op.Kind == store.OpMerge {
		hash = accepted.ProgramHash(r.Op.Program)
	}
	return accepted.Append(nil, r, hash)
}

// sameRecord compares records as the worker uses them: documents byte for byte but for the
// whitespace around them, which the format drops.
func sameRecord(a, b *accepted.Record) bool {
	trim := func(d store.Document) string { return string(bytes.Trim(d.JSON, " \t\r\n")) }
	return a.RequestID == b.RequestID && a.Index == b.Index && a.AcceptedAt.Equal(b.AcceptedAt) &&
		a.Op.Kind == b.Op.Kind && a.Op.Addr == b.Op.Addr && a.Op.Program == b.Op.Program &&
		a.Op.If == b.Op.If && trim(a.Op.Doc) == trim(b.Op.Doc) &&
		strings.Join(a.Op.Doc.Times, "\x00") == strings.Join(b.Op.Doc.Times, "\x00")
}

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range recordSamples(t) {
		enc := encode(&r)
		got, err := accepted.Decode(enc)
		if err != nil {
			t.Fatalf("%s: decode: %v\n%s", r.String(), err, enc)
		}
		if !sameRecord(&r, &got) {
			t.Fatalf("%s: round trip changed the record:\n got %+v\nwant %+v\n%s", r.String(), got, r, enc)
		}
		if !bytes.Equal(encode(&got), enc) {
			t.Fatalf("%s: encoding is not canonical after a round trip", r.String())
		}
	}
}

func TestMessageKeyIsDeterministicAndInjective(t *testing.T) {
	a := func(st, ns, ds string, k store.Key) store.Address {
		return store.Address{Store: st, Namespace: ns, Dataset: ds, Key: k}
	}
	addrs := []store.Address{
		a("s", "n", "d", store.StringKey("k")),
		a("s", "n", "d", store.StringKey("k/x")),
		a("s", "n", "d/k", store.StringKey("x")),
		a("s", "n/d", "k", store.StringKey("x")),
		a("s", "n", "d%2Fk", store.StringKey("x")),
		a("s", "n", "d", store.StringKey("1")),
		a("s", "n", "d", store.Int64Key(1)),
		a("s", "n", "d", store.BytesKey([]byte{1})),
		a("s", "n", "d", store.StringKey("01")),
		a("s", "n", "d", store.ObjectIDKey([12]byte{1})),
		a("s", "n", "d", store.BytesKey([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})),
		a("t", "n", "d", store.StringKey("k")),
	}
	seen := map[string]store.Address{}
	for _, ad := range addrs {
		k := string(accepted.MessageKey(ad))
		if k != string(accepted.MessageKey(ad)) {
			t.Fatalf("MessageKey(%v) is not deterministic", ad)
		}
		if prev, dup := seen[k]; dup {
			t.Fatalf("MessageKey gives %q to both %v and %v", k, prev, ad)
		}
		seen[k] = ad
	}
}

func TestDecodeRefusesMalformed(t *testing.T) {
	good := string(encode(&recordSamples(t)[1]))
	secret := accepted.Record{RequestID: "r", AcceptedAt: time.Now(),
		Op: store.Put(addr("m", "k"), store.Document{JSON: []byte(`{"password":"hunter2-secret"}`)})}
	cases := map[string]string{
		"not json":          `{"v":1,"doc":{"password":"hunter2-secret"`,
		"empty":             ``,
		"array":             `[1,2]`,
		"future version":    strings.Replace(good, `"v":1`, `"v":2`, 1),
		"no version":        strings.Replace(good, `"v":1,`, ``, 1),
		"damaged program":   strings.Replace(good, `return i`, `return x`, 1),
		"unknown op":        strings.Replace(good, `"op":"merge"`, `"op":"read"`, 1),
		"bad key type":      strings.Replace(good, `"key_type":"int64"`, `"key_type":"uuid"`, 1),
		"bad int64":         strings.Replace(good, `"key":"-9223372036854775808"`, `"key":"1e3"`, 1),
		"no key":            strings.Replace(good, `"key":"-9223372036854775808",`, ``, 1),
		"no index":          strings.Replace(good, `"index":7,`, ``, 1),
		"bad time":          strings.Replace(good, `"accepted_at":"`, `"accepted_at":"yesterday`, 1),
		"merge without doc": good[:strings.Index(good, `,"doc":`)] + `}`,
		"wrong type":        strings.Replace(string(encode(&secret)), `"store":"m"`, `"store":{"password":"hunter2-secret"}`, 1),
		"delete with doc":   strings.Replace(string(encode(&secret)), `"op":"put"`, `"op":"delete"`, 1),
		"bad precondition":  strings.Replace(string(encode(&secret)), `"key_type"`, `"if":"maybe","key_type"`, 1),
		"zero revision":     strings.Replace(string(encode(&secret)), `"key_type"`, `"if":"revision","revision":"","key_type"`, 1),
	}
	for name, value := range cases {
		_, err := accepted.Decode([]byte(value))
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: Decode = %v, want ErrInvalid", name, err)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error quotes the record: %v", name, err)
		}
	}
}

// reformat writes a JSON object's members in the given order, with whitespace around every
// token: a record as another encoder might write it, which the decoder must read exactly like
// Append's own layout.
func reformat(t *testing.T, value []byte, reverse bool) []byte {
	t.Helper()
	var members []json.RawMessage
	var names []string
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %v", err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatal(err)
		}
		names, members = append(names, tok.(string)), append(members, raw)
	}
	if reverse {
		slices.Reverse(names)
		slices.Reverse(members)
	}
	out := []byte("\n{ ")
	for i, n := range names {
		if i > 0 {
			out = append(out, " ,\t"...)
		}
		q, _ := json.Marshal(n)
		out = append(out, q...)
		out = append(out, " : "...)
		out = append(out, members[i]...)
	}
	return append(out, " }\r\n"...)
}

func TestDecodeReadsAnyMemberOrderAndWhitespace(t *testing.T) {
	for _, r := range recordSamples(t) {
		enc := encode(&r)
		for _, reverse := range []bool{false, true} {
			value := reformat(t, enc, reverse)
			got, err := accepted.Decode(value)
			if err != nil {
				t.Fatalf("%s, reversed %v: decode: %v\n%s", r.String(), reverse, err, value)
			}
			if !sameRecord(&r, &got) {
				t.Fatalf("%s, reversed %v: got %+v\nwant %+v\n%s", r.String(), reverse, got, r, value)
			}
		}
	}
}

// TestDecodeStringsOfEveryByte puts every byte value (every rune below 0x100, as
// UTF-8) at every position of the first 20 of a string, so that each lands at every place
// of the decoder's eight-byte steps, escaped as Append escapes it.
func TestDecodeStringsOfEveryByte(t *testing.T) {
	var d accepted.Decoder
	for c := rune(0); c < 0x100; c++ {
		for pos := range 20 {
			id := []rune(strings.Repeat("x", 24))
			id[pos] = c
			r := recordSamples(t)[0]
			r.RequestID = string(id)
			r.Op.Addr.Key = store.StringKey(string(id[:pos+1]))
			got, err := d.Decode(encode(&r))
			if err != nil {
				t.Fatalf("rune %#x at %d: %v", c, pos, err)
			}
			if got.RequestID != r.RequestID || got.Op.Addr != r.Op.Addr {
				t.Fatalf("rune %#x at %d: decoded %q, key %v; want %q, key %v", c, pos, got.RequestID, got.Op.Addr.Key, r.RequestID, r.Op.Addr.Key)
			}
		}
	}
}

func TestDecodeSharedSharesOnlyTheDocument(t *testing.T) {
	var d accepted.Decoder
	for _, r := range recordSamples(t) {
		value := encode(&r)
		shared, err := d.DecodeShared(value)
		if err != nil {
			t.Fatal(err)
		}
		copied, err := accepted.Decode(value)
		if err != nil {
			t.Fatal(err)
		}
		if !sameRecord(&shared, &copied) {
			t.Fatalf("%s: DecodeShared %+v, Decode %+v", r.String(), shared, copied)
		}
		doc := shared.Op.Doc.JSON
		if doc == nil {
			continue
		}
		if !overlaps(doc, value) {
			t.Fatalf("%s: DecodeShared copied the document", r.String())
		}
		if overlaps(copied.Op.Doc.JSON, value) {
			t.Fatalf("%s: Decode shares the document with the value", r.String())
		}
		// The shared document is capped: appending to it must not write into the value.
		before := string(value)
		_ = append(doc, "garbage"...)
		if string(value) != before {
			t.Fatalf("%s: appending to a shared document changed the message", r.String())
		}
	}
}

// overlaps reports whether a and b share memory.
func overlaps(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	a0, b0 := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0]))
	return a0 < b0+uintptr(len(b)) && b0 < a0+uintptr(len(a))
}

func addr(st, k string) store.Address {
	return store.Address{Store: st, Namespace: "ns", Dataset: "ds", Key: store.StringKey(k)}
}

// TestEncoderOutputIsFormatV1 holds Append and MessageKey to texts of format version 1 written
// down literally (the encoder's output when the format moved here from package store): workers
// already deployed read these bytes, so any change to them is a format change, not a refactor.
func TestEncoderOutputIsFormatV1(t *testing.T) {
	want := []struct{ value, key string }{
		{"{\"v\":1,\"request\":\"00112233445566778899aabbccddeeff\",\"index\":0,\"accepted_at\":\"2026-11-30T07:01:02.123456789Z\",\"op\":\"put\",\"store\":\"m\",\"namespace\":\"ns\",\"dataset\":\"ds\",\"key_type\":\"string\",\"key\":\"a\",\"doc\":{\"a\":1,\"t\":\"2026-01-02T03:04:05Z\",\"n\":12345678901234567890},\"times\":[\"/t\"]}",
			"m/ns/ds/s:a"},
		{"{\"v\":1,\"request\":\"r\",\"index\":7,\"accepted_at\":\"2026-11-30T08:01:02.123456789Z\",\"op\":\"merge\",\"store\":\"m\",\"namespace\":\"n\",\"dataset\":\"d\",\"key_type\":\"int64\",\"key\":\"-9223372036854775808\",\"program_sha256\":\"3233ae011ed5a871e969788b7269d2ad719b60420a2fde827f235c37e2c89acf\",\"program\":\"return function(c, i, x)\\n  return i -- \\\"quoted\\\" \\t\u2028\\nend\",\"doc\":{ \"x\" : [1, {\"y\": null}] }}",
			"m/n/d/i:-9223372036854775808"},
		{"{\"v\":1,\"request\":\"r\",\"index\":2,\"accepted_at\":\"2026-11-30T07:01:02.123456789Z\",\"op\":\"delete\",\"store\":\"m\",\"namespace\":\"n\",\"dataset\":\"d\",\"key_type\":\"bytes\",\"key\":\"AP8v\",\"if\":\"revision\",\"revision\":\"AAECAwQ\"}",
			"m/n/d/b:00ff2f"},
		{"{\"v\":1,\"request\":\"r\",\"index\":3,\"accepted_at\":\"2026-11-30T07:01:02.123456789Z\",\"op\":\"put\",\"store\":\"m\",\"namespace\":\"n\",\"dataset\":\"d\",\"key_type\":\"objectid\",\"key\":\"0102030405060708090a0b0c\",\"if\":\"absent\",\"doc\":{}}",
			"m/n/d/o:0102030405060708090a0b0c"},
		{"{\"v\":1,\"request\":\"r\",\"index\":4,\"accepted_at\":\"2026-11-30T07:01:02.123456789Z\",\"op\":\"delete\",\"store\":\"s/1%\",\"namespace\":\"ns/x\",\"dataset\":\"d%2F\",\"key_type\":\"string\",\"key\":\"k/é\\\"\\\\\\n\\u0001\",\"if\":\"absent\"}",
			"s%2F1%25/ns%2Fx/d%252F/s:k/é\"\\\n\x01"},
		{"{\"v\":1,\"request\":\"r\",\"index\":5,\"accepted_at\":\"2026-11-30T07:01:02.123456789Z\",\"op\":\"put\",\"store\":\"s/1%\",\"namespace\":\"ns/x\",\"dataset\":\"d%2F\",\"key_type\":\"string\",\"key\":\"k/é\\\"\\\\\\n\\u0001\",\"doc\":{\"k\":\"v\"}}",
			"s%2F1%25/ns%2Fx/d%252F/s:k/é\"\\\n\x01"},
	}
	samples := recordSamples(t)
	if len(samples) != len(want) {
		t.Fatalf("%d samples, %d expected texts", len(samples), len(want))
	}
	for i, r := range samples {
		if got := string(encode(&r)); got != want[i].value {
			t.Errorf("sample %d: value\n got %s\nwant %s", i, got, want[i].value)
		}
		if got := string(accepted.MessageKey(r.Op.Addr)); got != want[i].key {
			t.Errorf("sample %d: key %q, want %q", i, got, want[i].key)
		}
	}
}
