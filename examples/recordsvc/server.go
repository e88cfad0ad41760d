package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	recordv1 "github.com/tributary-dev/tributary/examples/recordsvc/proto/tributary/record/v1"
	"github.com/tributary-dev/tributary/store"
)

// server implements the gRPC API by translating each request into one store.Service call:
// every capability (validation, ordering, coalescing, merges, queues) is the library's.
type server struct {
	recordv1.UnimplementedRecordServiceServer
	svc store.Store
	m   *metrics
}

// badItems collects every invalid item of a request, those recordsvc cannot translate and
// those the Service's validation refuses, so that one answer reports them all in one format:
// a BadRequest field violation per item, in index order, whose description is the store's
// error text ("put main/ns/ds/\"k\": document is not valid JSON ...").
type badItems struct {
	field string // "addresses" or "items"
	items map[int]*store.Error
}

// add records that item i, an operation of kind op on addr (zero when unknown), cannot be
// translated.
func (b *badItems) add(i int, op store.OpKind, addr store.Address, err error) {
	if b.items == nil {
		b.items = map[int]*store.Error{}
	}
	b.items[i] = &store.Error{Kind: store.KindInvalid, Op: op, Addr: addr, Err: err}
}

// check runs the Service's validation over the items that could be translated and adds its
// refusals: without it a client would learn of them only after fixing the others. A fault
// of the request as a whole (too many items) is returned as it is. When every item was
// translated it does nothing: Do validates the request itself, in the same pass and format
// (callError), so documents are not validated twice on every request.
func (b *badItems) check(svc store.Store, ops []store.Op, mode store.Completion) error {
	if len(b.items) == 0 {
		return nil
	}
	c, ok := svc.(interface {
		Check([]store.Op, store.Completion) error
	})
	if !ok {
		return nil
	}
	idx := make([]int, 0, len(ops))
	sub := make([]store.Op, 0, len(ops))
	for i := range ops {
		if _, bad := b.items[i]; !bad {
			idx = append(idx, i)
			sub = append(sub, ops[i])
		}
	}
	err := c.Check(sub, mode)
	if err == nil {
		return nil
	}
	re, ok := errors.AsType[*store.RequestError](err)
	if !ok {
		return callError(err, b.field)
	}
	for _, it := range re.Items {
		if it.Index < 0 {
			return callError(err, b.field)
		}
		b.items[idx[it.Index]] = it.Err
	}
	return nil
}

// err is the refusal of the request, nil when every item is valid.
func (b *badItems) err() error {
	if len(b.items) == 0 {
		return nil
	}
	re := &store.RequestError{Items: make([]store.ItemError, 0, len(b.items))}
	for i, e := range b.items {
		re.Items = append(re.Items, store.ItemError{Index: i, Err: e})
	}
	slices.SortFunc(re.Items, func(x, y store.ItemError) int { return x.Index - y.Index })
	return refusal(re, b.field)
}

// validate refuses the request when any item is invalid: the translation failures already in
// b and the Service's refusals of the others, all in one answer.
func (b *badItems) validate(svc store.Store, ops []store.Op, mode store.Completion) error {
	if err := b.check(svc, ops, mode); err != nil {
		return err
	}
	return b.err()
}

// refusal answers a request refused before any item ran: INVALID_ARGUMENT with a BadRequest
// naming every bad item. (An accepted-mode write to a store without a queue is no refusal: it
// fails on its own, ERROR_KIND_NO_QUEUE, and the other items run.)
func refusal(re *store.RequestError, field string) error {
	v := make([]*errdetails.BadRequest_FieldViolation, len(re.Items))
	for i, it := range re.Items {
		f := field
		if it.Index >= 0 {
			f += "[" + strconv.Itoa(it.Index) + "]"
		}
		desc := "invalid"
		if it.Err != nil {
			desc = strings.TrimPrefix(it.Err.Error(), "store: ")
		}
		v[i] = &errdetails.BadRequest_FieldViolation{Field: f, Description: desc}
	}
	msg := fmt.Sprintf("request refused before any item ran: %d invalid item(s), first %s: %s", len(v), v[0].Field, v[0].Description)
	return invalidArgument(msg, v)
}

