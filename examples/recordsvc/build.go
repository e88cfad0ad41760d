package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"sort"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tributary-dev/tributary/luamerge"
	"github.com/tributary-dev/tributary/queue"
	"github.com/tributary-dev/tributary/queue/kafkaqueue"
	"github.com/tributary-dev/tributary/queue/memqueue"
	"github.com/tributary-dev/tributary/store"
	"github.com/tributary-dev/tributary/store/accepted"
	"github.com/tributary-dev/tributary/store/driver"
	"github.com/tributary-dev/tributary/store/memstore"
	"github.com/tributary-dev/tributary/store/mongostore"
	"github.com/tributary-dev/tributary/store/searchstore"
)

// Modes.
const (
	modeServer = "server"
	modeWorker = "worker"
	modeAll    = "all"
)

// runtime is everything a configuration builds: the adapters, the Service over them, the
// stores' queues and the in-process broker that memory queues share.
type runtime struct {
	cfg    *config
	mode   string
	log    *slog.Logger
	m      *metrics
	names  []string
	svc    *store.Service
	raw    map[string]store.Adapter // the adapters: the Service's, and the health checks'
	pubs   map[string]queue.Publisher
	broker *memqueue.Broker
	// drainWait waits out shutdown.drain_delay; nil means time.Sleep. Tests replace it to
	// hold the drain open for as long as they look, however slow the machine.
	drainWait func(time.Duration)
}

// build constructs the runtime. On error everything built so far is closed again.
func build(ctx context.Context, cfg *config, mode string, log *slog.Logger) (_ *runtime, err error) {
	rt := &runtime{cfg: cfg, mode: mode, log: log, raw: map[string]store.Adapter{}, pubs: map[string]queue.Publisher{}}
	for name := range cfg.Stores {
		rt.names = append(rt.names, name)
	}
	sort.Strings(rt.names)
	rt.m = newMetrics(rt.names)
	defer func() {
		if err != nil {
			rt.closeParts(context.Background())
		}
	}()
	for _, name := range rt.names {
		sc := cfg.Stores[name]
		if q := sc.Queue; q != nil && q.Kind == "memory" && mode != modeAll {
			return nil, fmt.Errorf("stores.%s.queue: kind memory is an in-process queue, which only mode all both fills and drains", name)
		}
	}
	for _, name := range rt.names {
		a, err := newAdapter(ctx, cfg.Stores[name])
		if err != nil {
			return nil, fmt.Errorf("stores.%s: %w", name, err)
		}
		rt.raw[name] = a
		ha := healthAddress(name, cfg.Stores[name])
		err = ha.Validate()
		if v, ok := a.(driver.AddressValidator); ok && err == nil {
			err = v.ValidateAddress(ha)
		}
		if err != nil {
			return nil, fmt.Errorf("stores.%s.health: the health check's record address is not valid for this store: %w", name, err)
		}
	}
	if mode != modeWorker {
		for _, name := range rt.names {
			q := cfg.Stores[name].Queue
			if q == nil {
				continue
			}
			p, err := rt.newPublisher(ctx, name, q, q.Topic)
			if err != nil {
				return nil, fmt.Errorf("stores.%s.queue: %w", name, err)
			}
			rt.pubs[name] = p
		}
	}
	engine, err := luamerge.New(&luamerge.Options{
		MaxInstructions: cfg.Lua.MaxInstructions, Timeout: cfg.Lua.Timeout,
		MaxInputBytes: cfg.Lua.MaxInputBytes, MaxOutputBytes: cfg.Lua.MaxOutputBytes,
		MaxDepth: cfg.Lua.MaxDepth, MaxMemoryBytes: cfg.Lua.MaxMemoryBytes, MaxCallDepth: cfg.Lua.MaxCallDepth,
		MaxProgramBytes: cfg.Lua.MaxProgramBytes, MaxCachedPrograms: cfg.Lua.MaxCachedPrograms,
	})
	if err != nil {
		return nil, fmt.Errorf("lua: %w", err)
	}
	queues := make(map[string]store.Queue, len(rt.pubs))
	for name, p := range rt.pubs {
		queues[name] = accepted.NewPublisher(observedPublisher{inner: p, store: name, m: rt.m})
	}
	co := store.CoalesceOptions{
		Disabled: cfg.Coalesce.Disabled, MaxBatch: cfg.Coalesce.MaxBatch,
		QueueLimit: cfg.Coalesce.QueueLimit, MaxInFlight: cfg.Coalesce.MaxInFlight,
	}
	if w := cfg.Coalesce.Window; w != nil {
		co.Window = *w
		if *w == 0 {
			co.Window = -1 // the store's way to say "no window"
		}
	}
	svc, err := store.New(rt.raw, &store.Options{
		Merger:           engine,
		Observer:         storeObserver{m: rt.m},
		MaxDocumentBytes: cfg.Limits.MaxDocumentBytes,
		MaxOps:           cfg.Limits.MaxItems,
		MergeBudget:      cfg.Service.MergeBudget,
		RetryAttempts:    cfg.Service.RetryAttempts,
		BackoffBase:      cfg.Service.BackoffBase,
		BackoffMax:       cfg.Service.BackoffMax,
		DeadlineReserve:  cfg.Service.DeadlineReserve,
		Coalesce:         co,
		Queues:           queues,
		Logger:           log,
	})
	if err != nil {
		return nil, err
	}
	rt.svc = svc
	return rt, nil
}

