package mongostore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	mdriver "go.mongodb.org/mongo-driver/v2/x/mongo/driver"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/auth"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"

	"github.com/tributary-dev/tributary/store/driver"
)

func TestRevisionFormat(t *testing.T) {
	tok := bytes.Repeat([]byte{7}, tokenLength)
	r, err := parseRevision(tokenRevision(tok))
	if err != nil || r.legacy || !bytes.Equal(r.token, tok) {
		t.Fatalf("token revision parsed as %+v, %v", r, err)
	}
	r, err = parseRevision(legacyRevision)
	if err != nil || !r.legacy {
		t.Fatalf("legacy revision parsed as %+v, %v", r, err)
	}
	for _, b := range [][]byte{nil, {}, {revToken}, {0x02}, {revLegacy, 0}, append([]byte{revLegacy}, tok...),
		append([]byte{revToken}, tok[1:]...), []byte("not-a-revision-at-all")} {
		if _, err := parseRevision(b); driver.KindOf(err) != driver.KindInvalid {
			t.Errorf("parseRevision(%x): %v, want invalid", b, err)
		}
	}
}

func TestRevisionOfStoredDocuments(t *testing.T) {
	tok := bytes.Repeat([]byte{9}, tokenLength)
	doc := func(meta any) []byte {
		d := bson.D{{Key: "_id", Value: "k"}, {Key: "v", Value: 1}}
		if meta != nil {
			d = append(d, bson.E{Key: testMeta, Value: meta})
		}
		b, err := bson.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	rev, err := revisionOf(doc(nil), testMeta)
	if err != nil || !bytes.Equal(rev, legacyRevision) {
		t.Fatalf("record without metadata: %x, %v; want the legacy revision", rev, err)
	}
	rev, err = revisionOf(doc(bson.D{{Key: "rev", Value: bson.Binary{Data: tok}}}), testMeta)
	if err != nil || !bytes.Equal(rev, tokenRevision(tok)) {
		t.Fatalf("record with metadata: %x, %v", rev, err)
	}
	for _, bad := range []any{"x", bson.D{}, bson.D{{Key: "rev", Value: "x"}}, bson.D{{Key: "rev", Value: bson.Binary{Subtype: 4, Data: tok}}},
		bson.D{{Key: "rev", Value: bson.Binary{Data: tok[:3]}}}} {
		if _, err := revisionOf(doc(bad), testMeta); driver.KindOf(err) != driver.KindInternal {
			t.Errorf("metadata %v: error %v, want internal", bad, err)
		}
	}
	// appendMeta writes what revisionOf reads.
	b := appendID(make([]byte, 4), driver.NewStringKey("k"))
	b = appendMeta(b, testMeta, tok)
	b = append(b, 0)
	putLen(b)
	if rev, err := revisionOf(b, testMeta); err != nil || !bytes.Equal(rev, tokenRevision(tok)) {
		t.Fatalf("appendMeta/revisionOf: %x, %v", rev, err)
	}
}

func TestFiltersMatchTheirDriverEncoding(t *testing.T) {
	tok := bytes.Repeat([]byte{3}, tokenLength)
	k := driver.NewInt64Key(-42)
	for _, tc := range []struct {
		rev  *revision
		want bson.D
	}{
		{nil, bson.D{{Key: "_id", Value: int64(-42)}}},
		{&revision{legacy: true}, bson.D{{Key: "_id", Value: int64(-42)}, {Key: testMeta, Value: bson.D{{Key: "$exists", Value: false}}}}},
		{&revision{token: tok}, bson.D{{Key: "_id", Value: int64(-42)}, {Key: testMeta + ".rev", Value: bson.Binary{Data: tok}}}},
	} {
		want, _ := bson.Marshal(tc.want)
		if got := filterFor(k, testMeta, tc.rev); !bytes.Equal(got, want) {
			t.Errorf("filter for %+v:\n got %v\nwant %v", tc.rev, bson.Raw(got), bson.Raw(want))
		}
	}
	ids := appendKeyValue(nil, "0", driver.NewStringKey("a"))
	ids = appendKeyValue(ids, "1", driver.NewBytesKey([]byte{1}))
	want, _ := bson.Marshal(bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{"a", bson.Binary{Data: []byte{1}}}}}}})
	if got := inFilter(ids); !bytes.Equal(got, want) {
		t.Errorf("$in filter:\n got %v\nwant %v", bson.Raw(got), bson.Raw(want))
	}
}