func invalidArgument(msg string, v []*errdetails.BadRequest_FieldViolation) error {
	st := status.New(codes.InvalidArgument, msg)
	if d, err := st.WithDetails(&errdetails.BadRequest{FieldViolations: v}); err == nil {
		st = d
	}
	return st.Err()
}

func (s *server) Read(ctx context.Context, req *recordv1.ReadRequest) (*recordv1.ReadResponse, error) {
	s.m.rpcItems.WithLabelValues("Read").Observe(float64(len(req.Addresses)))
	ops := make([]store.Op, len(req.Addresses))
	bad := badItems{field: "addresses"}
	for i, a := range req.Addresses {
		addr, err := toAddress(a)
		if err != nil {
			bad.add(i, store.OpRead, store.Address{}, err)
			continue
		}
		ops[i] = store.Read(addr)
	}
	if err := bad.validate(s.svc, ops, store.WaitApplied); err != nil {
		return nil, err
	}
	results, err := s.do(ctx, ops, store.WaitApplied, "addresses")
	if err != nil {
		return nil, err
	}
	return &recordv1.ReadResponse{Results: results}, nil
}

func (s *server) Write(ctx context.Context, req *recordv1.WriteRequest) (*recordv1.WriteResponse, error) {
	s.m.rpcItems.WithLabelValues("Write").Observe(float64(len(req.Items)))
	mode, err := toCompletion(req.Completion)
	if err != nil {
		return nil, err
	}
	ops := make([]store.Op, len(req.Items))
	bad := badItems{field: "items"}
	for i, it := range req.Items {
		op, err := toWriteOp(it, req.Programs)
		if err != nil {
			bad.add(i, op.Kind, op.Addr, err)
			continue
		}
		ops[i] = op
	}
	if err := bad.validate(s.svc, ops, mode); err != nil {
		return nil, err
	}
	results, err := s.do(ctx, ops, mode, "items")
	if err != nil {
		return nil, err
	}
	return &recordv1.WriteResponse{Results: results}, nil
}

func (s *server) Delete(ctx context.Context, req *recordv1.DeleteRequest) (*recordv1.DeleteResponse, error) {
	s.m.rpcItems.WithLabelValues("Delete").Observe(float64(len(req.Items)))
	mode, err := toCompletion(req.Completion)
	if err != nil {
		return nil, err
	}
	ops := make([]store.Op, len(req.Items))
	bad := badItems{field: "items"}
	for i, it := range req.Items {
		addr, err := toAddress(it.GetAddress())
		if err != nil {
			bad.add(i, store.OpDelete, store.Address{}, err)
			continue
		}
		pre, err := toPrecondition(it.Precondition)
		if err != nil {
			bad.add(i, store.OpDelete, addr, err)
			continue
		}
		ops[i] = store.Delete(addr).WithPrecondition(pre)
	}
	if err := bad.validate(s.svc, ops, mode); err != nil {
		return nil, err
	}
	results, err := s.do(ctx, ops, mode, "items")
	if err != nil {
		return nil, err
	}
	return &recordv1.DeleteResponse{Results: results}, nil
}

// do runs ops and translates the results, or the whole call's error into a gRPC status.
func (s *server) do(ctx context.Context, ops []store.Op, mode store.Completion, field string) ([]*recordv1.Result, error) {
	s.enter(ops, 1)
	start := time.Now()
	results, err := s.svc.Do(ctx, ops, mode)
	s.enter(ops, -1)
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			// The client left: its items end in the item metrics all the same (a call with a
			// deadline is answered per item before it, so this is a cancellation).
			gone := make([]store.Result, len(ops))
			for i := range gone {
				gone[i].Err = &store.Error{Kind: store.KindCanceled, Op: ops[i].Kind, Addr: ops[i].Addr, Err: err}
			}
			s.m.observe(ops, gone, time.Since(start))
		}
		return nil, callError(err, field)
	}
	s.m.observe(ops, results, time.Since(start))
	out := make([]*recordv1.Result, len(results))
	for i := range results {
		out[i] = fromResult(&results[i])
	}
	return out, nil
}

// enter moves the per-store in-flight gauge by d for each op.
func (s *server) enter(ops []store.Op, d float64) {
	if len(ops) == 1 {
		s.m.itemsInFlight.WithLabelValues(s.m.storeLabel(ops[0].Addr.Store)).Add(d)
		return
	}
	n := map[string]int{}
	for i := range ops {
		n[s.m.storeLabel(ops[i].Addr.Store)]++
	}
	for name, c := range n {
		s.m.itemsInFlight.WithLabelValues(name).Add(d * float64(c))
	}
}

