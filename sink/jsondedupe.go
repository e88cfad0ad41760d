package sink

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// maxPairwiseMembers is the most members an object may have for appendJSON's compaction pass
// to check its names pairwise; a larger object goes through dedupeJSON.
const maxPairwiseMembers = 32

// jsonLevel is one open container in appendJSON's pass.
type jsonLevel struct {
	object  bool
	names   int32 // index of the object's first name in the names scratch
	members int32
}

// jsonName is a member name in appendJSON's pass: offsets, quotes included, into the
// document written so far.
type jsonName struct{ start, end int32 }

// dedupeJSON rewrites a compacted, valid JSON text so that no object has two members of the
// same name: of each name only the last member stays, where it stands; the others keep their
// order. Names compare by their decoded text ("a" and "\u0061" are one name; a lone surrogate
// escape is its own code unit, as the engines' Java strings keep it). It returns the new text
// and true, or (nil, false) when the text has no duplicates.
func dedupeJSON(doc []byte) ([]byte, bool) {
	if !hasDuplicateMembers(doc) {
		return nil, false
	}
	d := deduper{in: doc, out: make([]byte, 0, len(doc))}
	d.value(0)
	return d.out, true
}

// hasDuplicateMembers reports whether any object of the compacted JSON text doc has two
// members of the same decoded name.
func hasDuplicateMembers(doc []byte) bool {
	found := false
	walkObjects(doc, 0, func(members []jsonMember) {
		if !found && lastOfName(doc, members) != nil {
			found = true
		}
	})
	return found
}

// jsonMember is one member of an object: the name (quotes included) and the value, as
// offsets into the text.
type jsonMember struct{ nameStart, nameEnd, valStart, valEnd int }

// walkObjects calls f with the members of every object in the value at i (inner objects
// first) and returns the value's end.
func walkObjects(doc []byte, i int, f func([]jsonMember)) int {
	switch doc[i] {
	case '{':
		var members []jsonMember
		i++
		for doc[i] != '}' {
			if doc[i] == ',' {
				i++
			}
			m := jsonMember{nameStart: i}
			m.nameEnd = skipJSONString(doc, i)
			m.valStart = m.nameEnd + 1 // past ':'
			m.valEnd = walkObjects(doc, m.valStart, f)
			members = append(members, m)
			i = m.valEnd
		}
		f(members)
		return i + 1
	case '[':
		i++
		for doc[i] != ']' {
			if doc[i] == ',' {
				i++
			}
			i = walkObjects(doc, i, f)
		}
		return i + 1
	case '"':
		return skipJSONString(doc, i)
	}
	for i < len(doc) && doc[i] != ',' && doc[i] != '}' && doc[i] != ']' {
		i++
	}
	return i
}

// lastOfName returns, for members of one object, which are dropped (a later member has the
// same name), or nil when none is.
func lastOfName(doc []byte, members []jsonMember) []bool {
	var drop []bool
	mark := func(i int) {
		if drop == nil {
			drop = make([]bool, len(members))
		}
		drop[i] = true
	}
	if len(members) <= maxPairwiseMembers {
		for i := range members {
			for k := i + 1; k < len(members); k++ {
				if sameJSONName(doc[members[i].nameStart:members[i].nameEnd], doc[members[k].nameStart:members[k].nameEnd]) {
					mark(i)
					break
				}
			}
		}
		return drop
	}
	last := make(map[string]int, len(members))
	for i, m := range members {
		last[decodeJSONName(doc[m.nameStart:m.nameEnd])] = i
	}
	if len(last) == len(members) {
		return nil
	}
	for i, m := range members {
		if last[decodeJSONName(doc[m.nameStart:m.nameEnd])] != i {
			mark(i)
		}
	}
	return drop
}

// deduper writes a compacted JSON text without the dropped members.
type deduper struct {
	in, out []byte
}

