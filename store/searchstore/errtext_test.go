package searchstore

import "testing"

// A BackendError says what the server said and nothing it did not: no "status 0" for the
// per-document errors of an _mget, which carry no status.
func TestBackendErrorText(t *testing.T) {
	for _, c := range []struct {
		err  BackendError
		want string
	}{
		{BackendError{Status: 404, Type: "index_not_found_exception", Index: "x"}, `status 404 index_not_found_exception (index "x")`},
		{BackendError{Type: "index_not_found_exception", Index: "x"}, `index_not_found_exception (index "x")`},
		{BackendError{Status: 400, Type: "mapper_parsing_exception", CausedBy: []string{"illegal_argument_exception"}}, `status 400 mapper_parsing_exception, caused by illegal_argument_exception`},
		{BackendError{Status: 503}, `status 503`},
		{BackendError{}, `the server gave no reason`},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.err, got, c.want)
		}
	}
}
