package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cmd/kubeindex/internal/startheap"
	"github.com/kubeindex/kubeindex/demo"
	"github.com/kubeindex/kubeindex/ipowner"
	"github.com/kubeindex/kubeindex/server"
)

// run wires kubeindex together: configuration, cluster access, discovery,
// cache, HTTP. Everything is validated before anything starts; then it
// serves until ctx is cancelled.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	// The heap's goal is held up from package initialization until the
	// cache has synced (startheap), unless the container's memory limit
	// is too small for it.
	limit := setMemoryLimit(getenv, os.ReadFile)
	if startheap.Small(limit) {
		startheap.Release()
	}
	defer startheap.Release()
	cfg, err := parseConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("invalid configuration:\n%w", err)
	}
	log := newLogger(cfg, stderr)
	if limit > 0 {
		log.Info("GOMEMLIMIT set from the container's memory limit", "bytes", limit)
	}
	if cfg.fleet() {
		startheap.Release() // a fleet has no one moment of sync
		return runFleet(ctx, cfg, getenv, log)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var restCfg *rest.Config
	if cfg.Demo {
		var waitDemo func()
		restCfg, waitDemo, err = startDemo(ctx, log, demo.Options{Seed: 1, Pods: cfg.DemoPods})
		// Cancel first, then wait: deferred calls run last-in first-out.
		defer waitDemo()
		defer cancel()
	} else {
		restCfg, err = clusterConfig(cfg, getenv)
	}
	if err != nil {
		return err
	}
	// Discovery shares the cache's client, and so its connection.
	cacheOpts := cfg.cacheOptions(log, cfg.IPHistoryDir)
	if cacheOpts.HTTPClient, err = cache.HTTPClient(restCfg, cacheOpts); err != nil {
		return err
	}
	resources, kubeVersion, upstream, err := resolve(restCfg, cacheOpts.HTTPClient, cfg)
	if err != nil {
		return err
	}
	if cfg.Demo {
		upstream = nil // the simulated API server has no OpenAPI documents
	}
	authOpts, err := cfg.Security.serverAuth(restCfg)
	if err != nil {
		return err
	}
	serverTLS, err := cfg.Security.TLS.serverTLS(log)
	if err != nil {
		return err
	}
	cfg.Security.warn(log, cfg.Listen)
	authOpts.Namespaces = cfg.Security.namespaceFinder(ctx, restCfg, log)
	c, err := cache.New(restCfg, resources, cacheOpts)
	if err != nil {
		return err
	}
	srv := server.New(c, server.Options{Simulated: cfg.Demo, Logger: log,
		Auth: authOpts, Hosts: cfg.Security.hosts(cfg.Demo), Limits: cfg.Security.limits(), Streams: cfg.streamOptions(),
		KubeVersion: kubeVersion, KubeUpstream: upstream, TLS: serverTLS})
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", cfg.Listen, err)
	}
	return runAll(ctx, c.Start,
		func(ctx context.Context) error { return srv.Serve(ctx, ln) },
		func(ctx context.Context) error {
			return logSync(ctx, c, log, func() {
				startheap.Release()
				if err := notifyReady(getenv); err != nil {
					log.Warn("readiness not notified", "err", err)
				}
			})
		})
}

// cacheOptions are a cluster's cache's options; historyDir is where its
// address history is kept ("": in memory).
func (cfg *Config) cacheOptions(log *slog.Logger, historyDir string) cache.Options {
	return cache.Options{StaleAfter: cfg.StaleAfter, WatchIdleTimeout: cfg.WatchIdle,
		Compression: cfg.APICompression, HTTP2: cfg.APIHTTP2, LazyColumns: cfg.LazyColumns, PodSortIndexes: splitList(cfg.PodSortIndexes), Simulated: cfg.Demo, Logger: log,
		IPHistory: ipowner.HistoryOptions{Off: cfg.IPHistory == 0, Retention: cfg.IPHistory, Skew: cfg.IPHistorySkew, MaxIntervals: cfg.IPHistoryMax, Dir: historyDir}}
}

