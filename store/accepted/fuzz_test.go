package accepted_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/accepted"
)

// The record codec's fuzz targets. Their seeds are the encoder's output for varied records
// (recordSamples, plus the files under testdata/fuzz/<target>/): a record the real Kafka path
// carries is Append's bytes, so those are the values the decoder meets in practice.

// FuzzDecode feeds arbitrary values to the decoder. It must never panic; it must refuse
// with a *store.Error of kind KindInvalid whose text is one of the decoder's own messages and
// quotes nothing of the value but the record's address; DecodeShared must agree with Decode
// and share nothing but the document; whatever it accepts must encode back to a record that
// decodes to the same thing, and encode canonically; and it must agree with refDecode, a
// reference decoder of the documented format over encoding/json.
func FuzzDecode(f *testing.F) {
	for _, r := range recordSamples(f) {
		f.Add(encode(&r))
	}
	f.Add([]byte(`{"v":1}`))
	f.Fuzz(func(t *testing.T, value []byte) {
		r, err := accepted.Decode(value)
		ref, refErr := refDecode(value)
		if err != nil {
			checkDecodeError(t, err)
			if refErr == nil {
				t.Fatalf("Decode refuses what the format allows: %v\nreference %+v", err, ref)
			}
			return
		}
		var d accepted.Decoder
		shared, err := d.DecodeShared(value)
		if err != nil || !sameRecord(&r, &shared) {
			t.Fatalf("DecodeShared disagrees with Decode: %v\n got %+v\nwant %+v", err, shared, r)
		}
		if overlaps(r.Op.Doc.JSON, value) {
			t.Fatal("Decode shares the document with the value")
		}
		if doc := shared.Op.Doc.JSON; doc != nil && !overlaps(doc, value) {
			t.Fatal("DecodeShared copied the document")
		}
		for _, s := range []string{r.RequestID, r.Op.Addr.Store, r.Op.Addr.Namespace, r.Op.Addr.Dataset, r.Op.Program} {
			if s != "" && overlaps(unsafe.Slice(unsafe.StringData(s), len(s)), value) {
				t.Fatal("a decoded string shares the value's memory")
			}
		}
		if refErr != nil {
			// The one part of a record the decoder delimits but does not validate is the
			// document (the store validates it when the record is applied): the value may be
			// invalid JSON only there. With the document replaced by a valid value, the
			// reference must accept the rest and agree.
			if json.Valid(shared.Op.Doc.JSON) || shared.Op.Doc.JSON == nil {
				t.Fatalf("Decode accepts what the format refuses (%v): %+v", refErr, r)
			}
			off := int(uintptr(unsafe.Pointer(unsafe.SliceData(shared.Op.Doc.JSON))) - uintptr(unsafe.Pointer(unsafe.SliceData(value))))
			fixed := append(append(append([]byte(nil), value[:off]...), "0"...), value[off+len(shared.Op.Doc.JSON):]...)
			ref, refErr = refDecode(fixed)
			if refErr != nil {
				if repeatsDoc(value) {
					return // an earlier "doc" the last one replaces is never looked at either
				}
				t.Fatalf("Decode accepts what the format refuses, beyond the document (%v): %+v", refErr, r)
			}
			ref.Op.Doc.JSON = r.Op.Doc.JSON
		}
		if !sameRecord(&r, &ref) {
			t.Fatalf("Decode disagrees with the reference decoder:\n got %+v\nwant %+v", r, ref)
		}
		enc := encode(&r)
		again, err := accepted.Decode(enc)
		if err != nil {
			t.Fatalf("a decoded record does not decode after encoding: %v\n%s", err, enc)
		}
		if !sameRecord(&r, &again) {
			t.Fatalf("encoding changed a decoded record:\n got %+v\nwant %+v", again, r)
		}
		if enc2 := encode(&again); !bytes.Equal(enc2, enc) {
			t.Fatalf("encoding is not canonical:\n%s\n%s", enc, enc2)
		}
	})
}