// callError maps an error of a whole Do call to a status.
func callError(err error, field string) error {
	if re, ok := errors.AsType[*store.RequestError](err); ok {
		return refusal(re, field)
	}
	switch {
	case errors.Is(err, store.ErrClosed):
		return status.Error(codes.Unavailable, "the service is shutting down")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	}
	if se, ok := errors.AsType[*store.Error](err); ok {
		if c, ok := callCodes[se.Kind]; ok {
			return status.Error(c, err.Error())
		}
	}
	return status.Error(codes.Internal, err.Error())
}

func toCompletion(c recordv1.Completion) (store.Completion, error) {
	switch c {
	case recordv1.Completion_COMPLETION_UNSPECIFIED, recordv1.Completion_COMPLETION_WAIT_UNTIL_APPLIED:
		return store.WaitApplied, nil
	case recordv1.Completion_COMPLETION_WAIT_UNTIL_VISIBLE:
		return store.WaitVisible, nil
	case recordv1.Completion_COMPLETION_RETURN_AFTER_ACCEPTED:
		return store.ReturnAccepted, nil
	}
	return 0, invalidArgument("unknown completion mode", []*errdetails.BadRequest_FieldViolation{{Field: "completion", Description: "unknown completion mode " + strconv.Itoa(int(c))}})
}

func toAddress(a *recordv1.Address) (store.Address, error) {
	if a == nil {
		return store.Address{}, errors.New("address is missing")
	}
	key, err := toKey(a.Key)
	if err != nil {
		return store.Address{}, err
	}
	return store.Address{Store: a.Store, Namespace: a.Namespace, Dataset: a.Dataset, Key: key}, nil
}

func toKey(k *recordv1.Key) (store.Key, error) {
	switch v := k.GetKind().(type) {
	case *recordv1.Key_String_:
		return store.StringKey(v.String_), nil
	case *recordv1.Key_Int64:
		return store.Int64Key(v.Int64), nil
	case *recordv1.Key_Bytes:
		return store.BytesKey(v.Bytes), nil
	case *recordv1.Key_ObjectId:
		if len(v.ObjectId) != 12 {
			return store.Key{}, fmt.Errorf("object_id key is %d bytes, not 12", len(v.ObjectId))
		}
		return store.ObjectIDKey([12]byte(v.ObjectId)), nil
	}
	return store.Key{}, errors.New("key is missing")
}

func toDocument(d *recordv1.Document) store.Document {
	if d == nil {
		return store.Document{}
	}
	if d.Json == "" {
		return store.Document{Times: d.TimePointers} // no document: the store says so
	}
	return store.Document{JSON: []byte(d.Json), Times: d.TimePointers}
}

func toPrecondition(p *recordv1.Precondition) (store.Precondition, error) {
	switch v := p.GetCondition().(type) {
	case nil:
		return store.Precondition{}, nil
	case *recordv1.Precondition_Absent:
		return store.IfAbsent(), nil
	case *recordv1.Precondition_Revision:
		if len(v.Revision) == 0 {
			return store.Precondition{}, errors.New("precondition revision is empty")
		}
		rev, err := store.RevisionFromBytes(v.Revision)
		if err != nil {
			return store.Precondition{}, err
		}
		return store.IfRevision(rev), nil
	}
	return store.Precondition{}, errors.New("unknown precondition")
}

// toWriteOp translates a write item. On failure the returned Op still says what is known
// (its kind, its address) for the error.
func toWriteOp(it *recordv1.WriteItem, programs []string) (store.Op, error) {
	var known store.Op
	switch it.GetOp().(type) {
	case *recordv1.WriteItem_Put:
		known.Kind = store.OpPut
	case *recordv1.WriteItem_Merge:
		known.Kind = store.OpMerge
	}
	addr, err := toAddress(it.GetAddress())
	if err != nil {
		return known, err
	}
	known.Addr = addr
	switch op := it.GetOp().(type) {
	case *recordv1.WriteItem_Put:
		pre, err := toPrecondition(op.Put.GetPrecondition())
		if err != nil {
			return known, err
		}
		return store.Put(addr, toDocument(op.Put.GetDocument())).WithPrecondition(pre), nil
	case *recordv1.WriteItem_Merge:
		var program string
		switch p := op.Merge.GetProgram().(type) {
		case *recordv1.Merge_Source:
			program = p.Source
		case *recordv1.Merge_ProgramIndex:
			if int64(p.ProgramIndex) >= int64(len(programs)) {
				return known, fmt.Errorf("program_index %d is beyond the request's %d programs", p.ProgramIndex, len(programs))
			}
			program = programs[p.ProgramIndex]
		default:
			return known, errors.New("merge without a program (source or program_index)")
		}
		return store.Merge(addr, program, toDocument(op.Merge.GetIncoming())), nil
	}
	return known, errors.New("item is neither a put nor a merge")
}