// value writes the value at i and returns its end.
func (d *deduper) value(i int) int {
	switch d.in[i] {
	case '{':
		var members []jsonMember
		j := i + 1
		for d.in[j] != '}' {
			if d.in[j] == ',' {
				j++
			}
			m := jsonMember{nameStart: j}
			m.nameEnd = skipJSONString(d.in, j)
			m.valStart = m.nameEnd + 1
			m.valEnd = skipJSONValue(d.in, m.valStart)
			members = append(members, m)
			j = m.valEnd
		}
		drop := lastOfName(d.in, members)
		d.out = append(d.out, '{')
		first := true
		for k, m := range members {
			if drop != nil && drop[k] {
				continue
			}
			if !first {
				d.out = append(d.out, ',')
			}
			first = false
			d.out = append(d.out, d.in[m.nameStart:m.valStart]...) // "name":
			d.value(m.valStart)
		}
		d.out = append(d.out, '}')
		return j + 1
	case '[':
		d.out = append(d.out, '[')
		j := i + 1
		for d.in[j] != ']' {
			if d.in[j] == ',' {
				d.out = append(d.out, ',')
				j++
			}
			j = d.value(j)
		}
		d.out = append(d.out, ']')
		return j + 1
	}
	end := skipJSONValue(d.in, i)
	d.out = append(d.out, d.in[i:end]...)
	return end
}

// skipJSONValue returns the end of the value at i of a compacted valid JSON text.
func skipJSONValue(doc []byte, i int) int {
	switch doc[i] {
	case '"':
		return skipJSONString(doc, i)
	case '{', '[':
		depth := 0
		for i < len(doc) {
			switch doc[i] {
			case '"':
				i = skipJSONString(doc, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(doc) && doc[i] != ',' && doc[i] != '}' && doc[i] != ']' {
		i++
	}
	return i
}

// skipJSONString returns the end (past the closing quote) of the string starting at doc[i].
func skipJSONString(doc []byte, i int) int {
	for i++; i < len(doc); i++ {
		switch doc[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// sameJSONName compares two member names (quotes included) by their decoded text.
func sameJSONName(a, b []byte) bool {
	if bytes.IndexByte(a, '\\') < 0 && bytes.IndexByte(b, '\\') < 0 {
		return bytes.Equal(a, b)
	}
	return decodeJSONName(a) == decodeJSONName(b)
}

// decodeJSONName decodes a JSON string (quotes included) of a valid text. Raw bytes are kept
// as they are; a \u escape of a lone surrogate becomes that code unit's three-byte form, so
// that it stays distinct from U+FFFD as in a Java string.
func decodeJSONName(s []byte) string {
	s = s[1 : len(s)-1]
	if bytes.IndexByte(s, '\\') < 0 {
		return string(s)
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			out = append(out, s[i])
			continue
		}
		i++
		switch s[i] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hex4(s[i+1 : i+5])
			i += 4
			if r >= 0xD800 && r < 0xDC00 && i+6 < len(s) && s[i+1] == '\\' && s[i+2] == 'u' {
				if lo := hex4(s[i+3 : i+7]); lo >= 0xDC00 && lo < 0xE000 {
					out = utf8.AppendRune(out, 0x10000+(r-0xD800)<<10+(lo-0xDC00))
					i += 6
					continue
				}
			}
			if r >= 0xD800 && r < 0xE000 { // a lone surrogate: utf8.AppendRune would give U+FFFD
				out = append(out, byte(0xE0|r>>12), byte(0x80|(r>>6)&0x3F), byte(0x80|r&0x3F))
				continue
			}
			out = utf8.AppendRune(out, r)
		default: // " \ /
			out = append(out, s[i])
		}
	}
	return string(out)
}

// hex4 reads four hex digits (validated by json.Valid).
func hex4(h []byte) rune {
	n, _ := strconv.ParseUint(string(h), 16, 32)
	return rune(n)
}
