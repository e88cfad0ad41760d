package store

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// RecordDecoder decodes queue records. It remembers the last merge program whose hash it
// verified, so a run of records sharing one program hashes it once. The zero value is ready;
// it is not safe for concurrent use.
//
// The decoder is hand-written rather than encoding/json because a worker decodes every record
// it applies: reflection-driven decoding cost more than applying a put to memory.
type RecordDecoder struct {
	program, hash string
	// The last value of each repeated string, so records of one request and dataset share
	// them instead of allocating their own.
	request, store, namespace, dataset string
	atText                             string
	at                                 time.Time
}

// intern returns b as a string, the one in *last when they are equal.
func intern(last *string, b []byte) string {
	if string(b) != *last {
		*last = string(b)
	}
	return *last
}

// DecodeRecord decodes one record with a fresh RecordDecoder.
func DecodeRecord(value []byte) (Record, error) {
	var d RecordDecoder
	return d.Decode(value)
}

// Decode reads a record AppendRecord wrote. A value that is not a well-formed record of a
// known version fails with a *Error of kind KindInvalid whose message never quotes the value.
// The record shares no memory with value. Member names are matched exactly; unknown members are skipped; a repeated member counts
// once, the last time; a null member is an absent one. Documents are delimited here and
// validated when the record is applied (Service.Apply), against the configuration of the
// service that applies it.
func (d *RecordDecoder) Decode(value []byte) (Record, error) {
	w, err := scanRecord(value)
	if err != nil {
		return Record{}, err
	}
	if w.v != RecordVersion {
		return Record{}, malformed(fmt.Sprintf("unknown record version %d (this decoder reads %d)", w.v, RecordVersion))
	}
	if !w.hasIndex || w.index < 0 || w.index > 1<<31 {
		return Record{}, malformed("index is missing or out of range")
	}
	if string(w.acceptedAt) != d.atText || d.atText == "" {
		at, err := time.Parse(time.RFC3339Nano, string(w.acceptedAt))
		if err != nil {
			return Record{}, malformed("accepted_at is not an RFC 3339 date-time")
		}
		d.atText, d.at = string(w.acceptedAt), at
	}
	r := Record{RequestID: intern(&d.request, w.request), Index: int(w.index), AcceptedAt: d.at}
	op := &r.Op
	switch string(w.op) {
	case "put":
		op.Kind = OpPut
	case "merge":
		op.Kind = OpMerge
	case "delete":
		op.Kind = OpDelete
	default:
		return Record{}, malformed("op is not put, merge or delete")
	}
	op.Addr = Address{Store: intern(&d.store, w.store), Namespace: intern(&d.namespace, w.namespace), Dataset: intern(&d.dataset, w.dataset)}
	if !w.hasKey {
		return Record{}, malformed("key is missing")
	}
	if op.Addr.Key, err = decodeRecordKey(w.keyType, w.key); err != nil {
		return Record{}, err
	}
	switch string(w.cond) {
	case "":
	case "absent":
		op.If = IfAbsent()
	case "revision":
		rev, err := ParseRevision(string(w.revision))
		if err != nil || rev.IsZero() {
			return Record{}, malformed("revision is missing or malformed")
		}
		op.If = IfRevision(rev)
	default:
		return Record{}, malformed("if is not revision or absent")
	}
	switch op.Kind {
	case OpPut, OpMerge:
		if w.doc == nil {
			return Record{}, malformed("a " + op.Kind.String() + " without a document")
		}
		op.Doc = Document{JSON: w.doc, Times: w.times}
	case OpDelete:
		if w.doc != nil || w.times != nil || w.hasProgram {
			return Record{}, malformed("a delete with a document or program")
		}
	}
	if op.Kind == OpMerge {
		if !w.hasProgram {
			return Record{}, malformed("a merge without a program")
		}
		if string(w.program) != d.program || string(w.programSHA256) != d.hash {
			program := string(w.program)
			hash := ProgramHash(program)
			if string(w.programSHA256) != hash {
				return Record{}, malformed("the program does not match program_sha256")
			}
			d.program, d.hash = program, hash
		}
		op.Program = d.program // one string shared by the records of a program
	} else if w.hasProgram {
		return Record{}, malformed("only merges carry a program")
	}
	return r, nil
}

