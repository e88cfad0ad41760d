package searchstore

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"strings"
	"syscall"
	"testing"

	"github.com/tributary-dev/tributary/internal/search"
	"github.com/tributary-dev/tributary/store/driver"
)

func TestDocumentIDEncodings(t *testing.T) {
	var oid [12]byte
	for i := range oid {
		oid[i] = byte(0xf0 + i)
	}
	for _, tc := range []struct {
		key  driver.Key
		want string
	}{
		{driver.NewStringKey("plain"), "plain"},
		{driver.NewStringKey("ключ/🔑"), "ключ/🔑"},
		{driver.NewInt64Key(0), "~~i:0"},
		{driver.NewInt64Key(-42), "~~i:-42"},
		{driver.NewInt64Key(math.MinInt64), "~~i:-9223372036854775808"},
		{driver.NewBytesKey([]byte{0, 0xff, 0xfe, '/', '%'}), "~~b:AP_-LyU"},
		{driver.NewObjectIDKey(oid), "~~o:f0f1f2f3f4f5f6f7f8f9fafb"},
	} {
		if got := documentID(tc.key); got != tc.want {
			t.Errorf("documentID(%v) = %q, want %q", tc.key, got, tc.want)
		}
	}
	longest := documentID(driver.NewBytesKey(bytes.Repeat([]byte{0xff}, driver.MaxBytesKeyBytes)))
	if len(longest) > maxIDBytes || len(longest) != 346 {
		t.Errorf("longest bytes-key _id is %d bytes, want 346 (<= %d)", len(longest), maxIDBytes)
	}
	// Keys of different kinds never share an _id: int64 1 and the string "1" differ.
	if documentID(driver.NewInt64Key(1)) == documentID(driver.NewStringKey("1")) {
		t.Error("int64 and string keys collide")
	}
}

func TestValidateAddress(t *testing.T) {
	s := &Store{}
	addr := func(dataset string, k driver.Key) driver.Address {
		return driver.Address{Store: "s", Namespace: "Any Namespace", Dataset: dataset, Key: k}
	}
	good := []driver.Address{
		addr("orders", driver.NewStringKey("k")),
		addr("orders-v1.2026", driver.NewStringKey("~not-reserved")),
		addr(".hidden", driver.NewInt64Key(7)),
		addr("données", driver.NewStringKey(strings.Repeat("x", driver.MaxStringKeyBytes))),
		addr("a", driver.NewBytesKey(bytes.Repeat([]byte{1}, driver.MaxBytesKeyBytes))),
	}
	for _, a := range good {
		if err := s.ValidateAddress(a); err != nil {
			t.Errorf("ValidateAddress(%v) = %v, want nil", a, err)
		}
	}
	bad := []driver.Address{
		addr("orders", driver.NewStringKey("~~i:1")),
		addr("orders", driver.NewStringKey("~~anything")),
		addr("Orders", driver.NewStringKey("k")),
		addr("or*ders", driver.NewStringKey("k")),
		addr("a,b", driver.NewStringKey("k")),
		addr("_internal", driver.NewStringKey("k")),
		addr("-x", driver.NewStringKey("k")),
		addr("+x", driver.NewStringKey("k")),
		addr(".", driver.NewStringKey("k")),
		addr("..", driver.NewStringKey("k")),
		addr("a b", driver.NewStringKey("k")),
		addr("a#b", driver.NewStringKey("k")),
		addr("a:b", driver.NewStringKey("k")),
		addr("a?b", driver.NewStringKey("k")),
		addr("a/b", driver.NewStringKey("k")),
		addr("a\tb", driver.NewStringKey("k")),
		addr(strings.Repeat("é", 128), driver.NewStringKey("k")), // 256 bytes
	}
	for _, a := range bad {
		err := s.ValidateAddress(a)
		if driver.KindOf(err) != driver.KindInvalid || err == nil {
			t.Errorf("ValidateAddress(%v) = %v, want KindInvalid", a, err)
		}
	}
}

