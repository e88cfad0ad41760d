package difftest

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The oracle: the document field each source value must become, derived from the source's own
// text form of the value (read back with SQL, see pg_test.go and mysql_test.go) and the rules
// package sink documents -- never from the sink's normalizer. Everything here is written from
// the documentation, not from the sink's code.

// wantKind is how an expected field value is compared with the document's.
type wantKind uint8

const (
	wNull  wantKind = iota
	wStr            // a JSON string with exactly this text
	wNum            // a JSON number with exactly this text (integers, epoch_millis)
	wFloat          // a JSON number that parses to exactly this float (at bits precision)
	wBool           // true or false
	wJSON           // an embedded JSON document, compared in canonical form (order kept)
	wArr            // a JSON array, element by element
)

var wantKindNames = [...]string{"null", "string", "number", "float", "bool", "json", "array"}

func (k wantKind) String() string { return wantKindNames[k] }

// want is one expected field value.
type want struct {
	k    wantKind
	s    string // wStr text, wNum digits, wJSON canonical text
	f    float64
	bits int // wFloat: 32 or 64
	b    bool
	arr  []want
}

func (w want) String() string {
	switch w.k {
	case wNull:
		return "null"
	case wStr:
		return strconv.Quote(w.s)
	case wNum, wJSON:
		return w.s
	case wFloat:
		return strconv.FormatFloat(w.f, 'g', -1, w.bits)
	case wBool:
		return strconv.FormatBool(w.b)
	}
	parts := make([]string, len(w.arr))
	for i, e := range w.arr {
		parts[i] = e.String()
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// Rules of the allow-list: the only reasons a row may be missing from the index. Each is a
// difference the documentation names, quoted at the rule; anything else is a failure. (Dates no
// format parses are no longer among them: sink/doc.go, Decimals, has them "written as
// PostgreSQL's text into date fields created with ignore_malformed", and the sink creates
// every index of this test.)
const (
	// sink.GenerateMapping, json: "JSONFlattened opts into flattened (Elasticsearch) or
	// flat_object (OpenSearch): ... top-level scalars and arrays of scalars are refused by the
	// engine per document." -- dead-lettered with the cluster's error types.
	ruleFlattened = "flattened_top_level_scalar"
	// sink/doc.go, Documents and _id: "... an empty or over-512-byte _id is a per-row
	// serialization failure: the row is dead-lettered, never written with an auto-generated id."
	ruleEmptyID = "empty_id"
	// sink/doc.go, Unchanged values: "No stored document, a stored document without the field,
	// or an older change in the batch that deleted the row: the row is dead-lettered with a
	// reason "unchanged_value_unavailable: column "c": ..."", and the stored document lacks a
	// change when "that previous change was dead-lettered (which was reported then; its values
	// are missing from the index either way)". Allowed only when an earlier dead letter of a
	// documented rule took a change of the row the values come from; the row may then be
	// missing or older. After an undocumented one it counts as that one's consequence.
	ruleUnchangedLost = "unchanged_after_dead_letter"
	// sink/doc.go, Schema changes: "A column whose type changed keeps its existing field ...
	// the others are rejected per document and dead-lettered with the cluster's error type
	// (document_parsing_exception on Elasticsearch, mapper_parsing_exception on OpenSearch)."
	// The schema cases widen integer types only (their text form, and so every document
	// written before, stays the same): a value beyond the old field's range (byte, short,
	// integer: sink.GenerateMapping's narrowest type) is this rule's.
	ruleAlteredType = "altered_type_rejected"
	// sink/doc.go, Unchanged values: "No stored document ...: the row is dead-lettered with a
	// reason "unchanged_value_unavailable: ..."", and Schema events: an index a relation entered
	// (or a TRUNCATE) gets "a new empty generation" that only the re-snapshot fills. An update
	// with unchanged values of a row the re-snapshot has not written yet finds no document.
	// Allowed in the schema cases for a name emptied during the case; the row may then be
	// missing or older, as after any documented dead letter.
	ruleUnchangedEmptied = "unchanged_after_emptied"
	// cdc/mysqlcdc/doc.go, Schemas: rows whose table map has a column without any description
	// that may be of a type only the catalog tells (MariaDB's JSON, INET4, INET6, UUID) "go out
	// malformed (dead-lettered, ErrAmbiguousType, ...)". Allowed when every
	// column the reason names is, in a relation that bore the table's name, of such a type or
	// of a BINARY the binlog cannot tell from one; the row may then be missing or older.
	ruleAmbiguousType = "ambiguous_type"
)

// ruleReason matches the dead-letter reasons each rule allows.
var ruleReason = map[string]*regexp.Regexp{
	ruleUnchangedEmptied: regexp.MustCompile(`^unchanged_value_unavailable: column "[^"]*": the source did not resend an unchanged TOAST value and ` +
		`the index holds no document to take it from; set REPLICA IDENTITY FULL on the table to have the source send every value$`),
	ruleAlteredType:   regexp.MustCompile(`^rejected by the cluster: status 400 (document_parsing_exception|mapper_parsing_exception)(, caused by [a-z_]+)?$`),
	ruleFlattened:     regexp.MustCompile(`^rejected by the cluster: status 400 (document_parsing_exception|mapper_parsing_exception)(, caused by [a-z_]+)?$`),
	ruleEmptyID:       regexp.MustCompile(`^serialization failure: the _id would be empty$`),
	ruleAmbiguousType: regexp.MustCompile(`^malformed: mysqlcdc: a column's type cannot be told: .*: column "[^"]+" \(.*\)$`),
	ruleUnchangedLost: regexp.MustCompile(`^unchanged_value_unavailable: column "[^"]*": the source did not resend an unchanged TOAST value and ` +
		`(the index holds no document to take it from|the index's document lacks the field); set REPLICA IDENTITY FULL on the table to have the source send every value$`),
}

// expectation is what one source row must become: the fields, or the documented rules that
// refuse it (then the row is dead-lettered and its document may be absent or an older one).
type expectation struct {
	id      string
	fields  []fieldWant
	refused []refusal
	// mayRefuse: rules that may have refused the row's change (ruleAlteredType): the row is
	// then either indexed exactly or dead-lettered by the rule.
	mayRefuse []refusal
}

type fieldWant struct {
	col *column
	w   want
	// optional: the column was added after the row's last write, so the document written then
	// lacks the field (sink/doc.go, Schema changes: the documents written before a column
	// existed are not rewritten); when present it must hold the value.
	optional bool
}

type refusal struct {
	rule string
	col  string // "" for a rule about the whole row
}

var (
	plainDate     = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)
	plainDateTime = regexp.MustCompile(`^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,6})?$`)
	decimalText   = regexp.MustCompile(`^-?\d+(\.\d+)?$`)
)

// trimFrac drops trailing zeros of a fractional second, and the dot when nothing is left
// ("12:34:56.780" -> "12:34:56.78", "...05.000" -> "...05"): sink.AppendDocument, "trailing
// fractional zeros trimmed".
func trimFrac(s string) string {
	dot := strings.LastIndexByte(s, '.')
	if dot < 0 || strings.ContainsAny(s[dot+1:], ":- ") {
		return s
	}
	t := strings.TrimRight(s[dot+1:], "0")
	if t == "" {
		return s[:dot]
	}
	return s[:dot+1] + t
}

// epochMillis turns exact epoch seconds ("1717243200.125", "-0.000001") into the documented
// epoch_millis text: "epoch_millis as a JSON number, with the sub-millisecond digits as a
// fraction" (sink.AppendDocument), trailing fraction zeros dropped.
func epochMillis(sec string) (string, error) {
	if !decimalText.MatchString(sec) {
		return "", fmt.Errorf("epoch seconds %q", sec)
	}
	neg := strings.HasPrefix(sec, "-")
	sec = strings.TrimPrefix(sec, "-")
	ip, fp, _ := strings.Cut(sec, ".")
	if len(fp) > 6 {
		if strings.Trim(fp[6:], "0") != "" {
			return "", fmt.Errorf("epoch seconds %q finer than microseconds", sec)
		}
		fp = fp[:6]
	}
	fp += strings.Repeat("0", 6-len(fp))
	micros, ok := new(big.Int).SetString(ip+fp, 10)
	if !ok {
		return "", fmt.Errorf("epoch seconds %q", sec)
	}
	ms, frac := new(big.Int).QuoRem(micros, big.NewInt(1000), new(big.Int))
	out := ms.String()
	if f := frac.Int64(); f != 0 {
		out += "." + strings.TrimRight(fmt.Sprintf("%03d", f), "0")
	}
	if neg && out != "0" {
		out = "-" + out
	}
	return out, nil
}

// canonicalJSON re-encodes a JSON text token by token: whitespace outside strings goes,
// strings and numbers are rewritten uniformly, member order and duplicate members stay. Two
// texts are the same document exactly when their canonical forms are equal.
func canonicalJSON(text []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	var b strings.Builder
	// Each open container's state: whether the next token is a key (objects) and whether a
	// comma is due.
	type frame struct {
		object, first, key bool
	}
	var stack []frame
	sep := func() {
		if len(stack) == 0 {
			return
		}
		f := &stack[len(stack)-1]
		if f.object && !f.key {
			b.WriteByte(':')
			f.key = true
			return
		}
		if !f.first {
			b.WriteByte(',')
		}
		f.first = false
		if f.object {
			f.key = false
		}
	}
	n := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", err
		}
		n++
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				sep()
				b.WriteByte(byte(v))
				stack = append(stack, frame{object: v == '{', first: true, key: true})
			default:
				b.WriteByte(byte(v))
				stack = stack[:len(stack)-1]
			}
		case string:
			sep()
			q, _ := json.Marshal(v)
			b.Write(q)
		case json.Number:
			sep()
			b.WriteString(v.String())
		case bool:
			sep()
			b.WriteString(strconv.FormatBool(v))
		case nil:
			sep()
			b.WriteString("null")
		}
	}
	if n == 0 {
		return "", fmt.Errorf("empty JSON text")
	}
	return b.String(), nil
}

