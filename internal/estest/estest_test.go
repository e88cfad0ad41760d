package estest

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/elastic/go-elasticsearch/v8/esapi"
)

func TestOKFailsOnErrorStatus(t *testing.T) {
	n := fakeNode(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":{"type":"x"}}`)
	})
	if r := n.Do(t, esapi.InfoRequest{}); r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), `"x"`) {
		t.Fatalf("Do: %d %s, want the 400 answer itself", r.Status, r.Body)
	}
	rec := record(t, func(tb testing.TB) { n.OK(tb, esapi.InfoRequest{}) })
	if !rec.fatal || !strings.Contains(rec.failures(), "status 400") {
		t.Fatalf("OK on a 400: fatal %v, failures %q", rec.fatal, rec.failures())
	}
}

func TestBulkReturnsItemsInOrder(t *testing.T) {
	var sent string
	n := fakeNode(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		sent = string(b)
		io.WriteString(w, `{"errors":true,"items":[{"index":{"_index":"i","_id":"a","status":201,"result":"created"}},`+
			`{"delete":{"_index":"i","_id":"b","status":404,"error":{"type":"index_not_found_exception","reason":"no such index [i]"}}}]}`)
	})
	errs, items := n.Bulk(t, esapi.BulkRequest{}, map[string]any{"index": map[string]any{"_id": "a"}}, map[string]any{"k": 1},
		map[string]any{"delete": map[string]any{"_id": "b"}})
	if want := `{"index":{"_id":"a"}}` + "\n" + `{"k":1}` + "\n" + `{"delete":{"_id":"b"}}` + "\n"; sent != want {
		t.Fatalf("body %q, want %q", sent, want)
	}
	if !errs || len(items) != 2 || items[0].ID != "a" || items[0].Status != http.StatusCreated || items[1].ID != "b" {
		t.Fatalf("errors %v, items %+v", errs, items)
	}
	WantItemError(t, "delete", items[1], http.StatusNotFound, "index_not_found_exception", "no such index")
	rec := record(t, func(tb testing.TB) {
		WantItemError(tb, "index", items[0], http.StatusNotFound, "index_not_found_exception", "")
	})
	if !rec.fatal {
		t.Fatal("WantItemError accepted a successful item")
	}
}

func TestBulkRefusesItemWithTwoActions(t *testing.T) {
	n := fakeNode(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"errors":false,"items":[{"index":{"status":201},"create":{"status":201}}]}`)
	})
	if rec := record(t, func(tb testing.TB) { n.Bulk(tb, esapi.BulkRequest{}, map[string]any{}) }); !rec.fatal {
		t.Fatal("an item naming two actions was accepted")
	}
}

func TestMgetErrors(t *testing.T) {
	answer := func(status int, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(status)
			io.WriteString(w, body)
		}
	}
	_, err := fakeNode(t, answer(http.StatusNotFound, `{"error":{"type":"index_not_found_exception"}}`)).Mget(t, "i", []string{"1"})
	var se *StatusError
	if !errors.As(err, &se) || se.Status != http.StatusNotFound {
		t.Fatalf("missing index: %v, want a *StatusError with 404", err)
	}
	_, err = fakeNode(t, answer(http.StatusOK, `{"docs":[{"_id":"1","error":{"type":"no_shard_available_action_exception"}}]}`)).Mget(t, "i", []string{"1"})
	if err == nil || errors.As(err, &se) {
		t.Fatalf("document error: %v, want a plain error", err)
	}
	docs, err := fakeNode(t, answer(http.StatusOK,
		`{"docs":[{"_id":"1","found":true,"_version":3,"_source":{"n":18446744073709551615}},{"_id":"2","found":false}]}`)).Mget(t, "i", []string{"1", "2"})
	if err != nil || len(docs) != 2 || !docs[0].Found || docs[0].Version != 3 || docs[1].Found {
		t.Fatalf("docs %+v, err %v", docs, err)
	}
	m, err := docs[0].Object()
	if err != nil || m["n"] != json.Number("18446744073709551615") {
		t.Fatalf("source %v (%T), err %v; want the number with all its digits", m, m["n"], err)
	}
}

func TestEnforceAutoCreateRuleRefusesTransient(t *testing.T) {
	var puts int
	n := fakeNode(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			puts++
		}
		io.WriteString(w, `{"persistent":{},"transient":{"action.auto_create_index":"false"}}`)
	})
	rec := record(t, func(tb testing.TB) { n.EnforceAutoCreateRule(tb) })
	if !rec.fatal || !strings.Contains(rec.failures(), "transient") || puts != 0 {
		t.Fatalf("fatal %v, failures %q, %d settings updates; want a refusal before any update", rec.fatal, rec.failures(), puts)
	}
}

func TestDeleteIndicesReportsRefusal(t *testing.T) {
	n := fakeNode(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":{"type":"illegal_argument_exception"}}`)
	})
	rec := record(t, func(tb testing.TB) { n.DeleteIndices(tb, "a*", "b") })
	if rec.fatal || !strings.Contains(rec.failures(), "deleting a*,b: status 400") {
		t.Fatalf("fatal %v, failures %q; want one non-fatal error naming the indices", rec.fatal, rec.failures())
	}
}
