// Package faultproxy puts a loopback proxy between a client under test and a real server and
// breaks the path between them on demand, so reliability tests can show what the client does
// when the network or the server misbehaves. It uses only the standard library and keeps no
// global state: every proxy is an independent value that a test creates and closes.
//
// # TCP mode
//
// NewTCP listens on a loopback address (127.0.0.1:0 unless TCPOptions.ListenAddr says
// otherwise) and forwards every accepted connection to a target "host:port", byte for byte,
// half-closes included. It suits any TCP protocol: Kafka, Postgres, the MongoDB wire protocol,
// or HTTP when the fault is below HTTP. Faults can be switched at any time from any goroutine:
//
//   - SetLatency(dir, d) delays each chunk going in a direction; open connections too.
//   - SetBlackhole(dir) swallows everything going in a direction while connections stay open,
//     until SetBlackhole(None); reads on the far side simply time out.
//   - SetHang(true) stops forwarding anything, both ways, on open and new connections alike,
//     while connections are accepted and stay open -- a server process SIGSTOPped -- and
//     SetHang(false) delivers everything held, in order, as the continued process would.
//   - ResetAll aborts every open connection with a TCP RST on both sides; SetResetEvery(d)
//     does it every d until cleared (a flapping network: new connections work in between).
//   - SetAcceptFault decides the fate of new connections: AcceptReset (RST at once),
//     AcceptClose (FIN at once), AcceptRefuse (the listener is closed, so connects are
//     refused; Addr stays the same and is listened on again when the fault is cleared).
//   - Heal clears all of the above.
//
// Stats counts connections and bytes in each direction; Wait blocks, under a context, until a
// condition on them holds, which replaces sleeping in tests. Close stops everything and
// returns only when every goroutine of the proxy has finished.
//
// # HTTP mode
//
// NewHTTP starts a reverse proxy in front of a target URL. Requests are forwarded unchanged,
// bodies streamed intact, unless a Rule takes them. A Rule matches on Method, PathPrefix and an
// optional Match func, applies to every matching request or only the first Times of them,
// can wait a Delay, and then acts:
//
//   - Forward: pass the request on (useful with Delay, or to let N requests through before a
//     later rule fails the rest).
//   - Respond: answer with a chosen Response (status, headers, body) without forwarding.
//   - ForwardThenRespond: let the target apply the request, then replace its response, e.g.
//     a 429 on a _bulk request that was in fact indexed, to test that retries are idempotent.
//   - Drop and ForwardThenDrop: close the client's connection without any response.
//
// Rules are tried in the order they were added and can be added and removed while requests
// flow. Records lists each request handled: method, path, rule, whether it was forwarded, the
// target's status and the status the client got.
//
// # Example
//
// A test that makes the first bulk request fail with 429 after Elasticsearch applied it:
//
//	p, err := faultproxy.NewHTTP(esURL, faultproxy.HTTPOptions{})
//	if err != nil {
//		t.Fatal(err)
//	}
//	defer p.Close()
//	_, err = p.AddRule(faultproxy.Rule{
//		Method:   http.MethodPost,
//		Match:    func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/_bulk") },
//		Times:    1,
//		Action:   faultproxy.ForwardThenRespond,
//		Response: faultproxy.TooManyRequests(time.Second),
//	})
//	// ... point the client at p.URL(), run it, then inspect p.Records().
//
// And a Kafka broker that goes silent for a while:
//
//	tp, err := faultproxy.NewTCP(brokerAddr, faultproxy.TCPOptions{})
//	// ... connect the client to tp.Addr() ...
//	tp.SetBlackhole(faultproxy.Both)
//	// ... the client's requests time out ...
//	tp.SetBlackhole(faultproxy.None)
//
// # Caveats
//
//   - Bytes swallowed by a black-hole are lost, not delayed: a connection reused afterwards
//     carries a stream with a hole in it, which most protocols detect as corruption or a
//     timeout. A half-close (FIN) arriving during a black-hole is held back until it is
//     cleared, so the far side does not learn that its peer left.
//   - A proxy that has accepted a connection cannot make the client's connect fail; when the
//     target is unreachable the client's connection is reset instead of refused.
//   - Protocols that advertise addresses (Kafka metadata, MongoDB replica-set members) tell
//     clients to connect to the server directly, around the proxy. Configure the server to
//     advertise the proxy's address, or use one proxy per advertised address.
//   - Go's own http.Transport silently retries a request on a reused connection that closed
//     before any response byte when the request is idempotent (GET, HEAD, or one carrying an
//     Idempotency-Key header), so a Drop can be invisible to such a client.
package faultproxy