// expectedJSON is the canonical form of the document a source JSON text must become: with
// duplicate member names resolved as sink/doc.go (Documents and _id) says -- "in every object,
// at every level, only the last member of a name stays, where it stands; the other members
// keep their order", names compared by decoded text. The document's own text is compared in
// canonicalJSON's form, which keeps duplicates, so one the sink leaves shows.
func expectedJSON(text []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	v, err := decodeJSONTree(dec)
	if err != nil {
		return "", err
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", fmt.Errorf("trailing JSON text")
	}
	var b strings.Builder
	v.write(&b)
	return canonicalJSON([]byte(b.String()))
}

// jsonTree is a decoded JSON value that keeps member order and duplicates: raw is a scalar's
// JSON text, names/vals an object's members, vals alone an array's elements.
type jsonTree struct {
	raw    string
	object bool
	names  []string
	vals   []jsonTree
}

func decodeJSONTree(dec *json.Decoder) (jsonTree, error) {
	tok, err := dec.Token()
	if err != nil {
		return jsonTree{}, err
	}
	switch v := tok.(type) {
	case json.Delim:
		t := jsonTree{object: v == '{', vals: []jsonTree{}}
		for dec.More() {
			if t.object {
				k, err := dec.Token()
				if err != nil {
					return t, err
				}
				t.names = append(t.names, k.(string))
			}
			e, err := decodeJSONTree(dec)
			if err != nil {
				return t, err
			}
			t.vals = append(t.vals, e)
		}
		_, err := dec.Token() // the closing delimiter
		if t.object {
			t = lastMemberWins(t)
		}
		return t, err
	case string:
		q, _ := json.Marshal(v)
		return jsonTree{raw: string(q)}, nil
	case json.Number:
		return jsonTree{raw: v.String()}, nil
	case bool:
		return jsonTree{raw: strconv.FormatBool(v)}, nil
	}
	return jsonTree{raw: "null"}, nil
}

