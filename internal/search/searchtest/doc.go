// Package searchtest is the in-process stand-in for one Elasticsearch or OpenSearch node that
// the unit tests of the sink, esfence and store/searchstore share: an httptest server (URL)
// that is also an esapi.Transport (Perform, for benchmarks that want no sockets).
//
// # What it imitates
//
// The requests those packages send: cluster state (cluster_uuid) and settings
// (action.auto_create_index), the local node's info (the engine), index creation, GET and
// HEAD of an index or an alias (answered by the indices it names), atomic _aliases actions
// with must_exist, remove_index (run first, as both engines do) and read-only aliases
// (is_write_index false: writes through them fail), _refresh, mapping
// reads and additions through an index or alias name, _bulk with external versions through
// aliases (require_alias), and real-time _mget (by index or alias in the path, or _index per
// entry).
// Requests it does not know are answered 400 fake_unsupported_request. The behaviour is
// pinned against the real engines by the packages' *_server_test.go tests; the fake is for
// what a test must count, inspect or break.
//
// # Faults
//
// [Cluster.Intercept] sees every request first and may answer it itself: a status and body
// ([Status], [ErrorAnswer]), a dropped connection ([Drop]), or nothing (nil: the fake answers).
// An interceptor may block, to play a hung node. [Cluster.FailItems] overrides the status of
// single _bulk items. Each [Request] carries its endpoint and its number among the requests to
// that endpoint, so a test can fail "the second _bulk".
//
// # Inspection
//
// [Cluster.Requests] lists what was sent, [Cluster.Count] counts an endpoint, [Cluster.Index]
// returns a copy of an index's state (mappings, fields, aliases, documents with versions) and
// [Cluster.EditIndex] changes it, as another client of the cluster would.
//
// # Secured servers
//
// [EachSecure] runs a test on es-secure and os-secure (testenv.RequireSecure) with a [Secure]
// admin client of plain net/http, the one helper of the tests that change users and roles:
// [Secure.NewAccount] (and [Secure.NewUser]) makes a role holding exactly a [Grant] (cluster
// privileges, index privileges on patterns) and a user mapped to it, removed when the test
// ends, and waits until the user authenticates WITH the role (both engines cache users and
// mappings); [Account.Set] and [Secure.PutRole] change a role; [Secure.MapCertUser] maps a role
// to the client certificate's user; [Secure.WaitRole] waits for a mapping. Every change of the
// security configuration answered 409 is sent again for up to 2 minutes ([Secure.Must],
// [Secure.Remove]): OpenSearch keeps each kind of it in one document, so the changes of
// concurrent tests conflict.
package searchtest