func TestRevisionRoundTrip(t *testing.T) {
	for _, r := range []revision{{0, 1}, {5, 3}, {math.MaxInt64, math.MaxInt64}} {
		b := r.encode()
		if len(b) != revisionLen {
			t.Fatalf("encoded revision is %d bytes", len(b))
		}
		got, err := decodeRevision(b)
		if err != nil || got != r {
			t.Errorf("decode(encode(%v)) = %v, %v", r, got, err)
		}
	}
	bad := [][]byte{
		nil,
		[]byte("not-a-revision-at-all"),
		revision{1, 1}.encode()[:16],
		append([]byte{'X'}, revision{1, 1}.encode()[1:]...),
		revision{1, 0}.encode(),  // primary terms start at 1
		revision{-1, 1}.encode(), // sequence numbers are not negative
		revision{1, -1}.encode(),
	}
	for _, b := range bad {
		if _, err := decodeRevision(b); driver.KindOf(err) != driver.KindInvalid {
			t.Errorf("decodeRevision(%x) = %v, want KindInvalid", b, err)
		}
	}
}

func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uote\back`, "ctl\x00\x01\x1f\n\r\t", "ünï 🔑 \u2028", "~~b:AP_-"} {
		got := appendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil || back != s {
			t.Errorf("appendJSONString(%q) = %s, decodes to %q, %v", s, got, back, err)
		}
	}
}

func TestAppendSourceKeepsOneLine(t *testing.T) {
	doc := []byte("{\n  \"a\": \"x y\",\r\n  \"b\": [1,\n2]\n}")
	got := appendSource([]byte("prefix"), doc)
	if !bytes.HasPrefix(got, []byte("prefix")) || bytes.IndexByte(got, '\n') >= 0 || len(got) != len("prefix")+len(doc) {
		t.Fatalf("appendSource = %q", got)
	}
	var a, b any
	_ = json.Unmarshal(doc, &a)
	if err := json.Unmarshal(got[len("prefix"):], &b); err != nil {
		t.Fatal(err)
	}
	if ja, jb := mustJSON(t, a), mustJSON(t, b); ja != jb {
		t.Fatalf("value changed: %s vs %s", ja, jb)
	}
	plain := []byte(`{"a" :  1}`)
	if got := appendSource(nil, plain); !bytes.Equal(got, plain) {
		t.Fatalf("a one-line document changed: %q", got)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestBulkLines(t *testing.T) {
	rev := revision{seqNo: 12, primaryTerm: 3}
	put := func(c driver.ConditionKind) driver.Write {
		return driver.Write{Kind: driver.Put, Addr: driver.Address{Dataset: "idx", Key: driver.NewInt64Key(5)}, Doc: driver.Document{JSON: []byte(`{"v":1}`)}, Cond: driver.Condition{Kind: c}}
	}
	del := func(c driver.ConditionKind) driver.Write {
		return driver.Write{Kind: driver.Delete, Addr: driver.Address{Dataset: "idx", Key: driver.NewStringKey(`k"1`)}, Cond: driver.Condition{Kind: c}}
	}
	for _, tc := range []struct {
		w    driver.Write
		want string
	}{
		{put(driver.Unconditional), `{"index":{"_index":"idx","_id":"~~i:5"}}` + "\n" + `{"v":1}` + "\n"},
		{put(driver.IfAbsent), `{"create":{"_index":"idx","_id":"~~i:5"}}` + "\n" + `{"v":1}` + "\n"},
		{put(driver.IfRevision), `{"index":{"_index":"idx","_id":"~~i:5","if_seq_no":12,"if_primary_term":3}}` + "\n" + `{"v":1}` + "\n"},
		{del(driver.Unconditional), `{"delete":{"_index":"idx","_id":"k\"1"}}` + "\n"},
		{del(driver.IfRevision), `{"delete":{"_index":"idx","_id":"k\"1","if_seq_no":12,"if_primary_term":3}}` + "\n"},
	} {
		if got := string(appendBulk(nil, &tc.w, rev)); got != tc.want {
			t.Errorf("bulk lines\n got %s\nwant %s", got, tc.want)
		}
	}
}