// lastMemberWins drops every member whose name a later member of the object repeats.
func lastMemberWins(t jsonTree) jsonTree {
	out := jsonTree{object: true, vals: []jsonTree{}}
	for i, n := range t.names {
		if !slices.Contains(t.names[i+1:], n) {
			out.names = append(out.names, n)
			out.vals = append(out.vals, t.vals[i])
		}
	}
	return out
}

func (t jsonTree) write(b *strings.Builder) {
	if t.vals == nil {
		b.WriteString(t.raw)
		return
	}
	open, closing := byte('['), byte(']')
	if t.object {
		open, closing = '{', '}'
	}
	b.WriteByte(open)
	for i, v := range t.vals {
		if i > 0 {
			b.WriteByte(',')
		}
		if t.object {
			q, _ := json.Marshal(t.names[i])
			b.Write(q)
			b.WriteByte(':')
		}
		v.write(b)
	}
	b.WriteByte(closing)
}

// flattenedRefuses reports whether flattened / flat_object refuses a JSON value as a field's
// whole value: a scalar (string, number, boolean) reached from the top without entering an
// object -- the value itself or an element of (nested) top-level arrays. null, objects and
// arrays holding only objects, nulls and such arrays are accepted. (Both engines answer so:
// probed on the test servers; the documentation names "top-level scalars and arrays of
// scalars".)
func flattenedRefuses(text []byte) bool {
	var v any
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return false
	}
	var walk func(any) bool
	walk = func(v any) bool {
		switch x := v.(type) {
		case nil, map[string]any:
			return false
		case []any:
			for _, e := range x {
				if walk(e) {
					return true
				}
			}
			return false
		}
		return true
	}
	return walk(v)
}

