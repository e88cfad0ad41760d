package main

import (
	"bytes"
	"encoding/binary"
	"math"
)

// FerretDB 1.24 keeps the query iterator of every statement of an update command open until the
// whole command ends (a deferred close inside its statement loop), and each open iterator holds
// one of the 100 connections of the SQLite pool. An update command with about a hundred
// statements therefore waits for a connection it will never get, while holding the relay's write
// lock -- and the whole server stops accepting writes. MongoDB has no such limit, so rather than
// let a test wedge the server, the relay answers such a command at once with an error that says
// why. Clients that batch updates split them below maxUpdateStatements.
const maxUpdateStatements = 50

// tooManyUpdates reports whether req is an update command carrying more statements than
// FerretDB can run, counting the "updates" document sequence the drivers send.
func tooManyUpdates(req []byte) bool {
	if opCode(req) != opMsg || len(req) < 21 {
		return false
	}
	name, ok := commandName(req)
	if !ok || name != "update" {
		return false
	}
	b := req[20:]
	if binary.LittleEndian.Uint32(req[16:20])&1 != 0 { // checksum present: drop its 4 bytes
		if len(b) < 4 {
			return false
		}
		b = b[:len(b)-4]
	}
	for len(b) > 5 {
		kind := b[0]
		size := int(int32(binary.LittleEndian.Uint32(b[1:5])))
		if size < 4 || size > len(b)-1 {
			return false
		}
		if kind == 1 {
			seq := b[5 : 1+size]
			nul := bytes.IndexByte(seq, 0)
			if nul < 0 {
				return false
			}
			if string(seq[:nul]) == "updates" && countDocs(seq[nul+1:]) > maxUpdateStatements {
				return true
			}
		}
		b = b[1+size:]
	}
	return false
}

// countDocs counts the BSON documents laid end to end in b.
func countDocs(b []byte) int {
	n := 0
	for len(b) >= 5 {
		size := int(int32(binary.LittleEndian.Uint32(b)))
		if size < 5 || size > len(b) {
			break
		}
		b = b[size:]
		n++
	}
	return n
}

// refusal builds the OP_MSG reply to req that fails the command with errmsg.
func refusal(req []byte, errmsg string) []byte {
	var doc []byte
	doc = append(doc, 0, 0, 0, 0)
	doc = append(doc, 0x01)
	doc = append(doc, "ok\x00"...)
	doc = binary.LittleEndian.AppendUint64(doc, math.Float64bits(0))
	doc = append(doc, 0x02)
	doc = append(doc, "errmsg\x00"...)
	doc = binary.LittleEndian.AppendUint32(doc, uint32(len(errmsg)+1))
	doc = append(doc, errmsg...)
	doc = append(doc, 0)
	doc = append(doc, 0x10)
	doc = append(doc, "code\x00"...)
	doc = binary.LittleEndian.AppendUint32(doc, 2) // BadValue
	doc = append(doc, 0)
	binary.LittleEndian.PutUint32(doc, uint32(len(doc)))

	msg := make([]byte, 16, 16+4+1+len(doc))
	binary.LittleEndian.PutUint32(msg[8:12], binary.LittleEndian.Uint32(req[4:8])) // responseTo = the request's id
	binary.LittleEndian.PutUint32(msg[12:16], opMsg)
	msg = binary.LittleEndian.AppendUint32(msg, 0) // flags
	msg = append(msg, 0)                           // section kind 0: the body
	msg = append(msg, doc...)
	binary.LittleEndian.PutUint32(msg[0:4], uint32(len(msg)))
	return msg
}