func TestClassifyItem(t *testing.T) {
	const secret = "SECRET-FIELD-VALUE"
	errJSON := func(typ, cause string) json.RawMessage {
		e := map[string]any{"type": typ, "reason": "Preview of field's value: '" + secret + "'", "index": "idx"}
		if cause != "" {
			e["caused_by"] = map[string]any{"type": cause, "reason": secret}
		}
		return json.RawMessage(mustJSON(t, e))
	}
	for _, tc := range []struct {
		action string
		status int
		err    json.RawMessage
		want   driver.ErrorKind
	}{
		{"create", 409, errJSON("version_conflict_engine_exception", ""), driver.KindAlreadyExists},
		{"index", 409, errJSON("version_conflict_engine_exception", ""), driver.KindConflict},
		{"delete", 409, errJSON("version_conflict_engine_exception", ""), driver.KindConflict},
		{"index", 429, errJSON("es_rejected_execution_exception", ""), driver.KindUnavailable},
		{"create", 429, errJSON("cluster_block_exception", ""), driver.KindUnavailable},
		{"index", 404, errJSON("index_not_found_exception", ""), driver.KindNotFound},
		{"index", 400, errJSON("document_parsing_exception", "illegal_argument_exception"), driver.KindInvalid},
		{"index", 400, errJSON("mapper_parsing_exception", ""), driver.KindInvalid},
		{"index", 400, errJSON("illegal_argument_exception", "max_bytes_length_exceeded_exception"), driver.KindTooLarge},
		{"index", 413, nil, driver.KindTooLarge},
		{"index", 500, errJSON("exception", ""), driver.KindOutcomeUnknown},
		{"index", 503, errJSON("unavailable_shards_exception", ""), driver.KindOutcomeUnknown},
		{"delete", 200, errJSON("exception", ""), driver.KindOutcomeUnknown},
		{"index", 403, errJSON("cluster_block_exception", ""), driver.KindInternal},
		{"create", 401, errJSON("security_exception", ""), driver.KindPermissionDenied},
		{"index", 403, errJSON("security_exception", ""), driver.KindPermissionDenied},
	} {
		err := classifyItem(tc.action, tc.status, tc.err)
		if err.Kind != tc.want {
			t.Errorf("%s %d %s: kind %v, want %v", tc.action, tc.status, tc.err, err.Kind, tc.want)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error message carries the server's reason: %v", err)
		}
		if (tc.want == driver.KindOutcomeUnknown) != strings.Contains(err.Error(), "outcome is unknown") {
			t.Errorf("%s %d: %v says the outcome is unknown if and only if it is not", tc.action, tc.status, err)
		}
		var be *BackendError
		if !errors.As(err, &be) || be.Status != tc.status {
			t.Errorf("%v: no *BackendError with status %d", err, tc.status)
		}
	}
	be := backendError(400, errJSON("document_parsing_exception", "illegal_argument_exception"))
	if be.Type != "document_parsing_exception" || len(be.CausedBy) != 1 || be.CausedBy[0] != "illegal_argument_exception" || be.Index != "idx" {
		t.Errorf("backendError = %+v", be)
	}
}

