package luamerge

import (
	"strconv"

	"github.com/tributary-dev/tributary/store"
)

// Limit names, as ProgramError.Limit reports them.
const (
	limitInstructions = "instructions"
	limitTime         = "time"
	limitCanceled     = "canceled"
	limitMemory       = "memory"
	limitCallDepth    = "call depth"
	limitInputSize    = "input size"
	limitOutputSize   = "output size"
	limitDepth        = "nesting depth"
)

// ProgramError is why a program failed on its input: it did not compile, raised an error,
// returned something that is not a document, or tripped a limit. It names the record and,
// when the failure happened in the program, the line -- never document contents (a message
// the program raises itself is passed on as it is, cut at 256 bytes: keep data out of it).
//
// Merge returns it wrapped in a *store.Error (without operation and address, which the store's
// own error names) whose kind is KindInvalid (KindTooLarge for the size and memory limits), so store.KindOf and
// errors.Is(err, store.ErrInvalid) work; reach it with errors.As.
type ProgramError struct {
	Kind store.ErrorKind
	Addr store.Address
	// Line is the program line the failure happened at, 0 when it is not in the program (a
	// document that does not decode, a result that does not encode).
	Line int
	// Limit names the limit that stopped the run ("instructions", "time", "memory",
	// "call depth", "input size", "output size", "nesting depth"), "" for other failures.
	Limit string
	// Reason says what happened.
	Reason string
}

// Error names the line and the reason, not Addr: the store's own error around it names the
// address once (and a caller of Engine.Merge knows which record it passed).
func (e *ProgramError) Error() string {
	s := "lua merge program"
	if e.Line > 0 {
		s += ", line " + strconv.Itoa(e.Line)
	}
	return s + ": " + e.Reason
}

// Is makes errors.Is(err, store.ErrInvalid) (or ErrTooLarge, ...) work on an Engine's errors
// also outside a store, which adds its own *store.Error.
func (e *ProgramError) Is(target error) bool {
	return target == kindSentinels[e.Kind]
}

var kindSentinels = map[store.ErrorKind]error{
	store.KindInvalid: store.ErrInvalid, store.KindTooLarge: store.ErrTooLarge,
	store.KindCanceled: store.ErrCanceled, store.KindInternal: store.ErrInternal,
}

// wrap returns e as the *store.Error the store classifies. It names neither the operation nor
// the address: the store fills them in, so its text says them once.
func (e *ProgramError) wrap(addr store.Address) error {
	e.Addr = addr
	return &store.Error{Kind: e.Kind, Err: e}
}

func invalid(reason string) *ProgramError {
	return &ProgramError{Kind: store.KindInvalid, Reason: reason}
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
