package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/demo"
	"github.com/kubeindex/kubeindex/fleet"
	"github.com/kubeindex/kubeindex/ipowner"
	"github.com/kubeindex/kubeindex/server"
)

// discoveryTimeout bounds each request of a fleet cluster's discovery: an
// API server that hangs fails that cluster's attempt, which is retried,
// and never holds up the others.
const discoveryTimeout = 30 * time.Second

// member is a fleet cluster as the command knows it: how to reach it and
// what to cache there.
type member struct {
	name string
	rc   *rest.Config
	cfg  *Config // the shared configuration, with this cluster's resources
	// version digests what the cluster is configured with (the fleet
	// restarts a cluster whose version changed: memberVersion).
	version string
}

// runFleet serves several clusters (docs/clusters.md): each is reached,
// cached and served on its own under /clusters/{name}/, and fails alone;
// the front serves the fleet's routes and routes the rest. Bad
// configuration (names, kubeconfigs, contexts) stops it before anything
// is served; a cluster that cannot be reached does not.
func runFleet(ctx context.Context, cfg *Config, getenv func(string) string, log *slog.Logger) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var demos sync.WaitGroup
	defer demos.Wait() // after cancel, deferred below: last in, first out
	defer cancel()
	members, err := cfg.members(ctx, getenv, log, &demos)
	if err != nil {
		return err
	}
	// Identity is established once, against the first cluster (a
	// TokenReview there); what it may read is each cluster's to say.
	identity, err := cfg.Security.serverAuth(members[0].rc)
	if err != nil {
		return err
	}
	serverTLS, err := cfg.Security.TLS.serverTLS(log)
	if err != nil {
		return err
	}
	cfg.Security.warn(log, cfg.Listen)
	shared := server.NewShared(cfg.Security.limits(), cfg.streamOptions())
	base := server.Options{Simulated: cfg.Demo, Logger: log, Hosts: cfg.Security.hosts(cfg.Demo), TLS: serverTLS, Shared: shared}
	clusters := func(members []member) []fleet.Cluster {
		out := make([]fleet.Cluster, len(members))
		for i, m := range members {
			out[i] = fleet.Cluster{Name: m.name, Version: m.version, Connect: m.connect(base, identity, log.With("cluster", m.name))}
		}
		return out
	}
	f, err := fleet.New(clusters(members), fleet.Options{Logger: log, ReadyWhenAny: cfg.readyWhenAny()})
	if err != nil {
		return err
	}
	parts := []func(context.Context) error{f.Start}
	if cfg.File != "" {
		w := newConfigWatch(cfg, getenv, log, f, clusters)
		if w.watched() {
			parts = append(parts, w.run)
		}
	}
	frontOpts := base
	frontOpts.Auth, frontOpts.Clusters = identity, f
	none, err := noResources(log)
	if err != nil {
		return err
	}
	front := server.New(none, frontOpts)
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", cfg.Listen, err)
	}
	log.Info("serving a fleet: each cluster under /clusters/{name}/", "clusters", f.Names())
	return runAll(ctx, append(parts, func(ctx context.Context) error { return front.Serve(ctx, ln) })...)
}

// members reaches nothing yet: it reads each cluster's kubeconfig and
// context (an error here is a configuration error), or starts the
// simulated clusters of --demo-clusters.
func (cfg *Config) members(ctx context.Context, getenv func(string) string, log *slog.Logger, demos *sync.WaitGroup) ([]member, error) {
	if cfg.DemoClusters > 0 {
		var out []member
		for i, name := range demoClusterNames(cfg.DemoClusters) {
			rc, wait, err := startDemo(ctx, log.With("cluster", name), demo.Options{Seed: int64(i + 1), Pods: cfg.DemoPods, PodNetwork: demoPodNetwork(i + 1)})
			if err != nil {
				return nil, err
			}
			demos.Go(wait)
			out = append(out, member{name: name, rc: rc, cfg: cfg, version: "simulated"})
		}
		return out, nil
	}
	out := make([]member, len(cfg.Clusters))
	for i, c := range cfg.Clusters {
		access := *cfg
		access.Context = c.Context
		if c.Kubeconfig != "" {
			access.Kubeconfig = c.Kubeconfig
		}
		rc, err := clusterConfig(&access, getenv)
		if err != nil {
			return nil, fmt.Errorf("cluster %q: %w", c.Name, err)
		}
		mc := cfg
		if c.Resources != nil {
			own := *cfg
			own.Resources = c.Resources
			mc = &own
		}
		out[i] = member{name: c.Name, rc: rc, cfg: mc, version: memberVersion(c, mc, rc)}
	}
	return out, nil
}

// connect reaches the cluster (discovery, with a timeout), maps the
// configuration onto what it serves and builds its cache and server, as a
// single cluster's start does. identity is the fleet's authentication;
// the authorizer is this cluster's own.
func (m member) connect(base server.Options, identity server.AuthOptions, log *slog.Logger) func(context.Context) (fleet.Parts, error) {
	return func(ctx context.Context) (fleet.Parts, error) {
		probe := rest.CopyConfig(m.rc)
		if probe.Timeout == 0 {
			probe.Timeout = discoveryTimeout
		}
		resources, kubeVersion, upstream, err := resolve(probe, nil, m.cfg)
		if err != nil {
			return fleet.Parts{}, err
		}
		if m.cfg.Demo {
			upstream = nil
		}
		authOpts := server.AuthOptions{Authenticator: identity.Authenticator}
		if authOpts.Authorizer, err = m.cfg.Security.authorizer(m.rc); err != nil {
			return fleet.Parts{}, err
		}
		if authOpts.Authorizer != nil {
			authOpts.Namespaces = m.cfg.Security.namespaceFinder(ctx, m.rc, log)
		}
		historyDir := ""
		if m.cfg.IPHistoryDir != "" {
			historyDir = filepath.Join(m.cfg.IPHistoryDir, m.name)
		}
		c, err := cache.New(m.rc, resources, m.cfg.cacheOptions(log, historyDir))
		if err != nil {
			return fleet.Parts{}, err
		}
		opts := base
		opts.ClusterName, opts.Auth, opts.KubeVersion, opts.KubeUpstream, opts.Logger = m.name, authOpts, kubeVersion, upstream, log
		return fleet.Parts{Cache: c, Server: server.New(c, opts)}, nil
	}
}

// noResources is the reader of a fleet's front: a cache of no resources,
// never started. The front serves the fleet's routes only; it is asked
// about no object.
func noResources(log *slog.Logger) (*cache.Cache, error) {
	return cache.New(&rest.Config{Host: "http://127.0.0.1"}, nil, cache.Options{Logger: log, IPHistory: ipowner.HistoryOptions{Off: true}})
}

// demoPodNetwork is the second octet of the pod CIDR of --demo-clusters'
// cluster n (1-based): the odd ones share 10.244.0.0/16, overlapping as in
// fleets that reuse pod networks; each even one has its own.
func demoPodNetwork(n int) int {
	if n%2 == 1 {
		return 244
	}
	return 244 - n
}
