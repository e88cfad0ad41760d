package main

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	recordv1 "github.com/tributary-dev/tributary/examples/recordsvc/proto/tributary/record/v1"
)

// reflector asks a server's reflection service, as grpcurl does, and keeps every file
// descriptor it was sent.
type reflector struct {
	t      *testing.T
	stream reflectionpb.ServerReflection_ServerReflectionInfoClient
	files  map[string]*descriptorpb.FileDescriptorProto
}

func newReflector(t *testing.T, s *service) (*reflector, error) {
	stream, err := reflectionpb.NewServerReflectionClient(s.conn).ServerReflectionInfo(testCtx(t))
	if err != nil {
		return nil, err
	}
	return &reflector{t: t, stream: stream, files: map[string]*descriptorpb.FileDescriptorProto{}}, nil
}

func (r *reflector) ask(req *reflectionpb.ServerReflectionRequest) (*reflectionpb.ServerReflectionResponse, error) {
	if err := r.stream.Send(req); err != nil {
		if errors.Is(err, io.EOF) {
			// The server ended the stream (UNIMPLEMENTED, say) before the send: grpc-go
			// reports that as io.EOF from Send, and the stream's status from Recv.
			_, err = r.stream.Recv()
		}
		return nil, err
	}
	return r.stream.Recv()
}

func (r *reflector) services() ([]string, error) {
	res, err := r.ask(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range res.GetListServicesResponse().GetService() {
		names = append(names, s.Name)
	}
	return names, nil
}

// symbol fetches the file defining name (and the dependencies not sent before) and returns
// the descriptor of name, resolved from what reflection sent only.
func (r *reflector) symbol(name string) protoreflect.Descriptor {
	r.t.Helper()
	res, err := r.ask(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: name}})
	if err != nil {
		r.t.Fatal(err)
	}
	if e := res.GetErrorResponse(); e != nil {
		r.t.Fatalf("reflection for %s: %s", name, e.ErrorMessage)
	}
	for _, b := range res.GetFileDescriptorResponse().GetFileDescriptorProto() {
		fd := &descriptorpb.FileDescriptorProto{}
		if err := proto.Unmarshal(b, fd); err != nil {
			r.t.Fatal(err)
		}
		r.files[fd.GetName()] = fd
	}
	set := &descriptorpb.FileDescriptorSet{}
	for _, fd := range r.files {
		set.File = append(set.File, fd)
	}
	files, err := protodesc.NewFiles(set)
	if err != nil {
		r.t.Fatalf("the descriptors reflection sent for %s do not resolve: %v", name, err)
	}
	d, err := files.FindDescriptorByName(protoreflect.FullName(name))
	if err != nil {
		r.t.Fatalf("%s: %v", name, err)
	}
	return d
}

// TestReflection: with the defaults, a client holding no proto file lists the services, finds
// the health service and decodes a refusal's BadRequest detail through the descriptors
// reflection sent.
func TestReflection(t *testing.T) {
	s := startService(t, memoryConfig, modeServer)
	r, err := newReflector(t, s)
	if err != nil {
		t.Fatal(err)
	}
	names, err := r.services()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"tributary.record.v1.RecordService", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"} {
		if !slices.Contains(names, want) {
			t.Errorf("reflection lists %v, not %s", names, want)
		}
	}
	if sd, ok := r.symbol("grpc.health.v1.Health").(protoreflect.ServiceDescriptor); !ok || sd.Methods().ByName("Check") == nil {
		t.Errorf("grpc.health.v1.Health through reflection: %v, want a service with Check", sd)
	}
	if _, ok := r.symbol("tributary.record.v1.RecordService").(protoreflect.ServiceDescriptor); !ok {
		t.Error("tributary.record.v1.RecordService through reflection is not a service")
	}

	// A refused request's detail, decoded as grpcurl does: by the Any's type name, through the
	// message descriptor reflection gives for it.
	_, err = s.rpc.Write(testCtx(t), &recordv1.WriteRequest{Items: []*recordv1.WriteItem{put(addr("main", "ns", "ds", "k"), doc(`[1]`), nil)}})
	st, _ := status.FromError(err)
	if st.Code() != codes.InvalidArgument || len(st.Proto().GetDetails()) == 0 {
		t.Fatalf("a bad document: %v, want INVALID_ARGUMENT with details", err)
	}
	for _, anyDetail := range st.Proto().GetDetails() {
		name := anyDetail.GetTypeUrl()[strings.LastIndexByte(anyDetail.GetTypeUrl(), '/')+1:]
		md, ok := r.symbol(name).(protoreflect.MessageDescriptor)
		if !ok {
			t.Fatalf("%s through reflection is not a message", name)
		}
		m := dynamicpb.NewMessage(md)
		if err := proto.Unmarshal(anyDetail.GetValue(), m); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if name != "google.rpc.BadRequest" {
			t.Fatalf("detail %s, want google.rpc.BadRequest", name)
		}
		vs := m.Get(md.Fields().ByName("field_violations")).List()
		if vs.Len() != 1 {
			t.Fatalf("BadRequest with %d violations, want 1", vs.Len())
		}
		v := vs.Get(0).Message()
		field := v.Get(v.Descriptor().Fields().ByName("field")).String()
		desc := v.Get(v.Descriptor().Fields().ByName("description")).String()
		if field != "items[0]" || !strings.Contains(desc, "JSON array") {
			t.Errorf("decoded violation %q: %q", field, desc)
		}
	}
}

// TestReflectionOff: listen.reflection false serves no reflection.
func TestReflectionOff(t *testing.T) {
	s := startService(t, strings.Replace(memoryConfig, "metrics: 127.0.0.1:0}", "metrics: 127.0.0.1:0, reflection: false}", 1), modeServer)
	r, err := newReflector(t, s)
	if err == nil {
		_, err = r.services()
	}
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("reflection with listen.reflection false: %v, want UNIMPLEMENTED", err)
	}
}