func decodeRecordKey(kind, v []byte) (Key, error) {
	switch string(kind) {
	case "string":
		return StringKey(string(v)), nil
	case "int64":
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return Key{}, malformed("an int64 key is not a decimal int64")
		}
		return Int64Key(n), nil
	case "bytes":
		b, err := base64.StdEncoding.AppendDecode(nil, v)
		if err != nil {
			return Key{}, malformed("a bytes key is not standard base64")
		}
		return BytesKey(b), nil
	case "objectid":
		b, err := hex.AppendDecode(nil, v)
		if err != nil || len(b) != 12 {
			return Key{}, malformed("an objectid key is not 24 hex digits")
		}
		return ObjectIDKey([12]byte(b)), nil
	}
	return Key{}, malformed("key_type is not string, int64, bytes or objectid")
}

func malformed(msg string) *Error {
	return &Error{Kind: KindInvalid, Err: errors.New("malformed queue record: " + msg)}
}

// wireRecord holds the members of a record as scanned.
type wireRecord struct {
	v, index                     int64
	hasIndex, hasKey, hasProgram bool
	// Strings as they are in the input (or unescaped copies); nil when absent.
	request, acceptedAt, op, store, namespace, dataset, keyType, key []byte
	cond, revision, programSHA256, program                           []byte
	doc                                                              []byte // a copy
	times                                                            []string
}

// scanRecord reads the top-level object of a record. Errors say where, never what.
func scanRecord(b []byte) (wireRecord, error) {
	var w wireRecord
	s := scanner{b: b}
	if !s.consume('{') {
		return w, s.fail("not a JSON object")
	}
	if s.consume('}') {
		return w, s.end(w)
	}
	for {
		name, ok := s.bytes()
		if !ok {
			return w, s.fail("expected a member name")
		}
		if !s.consume(':') {
			return w, s.fail("expected ':'")
		}
		if s.null() {
			// A null member is an absent one.
		} else {
			var ok bool
			switch string(name) {
			case "v":
				w.v, ok = s.int()
			case "index":
				w.index, ok = s.int()
				w.hasIndex = true
			case "request":
				w.request, ok = s.bytes()
			case "accepted_at":
				w.acceptedAt, ok = s.bytes()
			case "op":
				w.op, ok = s.bytes()
			case "store":
				w.store, ok = s.bytes()
			case "namespace":
				w.namespace, ok = s.bytes()
			case "dataset":
				w.dataset, ok = s.bytes()
			case "key_type":
				w.keyType, ok = s.bytes()
			case "key":
				w.key, ok = s.bytes()
				w.hasKey = true
			case "if":
				w.cond, ok = s.bytes()
			case "revision":
				w.revision, ok = s.bytes()
			case "program_sha256":
				w.programSHA256, ok = s.bytes()
			case "program":
				w.program, ok = s.bytes()
				w.hasProgram = true
			case "doc":
				w.doc, ok = s.value()
			case "times":
				w.times, ok = s.strings()
			default:
				_, ok = s.value()
			}
			if !ok {
				return w, s.fail("member " + strconv.Quote(safeName(string(name))) + " is malformed or has the wrong type")
			}
		}
		if s.consume('}') {
			return w, s.end(w)
		}
		if !s.consume(',') {
			return w, s.fail("expected ',' or '}'")
		}
	}
}

// safeName returns a member name for an error message: the record format's names are short
// ASCII; anything else is not quoted.
func safeName(name string) string {
	if len(name) > 20 {
		return "(unknown)"
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c != '_' && (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return "(unknown)"
		}
	}
	return name
}