// FuzzRecordRoundTrip builds records from arbitrary parts, keeps those Service.Do would
// publish (it validates addresses, documents, preconditions and programs before it encodes),
// and requires decode(encode(r)) == r, DecodeShared included, and a canonical encoding.
func FuzzRecordRoundTrip(f *testing.F) {
	for _, r := range recordSamples(f) {
		var keyKind byte
		var key []byte
		switch k := r.Op.Addr.Key; k.Kind() {
		case store.KindStringKey:
			key = []byte(k.StringValue())
		case store.KindInt64Key:
			keyKind, key = 1, strconv.AppendInt(nil, k.Int64Value(), 10)
		case store.KindBytesKey:
			keyKind, key = 2, k.BytesValue()
		case store.KindObjectIDKey:
			keyKind, key = 3, k.BytesValue()
		}
		var cond byte
		var rev []byte
		switch {
		case r.Op.If == store.IfAbsent():
			cond = 1
		case r.Op.If != store.Precondition{}:
			cond, rev = 2, []byte{0, 1, 2, 3, 4}
		}
		f.Add(r.RequestID, uint32(r.Index), r.AcceptedAt.UnixNano(), byte(r.Op.Kind), r.Op.Addr.Store, r.Op.Addr.Namespace, r.Op.Addr.Dataset,
			keyKind, key, cond, rev, r.Op.Program, r.Op.Doc.JSON, strings.Join(r.Op.Doc.Times, "\x00"))
	}
	f.Fuzz(func(t *testing.T, request string, index uint32, at int64, kind byte, st, ns, ds string,
		keyKind byte, key []byte, cond byte, rev []byte, program string, doc []byte, times string) {
		op, ok := fuzzOp(kind, store.Address{Store: st, Namespace: ns, Dataset: ds}, keyKind, key, cond, rev, program, doc, times)
		if !ok || !utf8.ValidString(request) || index > 1<<31 {
			return
		}
		r := accepted.Record{RequestID: request, Index: int(index), AcceptedAt: time.Unix(0, at), Op: op}
		enc := encode(&r)
		got, err := accepted.Decode(enc)
		if err != nil {
			t.Fatalf("%s does not decode: %v\n%s", r.String(), err, enc)
		}
		if !sameRecord(&r, &got) {
			t.Fatalf("round trip changed the record:\n got %+v\nwant %+v\n%s", got, r, enc)
		}
		var d accepted.Decoder
		if shared, err := d.DecodeShared(enc); err != nil || !sameRecord(&r, &shared) {
			t.Fatalf("DecodeShared: %v\n got %+v\nwant %+v", err, shared, r)
		}
		if ref, err := refDecode(enc); err != nil || !sameRecord(&r, &ref) {
			t.Fatalf("the reference decoder: %v\n got %+v\nwant %+v", err, ref, r)
		}
		if again := encode(&got); !bytes.Equal(again, enc) {
			t.Fatalf("encoding is not canonical:\n%s\n%s", enc, again)
		}
	})
}

// fuzzOp builds the operation of FuzzRecordRoundTrip; ok is false for one Service.Do refuses.
func fuzzOp(kind byte, a store.Address, keyKind byte, key []byte, cond byte, rev []byte, program string, doc []byte, times string) (store.Op, bool) {
	switch keyKind % 4 {
	case 0:
		a.Key = store.StringKey(string(key))
	case 1:
		n, err := strconv.ParseInt(string(key), 10, 64)
		if err != nil {
			return store.Op{}, false
		}
		a.Key = store.Int64Key(n)
	case 2:
		a.Key = store.BytesKey(key)
	case 3:
		if len(key) != 12 {
			return store.Op{}, false
		}
		a.Key = store.ObjectIDKey([12]byte(key))
	}
	if a.Validate() != nil {
		return store.Op{}, false
	}
	d := store.Document{JSON: doc}
	if times != "" {
		d.Times = strings.Split(times, "\x00")
	}
	var op store.Op
	switch kind % 3 {
	case 0:
		op = store.Put(a, d)
	case 1:
		if program == "" || !utf8.ValidString(program) {
			return store.Op{}, false
		}
		op = store.Merge(a, program, d)
	case 2:
		op = store.Delete(a)
	}
	if op.Kind != store.OpDelete {
		// The store validates documents before it encodes them: an object of valid UTF-8
		// whose date-time pointers name RFC 3339 strings.
		if _, err := store.NewDocument(json.RawMessage(doc), d.Times...); err != nil {
			return store.Op{}, false
		}
	}
	switch cond % 3 {
	case 1:
		if op.Kind == store.OpMerge {
			return store.Op{}, false
		}
		op = op.WithPrecondition(store.IfAbsent())
	case 2:
		r, err := store.RevisionFromBytes(rev)
		if err != nil || r.IsZero() || op.Kind == store.OpMerge {
			return store.Op{}, false
		}
		op = op.WithPrecondition(store.IfRevision(r))
	}
	return op, true
}

