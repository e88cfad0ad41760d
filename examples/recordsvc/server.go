package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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

// badItems collects the items a request cannot be translated for; the request is then
// refused whole, as the store refuses a request with a malformed operation.
type badItems struct {
	field string // "addresses" or "items"
	v     []*errdetails.BadRequest_FieldViolation
}

func (b *badItems) add(i int, err error) {
	b.v = append(b.v, &errdetails.BadRequest_FieldViolation{Field: b.field + "[" + strconv.Itoa(i) + "]", Description: err.Error()})
}

func (b *badItems) err() error {
	if len(b.v) == 0 {
		return nil
	}
	return invalidArgument(fmt.Sprintf("request refused before any item ran: %d invalid item(s), first %s: %s", len(b.v), b.v[0].Field, b.v[0].Description), b.v)
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
			bad.add(i, err)
			continue
		}
		ops[i] = store.Read(addr)
	}
	if err := bad.err(); err != nil {
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
			bad.add(i, err)
			continue
		}
		ops[i] = op
	}
	if err := bad.err(); err != nil {
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
			bad.add(i, err)
			continue
		}
		pre, err := toPrecondition(it.Precondition)
		if err != nil {
			bad.add(i, err)
			continue
		}
		ops[i] = store.Delete(addr).WithPrecondition(pre)
	}
	if err := bad.err(); err != nil {
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
		v := make([]*errdetails.BadRequest_FieldViolation, len(re.Items))
		for i, it := range re.Items {
			f := field
			if it.Index >= 0 {
				f += "[" + strconv.Itoa(it.Index) + "]"
			}
			v[i] = &errdetails.BadRequest_FieldViolation{Field: f, Description: it.Err.Error()}
		}
		return invalidArgument(err.Error(), v)
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
	return store.Document{JSON: d.Json, Times: d.TimePointers}
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

func toWriteOp(it *recordv1.WriteItem, programs []string) (store.Op, error) {
	addr, err := toAddress(it.GetAddress())
	if err != nil {
		return store.Op{}, err
	}
	switch op := it.GetOp().(type) {
	case *recordv1.WriteItem_Put:
		pre, err := toPrecondition(op.Put.GetPrecondition())
		if err != nil {
			return store.Op{}, err
		}
		return store.Put(addr, toDocument(op.Put.GetDocument())).WithPrecondition(pre), nil
	case *recordv1.WriteItem_Merge:
		var program string
		switch p := op.Merge.GetProgram().(type) {
		case *recordv1.Merge_Source:
			program = p.Source
		case *recordv1.Merge_ProgramIndex:
			if int64(p.ProgramIndex) >= int64(len(programs)) {
				return store.Op{}, fmt.Errorf("program_index %d is beyond the request's %d programs", p.ProgramIndex, len(programs))
			}
			program = programs[p.ProgramIndex]
		default:
			return store.Op{}, errors.New("merge without a program (source or program_index)")
		}
		return store.Merge(addr, program, toDocument(op.Merge.GetIncoming())), nil
	}
	return store.Op{}, errors.New("item is neither a put nor a merge")
}

var outcomes = map[store.Outcome]recordv1.Outcome{
	store.Found:     recordv1.Outcome_OUTCOME_FOUND,
	store.NotFound:  recordv1.Outcome_OUTCOME_NOT_FOUND,
	store.Created:   recordv1.Outcome_OUTCOME_CREATED,
	store.Updated:   recordv1.Outcome_OUTCOME_UPDATED,
	store.Deleted:   recordv1.Outcome_OUTCOME_DELETED,
	store.Unchanged: recordv1.Outcome_OUTCOME_UNCHANGED,
	store.Accepted:  recordv1.Outcome_OUTCOME_ACCEPTED,
}

var errorKinds = map[store.ErrorKind]recordv1.ErrorKind{
	store.KindInternal:       recordv1.ErrorKind_ERROR_KIND_INTERNAL,
	store.KindNotFound:       recordv1.ErrorKind_ERROR_KIND_NOT_FOUND,
	store.KindAlreadyExists:  recordv1.ErrorKind_ERROR_KIND_ALREADY_EXISTS,
	store.KindConflict:       recordv1.ErrorKind_ERROR_KIND_CONFLICT,
	store.KindInvalid:        recordv1.ErrorKind_ERROR_KIND_INVALID,
	store.KindTooLarge:       recordv1.ErrorKind_ERROR_KIND_TOO_LARGE,
	store.KindUnavailable:    recordv1.ErrorKind_ERROR_KIND_UNAVAILABLE,
	store.KindCanceled:       recordv1.ErrorKind_ERROR_KIND_CANCELED,
	store.KindOutcomeUnknown: recordv1.ErrorKind_ERROR_KIND_OUTCOME_UNKNOWN,
}

// callCodes gives the status of a whole call that failed with a *store.Error of a kind (per
// item failures travel in the results instead). Outcome unknown is UNKNOWN, not UNAVAILABLE:
// gRPC clients retry UNAVAILABLE as "not processed".
var callCodes = map[store.ErrorKind]codes.Code{
	store.KindInternal:       codes.Internal,
	store.KindNotFound:       codes.NotFound,
	store.KindAlreadyExists:  codes.AlreadyExists,
	store.KindConflict:       codes.Aborted,
	store.KindInvalid:        codes.InvalidArgument,
	store.KindTooLarge:       codes.ResourceExhausted,
	store.KindUnavailable:    codes.Unavailable,
	store.KindCanceled:       codes.Canceled,
	store.KindOutcomeUnknown: codes.Unknown,
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
		out.Document = &recordv1.Document{Json: r.Doc.JSON, TimePointers: r.Doc.Times}
	}
	return out
}
