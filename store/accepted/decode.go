package accepted

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/store"
)

// Decoder decodes queue records. It remembers the last merge program whose hash it
// verified, so a run of records sharing one program hashes it once. The zero value is ready;
// it is not safe for concurrent use.
//
// The decoder is hand-written rather than encoding/json because a worker decodes every record
// it applies: reflection-driven decoding cost more than applying a put to memory. It is
// fastest on the layout Append writes (members in its order, no whitespace, plain ASCII
// strings), and reads any other layout of the same object to the same record, only slower.
type Decoder struct {
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

// Decode decodes one record with a fresh Decoder.
func Decode(value []byte) (Record, error) {
	var d Decoder
	return d.Decode(value)
}

// Decode reads a record Append wrote. A value that is not a well-formed record of a
// known version fails with a *store.Error of kind store.KindInvalid whose message never
// quotes the value: "store: queue record is malformed: ..." with a byte offset or the member at fault, and with
// the operation and address once they are read ("store: merge m/ns/ds/\"k\": queue record is
// malformed: the program does not match program_sha256").
// The record shares no memory with value. Member names are matched exactly; unknown members
// are skipped (they must be JSON); a repeated member counts once, the last time; a null member
// is an absent one (see Record for all the decoder reads). Documents are delimited here and
// validated when the record is applied (store.Service.Apply), against the configuration of the
// service that applies it.
func (d *Decoder) Decode(value []byte) (Record, error) {
	var r Record
	if err := d.decode(&r, value, false); err != nil {
		return Record{}, err
	}
	return r, nil
}

// DecodeShared is Decode for a caller that keeps value unmodified for as long as it uses the
// record: the record's document (Op.Doc.JSON) is a sub-slice of value instead of a copy. A
// worker holds each message until it finished it anyway, so sharing saves it a copy and an
// allocation per record. Everything else in the record is memory of its own, as with Decode.
func (d *Decoder) DecodeShared(value []byte) (Record, error) {
	var r Record
	if err := d.decode(&r, value, true); err != nil {
		return Record{}, err
	}
	return r, nil
}

// decode fills *r, the zero Record, from value; on failure *r is partly filled.
func (d *Decoder) decode(r *Record, value []byte, share bool) error {
	var wr wireRecord // on the stack: filling it costs no write barriers
	w := &wr
	if err := scanRecord(w, value, share); err != nil {
		return err
	}
	if w.v != Version {
		return malformed(fmt.Sprintf("unknown record version %d (this decoder reads %d)", w.v, Version))
	}
	if !w.hasIndex || w.index < 0 || w.index > 1<<31 {
		return malformed("index is missing or out of range")
	}
	if string(w.acceptedAt) != d.atText || d.atText == "" {
		at, err := time.Parse(time.RFC3339Nano, string(w.acceptedAt))
		// An offset may move the instant out of the years RFC 3339 can write in UTC, as
		// Append writes it: such a record could not be published again.
		if y := at.UTC().Year(); err != nil || y < 0 || y > 9999 {
			return malformed("accepted_at is not an RFC 3339 date-time")
		}
		d.atText, d.at = string(w.acceptedAt), at
	}
	op := &r.Op
	switch string(w.op) {
	case "put":
		op.Kind = store.OpPut
	case "merge":
		op.Kind = store.OpMerge
	case "delete":
		op.Kind = store.OpDelete
	default:
		return malformed("op is not put, merge or delete")
	}
	if !w.hasKey {
		return malformed("key is missing")
	}
	var err error
	if op.Addr.Key, err = decodeKey(w.keyType, w.key); err != nil {
		return err
	}
	op.Addr.Store, op.Addr.Namespace, op.Addr.Dataset = intern(&d.store, w.store), intern(&d.namespace, w.namespace), intern(&d.dataset, w.dataset)
	// From here on the record's operation and address are known, and its errors name them.
	malformed := func(msg string) error { return malformedOp(op.Kind, op.Addr, msg) }
	switch string(w.cond) {
	case "":
		if w.cond != nil { // "if":"" is no precondition the format has
			return malformed("if is not revision or absent")
		}
	case "absent":
		op.If = store.IfAbsent()
	case "revision":
		rev, err := store.ParseRevision(string(w.revision))
		if err != nil || rev.IsZero() {
			return malformed("revision is missing or malformed")
		}
		op.If = store.IfRevision(rev)
	default:
		return malformed("if is not revision or absent")
	}
	switch op.Kind {
	case store.OpPut, store.OpMerge:
		if w.doc == nil {
			return malformed("a " + op.Kind.String() + " without a document")
		}
		op.Doc = store.Document{JSON: w.doc, Times: w.times}
	case store.OpDelete:
		if w.doc != nil || w.times != nil || w.hasProgram {
			return malformed("a delete with a document or program")
		}
	}
	if op.Kind == store.OpMerge {
		if !w.hasProgram {
			return malformed("a merge without a program")
		}
		if string(w.program) != d.program || string(w.programSHA256) != d.hash || d.hash == "" {
			program := string(w.program)
			hash := ProgramHash(program)
			if string(w.programSHA256) != hash {
				return malformed("the program does not match program_sha256")
			}
			d.program, d.hash = program, hash
		}
		op.Program = d.program // one string shared by the records of a program
	} else if w.hasProgram {
		return malformed("only merges carry a program")
	}
	r.RequestID, r.Index, r.AcceptedAt = intern(&d.request, w.request), int(w.index), d.at
	return nil
}

func decodeKey(kind, v []byte) (store.Key, error) {
	switch string(kind) {
	case "string":
		return store.StringKey(string(v)), nil
	case "int64":
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return store.Key{}, malformed("an int64 key is not a decimal int64")
		}
		return store.Int64Key(n), nil
	case "bytes":
		b, err := base64.StdEncoding.AppendDecode(nil, v)
		if err != nil {
			return store.Key{}, malformed("a bytes key is not standard base64")
		}
		return store.BytesKey(b), nil
	case "objectid":
		b, err := hex.AppendDecode(nil, v)
		if err != nil || len(b) != 12 {
			return store.Key{}, malformed("an objectid key is not 24 hex digits")
		}
		return store.ObjectIDKey([12]byte(b)), nil
	}
	return store.Key{}, malformed("key_type is not string, int64, bytes or objectid")
}