// repeatsDoc reports whether value may hold the member "doc" more than once.
func repeatsDoc(value []byte) bool {
	return bytes.Count(value, []byte(`doc`)) > 1 || bytes.Contains(value, []byte(`\u`))
}

// jsonInteger matches a JSON number without fraction or exponent.
var jsonInteger = regexp.MustCompile(`^-?(?:0|[1-9][0-9]*)$`)

// decodeErrorText matches the decoder's messages after "queue record is malformed: ".
var decodeErrorText = regexp.MustCompile(`^(?:` + strings.Join([]string{
	`(?:it is not a JSON object|expected a member name|expected ':'|expected ',' or '}'|data after the record` +
		`|member "(?:[a-z0-9_]{0,20}|\(unknown\))" is malformed or has the wrong type) at byte \d+`,
	`unknown record version -?\d+ \(this decoder reads 1\)`,
	`index is missing or out of range`, `accepted_at is not an RFC 3339 date-time`,
	`op is not put, merge or delete`, `key is missing`, `an int64 key is not a decimal int64`,
	`a bytes key is not standard base64`, `an objectid key is not 24 hex digits`,
	`key_type is not string, int64, bytes or objectid`, `revision is missing or malformed`,
	`if is not revision or absent`, `a (?:put|merge) without a document`,
	`a delete with a document or program`, `a merge without a program`,
	`the program does not match program_sha256`, `only merges carry a program`,
}, "|") + `)$`)

// checkDecodeError requires err to be the decoder's *store.Error of kind KindInvalid, its text
// "store: [op address: ]queue record is malformed: " and one of the decoder's messages, so that
// nothing of the value but the address can be in it.
func checkDecodeError(t *testing.T, err error) {
	t.Helper()
	var e *store.Error
	if !errors.As(err, &e) || error(e) != err || e.Kind != store.KindInvalid || !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Decode failed with %v (%T), want a *store.Error of kind KindInvalid", err, err)
	}
	head := "store: "
	if e.Op != 0 {
		addr := e.Addr.String()
		if len(addr) > 1024 {
			cut := 1024
			for cut > 0 && !utf8.RuneStart(addr[cut]) {
				cut--
			}
			addr = addr[:cut] + "..."
		}
		head += e.Op.String() + " " + addr + ": "
	} else if e.Addr != (store.Address{}) {
		t.Fatalf("an error names an address but no operation: %v", err)
	}
	head += "queue record is malformed: "
	msg := err.Error()
	if !strings.HasPrefix(msg, head) || !decodeErrorText.MatchString(msg[len(head):]) {
		t.Fatalf("Decode failed with a message that is not one of its own: %q", msg)
	}
}

