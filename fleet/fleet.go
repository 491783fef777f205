// Package fleet is a set of named clusters served by one process: each
// cluster is reached, cached and served on its own, and fails alone. A
// cluster that cannot be reached, whose credentials are refused or whose
// API server does not serve a configured resource is failed, with the
// reason, and tried again with backoff; the others serve meanwhile. Once
// reached, a cluster's cache keeps itself current (its reflectors relist
// and rewatch) and its state follows its freshness: synced, syncing or
// stale.
//
// The fleet knows no configuration format and no flags: the command gives
// each cluster a Connect function that builds its cache and server.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/internal/text"
	"github.com/kubeindex/kubeindex/server"
)

// Parts are what a reached cluster serves from: its cache, not started,
// and the server reading it.
type Parts struct {
	Cache  *cache.Cache
	Server *server.Server
}

// Cluster is one member of a fleet.
type Cluster struct {
	// Name is a DNS label (RFC 1123), unique in the fleet: the cluster's
	// path, /clusters/{name}/.
	Name string
	// Connect reaches the cluster and builds its parts without starting
	// them. Until it succeeds the cluster is failed with its error, and it
	// is called again after a backoff, until ctx ends.
	Connect func(ctx context.Context) (Parts, error)
}

// Options tunes a fleet. Zero values take the documented defaults.
type Options struct {
	// Logger receives each cluster's failures and recoveries. Default
	// slog.Default().
	Logger *slog.Logger
	// RetryInitial and RetryMax bound the wait between two attempts to
	// reach a cluster: it doubles from RetryInitial up to RetryMax.
	// Defaults DefaultRetryInitial and DefaultRetryMax.
	RetryInitial, RetryMax time.Duration
	// ReadyWhenAny makes the fleet ready when one cluster is; by default
	// it is ready when every cluster is. A cluster is ready when it has
	// synced, stale or not (a stale cluster answers from memory).
	ReadyWhenAny bool
}

// Options' defaults.
const (
	DefaultRetryInitial = time.Second
	DefaultRetryMax     = time.Minute
)

// Fleet is a set of named clusters. Build it with New, run it with Start;
// its methods are safe for concurrent use.
type Fleet struct {
	opts    Options
	members []*member
	byName  map[string]*member
}

var _ server.Clusters = (*Fleet)(nil)

// member is one cluster and what is known of it.
type member struct {
	Cluster

	mu     sync.Mutex
	parts  *Parts // nil until Connect succeeded
	reason string // the last error of Connect, while parts is nil
}

// New checks the clusters' names (DNS labels, unique) and builds the
// fleet. It starts nothing.
func New(clusters []Cluster, opts Options) (*Fleet, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.RetryInitial <= 0 {
		opts.RetryInitial = DefaultRetryInitial
	}
	if opts.RetryMax < opts.RetryInitial {
		opts.RetryMax = max(DefaultRetryMax, opts.RetryInitial)
	}
	if err := ValidateNames(clusterNames(clusters)); err != nil {
		return nil, err
	}
	f := &Fleet{opts: opts, byName: map[string]*member{}}
	for _, c := range clusters {
		if c.Connect == nil {
			return nil, fmt.Errorf("cluster %q: no way to connect", c.Name)
		}
		m := &member{Cluster: c, reason: "not reached yet"}
		f.members = append(f.members, m)
		f.byName[c.Name] = m
	}
	if len(f.members) == 0 {
		return nil, errors.New("a fleet needs at least one cluster")
	}
	return f, nil
}

// ValidateNames reports every name that is not a DNS label and every name
// given twice, at once.
func ValidateNames(names []string) error {
	var errs []error
	seen := map[string]bool{}
	for _, n := range names {
		if msgs := validation.IsDNS1123Label(n); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("cluster name %q: %s", n, strings.Join(msgs, "; ")))
		}
		if seen[n] {
			errs = append(errs, fmt.Errorf("cluster %q is configured twice", n))
		}
		seen[n] = true
	}
	return errors.Join(errs...)
}

