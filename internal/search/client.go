package search

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/elastic/elastic-transport-go/v8/elastictransport"
)

// Options configure a client. Only URLs is required.
type Options struct {
	// URLs are the nodes, http:// or https:// with a host. Credentials in a URL
	// ("http://user:password@host:9200") are sent as basic authentication. A request that
	// cannot reach a node goes to the next one (see the package documentation).
	URLs []string
	// Username and Password, when Username is set, are sent as basic authentication.
	Username, Password string
	// APIKey, when set, is sent as "Authorization: ApiKey <APIKey>" (the base64 "id:key"
	// credential Elasticsearch issues).
	APIKey string
	// CACert is the PEM of the CA (or CAs) that signed the servers' certificates. Default:
	// the system's roots.
	CACert []byte
	// ClientCert and ClientKey are the PEM of a client certificate (its chain may follow)
	// and of its private key, presented to servers that ask for one: both or neither.
	ClientCert, ClientKey []byte
	// ServerName is the name the servers' certificates must carry, when it is not the
	// URLs' host (nodes reached by address, a certificate made for a cluster name).
	// Default: each URL's host.
	ServerName string
	// ConnectTimeout bounds each connection attempt and each TLS handshake. Default 0:
	// net/http's (30 s to connect, 10 s for the handshake).
	ConnectTimeout time.Duration
	// MaxIdleConnsPerHost is how many idle connections are kept per node. Default 0:
	// net/http's (2).
	MaxIdleConnsPerHost int
	// AcceptGzip lets the client ask for compressed answers. Default false: both engines
	// compress every answer when asked (http.compression is on by default without TLS),
	// spending the cluster's CPU on answers that filter_path keeps to a few bytes per item.
	AcceptGzip bool
}

// credentialsHeader is set by the client on a 401 answer: the scheme of the credentials
// the refused request carried, for [AnswerError]'s message. Servers never send it.
const credentialsHeader = "Tributary-Credentials"

// NewClient builds a client of the given nodes: no product check (it talks to OpenSearch as
// to Elasticsearch), no retries except that a request which cannot reach a node goes to
// the next one. Errors never quote a URL (it may hold a password), a credential or a PEM.
// Close the client to release its idle connections.
func NewClient(o Options) (*elastictransport.Client, error) {
	if len(o.URLs) == 0 {
		return nil, errors.New("search: no URL")
	}
	us := make([]*url.URL, len(o.URLs))
	for i, raw := range o.URLs {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("search: URL %d is not an http(s) URL with a host", i)
		}
		us[i] = u
	}
	tc, err := tlsConfig(o)
	if err != nil {
		return nil, err
	}
	ht := http.DefaultTransport.(*http.Transport).Clone()
	ht.TLSClientConfig = tc
	if o.ConnectTimeout > 0 {
		ht.DialContext = (&net.Dialer{Timeout: o.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
		ht.TLSHandshakeTimeout = o.ConnectTimeout
	}
	if o.MaxIdleConnsPerHost > 0 {
		ht.MaxIdleConnsPerHost = o.MaxIdleConnsPerHost
	}
	ht.DisableCompression = !o.AcceptGzip
	cfg := elastictransport.Config{URLs: us, Transport: ht,
		Username: o.Username, Password: o.Password, APIKey: o.APIKey,
		ConnectionPoolFunc: func(conns []*elastictransport.Connection, _ elastictransport.Selector) elastictransport.ConnectionPool {
			return newNodePool(conns, time.Now)
		},
		Interceptors: []elastictransport.InterceptorFunc{markCredentials(len(o.ClientCert) > 0)},
	}
	if len(us) == 1 {
		cfg.DisableRetry = true
	} else {
		// The transport's retry loop, narrowed to failover: a request is sent again only
		// when its failure proves it never reached a server, at most once per other node,
		// at once; never on a status (0 is none).
		cfg.MaxRetries = len(us) - 1
		cfg.RetryOnStatus = []int{0}
		cfg.RetryOnError = func(req *http.Request, err error) bool {
			return req.Context().Err() == nil && NotSent(err)
		}
	}
	tp, err := elastictransport.New(cfg)
	if err != nil {
		// The transport's errors carry no credentials, but keep only the gist anyway.
		return nil, errors.New("search: building the client failed")
	}
	return tp, nil
}

// tlsConfig is the client's TLS: the CA, the client certificate, the server name. The
// errors name the option, never its content.
func tlsConfig(o Options) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: o.ServerName}
	if len(o.CACert) > 0 {
		if !hasPEM(o.CACert, "CERTIFICATE") {
			return nil, errors.New("search: the CA is not a PEM certificate")
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(o.CACert) {
			return nil, errors.New("search: the CA holds no certificate that parses")
		}
		tc.RootCAs = pool
	}
	switch {
	case len(o.ClientCert) > 0 && len(o.ClientKey) == 0:
		return nil, errors.New("search: a client certificate without its key")
	case len(o.ClientCert) == 0 && len(o.ClientKey) > 0:
		return nil, errors.New("search: a client key without its certificate")
	case len(o.ClientCert) > 0:
		if !hasPEM(o.ClientCert, "CERTIFICATE") {
			return nil, errors.New("search: the client certificate is not a PEM certificate")
		}
		if !hasPEM(o.ClientKey, "PRIVATE KEY") {
			return nil, errors.New("search: the client key is not a PEM private key")
		}
		pair, err := tls.X509KeyPair(o.ClientCert, o.ClientKey)
		if err != nil {
			return nil, errors.New("search: the client certificate and key do not parse as a pair (is the key the certificate's, unencrypted?)")
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

// hasPEM reports whether b holds a PEM block whose type ends with kind ("PRIVATE KEY"
// covers "RSA PRIVATE KEY" and "EC PRIVATE KEY").
func hasPEM(b []byte, kind string) bool {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return false
		}
		if strings.HasSuffix(blk.Type, kind) {
			return true
		}
	}
}

// markCredentials names, on a 401 answer, the credentials the request carried.
func markCredentials(clientCert bool) elastictransport.InterceptorFunc {
	return func(next elastictransport.RoundTripFunc) elastictransport.RoundTripFunc {
		return func(req *http.Request) (*http.Response, error) {
			res, err := next(req)
			if err == nil && res != nil && res.StatusCode == http.StatusUnauthorized {
				if res.Header == nil {
					res.Header = http.Header{}
				}
				res.Header.Set(credentialsHeader, credentialsOf(req.Header.Get("Authorization"), clientCert))
			}
			return res, err
		}
	}
}

func credentialsOf(authorization string, clientCert bool) string {
	scheme, _, _ := strings.Cut(authorization, " ")
	var s string
	switch strings.ToLower(scheme) {
	case "":
		if clientCert {
			return CredentialsClientCert
		}
		return CredentialsNone
	case "basic":
		s = CredentialsBasic
	case "apikey":
		s = CredentialsAPIKey
	case "bearer":
		s = "bearer token"
	default:
		s = "other"
	}
	if clientCert {
		s += " and " + CredentialsClientCert
	}
	return s
}

// The credentials an [AuthError] of status 401 names.
const (
	CredentialsBasic      = "basic"
	CredentialsAPIKey     = "api key"
	CredentialsClientCert = "client certificate"
	CredentialsNone       = "none"
)
