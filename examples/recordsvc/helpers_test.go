package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	recordv1 "github.com/tributary-dev/tributary/examples/recordsvc/proto/tributary/record/v1"

	"github.com/tributary-dev/tributary/internal/testenv"
)

// service is a recordsvc started in-process by command, on loopback listeners of port 0,
// with a real gRPC client connected to it.
type service struct {
	conn    *grpc.ClientConn // nil in worker mode
	rpc     recordv1.RecordServiceClient
	health  healthpb.HealthClient
	metrics string // http://host:port/metrics, or "" when off
	log     *syncBuffer
}

// syncBuffer is a log shared by goroutines.
type syncBuffer = testenv.LogBuffer

// startService writes yamlText to a file and runs command on it, with --mode unless mode is
// empty, until the test ends; the cleanup checks that the service stopped cleanly.
func startService(t *testing.T, yamlText string, mode string, clientOpts ...grpc.DialOption) *service {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(yamlText), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	log := &syncBuffer{}
	ready := make(chan listening, 1)
	done := make(chan error, 1)
	args := []string{"--config", path}
	if mode != "" {
		args = append(args, "--mode", mode)
	}
	go func() {
		done <- command(ctx, args, log, func(l listening) { ready <- l })
	}()
	var where listening
	select {
	case where = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("recordsvc did not start: %v\nlog:\n%s", err, log)
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatalf("recordsvc did not start within a minute\nlog:\n%s", log)
	}
	s := &service{log: log}
	var conn *grpc.ClientConn
	if where.GRPC != "" {
		var err error
		opts := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, clientOpts...)
		conn, err = grpc.NewClient(where.GRPC, opts...)
		if err != nil {
			t.Fatal(err)
		}
		s.conn = conn
		s.rpc = recordv1.NewRecordServiceClient(conn)
		s.health = healthpb.NewHealthClient(conn)
	}
	if where.Metrics != "" {
		s.metrics = "http://" + where.Metrics + "/metrics"
	}
	t.Cleanup(func() {
		if conn != nil {
			conn.Close()
		}
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("recordsvc stopped with an error: %v\nlog:\n%s", err, log)
			}
		case <-time.After(60 * time.Second):
			t.Errorf("recordsvc did not stop within a minute\nlog:\n%s", log)
		}
	})
	return s
}

// ctx returns a context bounded generously: the bound catches a hang, it measures nothing.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func strKey(s string) *recordv1.Key { return &recordv1.Key{Kind: &recordv1.Key_String_{String_: s}} }

func addr(store, ns, ds, key string) *recordv1.Address {
	return &recordv1.Address{Store: store, Namespace: ns, Dataset: ds, Key: strKey(key)}
}

func doc(js string, times ...string) *recordv1.Document {
	return &recordv1.Document{Json: js, TimePointers: times}
}

func put(a *recordv1.Address, d *recordv1.Document, pre *recordv1.Precondition) *recordv1.WriteItem {
	return &recordv1.WriteItem{Address: a, Op: &recordv1.WriteItem_Put{Put: &recordv1.Put{Document: d, Precondition: pre}}}
}

func mergeIdx(a *recordv1.Address, incoming *recordv1.Document, program uint32) *recordv1.WriteItem {
	return &recordv1.WriteItem{Address: a, Op: &recordv1.WriteItem_Merge{Merge: &recordv1.Merge{Incoming: incoming, Program: &recordv1.Merge_ProgramIndex{ProgramIndex: program}}}}
}

func mergeSrc(a *recordv1.Address, incoming *recordv1.Document, source string) *recordv1.WriteItem {
	return &recordv1.WriteItem{Address: a, Op: &recordv1.WriteItem_Merge{Merge: &recordv1.Merge{Incoming: incoming, Program: &recordv1.Merge_Source{Source: source}}}}
}

func ifRevision(rev []byte) *recordv1.Precondition {
	return &recordv1.Precondition{Condition: &recordv1.Precondition_Revision{Revision: rev}}
}

func ifAbsent() *recordv1.Precondition {
	return &recordv1.Precondition{Condition: &recordv1.Precondition_Absent{Absent: &recordv1.Absent{}}}
}

// describe renders a result for failure messages.
func describe(r *recordv1.Result) string {
	if r.Error != nil {
		return r.Error.Kind.String() + ": " + r.Error.Message
	}
	return r.Outcome.String()
}

// wantOutcomes checks each result's outcome, or its error kind where want names one.
func wantOutcomes(t *testing.T, what string, got []*recordv1.Result, want ...fmt.Stringer) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d results, want %d", what, len(got), len(want))
	}
	for i, w := range want {
		switch w := w.(type) {
		case recordv1.Outcome:
			if got[i].Error != nil || got[i].Outcome != w {
				t.Errorf("%s: result %d is %s, want %s", what, i, describe(got[i]), w)
			}
		case recordv1.ErrorKind:
			if got[i].Error == nil || got[i].Error.Kind != w {
				t.Errorf("%s: result %d is %s, want %s", what, i, describe(got[i]), w)
			}
		}
	}
}

// scrape returns the value of the sample whose name and labels are exactly series (as the
// text format prints them), and whether it exists.
func scrape(t *testing.T, url, series string) (float64, bool) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if name, value, ok := strings.Cut(line, " "); ok && name == series {
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				t.Fatalf("sample %s: %v", series, err)
			}
			return v, true
		}
	}
	return 0, false
}

// eventually polls cond until it holds or ctx ends. It waits for the system to reach a state;
// it asserts nothing about how long that took.
func eventually(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: still not the case when the test's bound ran out", what)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// uniqueName is a lowercase name no earlier run used, for indices, databases and topics.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), time.Now().UnixNano())
}