// scanner walks JSON text. Its methods skip leading whitespace and report ok = false, with
// the position at the failure, for input they cannot take.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) fail(msg string) error {
	return malformed("not a record: " + msg + " at byte " + strconv.Itoa(s.i))
}

func (s *scanner) end(w wireRecord) error {
	s.ws()
	if s.i != len(s.b) {
		return s.fail("data after the record")
	}
	return nil
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) consume(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *scanner) null() bool {
	s.ws()
	if len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

// int reads a JSON number that is an integer without fraction or exponent.
func (s *scanner) int() (int64, bool) {
	s.ws()
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	n, err := strconv.ParseInt(string(s.b[start:s.i]), 10, 64)
	return n, err == nil
}

// str reads a JSON string of valid UTF-8.
func (s *scanner) str() (string, bool) {
	b, ok := s.bytes()
	return string(b), ok
}

// bytes reads a JSON string of valid UTF-8 and returns its contents, in the input when the
// string has no escapes.
func (s *scanner) bytes() ([]byte, bool) {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	start := s.i
	// The common string has no escapes: find its end with IndexByte, then check it.
	if n := bytes.IndexByte(s.b[start+1:], '"'); n >= 0 {
		raw := s.b[start+1 : start+1+n]
		plain := true
		for _, c := range raw {
			if c < 0x20 || c == '\\' || c >= 0x80 {
				plain = false
				break
			}
		}
		if plain {
			s.i = start + n + 2
			return raw, true
		}
	}
	escaped := false
	for s.i++; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			raw := s.b[start+1 : s.i]
			s.i++
			if !utf8.Valid(raw) {
				return nil, false
			}
			if !escaped {
				return raw, true
			}
			var out string // escapes are rare in records: let encoding/json resolve them
			if json.Unmarshal(s.b[start:s.i], &out) != nil {
				return nil, false
			}
			return []byte(out), true
		case c == '\\':
			escaped = true
			s.i++
		case c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

// strings reads an array of strings.
func (s *scanner) strings() ([]string, bool) {
	if !s.consume('[') {
		return nil, false
	}
	out := []string{}
	if s.consume(']') {
		return out, true
	}
	for {
		v, ok := s.str()
		if !ok {
			return nil, false
		}
		out = append(out, v)
		if s.consume(']') {
			return out, true
		}
		if !s.consume(',') {
			return nil, false
		}
	}
}

// value returns the extent of one JSON value, copied. Objects and arrays are delimited by
// nesting and strings, not validated: the store validates documents before applying them.
func (s *scanner) value() ([]byte, bool) {
	s.ws()
	start := s.i
	depth := 0
	for s.i < len(s.b) {
		switch c := s.b[s.i]; c {
		case '"':
			if _, ok := s.skipString(); !ok {
				return nil, false
			}
			if depth == 0 {
				return s.copy(start), true
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return s.scalar(start)
			}
			depth--
			if depth == 0 {
				s.i++
				return s.copy(start), true
			}
		case ',', ' ', '\t', '\r', '\n':
			if depth == 0 {
				return s.scalar(start)
			}
		}
		s.i++
	}
	if depth > 0 {
		return nil, false
	}
	return s.scalar(start)
}

func (s *scanner) scalar(start int) ([]byte, bool) {
	if s.i == start {
		return nil, false
	}
	return s.copy(start), true
}

// copy returns b[start:i] in memory of its own, so a record never pins the fetched message.
func (s *scanner) copy(start int) []byte {
	return append([]byte(nil), s.b[start:s.i]...)
}

// skipString moves past the string at s.i.
func (s *scanner) skipString() (int, bool) {
	start := s.i
	for s.i++; s.i < len(s.b); s.i++ {
		switch s.b[s.i] {
		case '"':
			s.i++
			return start, true
		case '\\':
			s.i++
		}
	}
	return start, false
}