func TestKeysMapToIDsAndBack(t *testing.T) {
	oid := [12]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	for _, tc := range []struct {
		key  driver.Key
		want any
	}{
		{driver.NewStringKey("ключ-🔑"), "ключ-🔑"},
		{driver.NewInt64Key(-1 << 63), int64(-1 << 63)},
		{driver.NewBytesKey([]byte{0, 0xff}), bson.Binary{Subtype: 0, Data: []byte{0, 0xff}}},
		{driver.NewObjectIDKey(oid), bson.ObjectID(oid)},
	} {
		doc := document(appendID(nil, tc.key))
		want, _ := bson.Marshal(bson.D{{Key: "_id", Value: tc.want}})
		if !bytes.Equal(doc, want) {
			t.Errorf("%v encodes as %v, want %v", tc.key, bson.Raw(doc), bson.Raw(want))
		}
		if k, ok := idOf(doc); !ok || k != tc.key {
			t.Errorf("%v reads back as %v %v", tc.key, k, ok)
		}
		if k, ok := keyOfValue(tc.want); !ok || k != tc.key {
			t.Errorf("decoded id %#v maps to %v %v", tc.want, k, ok)
		}
	}
	// Numbers compare by value in MongoDB: other numeric ids map to the int64 key.
	for _, v := range []any{int32(5), 5.0} {
		b, _ := bson.Marshal(bson.D{{Key: "_id", Value: v}})
		if k, ok := idOf(b); !ok || k != driver.NewInt64Key(5) {
			t.Errorf("_id %#v maps to %v %v", v, k, ok)
		}
	}
	for _, v := range []any{5.5, bson.Binary{Subtype: 4, Data: []byte{1}}, true} {
		b, _ := bson.Marshal(bson.D{{Key: "_id", Value: v}})
		if k, ok := idOf(b); ok {
			t.Errorf("_id %#v maps to key %v", v, k)
		}
	}
}

