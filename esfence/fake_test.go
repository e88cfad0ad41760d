package esfence

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/internal/search"
	"github.com/tributary-dev/tributary/internal/search/searchtest"
	"github.com/tributary-dev/tributary/statestore"
)

// What the real servers cannot be made to do (refuse the sink's user a privilege, drop the
// connection, hide a setting) is played by the shared fake node.

// fakeFence is a Fence of a fake node whose answers at the given paths are replaced.
func fakeFence(t *testing.T, answers map[string]*searchtest.Reply) (*Fence, *searchtest.Cluster) {
	t.Helper()
	c := searchtest.New(t, nil)
	c.Intercept(func(r *searchtest.Request) *searchtest.Reply {
		for prefix, a := range answers {
			if strings.HasPrefix(r.Path, prefix) {
				return a
			}
		}
		return nil
	})
	f, err := New(c.Client(t), statestore.NewMemory(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return f, c
}

func stubDest() Destination {
	s := &server{prefix: "stub"}
	return s.dest("orders")
}

func TestSettingNotReadable(t *testing.T) {
	f, _ := fakeFence(t, map[string]*searchtest.Reply{
		"/_cluster/settings": searchtest.Status(403, `{"error":{"type":"security_exception","reason":"action [cluster:monitor/settings] is unauthorized for user [sink] with secret"}}`),
	})
	d := stubDest()
	_, err := f.Ensure(context.Background(), d)
	wantRefusal(t, err, FencingUnenforced, d)
	if strings.Contains(err.Error(), "secret") {
		t.Fatalf("the server's reason text leaked into %q", err)
	}
}

func TestTransportFailureIsNoRefusal(t *testing.T) {
	f, _ := fakeFence(t, map[string]*searchtest.Reply{"/": searchtest.Drop()})
	_, err := f.Ensure(context.Background(), stubDest())
	var se *ServerError
	if err == nil || errors.Is(err, ErrDestinationConflict) || errors.As(err, &se) || search.ErrorClass(err) != search.Unavailable {
		t.Fatalf("got %v, want the transport error and no refusal", err)
	}
}

func TestServerErrorIsNoRefusal(t *testing.T) {
	f, _ := fakeFence(t, map[string]*searchtest.Reply{"/_cluster/state": searchtest.ErrorAnswer(503, "cluster_block_exception")})
	_, err := f.Ensure(context.Background(), stubDest())
	var se *ServerError
	if !errors.As(err, &se) || errors.Is(err, ErrDestinationConflict) || se.Class() != search.Unavailable || se.Type != "cluster_block_exception" {
		t.Fatalf("got %v, want a *ServerError of class unavailable and no refusal", err)
	}
}

func TestSettingHiddenOrOdd(t *testing.T) {
	for name, settings := range map[string]string{
		"absent":     `{}`,
		"not_string": `{"persistent":{"action":{"auto_create_index":["-df-w-*"]}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			f, _ := fakeFence(t, map[string]*searchtest.Reply{"/_cluster/settings": searchtest.Status(200, settings)})
			d := stubDest()
			_, err := f.Ensure(context.Background(), d)
			wantRefusal(t, err, FencingUnenforced, d)
		})
	}
}

func TestDestinationValidation(t *testing.T) {
	f, c := fakeFence(t, nil)
	for _, mutate := range []func(*Destination){
		func(d *Destination) { d.Index = "Orders" },
		func(d *Destination) { d.Index = "orders*" },
		func(d *Destination) { d.Index = "df-w-orders" },
		func(d *Destination) { d.Index = "" },
		func(d *Destination) { d.Pipeline = "" },
		func(d *Destination) { d.Encoding = "" },
		func(d *Destination) { d.Table.Table = "" },
		func(d *Destination) { d.Mapping = []byte(`{"_meta":{"deltaforge":1}}`) },
	} {
		d := stubDest()
		mutate(&d)
		if _, err := f.Ensure(context.Background(), d); err == nil || errors.Is(err, ErrDestinationConflict) {
			t.Errorf("destination %+v: %v, want a validation error", d, err)
		}
	}
	if n := len(c.Requests()); n != 0 {
		t.Fatalf("%d requests sent for invalid destinations", n)
	}
}

// A claim on the fake creates the index with marker and write alias, and a second claim
// rotates the alias: the fake plays the protocol the server tests pin.
func TestFakeClaimAndRotate(t *testing.T) {
	f, c := fakeFence(t, nil)
	d := stubDest()
	claim, err := f.Ensure(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	ix := c.Index(d.Index)
	if ix == nil || !ix.Aliases[claim.WriteAlias()] || ix.Mappings["_meta"] == nil {
		t.Fatalf("index after the claim: %+v", ix)
	}
	next, err := f.Reclaim(context.Background(), claim)
	if err != nil {
		t.Fatal(err)
	}
	if ix := c.Index(d.Index); len(ix.Aliases) != 1 || !ix.Aliases[next.WriteAlias()] {
		t.Fatalf("aliases after the reclaim: %v", ix.Aliases)
	}
	// A claim made from the old one's state is fenced.
	c.EditIndex(d.Index, func(ix *searchtest.Index) { clear(ix.Aliases) })
	_, err = f.Fields(context.Background(), next)
	wantRefusal(t, err, Fenced, d)
}
