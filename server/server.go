// Package server is kubeindex's HTTP edge: the echo application, its one
// route table, thin handlers and the single error translation. It reads the
// cache through the small Reader interface declared here.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"k8s.io/apimachinery/pkg/version"
	restclient "k8s.io/client-go/rest"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/ipowner"
	"github.com/kubeindex/kubeindex/kubespec"
	"github.com/kubeindex/kubeindex/query"
)

// Reader is everything the HTTP layer needs from the cache. All methods must
// be safe for concurrent use.
type Reader interface {
	Resources() []cache.Status
	// Freshness is the whole cache's, cheap enough for every response.
	Freshness() cache.Freshness
	ResourceStatus(resource string) (cache.Status, error)
	Ready() bool
	Get(resource, namespace, name string) (*cache.Object, cache.Freshness, error)
	List(resource string, q cache.ListQuery) (cache.ListResult, error)
	// Count counts what a list would select, grouped by keys.
	Count(resource string, q cache.ListQuery, groupBy []query.Key) (cache.CountResult, error)
	IndexValues(resource, index string, limit int, after string) (cache.IndexValues, error)
	// Search finds objects of several resources by name, label value or
	// address (see cache.Cache.Search).
	Search(q cache.SearchQuery) (cache.SearchResult, error)
	// LookupAddress answers who holds an address, now or at a moment.
	LookupAddress(q ipowner.Query) (cache.IPLookup, error)
	// AddressLookups answers a batch of them (see cache.AddressLookups).
	AddressLookups() *cache.AddressLookups
	// IPHistoryStats describes the address history; false when it is off.
	IPHistoryStats() (ipowner.HistoryStats, bool)
	// Watch subscribes to a resource's events (see cache.Cache.Watch).
	Watch(resource string, q cache.WatchQuery, notify chan<- struct{}) (cache.Subscription, error)
	// WatchAddresses subscribes to the address stream (see
	// cache.Cache.WatchAddresses).
	WatchAddresses(q cache.AddressWatchQuery, notify chan<- struct{}) (cache.Subscription, error)
	// Window opens a live window (see cache.Cache.Window).
	Window(resource string, q cache.WindowQuery, notify chan<- struct{}) (*cache.Window, error)
	// StreamStats describes each resource's stream broker, for metrics.
	StreamStats() []cache.StreamStats
	// OrderStats describes each resource's ordered indexes, for metrics.
	OrderStats() []cache.OrderStats
	// Resolve, Namespaces, NamespacesOf and IPResources serve
	// authorization (see cache.Cache.Resolve).
	Resolve(resource string) (cache.Resource, error)
	Namespaces() []string
	NamespacesOf(resource string) ([]string, error)
	IPResources() []cache.Resource
	// APIResources, Position and WaitPosition serve the Kubernetes API
	// (see cache.Cache).
	APIResources() []cache.Resource
	// CRD is the CRD that defines a custom resource, for its columns.
	CRD(resource string) ([]byte, cache.CRDState, error)
	Position(resource string) (uint64, error)
	WaitPosition(ctx context.Context, resource string, rv uint64) (pos uint64, reached bool, err error)
}

// Options configures the server. Zero values take the documented defaults.
type Options struct {
	// Simulated labels every response as coming from the --demo cluster.
	Simulated bool
	// ShutdownTimeout bounds graceful shutdown. Default 10s.
	ShutdownTimeout time.Duration
	// MaxHeaderBytes bounds request headers. Default DefaultMaxHeaderBytes.
	MaxHeaderBytes int
	Logger         *slog.Logger
	// Streams bounds and tunes WebSocket and SSE event streams.
	Streams StreamOptions
	// Auth authenticates and authorizes callers. Default: no checks.
	Auth AuthOptions
	// Hosts are the Host values served while authentication is off.
	// Default: loopback addresses and localhost.
	Hosts HostOptions
	// Limits bounds connections, streams per client and REST requests.
	Limits LimitOptions
	// TLS, when set, serves HTTPS and may take client certificates as
	// identities (NewTLS). nil: plain HTTP.
	TLS *TLS
	// KubeVersion is what the Kubernetes API's /version reports: the
	// upstream API server's, as discovery found it at start. nil: a
	// version naming kubeindex only.
	KubeVersion *version.Info
	// KubeUpstream reads the API server's OpenAPI documents, which the
	// Kubernetes API's /openapi serves trimmed to what it serves: a
	// client of the API server's root (discovery's RESTClient). nil: it
	// serves documents without schemas.
	KubeUpstream restclient.Interface
	// ClusterName is the name this server's cluster answers to under
	// /clusters/{name}/ and in GET /api/v1/clusters. Default
	// DefaultClusterName.
	ClusterName string
	// Clusters, when set, makes this server the front of a fleet: it
	// routes /clusters/{name}/ to each cluster's server and serves the
	// fleet's own routes (probes, metrics, the documents, the clusters'
	// list); its Reader is not asked about objects.
	Clusters Clusters
	// Shared, when set, is what this server shares with the other servers
	// of the process (NewShared): Limits and Streams are then its.
	Shared *Shared
}

