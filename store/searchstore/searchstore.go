package searchstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/elastic/elastic-transport-go/v8/elastictransport"
	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/tributary-dev/tributary/internal/search"
	"github.com/tributary-dev/tributary/store/driver"
)

// Options configure a Store. The zero value (or nil) gives the documented defaults.
type Options struct {
	// DatasetTTL is how long a dataset (index or alias) seen to exist is trusted before a write
	// to it checks again. Default 1 minute. See "Missing datasets" in the package doc.
	DatasetTTL time.Duration
	// SkipDatasetCheck sends writes without checking that their dataset exists. Set it only
	// when the cluster's action.auto_create_index forbids creating the datasets written to:
	// then a missing dataset fails per item with KindNotFound anyway. Default false.
	SkipDatasetCheck bool
	// Timeout bounds every request the adapter sends, on top of the caller's context. A write
	// that times out after it was sent has an unknown outcome and fails with
	// KindOutcomeUnknown. Default 0: only the caller's context bounds a request.
	Timeout time.Duration
	// Now is the clock for DatasetTTL. Default time.Now.
	Now func() time.Time

	// The connection: used by NewFromURLs only (New takes a transport already built, and
	// refuses them). Errors never quote any of them.

	// Username and Password (both or neither) are sent as basic authentication; the URLs
	// then hold no user:password@. Default: none.
	Username, Password string
	// APIKey, when set, is sent as "Authorization: ApiKey <APIKey>" (the base64 "id:key"
	// credential Elasticsearch issues); not with Username, nor with credentials in the URLs.
	// Default: none.
	APIKey string
	// CACert is the PEM of the CA (or CAs) that signed the nodes' certificates, for https
	// URLs. Default: the system's roots.
	CACert []byte
	// ClientCert and ClientKey are the PEM of a client certificate (its chain may follow) and
	// of its unencrypted private key, presented to nodes that ask for one (Elasticsearch's PKI
	// realm, OpenSearch's clientcert_auth_domain): both or neither. Default: none.
	ClientCert, ClientKey []byte
	// ServerName is the name the nodes' certificates must carry when it is not the URLs'
	// host (nodes reached by address, one certificate made for a cluster name). Default: each
	// URL's host.
	ServerName string
}

// connectionSet reports whether any field of the connection group is set.
func (o *Options) connectionSet() bool {
	return o.Username != "" || o.Password != "" || o.APIKey != "" || len(o.CACert) > 0 ||
		len(o.ClientCert) > 0 || len(o.ClientKey) > 0 || o.ServerName != ""
}