// newAdapter connects one store. Connection errors never quote the URI or URLs: they may hold
// credentials.
func newAdapter(ctx context.Context, s *storeConfig) (driver.Store, error) {
	switch s.Kind {
	case "memory":
		return memstore.New(), nil
	case "elasticsearch", "opensearch":
		o := &searchstore.Options{
			DatasetTTL: s.DatasetTTL, SkipDatasetCheck: s.SkipDatasetCheck, Timeout: s.Timeout,
			Username: s.Username, Password: s.Password, APIKey: s.APIKey,
		}
		if t := s.TLS; t != nil {
			var err error
			if o.CACert, o.ClientCert, o.ClientKey, err = t.material(); err != nil {
				return nil, err
			}
			o.ServerName = t.ServerName
		}
		return searchstore.NewFromURLs(s.URLs, o)
	case "mongodb":
		o := options.Client().ApplyURI(s.URI).SetServerSelectionTimeout(10 * time.Second)
		if s.Timeout > 0 {
			o.SetTimeout(s.Timeout)
		}
		if t := s.TLS; t != nil {
			tc, err := t.config()
			if err != nil {
				return nil, err
			}
			o.SetTLSConfig(tc)
		}
		client, err := mongo.Connect(o)
		if err != nil {
			// The driver's message may quote the URI: keep only that connecting failed.
			return nil, errors.New("connecting to MongoDB failed (check uri)")
		}
		a, err := mongostore.New(client, &mongostore.Options{
			MetadataField: s.MetadataField, MaxConcurrency: s.MaxConcurrency,
			FerretDB: s.FerretDB, DisconnectOnClose: true, Timeout: s.Timeout,
		})
		if err != nil {
			_ = client.Disconnect(ctx)
			return nil, err
		}
		return a, nil
	}
	return nil, fmt.Errorf("unknown kind %q", s.Kind)
}

// broker returns the process's in-process broker, created on first use.
func (rt *runtime) memBroker() *memqueue.Broker {
	if rt.broker == nil {
		rt.broker = memqueue.New(nil)
	}
	return rt.broker
}

// memTopic prepares an in-process topic with the store's partition count.
func (rt *runtime) memTopic(q *queueConfig, topic string) error {
	if q.Partitions > 0 {
		return rt.memBroker().CreateTopic(topic, q.Partitions)
	}
	return nil
}

// kafkaConfig maps a store's queue settings to kafkaqueue's.
func kafkaConfig(q *queueConfig, topic string) kafkaqueue.Config {
	kc := kafkaqueue.Config{
		Brokers: q.Brokers, Topic: topic, Group: q.Group, ClientID: q.ClientID,
		DialTimeout: q.DialTimeout, RequestTimeout: q.RequestTimeout, DeliveryTimeout: q.DeliveryTimeout,
		MaxFetch: q.MaxFetch, FetchMaxWait: q.FetchMaxWait, SessionTimeout: q.SessionTimeout,
	}
	if ct := q.CreateTopics; ct != nil {
		kc.CreateTopic = &kafkaqueue.TopicSpec{Partitions: ct.Partitions, ReplicationFactor: ct.ReplicationFactor}
	}
	if t := q.TLS; t != nil {
		kc.TLS = &kafkaqueue.TLS{CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify}
	}
	if s := q.SASL; s != nil {
		kc.SASL = &kafkaqueue.SASL{Mechanism: s.Mechanism, Username: s.Username, Password: s.Password}
	}
	return kc
}

