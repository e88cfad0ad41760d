package mongostore

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"math"
	"strconv"
	"strings"
)

// unwrapExtended turns the objects that stand for BSON types JSON lacks (MongoDB Extended JSON
// v2, canonical form, as reads return them) back into those types. The object was just
// encoded as a document at out[start:]; a '$' object of any other shape is refused, since
// MongoDB does not store '$' member names portably.
func (e *encoder) unwrapExtended(typePos, start int) error {
	doc := e.out[start:]
	elems, err := docElements(doc)
	if err != nil || len(elems) == 0 {
		return invalid("malformed extended JSON object")
	}
	first := elems[0]
	bad := func(what string) error { return invalid("malformed extended JSON " + what + " object") }
	out := e.out[:start]
	if e.ferret {
		switch first.key {
		case "$minKey", "$maxKey", "$numberDouble", "$numberDecimal":
			return invalid("FerretDB 1.x cannot store the value of an extended JSON " + first.key + " object")
		}
	}
	switch first.key {
	case "$oid":
		s, ok := first.str()
		if len(elems) != 1 || !ok || len(s) != 24 {
			return bad("$oid")
		}
		id, err := hex.DecodeString(s)
		if err != nil {
			return bad("$oid")
		}
		e.out = append(out, id...)
		e.out[typePos] = bsonObjectID
	case "$binary":
		sub, ok := first.doc()
		if len(elems) != 1 || !ok {
			return bad("$binary")
		}
		fields, err := docElements(sub)
		if err != nil || len(fields) != 2 {
			return bad("$binary")
		}
		var b64, st string
		for _, f := range fields {
			s, ok := f.str()
			if !ok {
				return bad("$binary")
			}
			switch f.key {
			case "base64":
				b64 = s
			case "subType":
				st = s
			default:
				return bad("$binary")
			}
		}
		data, err1 := base64.StdEncoding.DecodeString(b64)
		subtype, err2 := strconv.ParseUint(st, 16, 8)
		if err1 != nil || err2 != nil || len(st) == 0 || len(st) > 2 {
			return bad("$binary")
		}
		out = binary.LittleEndian.AppendUint32(out, uint32(len(data)))
		out = append(out, byte(subtype))
		e.out = append(out, data...)
		e.out[typePos] = bsonBinary
	case "$timestamp":
		sub, ok := first.doc()
		if len(elems) != 1 || !ok {
			return bad("$timestamp")
		}
		fields, err := docElements(sub)
		if err != nil || len(fields) != 2 {
			return bad("$timestamp")
		}
		var t, i int64 = -1, -1
		for _, f := range fields {
			n, ok := f.integer()
			if !ok || n < 0 || n > math.MaxUint32 {
				return bad("$timestamp")
			}
			switch f.key {
			case "t":
				t = n
			case "i":
				i = n
			default:
				return bad("$timestamp")
			}
		}
		if t < 0 || i < 0 {
			return bad("$timestamp")
		}
		out = binary.LittleEndian.AppendUint32(out, uint32(i))
		e.out = binary.LittleEndian.AppendUint32(out, uint32(t))
		e.out[typePos] = bsonTimestamp
	case "$regularExpression":
		sub, ok := first.doc()
		if len(elems) != 1 || !ok {
			return bad("$regularExpression")
		}
		fields, err := docElements(sub)
		if err != nil || len(fields) != 2 {
			return bad("$regularExpression")
		}
		var pattern, opts string
		var have int
		for _, f := range fields {
			s, ok := f.str()
			if !ok || strings.IndexByte(s, 0) >= 0 {
				return bad("$regularExpression")
			}
			switch f.key {
			case "pattern":
				pattern, have = s, have|1
			case "options":
				opts, have = s, have|2
			default:
				return bad("$regularExpression")
			}
		}
		if have != 3 {
			return bad("$regularExpression")
		}
		out = append(append(out, pattern...), 0)
		e.out = append(append(out, opts...), 0)
		e.out[typePos] = bsonRegex
	case "$minKey", "$maxKey":
		if n, ok := first.integer(); len(elems) != 1 || !ok || n != 1 {
			return bad(first.key)
		}
		e.out = out
		e.out[typePos] = bsonMinKey
		if first.key == "$maxKey" {
			e.out[typePos] = bsonMaxKey
		}
	case "$numberDouble":
		s, ok := first.str()
		var f float64
		switch s {
		case "NaN":
			f = math.NaN()
		case "Infinity":
			f = math.Inf(1)
		case "-Infinity":
			f = math.Inf(-1)
		default:
			ok = false // finite doubles are plain JSON numbers
		}
		if len(elems) != 1 || !ok {
			return bad("$numberDouble")
		}
		e.out = binary.LittleEndian.AppendUint64(out, math.Float64bits(f))
		e.out[typePos] = bsonDouble
	case "$numberDecimal":
		s, ok := first.str()
		var hi, lo uint64
		switch s {
		case "NaN":
			hi = 0x7C00000000000000
		case "Infinity":
			hi = 0x7800000000000000
		case "-Infinity":
			hi = 0xF800000000000000
		default:
			ok = false // finite decimals are plain JSON numbers
		}
		if len(elems) != 1 || !ok {
			return bad("$numberDecimal")
		}
		out = binary.LittleEndian.AppendUint64(out, lo)
		e.out = binary.LittleEndian.AppendUint64(out, hi)
		e.out[typePos] = bsonDecimal128
	default:
		return invalid("an object's member names all start with '$' but it is no extended JSON type this adapter knows")
	}
	return nil
}
