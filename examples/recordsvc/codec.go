package main

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	recordv1 "github.com/tributary-dev/tributary/examples/recordsvc/proto/tributary/record/v1"
)

// requestCodec is the server's protobuf codec. grpc-go answers a request whose bytes its codec
// cannot decode with INTERNAL, which says the server failed; for the record service's own
// requests the client sent something that is not the message, so refusedUndecodable answers
// INVALID_ARGUMENT instead. On such a failure the codec leaves the request empty, reports
// success and notes the failure; the interceptor, which gets that same request value next,
// answers it. Other services' messages (health, reflection) keep grpc-go's handling.
type requestCodec struct {
	inner encoding.CodecV2
	bad   sync.Map // request message -> its decoding error
}

func newRequestCodec() *requestCodec {
	return &requestCodec{inner: encoding.GetCodecV2("proto")}
}

func (c *requestCodec) Name() string { return "proto" }

func (c *requestCodec) Marshal(v any) (mem.BufferSlice, error) { return c.inner.Marshal(v) }

func (c *requestCodec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.inner.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	switch m := v.(type) {
	case *recordv1.ReadRequest, *recordv1.WriteRequest, *recordv1.DeleteRequest:
		proto.Reset(m.(proto.Message))
		c.bad.Store(v, err)
		return nil
	}
	return err
}

// refusedUndecodable is a unary interceptor answering INVALID_ARGUMENT for a request the codec
// could not decode. It must be the first interceptor: nothing may see the empty request.
func (c *requestCodec) refusedUndecodable(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err, ok := c.bad.LoadAndDelete(req); ok {
		// The decoder's text names the field number and the fault, never the bytes.
		return nil, status.Errorf(codes.InvalidArgument, "the request is not a valid %s: %v", proto.MessageName(req.(proto.Message)), err)
	}
	return handler(ctx, req)
}