func (rt *runtime) newPublisher(ctx context.Context, name string, q *queueConfig, topic string) (queue.Publisher, error) {
	if q.Kind == "memory" {
		if err := rt.memTopic(q, topic); err != nil {
			return nil, err
		}
		return rt.memBroker().Publisher(topic)
	}
	return kafkaqueue.NewPublisher(ctx, kafkaConfig(q, topic), &kafkaqueue.Options{Logger: rt.log.With(slog.String("store", name))})
}

func (rt *runtime) newConsumer(ctx context.Context, name string, q *queueConfig) (queue.Consumer, error) {
	if q.Kind == "memory" {
		if err := rt.memTopic(q, q.Topic); err != nil {
			return nil, err
		}
		return rt.memBroker().Consumer(q.Topic, q.Group)
	}
	return kafkaqueue.NewConsumer(ctx, kafkaConfig(q, q.Topic), &kafkaqueue.Options{Logger: rt.log.With(slog.String("store", name))})
}

// closeParts closes the Service (which closes the adapters) or, when it was never built, the
// adapters, and then the publishers, which the Service does not close.
func (rt *runtime) closeParts(ctx context.Context) error {
	var errs []error
	if rt.svc != nil {
		if err := rt.svc.Close(ctx); err != nil && !errors.Is(err, store.ErrClosed) {
			errs = append(errs, err)
		}
	} else {
		for _, a := range rt.raw {
			if err := a.Close(ctx); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for name, p := range rt.pubs {
		if err := p.Close(); err != nil {
			errs = append(errs, fmt.Errorf("stores.%s.queue: closing the publisher: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// healthAddress is the record a store's periodic check reads.
func healthAddress(name string, s *storeConfig) driver.Address {
	return driver.Address{Store: name, Namespace: s.Health.Namespace, Dataset: s.Health.Dataset, Key: driver.NewStringKey(s.Health.Key)}
}

// maxPEMFile bounds a certificate or key file: PEM files are a few KiB.
const maxPEMFile = 1 << 20

// material reads the store's TLS files: the CA's PEM (ca or ca_file; nil for the system's
// roots) and the client certificate's and key's (nil for none). Errors name the key, never
// the path or the content.
func (t *storeTLSConfig) material() (ca, cert, key []byte, err error) {
	ca = []byte(t.CA)
	if t.CAFile != "" {
		if ca, err = readPEMFile("tls.ca_file", t.CAFile); err != nil {
			return nil, nil, nil, err
		}
		if !pemCertificates(ca) {
			return nil, nil, nil, errors.New("tls.ca_file: is not PEM: one or more -----BEGIN CERTIFICATE----- blocks")
		}
	}
	if len(ca) == 0 {
		ca = nil
	}
	if t.CertFile != "" {
		if cert, err = readPEMFile("tls.cert_file", t.CertFile); err != nil {
			return nil, nil, nil, err
		}
		if key, err = readPEMFile("tls.key_file", t.KeyFile); err != nil {
			return nil, nil, nil, err
		}
		if _, err := tls.X509KeyPair(cert, key); err != nil {
			return nil, nil, nil, errors.New("tls: cert_file and key_file do not hold a PEM certificate and its unencrypted private key")
		}
	}
	return ca, cert, key, nil
}

// config is the TLS configuration of a MongoDB client: the CA (default the system's roots),
// the client certificate, the server name (default each host's name).
func (t *storeTLSConfig) config() (*tls.Config, error) {
	ca, cert, key, err := t.material()
	if err != nil {
		return nil, err
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if ca != nil {
		tc.RootCAs = x509.NewCertPool()
		tc.RootCAs.AppendCertsFromPEM(ca)
	}
	if cert != nil {
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			return nil, errors.New("tls: cert_file and key_file do not hold a PEM certificate and its unencrypted private key")
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

// readPEMFile reads a certificate or key file of at most maxPEMFile bytes. Its errors say
// what went wrong without the path.
func readPEMFile(key, path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, errors.New(key + ": the file does not exist")
		case errors.Is(err, fs.ErrPermission):
			return nil, errors.New(key + ": the file cannot be read: permission denied")
		}
		return nil, errors.New(key + ": the file cannot be read")
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, errors.New(key + ": is not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(f, maxPEMFile+1))
	if err != nil {
		return nil, errors.New(key + ": the file cannot be read")
	}
	if len(b) > maxPEMFile {
		return nil, errors.New(key + ": the file is larger than 1 MiB: not a PEM file")
	}
	return b, nil
}