func TestValidateAddress(t *testing.T) {
	s, err := New(&mongo.Client{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := func(ns, ds string) driver.Address {
		return driver.Address{Store: "m", Namespace: ns, Dataset: ds, Key: driver.NewStringKey("k")}
	}
	for _, ok := range []driver.Address{addr("crm", "people"), addr("Crm_2", "people.archive"), addr("x", strings.Repeat("c", 253)), addr(strings.Repeat("d", 63), "c")} {
		if err := s.ValidateAddress(ok); err != nil {
			t.Errorf("%v: %v", ok, err)
		}
	}
	for _, bad := range []driver.Address{
		addr("a.b", "c"), addr("a/b", "c"), addr(`a\b`, "c"), addr("a b", "c"), addr(`a"b`, "c"), addr("a$b", "c"),
		addr("a*b", "c"), addr("a<b", "c"), addr("a>b", "c"), addr("a:b", "c"), addr("a|b", "c"), addr("a?b", "c"),
		addr("a\x00b", "c"), addr(strings.Repeat("d", 64), "c"), addr("admin", "c"), addr("LOCAL", "c"), addr("config", "c"),
		addr("db", "a$b"), addr("db", "a\x00"), addr("db", ".c"), addr("db", "system.users"), addr("x", strings.Repeat("c", 254)),
	} {
		err := s.ValidateAddress(bad)
		if driver.KindOf(err) != driver.KindInvalid {
			t.Errorf("%q/%q: error %v, want invalid", bad.Namespace, bad.Dataset, err)
		}
	}
}

func TestNewValidatesOptions(t *testing.T) {
	if _, err := New(nil, nil); err == nil {
		t.Error("New accepted a nil client")
	}
	for _, f := range []string{"_id", "a.b", "$meta", "a\x00"} {
		if _, err := New(&mongo.Client{}, &Options{MetadataField: f}); err == nil {
			t.Errorf("New accepted MetadataField %q", f)
		}
	}
	s, err := New(&mongo.Client{}, &Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.opts.MetadataField != DefaultMetadataField || s.opts.MaxConcurrency != 32 || s.opts.Rand == nil {
		t.Errorf("defaults not applied: %+v", s.opts)
	}
}

func TestCallErrorClassification(t *testing.T) {
	live, dead := context.Background(), canceled()
	netErr := mongo.CommandError{Labels: []string{"NetworkError"}, Message: "connection reset"}
	for _, tc := range []struct {
		name       string
		ctx        context.Context
		err        error
		write, got driver.ErrorKind
	}{
		{"server selection", live, topology.ServerSelectionError{Wrapped: errors.New("no server")}, driver.KindUnavailable, driver.KindUnavailable},
		{"checkout timeout", live, topology.WaitQueueTimeoutError{}, driver.KindUnavailable, driver.KindUnavailable},
		{"handshake", live, topology.ConnectionError{Wrapped: errors.New("refused")}, driver.KindUnavailable, driver.KindUnavailable},
		{"pool closed", live, topology.ErrPoolClosed, driver.KindUnavailable, driver.KindUnavailable},
		{"client disconnected", live, mongo.ErrClientDisconnected, driver.KindUnavailable, driver.KindUnavailable},
		{"network error mid-flight", live, netErr, driver.KindOutcomeUnknown, driver.KindUnavailable},
		{"network timeout mid-flight", live, mongo.CommandError{Labels: []string{"NetworkError"}, Wrapped: context.DeadlineExceeded}, driver.KindOutcomeUnknown, driver.KindUnavailable},
		{"no writes performed", live, mongo.CommandError{Code: 91, Labels: []string{mdriver.NoWritesPerformed}}, driver.KindUnavailable, driver.KindUnavailable},
		{"not primary", live, mongo.CommandError{Code: 10107}, driver.KindUnavailable, driver.KindUnavailable},
		{"interrupted", live, mongo.CommandError{Code: 11601}, driver.KindOutcomeUnknown, driver.KindUnavailable},
		{"stepped down", live, mongo.CommandError{Code: 189}, driver.KindOutcomeUnknown, driver.KindUnavailable},
		{"out of time", live, mongo.CommandError{Code: 50}, driver.KindOutcomeUnknown, driver.KindUnavailable},
		{"deadline would be exceeded", live, fmt.Errorf("%w: rtt", mdriver.ErrDeadlineWouldBeExceeded), driver.KindUnavailable, driver.KindUnavailable},
		{"malformed reply", live, errors.New("malformed wire message: insufficient bytes"), driver.KindInternal, driver.KindInternal},
		{"unauthorized", live, mongo.CommandError{Code: 13}, driver.KindPermissionDenied, driver.KindPermissionDenied},
		{"authentication failed", live, mongo.CommandError{Code: 18}, driver.KindPermissionDenied, driver.KindPermissionDenied},
		{"handshake refused the credentials", live, topology.ConnectionError{Wrapped: &auth.Error{}}, driver.KindPermissionDenied, driver.KindPermissionDenied},
		{"invalid namespace", live, mongo.CommandError{Code: 73}, driver.KindInvalid, driver.KindInvalid},
		{"too large", live, mongo.CommandError{Code: 10334}, driver.KindTooLarge, driver.KindTooLarge},
		{"write concern", live, mongo.WriteException{WriteConcernError: &mongo.WriteConcernError{Code: 64}}, driver.KindOutcomeUnknown, driver.KindInternal},
		{"bulk write concern", live, mongo.BulkWriteException{WriteConcernError: &mongo.WriteConcernError{Code: 91}}, driver.KindOutcomeUnknown, driver.KindInternal},
		{"unsatisfiable write concern", live, mongo.WriteException{WriteConcernError: &mongo.WriteConcernError{Code: 100}}, driver.KindInternal, driver.KindInternal},
		{"client timeout", live, context.DeadlineExceeded, driver.KindOutcomeUnknown, driver.KindUnavailable},
		{"caller canceled in flight", dead, netErr, driver.KindOutcomeUnknown, driver.KindCanceled},
		{"caller canceled before the round trip", dead, context.Canceled, driver.KindCanceled, driver.KindCanceled},
		{"caller canceled before sending", dead, topology.ServerSelectionError{}, driver.KindCanceled, driver.KindCanceled},
	} {
		if k := callErrKind(tc.ctx, tc.err, true); k != tc.write {
			t.Errorf("%s, write: %v, want %v", tc.name, k, tc.write)
		}
		if k := callErrKind(tc.ctx, tc.err, false); k != tc.got {
			t.Errorf("%s, read: %v, want %v", tc.name, k, tc.got)
		}
	}
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func TestItemErrorClassification(t *testing.T) {
	idDup := "E11000 duplicate key error collection: db.c index: _id_ dup key: { _id: \"k\" }"
	otherDup := "E11000 duplicate key error collection: db.c index: email_1 dup key: { email: \"x\" }"
	ferretDup := "E11000 duplicate key error collection: db.c"
	kp := func(field string) bson.Raw {
		b, _ := bson.Marshal(bson.D{{Key: "keyPattern", Value: bson.D{{Key: field, Value: 1}}}})
		return b
	}
	for _, tc := range []struct {
		kind writeKind
		code int
		msg  string
		raw  bson.Raw
		want driver.ErrorKind
	}{
		{kindInsert, 11000, idDup, nil, driver.KindAlreadyExists},
		{kindInsert, 11000, ferretDup, nil, driver.KindAlreadyExists},
		{kindInsert, 11000, "", kp("_id"), driver.KindAlreadyExists},
		{kindInsert, 11000, otherDup, nil, driver.KindInvalid},
		{kindInsert, 11000, "", kp("email"), driver.KindInvalid},
		{kindUpsert, 11000, idDup, nil, driver.KindUnavailable},
		{kindUpsert, 11000, otherDup, nil, driver.KindInvalid},
		{kindReplace, 11000, otherDup, nil, driver.KindInvalid},
		{kindReplace, 11000, ferretDup, nil, driver.KindInvalid},
		{kindInsert, 2, "invalid key", nil, driver.KindInvalid},
		{kindInsert, 121, "Document failed validation", nil, driver.KindInvalid},
		{kindUpsert, 10334, "too large", nil, driver.KindTooLarge},
		{kindReplace, 112, "write conflict", nil, driver.KindUnavailable},
		{kindReplace, 99999, "?", nil, driver.KindInternal},
		{kindUpsert, 13, "not authorized on db to execute command", nil, driver.KindPermissionDenied},
	} {
		if got := itemErrKind(tc.kind, tc.code, tc.msg, tc.raw); got != tc.want {
			t.Errorf("kind %d code %d %q: %v, want %v", tc.kind, tc.code, tc.msg, got, tc.want)
		}
	}
}

// TestAuthRefusalText: a refusal of the credentials or of a privilege says which, and never
// the server's text (Unauthorized quotes the command, which can hold document values).
func TestAuthRefusalText(t *testing.T) {
	const secret = "s3cr3t@example.com"
	for _, tc := range []struct {
		err  error
		want string
	}{
		{mongo.CommandError{Code: 13, Name: "Unauthorized", Message: "not authorized on db to execute command { insert: \"c\", documents: [ { email: \"" + secret + "\" } ] }"}, "permission denied"},
		{topology.ConnectionError{Wrapped: &auth.Error{}}, "authentication failed"},
		{mongo.CommandError{Code: 18, Name: "AuthenticationFailed", Message: "Authentication failed for " + secret}, "authentication failed"},
	} {
		e := newBackendError(callErrKind(context.Background(), tc.err, true), "bulk write", tc.err)
		if e.Kind != driver.KindPermissionDenied || !strings.Contains(e.Error(), tc.want) || strings.Contains(e.Error(), secret) {
			t.Errorf("%v: %v (kind %v), want permission denied saying %q and no server text", tc.err, e, e.Kind, tc.want)
		}
	}
}

func TestBackendErrorsLeaveServerMessagesOut(t *testing.T) {
	const secret = "s3cr3t@example.com"
	we := mongo.WriteError{Code: 11000, Message: "dup key: { email: \"" + secret + "\" }"}
	for _, err := range []error{
		mongo.WriteException{WriteErrors: mongo.WriteErrors{we}},
		mongo.BulkWriteException{WriteErrors: []mongo.BulkWriteError{{WriteError: we}}},
		mongo.CommandError{Code: 2, Message: "invalid value: " + secret, Name: "BadValue"},
	} {
		e := newBackendError(driver.KindInvalid, "write", err)
		if strings.Contains(e.Error(), secret) {
			t.Errorf("error quotes the server message: %v", e)
		}
		if !errors.As(e, new(mongo.ServerError)) {
			t.Errorf("the driver's error is not reachable from %v", e)
		}
	}
	e := itemError(kindInsert, 11000, we.Message, nil, mongo.WriteException{WriteErrors: mongo.WriteErrors{we}})
	if strings.Contains(e.Error(), secret) || driver.KindOf(e) != driver.KindAlreadyExists {
		t.Errorf("item error %v", e)
	}
}

// An unreachable server: nothing can have been sent, so every read and write is Unavailable
// (retryable), never anything that would make a caller think it may have been applied.
func TestUnreachableServerIsUnavailable(t *testing.T) {
	client, err := mongo.Connect(options.Client().ApplyURI("mongodb://127.0.0.1:1/").
		SetServerSelectionTimeout(50 * time.Millisecond).SetConnectTimeout(50 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(client, &Options{DisconnectOnClose: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a := driver.Address{Store: "m", Namespace: "db", Dataset: "c", Key: driver.NewStringKey("k")}
	b := a
	b.Key = driver.NewInt64Key(1)
	c := a
	c.Dataset = "other"
	reads, err := s.Read(ctx, []driver.Address{a, b, c})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range reads {
		if driver.KindOf(r.Err) != driver.KindUnavailable {
			t.Errorf("read %d: %v, want unavailable", i, r.Err)
		}
	}
	doc := driver.Document{JSON: []byte(`{"v":1}`)}
	rev := tokenRevision(make([]byte, tokenLength))
	writes := []driver.Write{
		{Kind: driver.Put, Addr: a, Doc: doc},
		{Kind: driver.Put, Addr: b, Doc: doc, Cond: driver.Condition{Kind: driver.IfAbsent}},
		{Kind: driver.Put, Addr: c, Doc: doc, Cond: driver.Condition{Kind: driver.IfRevision, Revision: rev}},
		{Kind: driver.Delete, Addr: driver.Address{Store: "m", Namespace: "db", Dataset: "c", Key: driver.NewStringKey("d1")}},
		{Kind: driver.Delete, Addr: driver.Address{Store: "m", Namespace: "db", Dataset: "c", Key: driver.NewStringKey("d2")}, Cond: driver.Condition{Kind: driver.IfRevision, Revision: legacyRevision}},
		{Kind: driver.Delete, Addr: driver.Address{Store: "m", Namespace: "db", Dataset: "c", Key: driver.NewStringKey("d3")}, Cond: driver.Condition{Kind: driver.IfAbsent}},
	}
	res, err := s.Write(ctx, writes, driver.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if driver.KindOf(r.Err) != driver.KindUnavailable {
			t.Errorf("write %d: %v, want unavailable", i, r.Err)
		}
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(ctx, []driver.Address{a}); err == nil {
		t.Error("Read after Close succeeded")
	}
	if _, err := s.Write(ctx, writes[:1], driver.WriteOptions{}); err == nil {
		t.Error("Write after Close succeeded")
	}
}

func TestWritesRefusedBeforeSending(t *testing.T) {
	// No server: refusals must not need one, and the other writes of the call still run.
	client, err := mongo.Connect(options.Client().ApplyURI("mongodb://127.0.0.1:1/").SetServerSelectionTimeout(50 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(context.Background())
	s, err := New(client, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := driver.Address{Store: "m", Namespace: "db", Dataset: "c", Key: driver.NewStringKey("k")}
	// 3 MB of JSON, over 16 MiB as BSON: every array element costs a type, a key and an int32.
	huge := driver.Document{JSON: []byte(`{"a":[` + strings.Repeat("1,", 1500000) + `1]}`)}
	res, err := s.Write(context.Background(), []driver.Write{
		{Kind: driver.Put, Addr: a, Doc: driver.Document{JSON: []byte(`{"_id":1}`)}},
		{Kind: driver.Put, Addr: a, Doc: driver.Document{JSON: []byte(`{"v":1}`)}, Cond: driver.Condition{Kind: driver.IfRevision, Revision: []byte("junk")}},
		{Kind: driver.Put, Addr: a, Doc: huge},
	}, driver.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []driver.ErrorKind{driver.KindInvalid, driver.KindInvalid, driver.KindTooLarge} {
		if k := driver.KindOf(res[i].Err); k != want {
			t.Errorf("write %d: %v, want %v", i, res[i].Err, want)
		}
	}
}

func TestRevisionTokensAreFresh(t *testing.T) {
	s, err := New(&mongo.Client{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[string]bool)
	for range 100 {
		b, err := s.tokens(10)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(b); i += tokenLength {
			tok := string(b[i : i+tokenLength])
			if seen[tok] {
				t.Fatal("a revision token repeated")
			}
			seen[tok] = true
		}
	}
	s.opts.Rand = bytes.NewReader(nil)
	if _, err := s.Write(context.Background(), []driver.Write{{Kind: driver.Put, Addr: driver.Address{Store: "m", Namespace: "d", Dataset: "c", Key: driver.NewStringKey("k")}, Doc: driver.Document{JSON: []byte(`{}`)}}}, driver.WriteOptions{}); driver.KindOf(err) != driver.KindInternal {
		t.Errorf("write without randomness: %v, want internal", err)
	}
}