var outcomes = map[store.Outcome]recordv1.Outcome{
	store.Found:     recordv1.Outcome_OUTCOME_FOUND,
	store.Absent:    recordv1.Outcome_OUTCOME_NOT_FOUND,
	store.Created:   recordv1.Outcome_OUTCOME_CREATED,
	store.Updated:   recordv1.Outcome_OUTCOME_UPDATED,
	store.Deleted:   recordv1.Outcome_OUTCOME_DELETED,
	store.Unchanged: recordv1.Outcome_OUTCOME_UNCHANGED,
	store.Accepted:  recordv1.Outcome_OUTCOME_ACCEPTED,
}

var errorKinds = map[store.ErrorKind]recordv1.ErrorKind{
	store.KindInternal:         recordv1.ErrorKind_ERROR_KIND_INTERNAL,
	store.KindDatasetNotFound:  recordv1.ErrorKind_ERROR_KIND_NOT_FOUND,
	store.KindAlreadyExists:    recordv1.ErrorKind_ERROR_KIND_ALREADY_EXISTS,
	store.KindConflict:         recordv1.ErrorKind_ERROR_KIND_CONFLICT,
	store.KindInvalid:          recordv1.ErrorKind_ERROR_KIND_INVALID,
	store.KindTooLarge:         recordv1.ErrorKind_ERROR_KIND_TOO_LARGE,
	store.KindUnavailable:      recordv1.ErrorKind_ERROR_KIND_UNAVAILABLE,
	store.KindCanceled:         recordv1.ErrorKind_ERROR_KIND_CANCELED,
	store.KindOutcomeUnknown:   recordv1.ErrorKind_ERROR_KIND_OUTCOME_UNKNOWN,
	store.KindPermissionDenied: recordv1.ErrorKind_ERROR_KIND_PERMISSION_DENIED,
	store.KindNoQueue:          recordv1.ErrorKind_ERROR_KIND_NO_QUEUE,
}

// callCodes gives the status of a whole call that failed with a *store.Error of a kind (per
// item failures travel in the results instead). Outcome unknown is UNKNOWN, not UNAVAILABLE:
// gRPC clients retry UNAVAILABLE as "not processed".
var callCodes = map[store.ErrorKind]codes.Code{
	store.KindInternal:         codes.Internal,
	store.KindDatasetNotFound:  codes.NotFound,
	store.KindAlreadyExists:    codes.AlreadyExists,
	store.KindConflict:         codes.Aborted,
	store.KindInvalid:          codes.InvalidArgument,
	store.KindTooLarge:         codes.ResourceExhausted,
	store.KindUnavailable:      codes.Unavailable,
	store.KindCanceled:         codes.Canceled,
	store.KindOutcomeUnknown:   codes.Unknown,
	store.KindPermissionDenied: codes.PermissionDenied,
	store.KindNoQueue:          codes.FailedPrecondition,
}

func fromResult(r *store.Result) *recordv1.Result {
	if r.Err != nil {
		k := store.KindOf(r.Err)
		kind, ok := errorKinds[k]
		if !ok {
			kind = recordv1.ErrorKind_ERROR_KIND_INTERNAL
		}
		return &recordv1.Result{Error: &recordv1.Error{Kind: kind, Message: r.Err.Error(), Retryable: k.Retryable()}}
	}
	out := &recordv1.Result{Outcome: outcomes[r.Outcome], Revision: r.Revision.Bytes()}
	if r.Doc.JSON != nil {
		out.Document = &recordv1.Document{Json: string(r.Doc.JSON), TimePointers: r.Doc.Times}
	}
	return out
}