func malformed(msg string) error { return malformedOp(0, store.Address{}, msg) }

// malformedOp is malformed for a record whose operation and address are known.
func malformedOp(op store.OpKind, addr store.Address, msg string) error {
	return &store.Error{Kind: store.KindInvalid, Op: op, Addr: addr, Err: errors.New("queue record is malformed: " + msg)}
}

// wireRecord holds the members of a record as scanned.
type wireRecord struct {
	v, index                     int64
	hasIndex, hasKey, hasProgram bool
	// Strings as they are in the input (or unescaped copies); nil when absent.
	request, acceptedAt, op, store, namespace, dataset, keyType, key []byte
	cond, revision, programSHA256, program                           []byte
	doc                                                              []byte // a copy, or shared with the input
	times                                                            []string
}

// clear makes member m absent again (a null given after a value).
func (w *wireRecord) clear(m int) {
	switch m {
	case memberV:
		w.v = 0
	case memberIndex:
		w.index, w.hasIndex = 0, false
	case memberRequest:
		w.request = nil
	case memberAcceptedAt:
		w.acceptedAt = nil
	case memberOp:
		w.op = nil
	case memberStore:
		w.store = nil
	case memberNamespace:
		w.namespace = nil
	case memberDataset:
		w.dataset = nil
	case memberKeyType:
		w.keyType = nil
	case memberKey:
		w.key, w.hasKey = nil, false
	case memberIf:
		w.cond = nil
	case memberRevision:
		w.revision = nil
	case memberProgramSHA256:
		w.programSHA256 = nil
	case memberProgram:
		w.program, w.hasProgram = nil, false
	case memberDoc:
		w.doc = nil
	case memberTimes:
		w.times = nil
	}
}

// The members of a record, in the order Append writes them.
const (
	memberV = iota
	memberRequest
	memberIndex
	memberAcceptedAt
	memberOp
	memberStore
	memberNamespace
	memberDataset
	memberKeyType
	memberKey
	memberIf
	memberRevision
	memberProgramSHA256
	memberProgram
	memberDoc
	memberTimes
	memberUnknown
)

// memberNames[m] is member m's name; memberQuoted[m] is how Append writes it, quoted
// and followed by ':'.
var memberNames, memberQuoted = func() (names, quoted [memberUnknown]string) {
	names = [...]string{"v", "request", "index", "accepted_at", "op", "store", "namespace", "dataset",
		"key_type", "key", "if", "revision", "program_sha256", "program", "doc", "times"}
	for m, n := range names {
		quoted[m] = `"` + n + `":`
	}
	return names, quoted
}()

