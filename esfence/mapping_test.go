package esfence

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/tributary-dev/tributary/internal/search/searchtest"
)

// Requests through a write alias that is gone are refusals: fenced while the index exists,
// destination_missing once it is deleted; other failures are server errors, not refusals.
func TestMappingThroughGoneAlias(t *testing.T) {
	d := stubDest()
	c := &Claim{dest: d, instance: "0123456789abcdef0123456789abcdef", fence: "2-0123456789abcdef"}
	alias := "/" + c.WriteAlias()
	notFound := searchtest.Status(404, `{"error":{"type":"index_not_found_exception","reason":"no such index [`+c.WriteAlias()+`]"},"status":404}`)
	for name, tc := range map[string]struct {
		answers map[string]*searchtest.Reply
		want    Class
	}{
		"fenced":  {map[string]*searchtest.Reply{alias: notFound, "/" + d.Index: searchtest.Status(200, `{"`+d.Index+`":{"aliases":{},"mappings":{}}}`)}, Fenced},
		"deleted": {map[string]*searchtest.Reply{alias: notFound}, DestinationMissing},
	} {
		t.Run(name, func(t *testing.T) {
			f, _ := fakeFence(t, tc.answers)
			_, err := f.Fields(context.Background(), c)
			wantRefusal(t, err, tc.want, d)
			err = f.AddFields(context.Background(), c, map[string]json.RawMessage{"x": json.RawMessage(`{"type":"keyword"}`)})
			wantRefusal(t, err, tc.want, d)
		})
	}
	// A field whose mapping conflicts: the cluster's 400, as a server error.
	f, _ := fakeFence(t, map[string]*searchtest.Reply{alias: searchtest.Status(400, `{"error":{"type":"illegal_argument_exception","reason":"mapper [x] cannot be changed"},"status":400}`)})
	err := f.AddFields(context.Background(), c, map[string]json.RawMessage{"x": json.RawMessage(`{"type":"long"}`)})
	var se *ServerError
	if !errors.As(err, &se) || se.Status != 400 || errors.Is(err, ErrDestinationConflict) {
		t.Fatalf("conflicting field: %v, want a 400 server error", err)
	}
}
