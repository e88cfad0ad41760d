package store

import (
	"strconv"

	"github.com/tributary-dev/tributary/store/driver"
)

// OpKind says what an operation does.
type OpKind uint8

// Operation kinds.
const (
	OpRead   OpKind = iota + 1 // return the record
	OpPut                      // store a complete document
	OpMerge                    // apply a merge program to the current record and store the result
	OpDelete                   // remove the record permanently
)

var opNames = [...]string{"", "read", "put", "merge", "delete"}

func (k OpKind) String() string {
	if k != 0 && int(k) < len(opNames) {
		return opNames[k]
	}
	return "OpKind(" + strconv.Itoa(int(k)) + ")"
}

// Precondition is an optional requirement a put or delete places on the record's state.
// The zero Precondition requires nothing.
type Precondition struct {
	kind driver.ConditionKind
	rev  Revision
}

// IfRevision applies the operation only while the record is at rev, the revision a read or an
// earlier write returned. Otherwise the operation fails with ErrConflict -- on every backend, and
// also when the record has been deleted since.
func IfRevision(rev Revision) Precondition {
	return Precondition{kind: driver.IfRevision, rev: rev}
}

// IfAbsent applies the operation only while there is no record. A put on an existing record
// fails with ErrAlreadyExists; a delete becomes a check that writes nothing: Absent when the
// record is absent, ErrAlreadyExists when it exists.
func IfAbsent() Precondition { return Precondition{kind: driver.IfAbsent} }

// Revision returns the revision an IfRevision precondition requires, and the zero Revision for
// any other.
func (p Precondition) Revision() Revision { return p.rev }

// Absent reports whether p is IfAbsent.
func (p Precondition) Absent() bool { return p.kind == driver.IfAbsent }

// IsZero reports whether p is the zero Precondition, which requires nothing.
func (p Precondition) IsZero() bool { return p.kind == driver.Unconditional }

// Op is one operation of a batch. Build it with Read, Put, Merge or Delete.
type Op struct {
	Kind OpKind
	Addr Address
	// Doc is the complete document of a put, or the incoming document of a merge.
	Doc Document
	// Program is a merge's program, handed unchanged to the store's Merger.
	Program string
	// If is a put's or delete's precondition.
	If Precondition
}

// Read returns an operation that reads the record at addr.
func Read(addr Address) Op { return Op{Kind: OpRead, Addr: addr} }

// Put returns an operation that stores doc, the complete new document, at addr.
func Put(addr Address, doc Document) Op { return Op{Kind: OpPut, Addr: addr, Doc: doc} }

// Merge returns an operation that runs program on the current record at addr and incoming,
// and stores the result. The program may run more than once: see Merger.
func Merge(addr Address, program string, incoming Document) Op {
	return Op{Kind: OpMerge, Addr: addr, Program: program, Doc: incoming}
}

// Delete returns an operation that permanently removes the record at addr.
func Delete(addr Address) Op { return Op{Kind: OpDelete, Addr: addr} }

// WithPrecondition returns a copy of a put or delete with precondition p.
func (o Op) WithPrecondition(p Precondition) Op {
	o.If = p
	return o
}

// Result is what one operation did, at the index of the operation in the request.
//
// On success Err is nil and Outcome says what happened: Found or Absent for a read; Created
// or Updated for a put; Created, Updated, Deleted, Unchanged or Absent (a delete of an absent
// record) for a merge; Deleted or Absent for a delete; Accepted in accepted mode. Doc is the
// record after the operation (reads and merges); Revision is its revision (zero when absent).
//
// On failure Err is a *Error whose kind is one of the sentinels (errors.Is(res.Err, ErrConflict))
// and Outcome is zero.
type Result struct {
	Outcome  Outcome
	Doc      Document
	Revision Revision
	Err      error
}