// refDecode is a reference decoder of the documented format (Record), over encoding/json: the
// value is one JSON object; member names match exactly; unknown members are ignored; a
// repeated member counts the last time; a null member is an absent one. Beyond the format's
// text it follows these rules of the decoder, which the fuzz target thereby pins down:
//
//   - v and index are JSON integers (no fraction or exponent) within int64; index 0 to 2^31.
//   - Strings, member names included, are valid UTF-8 (encoding/json would replace invalid
//     bytes silently).
//   - accepted_at is what time.Parse(time.RFC3339Nano) reads, any offset, and an instant whose
//     UTC form Append can write again (years 0000-9999 in UTC).
//   - An int64 key is what strconv.ParseInt reads ("+5", "007"); a bytes key what
//     base64.StdEncoding reads (it skips CR and LF, and ignores non-zero padding bits); an
//     ObjectID key 24 hex digits of either case. All of them decode to the same key as the
//     canonical text, which is what Append writes again.
//   - revision is read only with if "revision", and program_sha256 only with a program; the
//     other records ignore them as they ignore unknown members.
//   - times is an array of strings; an empty array is no date-time pointers.
//   - The document is not validated (Service.Apply does): any JSON value.
func refDecode(value []byte) (accepted.Record, error) {
	bad := errors.New("refused")
	members, ok := refMembers(value)
	if !ok {
		return accepted.Record{}, bad
	}
	str := func(name string) (s string, present, ok bool) {
		raw, present := members[name]
		if !present || string(raw) == "null" {
			return "", false, true
		}
		if raw[0] != '"' || !utf8.Valid(raw) || json.Unmarshal(raw, &s) != nil {
			return "", true, false
		}
		return s, true, true
	}
	integer := func(name string) (n int64, present, ok bool) {
		raw, present := members[name]
		if !present || string(raw) == "null" {
			return 0, false, true
		}
		if !jsonInteger.Match(raw) {
			return 0, true, false
		}
		n, err := strconv.ParseInt(string(raw), 10, 64)
		return n, true, err == nil
	}
	var r accepted.Record
	v, _, ok1 := integer("v")
	index, hasIndex, ok2 := integer("index")
	request, _, ok3 := str("request")
	at, _, ok4 := str("accepted_at")
	opName, _, ok5 := str("op")
	st, _, ok6 := str("store")
	ns, _, ok7 := str("namespace")
	ds, _, ok8 := str("dataset")
	keyType, _, ok9 := str("key_type")
	key, hasKey, ok10 := str("key")
	cond, hasCond, ok11 := str("if")
	revText, _, ok12 := str("revision")
	hash, _, ok13 := str("program_sha256")
	program, hasProgram, ok14 := str("program")
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7 && ok8 && ok9 && ok10 && ok11 && ok12 && ok13 && ok14) {
		return r, bad
	}
	var times []string
	if raw, ok := members["times"]; ok && string(raw) != "null" {
		var elems []json.RawMessage
		if raw[0] != '[' || json.Unmarshal(raw, &elems) != nil {
			return r, bad
		}
		times = []string{}
		for _, e := range elems {
			var s string
			if e[0] != '"' || !utf8.Valid(e) || json.Unmarshal(e, &s) != nil {
				return r, bad
			}
			times = append(times, s)
		}
	}
	doc, hasDoc := members["doc"]
	if string(doc) == "null" {
		doc, hasDoc = nil, false
	}
	if v != accepted.Version || !hasIndex || index < 0 || index > 1<<31 {
		return r, bad
	}
	acceptedAt, err := time.Parse(time.RFC3339Nano, at)
	if err != nil || acceptedAt.UTC().Year() > 9999 || acceptedAt.UTC().Year() < 0 {
		return r, bad
	}
	if !hasKey {
		return r, bad
	}
	a := store.Address{Store: st, Namespace: ns, Dataset: ds}
	switch keyType {
	case "string":
		a.Key = store.StringKey(key)
	case "int64":
		n, err := strconv.ParseInt(key, 10, 64)
		if err != nil {
			return r, bad
		}
		a.Key = store.Int64Key(n)
	case "bytes":
		b, err := base64.StdEncoding.DecodeString(key)
		if err != nil {
			return r, bad
		}
		a.Key = store.BytesKey(b)
	case "objectid":
		b, err := hex.DecodeString(key)
		if err != nil || len(b) != 12 {
			return r, bad
		}
		a.Key = store.ObjectIDKey([12]byte(b))
	default:
		return r, bad
	}
	d := store.Document{JSON: doc, Times: times}
	switch opName {
	case "put":
		if !hasDoc || hasProgram {
			return r, bad
		}
		r.Op = store.Put(a, d)
	case "merge":
		if !hasDoc || !hasProgram || hash != accepted.ProgramHash(program) {
			return r, bad
		}
		r.Op = store.Merge(a, program, d)
	case "delete":
		if hasDoc || times != nil || hasProgram {
			return r, bad
		}
		r.Op = store.Delete(a)
	default:
		return r, bad
	}
	switch {
	case !hasCond:
	case cond == "absent":
		r.Op = r.Op.WithPrecondition(store.IfAbsent())
	case cond == "revision":
		rev, err := store.ParseRevision(revText)
		if err != nil || rev.IsZero() {
			return r, bad
		}
		r.Op = r.Op.WithPrecondition(store.IfRevision(rev))
	default:
		return r, bad
	}
	r.RequestID, r.Index, r.AcceptedAt = request, int(index), acceptedAt
	return r, nil
}

// refMembers splits value, which must be exactly one JSON object (whitespace around it
// allowed), into its members, the last of a repeated name winning; ok is false when value is
// anything else or a member name is not valid UTF-8.
func refMembers(value []byte) (map[string]json.RawMessage, bool) {
	dec := json.NewDecoder(bytes.NewReader(value))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	members := map[string]json.RawMessage{}
	for dec.More() {
		before := dec.InputOffset()
		tok, err := dec.Token()
		name, isName := tok.(string)
		if err != nil || !isName {
			return nil, false
		}
		if raw := value[before:dec.InputOffset()]; !utf8.Valid(raw) {
			return nil, false
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, false
		}
		members[name] = raw
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return members, true
}
