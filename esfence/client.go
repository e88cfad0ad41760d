package esfence

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/internal/search"
)

// answer is one fully read response.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) ok() bool { return a.status >= 200 && a.status <= 299 }

// ServerError is a failed request that is not a refusal (a refusal is a *ConflictError): the
// request, the HTTP status and the error types the server reported. Reason texts are left out
// on purpose, but for a 401 or 403, whose Auth keeps what the security refusal names (the
// action, the user, the privileges that grant it; errors.As finds it). The caller judges
// whether to retry: never a 401 or 403.
type ServerError struct {
	Request  string
	Status   int
	Type     string
	CausedBy []string
	// Auth is the refusal of a 401 or 403 answer (internal/search); nil for other statuses.
	Auth *search.AuthError
}

func (e *ServerError) Error() string {
	s := "esfence: " + e.Request + ": "
	if e.Auth != nil {
		return s + e.Auth.Error()
	}
	s += "status " + strconv.Itoa(e.Status)
	if e.Type != "" {
		s += " " + e.Type
	}
	for _, c := range e.CausedBy {
		s += ", caused by " + c
	}
	return s
}

// Unwrap gives the *search.AuthError of a 401 or 403.
func (e *ServerError) Unwrap() error {
	if e.Auth == nil {
		return nil
	}
	return e.Auth
}

// Class is the class of the error's status (internal/search).
func (e *ServerError) Class() search.Class { return search.StatusClass(e.Status) }

// serverError reads the error types of a failed answer, leaving the reason texts out (but
// what a 401 or 403 names: search.AnswerError).
func (a answer) serverError(request string) *ServerError {
	info := search.ParseError(a.body)
	se := &ServerError{Request: request, Status: a.status, Type: info.Type, CausedBy: info.CausedBy}
	if err := search.AnswerError(a.status, a.header, a.body); err != nil {
		se.Auth, _ = err.(*search.AuthError)
	}
	return se
}

// do sends one request. Transport failures are returned as errors; HTTP errors are answers.
func (f *Fence) do(ctx context.Context, what string, req esapi.Request) (answer, error) {
	if f.opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.opts.Timeout)
		defer cancel()
	}
	a, err := search.Do(ctx, f.tp, req)
	if err != nil {
		return answer{}, fmt.Errorf("esfence: %s: %w", what, err)
	}
	defer a.Release()
	// Claims are rare; their answers are kept as copies rather than pooled.
	return answer{status: a.Status, header: a.Header, body: bytes.Clone(a.Body)}, nil
}

func jsonBody(v any) io.Reader {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only maps of strings and raw JSON already validated
	}
	return bytes.NewReader(b)
}

// clusterUUID reads the cluster's UUID from the cluster state: GET / is not available on every
// distribution (the Elasticsearch integ-test zip has no root handler), the cluster state is.
func (f *Fence) clusterUUID(ctx context.Context) (string, error) {
	const what = "reading cluster_uuid"
	a, err := f.do(ctx, what, esapi.ClusterStateRequest{Metric: []string{"metadata"}, FilterPath: []string{"metadata.cluster_uuid"}})
	if err != nil {
		return "", err
	}
	if !a.ok() {
		return "", a.serverError(what)
	}
	var st struct {
		Metadata struct {
			ClusterUUID string `json:"cluster_uuid"`
		} `json:"metadata"`
	}
	if json.Unmarshal(a.body, &st) != nil || st.Metadata.ClusterUUID == "" || st.Metadata.ClusterUUID == "_na_" {
		return "", errors.New("esfence: " + what + ": the cluster state names no cluster_uuid")
	}
	return st.Metadata.ClusterUUID, nil
}

// indexState is what GET /<name> says about a destination name.
type indexState struct {
	exists   bool
	concrete bool // the name is itself an index, not an alias or a data stream
	meta     map[string]json.RawMessage
	aliases  []string
	// resolvesTo are the indices an alias or a data stream names (sorted; nil for an index).
	resolvesTo []string
}

// getIndex reads the name's mapping _meta and aliases. An alias or a data stream resolves to
// other (backing) index names, which is how they are told from a concrete index.
func (f *Fence) getIndex(ctx context.Context, name string) (indexState, error) {
	const what = "reading the index"
	a, err := f.do(ctx, what, esapi.IndicesGetRequest{Index: []string{name}})
	if err != nil {
		return indexState{}, err
	}
	if a.status == http.StatusNotFound {
		return indexState{}, nil
	}
	if !a.ok() {
		return indexState{}, a.serverError(what)
	}
	var m map[string]struct {
		Aliases  map[string]json.RawMessage `json:"aliases"`
		Mappings struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"mappings"`
	}
	if err := json.Unmarshal(a.body, &m); err != nil {
		return indexState{}, errors.New("esfence: " + what + ": unexpected answer")
	}
	st := indexState{exists: true}
	got, found := m[name]
	if !found || len(m) != 1 {
		for idx := range m {
			st.resolvesTo = append(st.resolvesTo, idx)
		}
		slices.Sort(st.resolvesTo)
		return st, nil
	}
	st.concrete = true
	st.meta = got.Mappings.Meta
	for a := range got.Aliases {
		st.aliases = append(st.aliases, a)
	}
	return st, nil
}

func ptr[T any](v T) *T { return &v }