// pgArray is a parsed PostgreSQL array text: either a value (nil for NULL) or sub-arrays.
type pgArray struct {
	isArr bool
	elems []pgArray
	val   *string
}

// parsePGArray parses an array's text output: {a,"b c",NULL,{...}}, optionally after
// dimension decorations ("[0:1]={5,6}", whose lower bounds JSON has no place for).
func parsePGArray(s string) (pgArray, error) {
	if strings.HasPrefix(s, "[") {
		eq := strings.Index(s, "=")
		if eq < 0 {
			return pgArray{}, fmt.Errorf("array decoration without '='")
		}
		s = s[eq+1:]
	}
	p := &arrParser{s: s}
	a, err := p.array()
	if err != nil {
		return a, err
	}
	if p.i != len(s) {
		return a, fmt.Errorf("trailing text after the array at %d", p.i)
	}
	return a, nil
}

type arrParser struct {
	s string
	i int
}

func (p *arrParser) array() (pgArray, error) {
	if p.i >= len(p.s) || p.s[p.i] != '{' {
		return pgArray{}, fmt.Errorf("expected '{' at %d", p.i)
	}
	p.i++
	a := pgArray{isArr: true, elems: []pgArray{}}
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return a, nil
	}
	for {
		if p.i >= len(p.s) {
			return a, fmt.Errorf("unterminated array")
		}
		switch p.s[p.i] {
		case '{':
			sub, err := p.array()
			if err != nil {
				return a, err
			}
			a.elems = append(a.elems, sub)
		case '"':
			p.i++
			var b strings.Builder
			for {
				if p.i >= len(p.s) {
					return a, fmt.Errorf("unterminated quoted element")
				}
				c := p.s[p.i]
				p.i++
				if c == '\\' && p.i < len(p.s) {
					b.WriteByte(p.s[p.i])
					p.i++
					continue
				}
				if c == '"' {
					break
				}
				b.WriteByte(c)
			}
			v := b.String()
			a.elems = append(a.elems, pgArray{val: &v})
		default:
			st := p.i
			for p.i < len(p.s) && p.s[p.i] != ',' && p.s[p.i] != '}' {
				p.i++
			}
			v := p.s[st:p.i]
			if strings.EqualFold(v, "NULL") {
				a.elems = append(a.elems, pgArray{})
			} else {
				a.elems = append(a.elems, pgArray{val: &v})
			}
		}
		if p.i >= len(p.s) {
			return a, fmt.Errorf("unterminated array")
		}
		switch p.s[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return a, nil
		default:
			return a, fmt.Errorf("expected ',' or '}' at %d", p.i)
		}
	}
}