// DefaultMaxHeaderBytes is Options.MaxHeaderBytes' default.
const DefaultMaxHeaderBytes = 64 << 10

// Server serves the REST API from a Reader.
type Server struct {
	opts    Options
	r       Reader
	echo    *echo.Echo
	log     *slog.Logger
	metrics *metrics
	streams *streamHub
	limits  *limiter
	headers []header // security headers of every response
	// secLines are headers' lines on a plain HTTP/1.x answer, and
	// headersBesideLines those that stay in its header map (headlines.go).
	secLines           []byte
	headersBesideLines []header
	// routeInfo is read by every request and written only by New.
	routeInfo map[routeKey]*route
	// kubeSpecs serves the Kubernetes API's OpenAPI documents.
	kubeSpecs *kubespec.Docs
	// allow is each path's Allow header (routes.go); written only by New.
	allow map[string]string
	// fresh holds the freshness header values last written (headers.go).
	fresh atomicFreshness
	// retired ends, with its cause, when the server is retired (Retire):
	// its streams end then.
	retired context.Context
	retire  context.CancelCauseFunc
	// fleetStates follows a fleet's clusters for its streams across
	// clusters (clusters_stream.go).
	fleetStates stateWatch
	// reviewsFailing: the last access review asked of this cluster's API
	// server failed (ClusterPartContext).
	reviewsFailing atomic.Bool
}

// New builds the server and its routes. It starts nothing.
func New(r Reader, opts Options) *Server {
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 10 * time.Second
	}
	if opts.MaxHeaderBytes <= 0 {
		opts.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ClusterName == "" {
		opts.ClusterName = DefaultClusterName
	}
	if opts.Shared == nil {
		opts.Shared = NewShared(opts.Limits, opts.Streams)
	}
	opts.Auth, opts.Limits, opts.Streams = opts.Auth.withDefaults(), opts.Shared.limits.opts, opts.Shared.streams.opts
	s := &Server{opts: opts, r: r, echo: echo.New(), log: opts.Logger, metrics: newMetrics(r),
		streams: opts.Shared.streams}
	s.retired, s.retire = context.WithCancelCause(context.Background())
	s.echo.HideBanner, s.echo.HidePort = true, true
	s.echo.HTTPErrorHandler = s.handleError
	s.limits, s.headers = opts.Shared.limits, newSecurityHeaders(opts.Auth.Authenticator != nil || opts.TLS.clientCerts())
	s.secLines, s.headersBesideLines = securityLines(s.headers)
	s.metrics.registry.MustRegister(&securityCollector{s: s})
	if cr, ok := opts.Clusters.(ConfigReporter); ok {
		s.metrics.registry.MustRegister(configCollector{cr})
	}
	s.echo.Use(s.edge) // recovery, metrics, freshness, security headers, no body, authentication, limits
	s.kubeSpecs = kubespec.New(opts.KubeUpstream, s.kubeSpecServed(), kubespec.Options{Prefix: kubePrefix, Logger: opts.Logger})
	s.routes()
	return s
}

// Handler returns the HTTP handler, for tests and embedding.
func (s *Server) Handler() http.Handler { return s.root() }

// Serve serves HTTP on ln until ctx is cancelled, then shuts down
// gracefully within ShutdownTimeout using a fresh context.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.root(),
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       s.opts.Limits.IdleTimeout,
		MaxHeaderBytes:    s.opts.MaxHeaderBytes,
		ConnContext:       connContext, // the short timeout of unauthenticated connections (conns.go)
		ConnState:         connState,
		// What net/http logs itself is about clients (failed handshakes,
		// a client speaking HTTP to the TLS port): not an operator's
		// concern unless debugging.
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 1)
	if t := s.opts.TLS; t != nil {
		ln = s.limits.listener(ln, t.config)
		// ServeTLS offers HTTP/2 (ALPN) besides HTTP/1.1; the certificate
		// comes from GetCertificate, so no file is named here.
		srv.TLSConfig = t.config
		s.log.Info("serving", "addr", ln.Addr().String(), "tls", true, "clientCertificates", t.clientCerts())
		go func() { errc <- srv.ServeTLS(ln, "", "") }()
	} else {
		ln = s.limits.listener(ln, nil)
		s.log.Info("serving", "addr", ln.Addr().String())
		go func() { errc <- srv.Serve(ln) }()
	}
	select {
	case err := <-errc:
		s.streams.stop()
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	s.streams.stop() // streams never end by themselves: end them, with close frames
	err := srv.Shutdown(shutdownCtx)
	s.streams.wait(shutdownCtx) // Shutdown does not wait for WebSockets
	if err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
