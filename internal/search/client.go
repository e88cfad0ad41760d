package search

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/elastic/elastic-transport-go/v8/elastictransport"
)

// Options configure a client. Only URLs is required.
type Options struct {
	// URLs are the nodes, http:// or https:// with a host. Credentials in a URL
	// ("http://user:password@host:9200") are sent as basic authentication.
	URLs []string
	// Username and Password, when Username is set, are sent as basic authentication.
	Username, Password string
	// APIKey, when set, is sent as "Authorization: ApiKey <APIKey>" (the base64 "id:key"
	// credential Elasticsearch issues).
	APIKey string
	// CACert is the PEM of the CA that signed the servers' certificates. Default: the
	// system's roots.
	CACert []byte
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

// NewClient builds a client of the given nodes: no product check (it talks to OpenSearch as
// to Elasticsearch), no retries. Errors never quote a URL (it may hold a password) or a
// credential. Close the client to release its idle connections.
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
	ht := http.DefaultTransport.(*http.Transport).Clone()
	if o.ConnectTimeout > 0 {
		ht.DialContext = (&net.Dialer{Timeout: o.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
		ht.TLSHandshakeTimeout = o.ConnectTimeout
	}
	if o.MaxIdleConnsPerHost > 0 {
		ht.MaxIdleConnsPerHost = o.MaxIdleConnsPerHost
	}
	ht.DisableCompression = !o.AcceptGzip
	cfg := elastictransport.Config{URLs: us, DisableRetry: true, Transport: ht,
		Username: o.Username, Password: o.Password, APIKey: o.APIKey, CACert: o.CACert}
	tp, err := elastictransport.New(cfg)
	if err != nil {
		// The transport's errors carry no credentials, but keep only the gist anyway.
		if len(o.CACert) > 0 {
			return nil, errors.New("search: building the client failed (is the CA a PEM certificate?)")
		}
		return nil, errors.New("search: building the client failed")
	}
	return tp, nil
}