func clusterNames(clusters []Cluster) []string {
	out := make([]string, len(clusters))
	for i, c := range clusters {
		out[i] = c.Name
	}
	return out
}

// Names lists the clusters in configuration order.
func (f *Fleet) Names() []string {
	out := make([]string, len(f.members))
	for i, m := range f.members {
		out[i] = m.Name
	}
	return out
}

// Start runs every cluster until ctx ends: reaches it (again after each
// failure, with backoff), then runs its cache. A cluster never stops the
// others; Start returns nil when ctx ends and every cluster has stopped.
func (f *Fleet) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, m := range f.members {
		wg.Go(func() { f.run(ctx, m) })
	}
	wg.Wait()
	return nil
}

// run reaches one cluster, then runs its cache until ctx ends.
func (f *Fleet) run(ctx context.Context, m *member) {
	log := f.opts.Logger.With("cluster", m.Name)
	backoff := wait.Backoff{Duration: f.opts.RetryInitial, Factor: 2, Jitter: 0.1, Steps: 64, Cap: f.opts.RetryMax}
	for ctx.Err() == nil {
		parts, err := m.Connect(ctx)
		if err == nil && (parts.Cache == nil || parts.Server == nil) {
			err = errors.New("connecting built no cache or server")
		}
		if err == nil {
			m.mu.Lock()
			m.parts, m.reason = &parts, ""
			m.mu.Unlock()
			log.Info("cluster reached; its cache is starting")
			if err := parts.Cache.Start(ctx); err != nil {
				log.Error("cluster's cache stopped", "err", err)
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
		m.mu.Lock()
		m.reason = err.Error()
		m.mu.Unlock()
		delay := backoff.Step()
		log.Warn("cluster not reached; the others serve meanwhile", "err", err, "retryIn", delay.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

// snapshot is the member's parts, or why there are none.
func (m *member) snapshot() (*Parts, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.parts, m.reason
}

// Cluster is the named cluster's server (server.Clusters).
func (f *Fleet) Cluster(name string) (*server.Server, error) {
	m, ok := f.byName[name]
	if !ok {
		return nil, fmt.Errorf("%w %q (clusters: %s)", server.ErrUnknownCluster, text.Truncate(name, 64), strings.Join(f.Names(), ", "))
	}
	parts, reason := m.snapshot()
	if parts == nil {
		return nil, fmt.Errorf("%w: cluster %q: %s", server.ErrClusterUnavailable, name, reason)
	}
	return parts.Server, nil
}

// Reader is the named cluster's cache, nil while it is not reached.
func (f *Fleet) Reader(name string) *cache.Cache {
	m, ok := f.byName[name]
	if !ok {
		return nil
	}
	parts, _ := m.snapshot()
	if parts == nil {
		return nil
	}
	return parts.Cache
}

// States describes every cluster in configuration order
// (server.Clusters).
func (f *Fleet) States() []server.ClusterState {
	out := make([]server.ClusterState, len(f.members))
	for i, m := range f.members {
		out[i] = m.state()
	}
	return out
}

func (m *member) state() server.ClusterState {
	parts, reason := m.snapshot()
	if parts == nil {
		return server.ClusterState{Name: m.Name, State: server.ClusterFailed, Reason: reason}
	}
	return server.StateOf(m.Name, parts.Cache)
}

// Ready is the fleet's readiness (server.Clusters): every cluster, or with
// ReadyWhenAny one, synced or stale.
func (f *Fleet) Ready() bool {
	any, all := false, true
	for _, m := range f.members {
		st := m.state().State
		ready := st == server.ClusterSynced || st == server.ClusterStale
		any, all = any || ready, all && ready
	}
	if f.opts.ReadyWhenAny {
		return any
	}
	return all
}
