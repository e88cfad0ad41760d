// Package privtest holds the least-privilege roles docs/privileges.md documents, as data the
// tests grant on the secured servers (es-secure, os-secure), and an account whose role a test
// can change between runs: each row of the documentation is proven by a run with exactly its
// role, and each privilege of it by a run without that privilege alone (Without). Nothing here
// is used outside tests.
package privtest

import (
	"slices"
	"testing"

	"github.com/tributary-dev/tributary/internal/search/searchtest"
)

// Role is the privileges of one row for one engine: cluster privileges (Elasticsearch) or
// cluster permissions (OpenSearch), and index privileges (allowed actions) granted on every
// index pattern of the row alike.
type Role struct {
	Cluster []string
	Index   []string
}

// The roles of docs/privileges.md. Keep them equal to the documentation.
var (
	// ESMirror runs a mirror: claims (cluster settings, cluster_uuid, GET index, create with
	// the write alias, the alias rotation), mappings (read, add fields), _bulk and the _mget of
	// unchanged TOAST values. Elasticsearch has no manage_aliases index privilege; the _aliases
	// action (indices:admin/aliases) is granted by name instead of manage, which would also
	// grant delete_index. write covers PUT _mapping.
	ESMirror = Role{Cluster: []string{"monitor"},
		Index: []string{"create_index", "view_index_metadata", "write", "read", "indices:admin/aliases"}}
	// OSMirror is ESMirror on OpenSearch, which checks _bulk and _mget as cluster-level
	// actions and has no view_index_metadata action group (write and create_index cover PUT
	// _mapping). OpenSearch checks requests through an alias against the alias's indices, so
	// its roles need no pattern for the df-w-* write aliases.
	OSMirror = Role{Cluster: []string{"cluster_monitor", "indices:data/write/bulk", "indices:data/read/mget"},
		Index: []string{"create_index", "indices:admin/get", "indices:admin/mappings/get", "write", "read", "manage_aliases"}}

	// ESReindex is what a reindex adds to ESMirror: the refresh of the new generation
	// before the switch, and deleting retired generations.
	ESReindex = Role{Index: []string{"maintenance", "delete_index"}}
	// OSReindex is ESReindex on OpenSearch, which has no delete_index action group; the refresh
	// is also checked per shard (indices:admin/refresh[s]).
	OSReindex = Role{Index: []string{"indices:admin/refresh*", "indices:admin/delete"}}

	// ESDrop deletes a stopped pipeline's indices (drop --indices): each index read for its
	// marker, then deleted.
	ESDrop = Role{Index: []string{"view_index_metadata", "delete_index"}}
	// OSDrop is ESDrop on OpenSearch.
	OSDrop = Role{Index: []string{"indices:admin/get", "indices:admin/delete"}}

	// ESRecordStore is the record store's (store/searchstore) reads and writes: _mget, _bulk,
	// and HEAD /<dataset> (it never creates an index).
	ESRecordStore = Role{Index: []string{"read", "write", "view_index_metadata"}}
	// OSRecordStore is ESRecordStore on OpenSearch.
	OSRecordStore = Role{Cluster: []string{"indices:data/write/bulk", "indices:data/read/mget"},
		Index: []string{"read", "write", "indices:admin/get"}}
)

// Patterns are the index patterns of the tests' roles for indices named base-*: on
// Elasticsearch also df-w-*, the write aliases, which it checks by their own names.
func Patterns(s *searchtest.Secure, base string) []string {
	if s.OpenSearch() {
		return []string{base + "-*"}
	}
	return []string{base + "-*", "df-w-*"}
}

// Pick returns es or os for the server.
func Pick(s *searchtest.Secure, es, os Role) Role {
	if s.OpenSearch() {
		return os
	}
	return es
}

// Plus returns r with o's privileges added.
func (r Role) Plus(o Role) Role {
	out := Role{Cluster: slices.Clone(r.Cluster), Index: slices.Clone(r.Index)}
	for _, p := range o.Cluster {
		if !slices.Contains(out.Cluster, p) {
			out.Cluster = append(out.Cluster, p)
		}
	}
	for _, p := range o.Index {
		if !slices.Contains(out.Index, p) {
			out.Index = append(out.Index, p)
		}
	}
	return out
}

// Without returns r without privilege p (cluster or index); it panics when r lacks p, so
// that a removal case cannot silently test nothing.
func (r Role) Without(p string) Role {
	out := Role{Cluster: slices.Clone(r.Cluster), Index: slices.Clone(r.Index)}
	n := len(out.Cluster) + len(out.Index)
	out.Cluster = slices.DeleteFunc(out.Cluster, func(q string) bool { return q == p })
	out.Index = slices.DeleteFunc(out.Index, func(q string) bool { return q == p })
	if len(out.Cluster)+len(out.Index) == n {
		panic("privtest: the role has no privilege " + p)
	}
	return out
}

// Grant is r on patterns, as searchtest grants it.
func (r Role) Grant(patterns []string) searchtest.Grant {
	return searchtest.Grant{Cluster: r.Cluster, Index: r.Index, Patterns: patterns}
}

// Account is a user holding one role of its own on the secured server (searchtest.Account),
// granted on fixed index patterns; Set changes the role in place.
type Account struct {
	*searchtest.Account
	Patterns []string
}

// NewAccount creates a role r on patterns and a user holding it (names from base and a unique
// suffix), removed when the test ends, and waits until the user authenticates with the role.
func NewAccount(t testing.TB, s *searchtest.Secure, base string, patterns []string, r Role) *Account {
	t.Helper()
	return &Account{Account: s.NewAccount(t, base, r.Grant(patterns)), Patterns: patterns}
}

// Set replaces the account's role by r on the account's patterns.
func (a *Account) Set(t testing.TB, r Role) {
	t.Helper()
	a.Account.Set(t, r.Grant(a.Patterns))
}
