package esfence

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/statestore"
)

// stubTransport answers by path; what the real servers cannot be made to do (refuse the
// sink's user a privilege, drop the connection) is played here.
type stubTransport map[string]func() (*http.Response, error)

func (s stubTransport) Perform(req *http.Request) (*http.Response, error) {
	for prefix, answer := range s {
		if strings.HasPrefix(req.URL.Path, prefix) {
			return answer()
		}
	}
	return reply(http.StatusNotFound, `{}`)()
}

func reply(status int, body string) func() (*http.Response, error) {
	return func() (*http.Response, error) {
		return &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body))}, nil
	}
}

func stubDest() Destination {
	s := &server{prefix: "stub"}
	return s.dest("orders")
}

func TestSettingNotReadable(t *testing.T) {
	tp := stubTransport{
		"/_cluster/state":    reply(200, `{"metadata":{"cluster_uuid":"abc"}}`),
		"/_cluster/settings": reply(403, `{"error":{"type":"security_exception","reason":"action [cluster:monitor/settings] is unauthorized for user [sink] with secret"}}`),
	}
	f, err := New(tp, statestore.NewMemory(), nil)
	if err != nil {
		t.Fatal(err)
	}
	d := stubDest()
	_, err = f.Ensure(context.Background(), d)
	wantRefusal(t, err, FencingUnenforced, d)
	if strings.Contains(err.Error(), "secret") {
		t.Fatalf("the server's reason text leaked into %q", err)
	}
}

func TestTransportFailureIsNoRefusal(t *testing.T) {
	down := errors.New("connection refused")
	tp := stubTransport{"/": func() (*http.Response, error) { return nil, down }}
	f, err := New(tp, statestore.NewMemory(), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Ensure(context.Background(), stubDest())
	if !errors.Is(err, down) || errors.Is(err, ErrDestinationConflict) {
		t.Fatalf("got %v, want the transport error and no refusal", err)
	}
}

func TestSettingHiddenOrOdd(t *testing.T) {
	for name, settings := range map[string]string{
		"absent":     `{}`,
		"not_string": `{"persistent":{"action":{"auto_create_index":["-df-w-*"]}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			tp := stubTransport{
				"/_cluster/state":    reply(200, `{"metadata":{"cluster_uuid":"abc"}}`),
				"/_cluster/settings": reply(200, settings),
			}
			f, _ := New(tp, statestore.NewMemory(), nil)
			d := stubDest()
			_, err := f.Ensure(context.Background(), d)
			wantRefusal(t, err, FencingUnenforced, d)
		})
	}
}

func TestDestinationValidation(t *testing.T) {
	f, _ := New(stubTransport{}, statestore.NewMemory(), nil)
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
}