// pgBytea decodes bytea's hex output ("\x0102ff").
func pgBytea(s string) ([]byte, error) {
	h, ok := strings.CutPrefix(s, `\x`)
	if !ok {
		return nil, fmt.Errorf("bytea output without \\x")
	}
	return hex.DecodeString(h)
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// escapeIDPart escapes one part of a composite _id: sink/doc.go, "a backslash becomes \\ and
// every byte that occurs in the separator gets a backslash before it".
func escapeIDPart(s, sep string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' || strings.IndexByte(sep, s[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// docID is the documented _id of a row from its key columns' text: one column "gives its text
// as is", several are escaped and joined by the separator.
func docID(parts []string, sep string) string {
	if len(parts) == 1 {
		return parts[0]
	}
	esc := make([]string, len(parts))
	for i, p := range parts {
		esc[i] = escapeIDPart(p, sep)
	}
	return strings.Join(esc, sep)
}

// floatWant is a float's expected field: the documented strings for NaN and the infinities,
// otherwise the value (PostgreSQL prints "NaN", "Infinity", "-Infinity").
func floatWant(text string, bits int) (want, error) {
	switch text {
	case "NaN", "Infinity", "-Infinity":
		return want{k: wStr, s: text}, nil
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return want{}, err
	}
	return want{k: wFloat, f: f, bits: bits}, nil
}

// intWant is an integer's expected field: its digits without leading zeros (YEAR prints
// "0000").
func intWant(text string) (want, error) {
	n, ok := new(big.Int).SetString(text, 10)
	if !ok {
		return want{}, fmt.Errorf("integer %q", text)
	}
	return want{k: wNum, s: n.String()}, nil
}

// mismatch is one difference between an expected field and the document's.
type mismatch struct {
	kind     string // type, value, length
	path     string // "" for the field itself, "[3]" for an array element
	expected string
	actual   string
}

// compareValue compares a document field's raw JSON with the expected value.
func compareValue(w want, raw json.RawMessage, path string) *mismatch {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return &mismatch{kind: "unparsable", path: path, expected: w.String(), actual: string(raw)}
	}
	typeMismatch := func() *mismatch {
		return &mismatch{kind: "type", path: path, expected: w.k.String() + " " + short(w.String()), actual: short(string(raw))}
	}
	valueMismatch := func() *mismatch {
		return &mismatch{kind: "value", path: path, expected: short(w.String()), actual: short(string(raw))}
	}
	switch w.k {
	case wNull:
		if v != nil {
			return typeMismatch()
		}
	case wStr:
		s, ok := v.(string)
		if !ok {
			return typeMismatch()
		}
		if s != w.s {
			m := valueMismatch()
			if len(s) != len(w.s) {
				m.kind = "value"
				m.expected = fmt.Sprintf("%s (%d bytes)", m.expected, len(w.s))
				m.actual = fmt.Sprintf("%s (%d bytes)", m.actual, len(s))
			}
			return m
		}
	case wNum:
		n, ok := v.(json.Number)
		if !ok {
			return typeMismatch()
		}
		if n.String() != w.s {
			return valueMismatch()
		}
	case wFloat:
		n, ok := v.(json.Number)
		if !ok {
			return typeMismatch()
		}
		f, err := strconv.ParseFloat(n.String(), 64)
		if err != nil {
			return valueMismatch()
		}
		if w.bits == 32 {
			if math.Float32bits(float32(f)) != math.Float32bits(float32(w.f)) {
				return valueMismatch()
			}
		} else if math.Float64bits(f) != math.Float64bits(w.f) {
			return valueMismatch()
		}
	case wBool:
		b, ok := v.(bool)
		if !ok {
			return typeMismatch()
		}
		if b != w.b {
			return valueMismatch()
		}
	case wJSON:
		c, err := canonicalJSON(raw)
		if err != nil {
			return valueMismatch()
		}
		if c != w.s {
			return &mismatch{kind: "value", path: path, expected: short(w.s), actual: short(c)}
		}
	case wArr:
		var elems []json.RawMessage
		if json.Unmarshal(raw, &elems) != nil || elems == nil {
			return typeMismatch()
		}
		if len(elems) != len(w.arr) {
			return &mismatch{kind: "length", path: path, expected: short(w.String()), actual: short(string(raw))}
		}
		for i := range elems {
			if m := compareValue(w.arr[i], elems[i], path+"["+strconv.Itoa(i)+"]"); m != nil {
				return m
			}
		}
	}
	return nil
}

// short cuts a long value for a failure message, keeping its length visible.
func short(s string) string {
	if len(s) <= 160 {
		return s
	}
	return fmt.Sprintf("%s...(%d bytes)", s[:120], len(s))
}

// fieldRange is the range of the integer field sink.GenerateMapping gives an integer column of
// the given width (byte, short, integer, long: the narrowest that holds it).
func fieldRange(bits int) (lo, hi int64) {
	switch {
	case bits > 0 && bits <= 8:
		return math.MinInt8, math.MaxInt8
	case bits > 0 && bits <= 16:
		return math.MinInt16, math.MaxInt16
	case bits > 0 && bits <= 32:
		return math.MinInt32, math.MaxInt32
	}
	return math.MinInt64, math.MaxInt64
}

// fitsField reports whether an expected value (an integer's exact digits, or null) fits the
// integer field of the given width.
func fitsField(w want, bits int) bool {
	if w.k != wNum {
		return true
	}
	v, err := strconv.ParseInt(w.s, 10, 64)
	if err != nil {
		return false
	}
	lo, hi := fieldRange(bits)
	return v >= lo && v <= hi
}

// valueFitsField is fitsField for an event's value.
func valueFitsField(v any, bits int) bool {
	lo, hi := fieldRange(bits)
	switch x := v.(type) {
	case int64:
		return x >= lo && x <= hi
	case uint64:
		return x <= uint64(hi)
	}
	return true
}