func TestClassifyStatus(t *testing.T) {
	body := func(typ string) []byte {
		return []byte(`{"error":{"type":"` + typ + `","reason":"r"},"status":0}`)
	}
	for _, tc := range []struct {
		status int
		body   []byte
		kind   requestKind
		want   driver.ErrorKind
	}{
		{429, body("circuit_breaking_exception"), mutating, driver.KindUnavailable},
		{503, body("cluster_block_exception"), mutating, driver.KindUnavailable},
		{503, nil, readOnly, driver.KindUnavailable},
		{413, nil, mutating, driver.KindTooLarge},
		{400, body("action_request_validation_exception"), mutating, driver.KindInvalid},
		{400, body("illegal_argument_exception"), readOnly, driver.KindInvalid},
		{404, body("index_not_found_exception"), readOnly, driver.KindNotFound},
		{401, body("security_exception"), mutating, driver.KindPermissionDenied},
		{403, body("security_exception"), readOnly, driver.KindPermissionDenied},
		{401, []byte("Unauthorized"), readOnly, driver.KindPermissionDenied}, // OpenSearch's 401 is plain text
		{403, body("cluster_block_exception"), mutating, driver.KindInternal},
		{500, body("exception"), mutating, driver.KindOutcomeUnknown},
		{502, []byte("<html>bad gateway</html>"), mutating, driver.KindOutcomeUnknown},
		{504, nil, mutating, driver.KindOutcomeUnknown},
		{408, nil, mutating, driver.KindOutcomeUnknown},
		{405, nil, mutating, driver.KindInternal},
		{500, body("exception"), readOnly, driver.KindUnavailable},
		{504, nil, readOnly, driver.KindUnavailable},
		{408, nil, readOnly, driver.KindUnavailable},
	} {
		err := classifyStatus(&search.Answer{Status: tc.status, Body: tc.body}, tc.kind, "req")
		if err.Kind != tc.want {
			t.Errorf("status %d (kind %d): %v, want %v", tc.status, tc.kind, err.Kind, tc.want)
		}
		if (tc.want == driver.KindOutcomeUnknown) != strings.Contains(err.Error(), "outcome is unknown") {
			t.Errorf("status %d (kind %d): %v says the outcome is unknown if and only if it is not", tc.status, tc.kind, err)
		}
	}
	// A bare-string error, as some endpoints send, still classifies by status.
	if err := classifyStatus(&search.Answer{Status: 404, Body: []byte(`{"error":"alias [x] missing","status":404}`)}, readOnly, "req"); err.Kind != driver.KindInternal {
		t.Errorf("bare-string 404: %v", err)
	}
}

// A request without a complete answer: only a failed connect proves nothing was sent; a write
// failing after that may have been applied (outcome unknown), a read is retryable.
func TestClassifyTransport(t *testing.T) {
	live := context.Background()
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	timedOut, cancelT := context.WithTimeoutCause(context.Background(), 0, errRequestTimeout)
	defer cancelT()
	<-timedOut.Done()
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	cert := &url.Error{Op: "Post", URL: "https://x", Err: &tls.CertificateVerificationError{Err: errors.New("unknown authority")}}
	for _, tc := range []struct {
		name        string
		parent, ctx context.Context
		err         error
		write, read driver.ErrorKind
	}{
		{"cannot connect", live, live, dial, driver.KindUnavailable, driver.KindUnavailable},
		{"cannot connect, caller gone", gone, gone, dial, driver.KindCanceled, driver.KindCanceled},
		{"reset after sending", live, live, reset, driver.KindOutcomeUnknown, driver.KindUnavailable},
		{"end of file", live, live, io.ErrUnexpectedEOF, driver.KindOutcomeUnknown, driver.KindUnavailable},
		{"answer cut short", live, live, &search.ReadError{Err: io.ErrUnexpectedEOF}, driver.KindOutcomeUnknown, driver.KindUnavailable},
		{"caller gone in flight", gone, gone, fmt.Errorf("post: %w", context.Canceled), driver.KindOutcomeUnknown, driver.KindCanceled},
		{"Options.Timeout", live, timedOut, fmt.Errorf("post: %w", context.DeadlineExceeded), driver.KindOutcomeUnknown, driver.KindUnavailable},
		{"certificate", live, live, cert, driver.KindInternal, driver.KindInternal},
	} {
		w := classifyTransport(tc.parent, tc.ctx, tc.err, mutating, "_bulk")
		r := classifyTransport(tc.parent, tc.ctx, tc.err, readOnly, "_mget")
		if w.Kind != tc.write || r.Kind != tc.read {
			t.Errorf("%s: write %v, read %v; want %v, %v", tc.name, w, r, tc.write, tc.read)
		}
		if (w.Kind == driver.KindOutcomeUnknown) != strings.Contains(w.Error(), "outcome is unknown") || strings.Contains(r.Error(), "outcome") {
			t.Errorf("%s: messages %q, %q", tc.name, w, r)
		}
	}
}