// scanRecord reads the top-level object of a record into *w, the zero wireRecord; share says
// whether w.doc may be a sub-slice of b. Errors say where, never what.
func scanRecord(w *wireRecord, b []byte, share bool) error {
	s := scanner{b: b, share: share}
	if !s.consume('{') {
		return s.fail("it is not a JSON object")
	}
	if s.consume('}') {
		return s.end()
	}
	next := 0 // members next and later are those Append may write after the last one
	for {
		// A record as Append writes it has its members in order and without
		// whitespace: compare the names it may write here before scanning one.
		m := memberUnknown
		for c := next; c < memberUnknown; c++ {
			if s.hasPrefix(memberQuoted[c]) {
				m, next = c, c+1
				s.i += len(memberQuoted[c])
				break
			}
		}
		var name []byte
		if m == memberUnknown {
			var ok bool
			if name, ok = s.bytes(); !ok {
				return s.fail("expected a member name")
			}
			if !s.consume(':') {
				return s.fail("expected ':'")
			}
			for c, n := range memberNames {
				if string(name) == n {
					m = c
					break
				}
			}
		}
		if s.null() {
			w.clear(m) // a null member is an absent one, also after the member was given once
		} else {
			var ok bool
			switch m {
			case memberV:
				w.v, ok = s.int()
			case memberIndex:
				w.index, ok = s.int()
				w.hasIndex = true
			case memberRequest:
				w.request, ok = s.bytes()
			case memberAcceptedAt:
				w.acceptedAt, ok = s.bytes()
			case memberOp:
				w.op, ok = s.bytes()
			case memberStore:
				w.store, ok = s.bytes()
			case memberNamespace:
				w.namespace, ok = s.bytes()
			case memberDataset:
				w.dataset, ok = s.bytes()
			case memberKeyType:
				w.keyType, ok = s.bytes()
			case memberKey:
				w.key, ok = s.bytes()
				w.hasKey = true
			case memberIf:
				w.cond, ok = s.bytes()
			case memberRevision:
				w.revision, ok = s.bytes()
			case memberProgramSHA256:
				w.programSHA256, ok = s.bytes()
			case memberProgram:
				w.program, ok = s.bytes()
				w.hasProgram = true
			case memberDoc:
				w.doc, ok = s.value()
			case memberTimes:
				w.times, ok = s.strings()
			default:
				// An unknown member is skipped, but it must be JSON: the record is one JSON
				// object, which other readers (a dead-letter tool) must be able to read too.
				var v []byte
				v, ok = s.valueShared()
				ok = ok && json.Valid(v)
			}
			if !ok {
				return s.fail("member " + strconv.Quote(safeName(memberName(m, name))) + " is malformed or has the wrong type")
			}
		}
		if s.i < len(s.b) && s.b[s.i] == ',' { // the usual case, without whitespace
			s.i++
			continue
		}
		if s.consume('}') {
			return s.end()
		}
		if !s.consume(',') {
			return s.fail("expected ',' or '}'")
		}
	}
}

