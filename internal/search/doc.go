// Package search is how the project talks to Elasticsearch and OpenSearch: the sink, esfence,
// store/searchstore and the tests' helpers (internal/estest) all build their client, send
// their requests and judge the answers here, so that they agree on what a failure is.
//
// # The client
//
// [NewClient] builds an *elastictransport.Client from node URLs, credentials (basic or API
// key), a CA and a connect timeout. Requests are made with esapi on it rather than through
// elasticsearch.Client: the product check lives in elasticsearch.BaseClient and OpenSearch
// never passes it, while esapi only needs Perform. The transport never retries: a _bulk whose
// answer was lost and that a transport sent again can be applied twice, and a fence's alias
// rotation must be sent once; retries belong to the callers, who know what a request can
// have done. Answers are not asked for gzip unless [Options.AcceptGzip] is set.
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
package search
