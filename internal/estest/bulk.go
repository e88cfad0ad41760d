package estest

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/elastic/go-elasticsearch/v8/esapi"
)

// ItemError is the "error" object of a failed answer or bulk item.
type ItemError struct {
	Type     string     `json:"type"`
	Reason   string     `json:"reason"`
	CausedBy *ItemError `json:"caused_by"`
}

// BulkItem is one entry of a _bulk answer, whatever its action.
type BulkItem struct {
	Index       string     `json:"_index"`
	ID          string     `json:"_id"`
	Version     int64      `json:"_version"`
	Result      string     `json:"result"`
	Status      int        `json:"status"`
	SeqNo       int64      `json:"_seq_no"`
	PrimaryTerm int64      `json:"_primary_term"`
	Error       *ItemError `json:"error"`
}

// Bulk sends one NDJSON line per value of lines and returns the answer's "errors" flag and its
// items in order. The request itself must succeed and every item must name exactly one action;
// items may fail.
func (n *Node) Bulk(t testing.TB, req esapi.BulkRequest, lines ...any) (errors bool, items []BulkItem) {
	t.Helper()
	var buf bytes.Buffer
	for _, l := range lines {
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	req.Body = &buf
	var ans struct {
		Errors bool                  `json:"errors"`
		Items  []map[string]BulkItem `json:"items"`
	}
	n.OK(t, req).Decode(t, &ans)
	items = make([]BulkItem, 0, len(ans.Items))
	for _, m := range ans.Items {
		if len(m) != 1 {
			t.Fatalf("bulk item with %d actions: %v", len(m), m)
		}
		for _, it := range m {
			items = append(items, it)
		}
	}
	return ans.Errors, items
}

// WantItemError fails the test unless it is a failed item with the status, the error type and
// a reason containing reasonPart. what names the write in the message.
func WantItemError(t testing.TB, what string, it BulkItem, status int, typ, reasonPart string) {
	t.Helper()
	if it.Status != status || it.Error == nil || it.Error.Type != typ || !strings.Contains(it.Error.Reason, reasonPart) {
		t.Fatalf("%s: item %+v (error %+v), want status %d type %s reason containing %q", what, it, it.Error, status, typ, reasonPart)
	}
}
