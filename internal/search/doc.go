// Package search is how the project talks to Elasticsearch and OpenSearch: the sink, esfence,
// store/searchstore and the tests' helpers (internal/estest) all build their client, send
// their requests and judge the answers here, so that they agree on what a failure is.
//
// # The client
//
// [NewClient] builds an *elastictransport.Client from node URLs, credentials (basic or API
// key), TLS (a CA, a client certificate and key, a server name; one tls.Config built here,
// so all three apply together) and a connect timeout. Requests are made with esapi on it
// rather than through elasticsearch.Client: the product check lives in
// elasticsearch.BaseClient and OpenSearch never passes it, while esapi only needs Perform.
// Answers are not asked for gzip unless [Options.AcceptGzip] is set. Bad PEM is refused
// with an error naming the option, never quoting it.
//
// # Several nodes
//
// The transport never sends a request again once it may have reached a server: a _bulk
// whose answer was lost and that a transport sent again can be applied twice, and a fence's
// alias rotation must be sent once; those retries belong to the callers, who know what a
// request can have done. The one exception is failover: a request whose failure proves it
// never reached a server ([NotSent]: the connection could not be made, refused or timed
// out, or its TLS handshake timed out) goes at once to the next node, at most one attempt per node, its body read again
// (GetBody). A canceled request is not sent on.
//
// The nodes take turns. A node whose request failed (any transport failure) is skipped for
// 5 s, twice as long after each further failure in a row, at most a minute; a success makes
// it live again. When every node failed lately, a request goes to the node whose last
// failure is the oldest — a request never fails for want of a node, and the attempts of one
// request visit every node once. (elastictransport's own pool does not: it resurrects the
// dead node with the fewest failures, which can be the one a request just failed on, and
// keeps a resurrected node's failure count forever.)
//
// # Answers
//
// [Do] sends one esapi request and reads the whole answer into a pooled buffer ([Answer];
// Release gives it back). A transport failure (no complete answer) is an error; every HTTP
// status is an answer.
//
// # Classes
//
// [StatusClass] and [ErrorClass] put an answer's status or a transport failure into one
// [Class]: Overloaded (429), Unavailable (5xx, 408, refused or reset connections, timeouts),
// Auth (401, 403, a server certificate that does not verify), NotFound, Conflict, TooLarge,
// BadRequest (400 and every other 4xx), Canceled (the caller's context). [Class.Retryable]
// is true for Overloaded and Unavailable: the request may be sent again as it is. What a
// retry may cost (a mutating request that got no answer may have been applied) is the
// caller's to judge; [NotSent] tells the one transport failure that proves nothing reached
// the server. [RetryAfter] reads a Retry-After header.
//
// [ParseError] reads the "error" member of a failed answer into an [ErrorInfo]: the error
// type and the types of its causes, never the reason texts, which quote document values
// ("Preview of field's value: ...").
//
// # Auth errors
//
// [AnswerError] (or [Answer.Err]) turns a 401 or 403 answer into an [*AuthError], and
// [ItemError] a 401 or 403 item of a _bulk or _mget answer; the sink, esfence and the search
// store all report refusals through it, and never retry them. A 401 says
// "authentication failed: the cluster refused the credentials (basic)", naming what the
// request carried (basic, api key, client certificate, none; the client marks its 401
// answers with the scheme). A 403 keeps, from the security_exception's reason, the action,
// the indices, the user and the privileges the server says grant the action, each bounded
// in length — "permission denied: action indices:data/write/bulk[s] on indices i for user
// u (granted by the index privileges create_doc, create, index, write, all)" — and nothing
// else of it. The reasons parsed, as the engines word them:
//
//	Elasticsearch: action [A] is unauthorized for user [U] with effective roles [R] on indices [I],
//	               this action is granted by the index privileges [P,...]
//	OpenSearch:    no permissions for [A, ...] and User [name=U, backend_roles=[...], requestedTenant=...]
//
// A 403 cluster_block_exception (an index made read-only) is an AuthError with Block set,
// not a privilege.
package search