// memberName returns member m's name, or name when m is memberUnknown.
func memberName(m int, name []byte) string {
	if m == memberUnknown {
		return string(name)
	}
	return memberNames[m]
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

// Byte classes of the scanner's loops, so that each loop tests one table entry per byte
// rather than a chain of comparisons.
var (
	// plainInString: printable ASCII but '"' and '\\' -- a string of only these needs
	// neither unescaping nor UTF-8 validation.
	plainInString [256]bool
	// inertInValue: bytes that neither open, close nor separate anything in a JSON value.
	inertInValue [256]bool
)

func init() {
	for c := 0x20; c < 0x80; c++ {
		plainInString[c] = c != '"' && c != '\\'
	}
	for c := range inertInValue {
		switch c {
		case '"', '{', '[', '}', ']', ',', ' ', '\t', '\r', '\n':
		default:
			inertInValue[c] = true
		}
	}
}

// plainRun returns the index of the first byte of b at or after i that is not plain in a
// string, or len(b). It tests eight bytes per step: each term below flags, in a byte's high
// bit, one kind of byte that is not plain -- below 0x20, '"', '\\', 0x80 and above. A term can
// also flag bytes above one it rightly flagged (the subtraction's borrow), never below, so
// the lowest flag is exact.
func plainRun(b []byte, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		q, bs := x^(ones*'"'), x^(ones*'\\')
		m := (x-ones*0x20)&^x | (q-ones)&^q | (bs-ones)&^bs | x
		if m &= highs; m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for i < len(b) && plainInString[b[i]] {
		i++
	}
	return i
}

// scanner walks JSON text. Its methods skip leading whitespace and report ok = false, with
// the position at the failure, for input they cannot take.
type scanner struct {
	b     []byte
	i     int
	share bool // value may return sub-slices of b
}

func (s *scanner) fail(msg string) error {
	return malformed(msg + " at byte " + strconv.Itoa(s.i))
}

func (s *scanner) end() error {
	s.ws()
	if s.i != len(s.b) {
		return s.fail("data after the record")
	}
	return nil
}

func (s *scanner) ws() {
	if s.i < len(s.b) && s.b[s.i] > ' ' { // records as Append writes them have no whitespace
		return
	}
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

// hasPrefix reports whether the input at s.i starts with p, a quoted member name: the byte
// after the quote rejects most names before the comparison of the rest.
func (s *scanner) hasPrefix(p string) bool {
	return len(s.b)-s.i >= len(p) && s.b[s.i+1] == p[1] && string(s.b[s.i:s.i+len(p)]) == p
}

func (s *scanner) null() bool {
	if s.i < len(s.b) && s.b[s.i] > ' ' && s.b[s.i] != 'n' {
		return false
	}
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
	neg := s.i < len(s.b) && s.b[s.i] == '-'
	if neg {
		s.i++
	}
	var n uint64
	digits := 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		if digits == 18 { // beyond what surely fits: let strconv judge the range
			for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
				s.i++
			}
			v, err := strconv.ParseInt(string(s.b[start:s.i]), 10, 64)
			return v, err == nil
		}
		n = n*10 + uint64(s.b[s.i]-'0')
		digits++
		s.i++
	}
	if digits == 0 || (digits > 1 && s.b[start+b2i(neg)] == '0') { // JSON has no leading zeros
		return 0, false
	}
	if neg {
		return -int64(n), true
	}
	return int64(n), true
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
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
	b, start := s.b, s.i
	if start >= len(b) || b[start] != '"' {
		return nil, false
	}
	// The common string is plain ASCII: find its end eight bytes at a time.
	j := plainRun(b, start+1)
	if j < len(b) && b[j] == '"' {
		s.i = j + 1
		return b[start+1 : j], true
	}
	escaped := false
	for s.i = j; s.i < len(b); s.i++ {
		switch c := b[s.i]; {
		case c == '"':
			raw := b[start+1 : s.i]
			s.i++
			if !utf8.Valid(raw) {
				return nil, false
			}
			if !escaped {
				return raw, true
			}
			var out string // escapes are rare in records: let encoding/json resolve them
			if json.Unmarshal(b[start:s.i], &out) != nil {
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

// value returns the extent of one JSON value, copied unless the scanner shares. Objects and
// arrays are delimited by nesting and strings, not validated: the store validates documents
// before applying them.
func (s *scanner) value() ([]byte, bool) {
	start, ok := s.extent()
	if !ok {
		return nil, false
	}
	return s.take(start), true
}

// valueShared is value without the copy: the extent in the input, for a value only looked at.
func (s *scanner) valueShared() ([]byte, bool) {
	start, ok := s.extent()
	if !ok {
		return nil, false
	}
	return s.b[start:s.i:s.i], true
}

// extent moves past one JSON value and returns where it starts.
func (s *scanner) extent() (int, bool) {
	s.ws()
	start := s.i
	depth := 0
	for s.i < len(s.b) {
		c := s.b[s.i]
		if inertInValue[c] {
			s.i++
			continue
		}
		switch c {
		case '"':
			if !s.skipString() {
				return start, false
			}
			if depth == 0 {
				return start, true
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return start, s.i > start
			}
			depth--
			if depth == 0 {
				s.i++
				return start, true
			}
		case ',', ' ', '\t', '\r', '\n':
			if depth == 0 {
				return start, s.i > start
			}
		}
		s.i++
	}
	return start, depth == 0 && s.i > start
}

// take returns b[start:i]: shared when the scanner shares (capped, so an append to it cannot
// reach the rest of the input), else in memory of its own, so a record never pins the
// fetched message.
func (s *scanner) take(start int) []byte {
	if s.share {
		return s.b[start:s.i:s.i]
	}
	return append([]byte(nil), s.b[start:s.i]...)
}

// skipString moves past the string at s.i. Long strings are common in documents, so it
// jumps from quote to quote; a quote ends the string unless an odd run of backslashes
// precedes it.
func (s *scanner) skipString() bool {
	open := s.i
	for i := open + 1; ; {
		n := bytes.IndexByte(s.b[i:], '"')
		if n < 0 {
			s.i = len(s.b)
			return false
		}
		i += n
		k := i - 1
		for k > open && s.b[k] == '\\' {
			k--
		}
		if (i-1-k)%2 == 0 {
			s.i = i + 1
			return true
		}
		i++
	}
}