func (o *Options) withDefaults() (Options, error) {
	var c Options
	if o != nil {
		c = *o
	}
	if c.DatasetTTL < 0 || c.Timeout < 0 {
		return c, errors.New("searchstore: negative DatasetTTL or Timeout")
	}
	if c.DatasetTTL == 0 {
		c.DatasetTTL = time.Minute
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}

// Store is the Elasticsearch / OpenSearch adapter. It is safe for concurrent use.
type Store struct {
	tp       elastictransport.Interface
	owned    *elastictransport.Client // created by NewFromURLs; Close closes it
	opts     Options
	datasets datasetCache
	closed   atomic.Bool
}

var (
	_ driver.Store            = (*Store)(nil)
	_ driver.AddressValidator = (*Store)(nil)
)

// New returns a Store that sends its requests through tp, typically an
// *elastictransport.Client (go-elasticsearch's transport, which has no product check and so
// talks to OpenSearch as well; internal/search builds it for NewFromURLs). tp must not retry requests on its own
// (elastictransport.Config.DisableRetry): a _bulk whose answer was lost and that the transport
// sends again can be applied twice and then be reported as a conflict. Close does not close tp.
func New(tp elastictransport.Interface, opts *Options) (*Store, error) {
	if tp == nil {
		return nil, errors.New("searchstore: nil transport")
	}
	if opts != nil && opts.connectionSet() {
		return nil, errors.New("searchstore: credentials, CA, client certificate and server name are options of NewFromURLs; New takes a transport that carries them")
	}
	return newStore(tp, opts)
}

func newStore(tp elastictransport.Interface, opts *Options) (*Store, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Store{tp: tp, opts: o}, nil
}

// NewFromURLs returns a Store over a transport of its own to the given node URLs
// ("https://host:9200"; credentials in a URL, "http://user:password@host:9200", are sent as
// basic authentication, and then Options.Username and APIKey must be empty), built by
// internal/search:
// no product check, and no retries, except that a request which cannot reach a node (refused,
// no route, a connect timeout: nothing was sent) goes to the next one. Options' connection
// fields give credentials and TLS. Close closes that transport.
func NewFromURLs(urls []string, opts *Options) (*Store, error) {
	if len(urls) == 0 {
		return nil, errors.New("searchstore: no URLs")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.APIKey != "" && (o.Username != "" || o.Password != "") {
		return nil, errors.New("searchstore: APIKey or Username and Password, not both")
	}
	if (o.Username == "") != (o.Password == "") {
		return nil, errors.New("searchstore: Username and Password go together")
	}
	if o.Username != "" || o.APIKey != "" {
		for i, raw := range urls {
			if u, err := url.Parse(raw); err == nil && u.User != nil {
				return nil, fmt.Errorf("searchstore: URL %d holds credentials, and Options give Username or APIKey: give them once", i)
			}
		}
	}
	// AcceptGzip: this adapter has always let net/http ask for compressed answers (_mget
	// answers carry whole documents).
	tp, err := search.NewClient(search.Options{
		URLs: urls, AcceptGzip: true,
		Username: o.Username, Password: o.Password, APIKey: o.APIKey,
		CACert: o.CACert, ClientCert: o.ClientCert, ClientKey: o.ClientKey, ServerName: o.ServerName,
	})
	if err != nil {
		// Never quotes a URL (it may hold a password), a credential or a PEM.
		return nil, fmt.Errorf("searchstore: %w", err)
	}
	s, err := newStore(tp, opts)
	if err != nil {
		_ = tp.Close(context.Background())
		return nil, err
	}
	s.owned = tp
	return s, nil
}

var errClosed = driver.NewError(driver.KindInternal, "searchstore: closed", nil)

// Close implements driver.Store: later calls fail, and a transport NewFromURLs created is
// closed.
func (s *Store) Close(ctx context.Context) error {
	if s.closed.Swap(true) || s.owned == nil {
		return nil
	}
	return s.owned.Close(ctx)
}

// perform sends the request mk makes and reads the whole answer. A non-nil error is already
// classified: kind says whether the request may have changed anything when its answer was lost.
//
// A read is sent once more when its connection failed after reaching a node (the node died
// with the request in flight, or reset a pooled connection): it changed nothing, and the
// client skips the node that failed, so the second attempt goes to another node when there is
// one. A request that could not connect at all was already offered to every node by the
// client (internal/search), and one that ran out of its time is not repeated. A write is never
// sent twice: its first attempt may have been applied.
func (s *Store) perform(parent context.Context, mk func() esapi.Request, kind requestKind, what string) (search.Answer, *driver.Error) {
	if err := parent.Err(); err != nil {
		// Checked here so that a write whose caller had already left is KindCanceled, not of
		// unknown outcome: nothing was sent.
		return search.Answer{}, driver.NewError(driver.KindCanceled, "searchstore: "+what+" canceled; nothing was sent", err)
	}
	ctx := parent
	if s.opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(parent, s.opts.Timeout, errRequestTimeout)
		defer cancel()
	}
	ans, err := search.Do(ctx, s.tp, mk())
	if err != nil && kind == readOnly && resendableRead(ctx, err) {
		ans, err = search.Do(ctx, s.tp, mk())
	}
	if err != nil {
		return search.Answer{}, classifyTransport(parent, ctx, err, kind, what)
	}
	return ans, nil
}

// resendableRead reports whether a read that failed with err may be sent again at once: it
// reached a node whose connection then failed, and its time has not run out.
func resendableRead(ctx context.Context, err error) bool {
	return ctx.Err() == nil && !search.NotSent(err) && search.ErrorClass(err) == search.Unavailable
}
