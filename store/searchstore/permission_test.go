package searchstore

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/internal/search/searchtest"
	"github.com/tributary-dev/tributary/store/driver"
)

// The refusals below are the engines' own texts (Elasticsearch 8.19 and OpenSearch 2.19 with
// security on), as the secured test servers answer them.
const (
	esBulkItemDenied = `{"type":"security_exception","reason":"action [indices:data/write/bulk[s]] is unauthorized for user [rs_user] with effective roles [rs_role] on indices [denied], this action is granted by the index privileges [create_doc,create,delete,index,write,all]"}`
	esMgetDenied     = `{"root_cause":[{"type":"security_exception","reason":"action [indices:data/read/mget[shard]] is unauthorized for user [rs_user] with effective roles [rs_role] on indices [denied], this action is granted by the index privileges [read,all]"}],"type":"security_exception","reason":"action [indices:data/read/mget[shard]] is unauthorized for user [rs_user] with effective roles [rs_role] on indices [denied], this action is granted by the index privileges [read,all]"}`
	esGetDenied      = `{"error":{"root_cause":[],"type":"security_exception","reason":"action [indices:admin/get] is unauthorized for user [rs_user] with effective roles [rs_role] on indices [denied], this action is granted by the index privileges [view_index_metadata,manage,all]"},"status":403}`
	es401            = `{"error":{"root_cause":[],"type":"security_exception","reason":"unable to authenticate user [rs_user] for REST request [/_mget]"},"status":401}`
	osBulkDenied     = `{"error":{"root_cause":[{"type":"security_exception","reason":"no permissions for [indices:data/write/bulk] and User [name=rs_user, backend_roles=[], requestedTenant=null]"}],"type":"security_exception","reason":"no permissions for [indices:data/write/bulk] and User [name=rs_user, backend_roles=[], requestedTenant=null]"},"status":403}`
)

func wantText(t *testing.T, what string, err error, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v does not say %q", what, err, p)
		}
	}
}

// TestFakePermissionDeniedPerItem: a role that does not cover one dataset fails that
// dataset's items with KindPermissionDenied, naming the action and the privileges, and the
// other items of the same call succeed (the engines refuse per item).
func TestFakePermissionDeniedPerItem(t *testing.T) {
	f := newFake(t, func(r *searchtest.Request) (int, string) {
		switch r.Endpoint {
		case "_bulk":
			return 200, `{"errors":true,"items":[
				{"index":{"_index":"ok","_id":"1","_seq_no":0,"_primary_term":1,"result":"created","status":201}},
				{"index":{"_index":"denied","_id":"1","status":403,"error":` + esBulkItemDenied + `}}]}`
		case "_mget":
			return 200, `{"docs":[
				{"_index":"ok","_id":"1","_seq_no":0,"_primary_term":1,"found":true,"_source":{"a":1}},
				{"_index":"denied","_id":"1","error":` + esMgetDenied + `}]}`
		}
		return 200, ""
	})
	s := storeOf(t, f, nil)
	ctx := context.Background()
	res, err := s.Write(ctx, []driver.Write{putOf(addrOf("ok", "1"), `{"a":1}`, driver.Condition{}), putOf(addrOf("denied", "1"), `{"a":1}`, driver.Condition{})}, driver.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || res[0].Outcome != driver.Created {
		t.Fatalf("the covered dataset's write: %+v", res[0])
	}
	wantKind(t, "denied write", res[1].Err, driver.KindPermissionDenied)
	wantText(t, "denied write", res[1].Err, "permission denied", "indices:data/write/bulk[s]", "denied", "rs_user", "index privileges create_doc, create, delete, index, write, all")
	if driver.KindOf(res[1].Err).Retryable() {
		t.Fatal("permission denied is retryable")
	}

	rr, err := s.Read(ctx, []driver.Address{addrOf("ok", "1"), addrOf("denied", "1")})
	if err != nil {
		t.Fatal(err)
	}
	if rr[0].Err != nil || !rr[0].Found {
		t.Fatalf("the covered dataset's read: %+v", rr[0])
	}
	wantKind(t, "denied read", rr[1].Err, driver.KindPermissionDenied)
	wantText(t, "denied read", rr[1].Err, "indices:data/read/mget[shard]", "index privileges read, all")
}

// TestFakePermissionDeniedWholeRequest: a 401 is "authentication failed" naming the kind of
// credentials sent (never the credentials); OpenSearch's 403 of a whole _bulk names its
// cluster-level action; neither is retryable.
func TestFakePermissionDeniedWholeRequest(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   []string
	}{
		{"es 401", 401, es401, []string{"_bulk refused; nothing was applied", "authentication failed", "basic"}},
		{"opensearch 401", 401, "Unauthorized", []string{"authentication failed", "basic"}},
		{"opensearch 403", 403, osBulkDenied, []string{"permission denied", "indices:data/write/bulk", "rs_user"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(r *searchtest.Request) (int, string) {
				if r.Method == http.MethodHead {
					return 200, ""
				}
				return tc.status, tc.body
			})
			s := storeOf(t, f, &Options{Username: "rs_user", Password: "pw-not-in-errors"})
			res, err := s.Write(context.Background(), []driver.Write{putOf(addrOf("d", "1"), `{}`, driver.Condition{})}, driver.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			wantKind(t, "write", res[0].Err, driver.KindPermissionDenied)
			wantText(t, "write", res[0].Err, tc.want...)
			if strings.Contains(res[0].Err.Error(), "pw-not-in-errors") {
				t.Fatalf("the error quotes the password: %v", res[0].Err)
			}
		})
	}
}

// TestFakeDatasetCheckDenied: a HEAD refused has no body; the adapter asks GET /<dataset>
// for the reason, so the refusal still names the action and the privileges, and only the
// writes to that dataset fail.
func TestFakeDatasetCheckDenied(t *testing.T) {
	f := newFake(t, func(r *searchtest.Request) (int, string) {
		switch {
		case r.Path == "/denied" && r.Method == http.MethodHead:
			return 403, ""
		case r.Path == "/denied":
			return 403, esGetDenied
		case r.Endpoint == "_bulk":
			return 200, `{"errors":false,"items":[{"index":{"_index":"ok","_id":"1","_seq_no":0,"_primary_term":1,"result":"created","status":201}}]}`
		}
		return 200, ""
	})
	s := storeOf(t, f, nil)
	res, err := s.Write(context.Background(), []driver.Write{putOf(addrOf("ok", "1"), `{}`, driver.Condition{}), putOf(addrOf("denied", "1"), `{}`, driver.Condition{})}, driver.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil {
		t.Fatalf("the covered dataset's write: %v", res[0].Err)
	}
	wantKind(t, "denied dataset", res[1].Err, driver.KindPermissionDenied)
	wantText(t, "denied dataset", res[1].Err, "dataset check refused", "indices:admin/get", "view_index_metadata, manage, all")
}