func (cfg *Config) streamOptions() server.StreamOptions {
	return server.StreamOptions{Coalesce: cfg.StreamCoalesce, MaxLifetime: cfg.StreamMaxLifetime, WindowRate: cfg.WindowRate}
}

// clusterConfig finds cluster access the way kubectl does.
func clusterConfig(cfg *Config, getenv func(string) string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = cfg.Kubeconfig
	rules.Precedence = filepath.SplitList(getenv("KUBECONFIG"))
	if len(rules.Precedence) == 0 {
		rules.Precedence = []string{clientcmd.RecommendedHomeFile}
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: cfg.Context}
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("cluster access (use --kubeconfig, $KUBECONFIG or --demo): %w", err)
	}
	rc.UserAgent = "kubeindex"
	return rc, nil
}

// resolve asks the API server what it serves and maps the configuration
// onto it (configure). It also returns the API server's version, which
// the Kubernetes API's /version repeats (nil when it would not say: only
// /version needs it, not worth refusing to start), and the client of its
// root the Kubernetes API's /openapi reads the API server's documents
// with. It asks through hc (nil: a client of its own).
func resolve(rc *rest.Config, hc *http.Client, cfg *Config) ([]cache.Configured, *version.Info, rest.Interface, error) {
	var dc *discovery.DiscoveryClient
	var err error
	if hc != nil {
		dc, err = discovery.NewDiscoveryClientForConfigAndClient(rc, hc)
	} else {
		dc, err = discovery.NewDiscoveryClientForConfig(rc)
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("discovery client: %w", err)
	}
	found, err := cache.Discover(dc)
	if err != nil {
		return nil, nil, nil, err
	}
	v, err := dc.ServerVersion()
	if err != nil {
		v = nil
	}
	configured, err := cfg.configure(found)
	return configured, v, dc.RESTClient(), err
}

// startDemo serves the simulated cluster on a loopback port, and churns it,
// until ctx is cancelled. It must serve before discovery runs, so it starts
// here rather than with the other long-lived parts. wait blocks until both
// have stopped.
func startDemo(ctx context.Context, log *slog.Logger, opts demo.Options) (cfg *rest.Config, wait func(), err error) {
	start := time.Now()
	sim, err := demo.New(opts)
	if err != nil {
		return nil, nil, err
	}
	if opts.Pods > 0 {
		log.Info("simulated cluster generated", "pods", opts.Pods, "after", time.Since(start).Round(time.Millisecond))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("demo API server: %w", err)
	}
	log.Warn("DEMO MODE: serving a simulated cluster generated inside this process; nothing here is real",
		"fakeAPIServer", ln.Addr().String())
	hs := &http.Server{Handler: sim.Handler(), ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := sim.Run(ctx); err != nil {
			log.Error("demo churn stopped", "err", err)
		}
	})
	wg.Go(func() {
		if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Error("demo API server stopped", "err", err)
		}
	})
	wg.Go(func() {
		<-ctx.Done()
		hs.Close() // watches are long-lived; closing ends them at once
	})
	return &rest.Config{Host: "http://" + ln.Addr().String(), UserAgent: "kubeindex"}, wg.Wait, nil
}

// logSync says when the cache is ready, or which resources are slow to
// sync; synced is called once it is ready.
func logSync(ctx context.Context, c *cache.Cache, log *slog.Logger, synced func()) error {
	start := time.Now()
	for {
		waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		ok := c.WaitForSync(waitCtx)
		cancel()
		if ok {
			synced()
			log.Info("cache synced", "after", time.Since(start).Round(time.Millisecond))
			return nil
		}
		if ctx.Err() != nil {
			return nil
		}
		for _, st := range c.Resources() {
			if !st.Synced {
				log.Warn("resource not synced yet", "resource", st.Name, "lastError", st.LastError)
			}
		}
	}
}

// runAll runs every part until ctx ends or one fails; then it cancels the
// others and waits for them.
func runAll(ctx context.Context, parts ...func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, len(parts))
	for _, p := range parts {
		wg.Go(func() {
			if err := p(ctx); err != nil {
				errc <- err
				cancel()
			}
		})
	}
	wg.Wait()
	close(errc)
	return <-errc
}

func newLogger(cfg *Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
