package store

import "context"

// WriteOption qualifies a single-operation write (Service.Put, Merge, Delete): a
// Precondition (IfAbsent, IfRevision) or a Completion (WaitVisible, ReturnAccepted).
type WriteOption interface {
	applyWrite(op *Op, mode *Completion)
}

func (p Precondition) applyWrite(op *Op, _ *Completion) { op.If = p }
func (c Completion) applyWrite(_ *Op, mode *Completion) { *mode = c }

// DoOne runs one operation. The error is the call's (a *RequestError, ErrClosed, ctx's
// error) or the operation's own (Result.Err, an *Error); a missing record is not an error:
// the outcome says Absent. Like a one-operation Do, it goes through the store's
// coalescer.
func (s *Service) DoOne(ctx context.Context, op Op, mode Completion) (Result, error) {
	var ops [1]Op
	ops[0] = op
	res, err := s.Do(ctx, ops[:], mode)
	if err != nil {
		return Result{}, err
	}
	return res[0], res[0].Err
}

// Get reads the record at addr: Outcome Found with its document and revision, or Absent
// (no record) with a nil error.
func (s *Service) Get(ctx context.Context, addr Address) (Result, error) {
	return s.DoOne(ctx, Read(addr), WaitApplied)
}

// Put stores doc, the complete document, at addr. Options: a precondition (IfAbsent,
// IfRevision) and a completion mode (default WaitApplied).
func (s *Service) Put(ctx context.Context, addr Address, doc Document, opts ...WriteOption) (Result, error) {
	return s.doWrite(ctx, Put(addr, doc), opts)
}

// Merge runs program on the record at addr and incoming, and stores the result (see Merger).
// Options: a completion mode (a merge takes no precondition: it reads the record itself).
func (s *Service) Merge(ctx context.Context, addr Address, program string, incoming Document, opts ...WriteOption) (Result, error) {
	return s.doWrite(ctx, Merge(addr, program, incoming), opts)
}

// Delete removes the record at addr: Outcome Deleted, or Absent when there was none.
// Options: a precondition and a completion mode.
func (s *Service) Delete(ctx context.Context, addr Address, opts ...WriteOption) (Result, error) {
	return s.doWrite(ctx, Delete(addr), opts)
}

func (s *Service) doWrite(ctx context.Context, op Op, opts []WriteOption) (Result, error) {
	mode := WaitApplied
	for _, o := range opts {
		o.applyWrite(&op, &mode)
	}
	return s.DoOne(ctx, op, mode)
}
