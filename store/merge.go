package store

import (
	"context"
	"time"
)

// Merger runs merge programs. The store reads the current record, calls Merge, and writes the
// result with a revision precondition; when another writer got there first it reads again and
// calls Merge again. A merge program may therefore run more than once for one operation (and
// again after a queue redelivery): it must be a pure function of (current, incoming, context),
// with no effects outside its result. The Lua engine (package luamerge) is the standard Merger;
// MergeFunc adapts a Go function.
//
// An error from Merge fails the operation and leaves the record untouched. Its kind is the kind
// of the error (KindOf); an error without a kind counts as KindInvalid, since a program that
// fails on its input fails again on a retry.
type Merger interface {
	Merge(ctx context.Context, call *MergeCall) (MergeResult, error)
}

// MergeCall is one run of a merge program.
type MergeCall struct {
	// Program is the op's program, as the request carried it.
	Program string
	// Current is the stored record, nil when there is none.
	Current *Document
	// Incoming is the op's document.
	Incoming Document
	// Context is metadata about the request.
	Context MergeContext
}

// MergeContext is what a merge program may know about its request.
type MergeContext struct {
	Addr Address
	// Time is when the store accepted the request; the same on every attempt. It is truncated
	// to the precision the record's backend keeps for date-times (milliseconds on MongoDB,
	// see driver.TimePrecisioner), so a program may store it as a date-time on every backend.
	Time time.Time
	// Attempt counts runs for this operation, from 1.
	Attempt int
}

// MergeAction is what a merge program decided.
type MergeAction uint8

// Merge decisions.
const (
	// MergeWrite stores MergeResult.Doc (creating the record when it was absent).
	MergeWrite MergeAction = iota
	// MergeDelete removes the record (outcome Absent when it was already absent).
	MergeDelete
	// MergeUnchanged leaves the record as it is (outcome Unchanged, or Absent when absent).
	MergeUnchanged
)

// MergeResult is a merge program's decision.
type MergeResult struct {
	Action MergeAction
	Doc    Document
}

// MergeFunc adapts an ordinary function to the Merger interface. It ignores MergeCall.Program:
// the function is the program.
type MergeFunc func(ctx context.Context, call *MergeCall) (MergeResult, error)

// Merge calls f.
func (f MergeFunc) Merge(ctx context.Context, call *MergeCall) (MergeResult, error) {
	return f(ctx, call)
}
