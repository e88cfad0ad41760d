package main

import (
	"bytes"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	recordv1 "github.com/tributary-dev/tributary/examples/recordsvc/proto/tributary/record/v1"
)

// rawCodec sends []byte as they are: a client that speaks no protobuf.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }
func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

// TestUndecodableRequest: bytes that are not the request message are the client's fault,
// INVALID_ARGUMENT (grpc-go's own answer is INTERNAL); the call is counted with that code, as
// is a request over limits.max_request_bytes (RESOURCE_EXHAUSTED, refused before any handler).
func TestUndecodableRequest(t *testing.T) {
	s := startService(t, `
listen: {grpc: 127.0.0.1:0, metrics: 127.0.0.1:0}
limits: {max_request_bytes: 4096}
stores: {main: {kind: memory}}
`, modeServer, grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(1<<20)))
	ctx := testCtx(t)
	// A field 1 (addresses) of wire type 2 whose length runs past the end, then a truncated
	// varint: no ReadRequest.
	for _, garbage := range [][]byte{{0x0a, 0x7f, 0x01}, {0xff, 0xff, 0xff}} {
		var out []byte
		err := s.conn.Invoke(ctx, "/tributary.record.v1.RecordService/Read", &garbage, &out, grpc.ForceCodecV2(rawCodec{}))
		if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "tributary.record.v1.ReadRequest") {
			t.Errorf("garbage %x: %v, want INVALID_ARGUMENT naming the message", garbage, err)
		}
	}
	// A client built from the earlier record.proto (document bytes) that sends a document
	// which is not UTF-8: refused naming the field, not INTERNAL.
	wire, err := proto.Marshal(&recordv1.WriteRequest{Items: []*recordv1.WriteItem{put(addr("main", "ns", "ds", "k"), doc(`{"a":"XX"}`), nil)}})
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(wire, []byte("XX"))
	wire[at], wire[at+1] = 0xff, 0xfe
	var out []byte
	err = s.conn.Invoke(ctx, "/tributary.record.v1.RecordService/Write", &wire, &out, grpc.ForceCodecV2(rawCodec{}))
	if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "invalid UTF-8") {
		t.Errorf("a document that is not UTF-8: %v, want INVALID_ARGUMENT saying invalid UTF-8", err)
	}
	// The server still answers good requests on the same connection, with nothing left over.
	if _, err := s.rpc.Read(ctx, &recordv1.ReadRequest{Addresses: []*recordv1.Address{addr("main", "ns", "ds", "k")}}); err != nil {
		t.Fatal(err)
	}
	big := doc(`{"pad":"` + strings.Repeat("x", 8000) + `"}`)
	_, err = s.rpc.Write(ctx, &recordv1.WriteRequest{Items: []*recordv1.WriteItem{put(addr("main", "ns", "ds", "k"), big, nil)}})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("an 8 KB request against a 4 KiB limit: %v, want RESOURCE_EXHAUSTED", err)
	}
	for _, c := range []struct {
		series string
		want   float64
	}{
		{`recordsvc_rpc_requests_total{code="InvalidArgument",method="Read"}`, 2},
		{`recordsvc_rpc_requests_total{code="InvalidArgument",method="Write"}`, 1},
		{`recordsvc_rpc_requests_total{code="OK",method="Read"}`, 1},
		{`recordsvc_rpc_requests_total{code="ResourceExhausted",method="Write"}`, 1},
	} {
		if v, ok := scrape(t, s.metrics, c.series); !ok || v != c.want {
			t.Errorf("%s = %v (present %v), want %v", c.series, v, ok, c.want)
		}
	}
}
