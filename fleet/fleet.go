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
	// Version identifies what the cluster is configured with: Update
	// restarts a cluster whose Version changed and leaves one whose
	// Version is the same alone. Any string; the command's is a digest of
	// the cluster's settings.
	Version string
	// Connect reaches the cluster and builds its parts without starting
	// them. Until it succeeds the cluster is failed with its error, and it
	// is called again after a backoff, until the cluster stops.
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

// Fleet is a set of named clusters. Build it with New, run it with Start,
// change it with Update; its methods are safe for concurrent use.
type Fleet struct {
	opts Options

	// updates serializes Start's launch, Update and Start's end.
	updates sync.Mutex
	running sync.WaitGroup // every started member's run

	mu      sync.RWMutex
	members []*member // in configuration order
	byName  map[string]*member
	ctx     context.Context // Start's; nil before
	config  server.ConfigStatus
}

var _ server.Clusters = (*Fleet)(nil)

// member is one cluster and what is known of it.
type member struct {
	Cluster

	// cancel stops the member and done is closed when its run has
	// returned; both nil until it is launched (under Fleet.mu).
	cancel context.CancelFunc
	done   chan struct{}

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
	if err := check(clusters); err != nil {
		return nil, err
	}
	f := &Fleet{opts: opts, byName: map[string]*member{}}
	for _, c := range clusters {
		m := newMember(c)
		f.members = append(f.members, m)
		f.byName[c.Name] = m
	}
	return f, nil
}

// check reports what makes clusters no fleet: no cluster, bad or repeated
// names, a cluster without a way to connect.
func check(clusters []Cluster) error {
	if len(clusters) == 0 {
		return errors.New("a fleet needs at least one cluster")
	}
	if err := ValidateNames(clusterNames(clusters)); err != nil {
		return err
	}
	for _, c := range clusters {
		if c.Connect == nil {
			return fmt.Errorf("cluster %q: no way to connect", c.Name)
		}
	}
	return nil
}

func newMember(c Cluster) *member {
	return &member{Cluster: c, reason: "not reached yet"}
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

// Names lists the clusters in configuration order (server.Clusters).
func (f *Fleet) Names() []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]string, len(f.members))
	for i, m := range f.members {
		out[i] = m.Name
	}
	return out
}

// Start runs every cluster until ctx ends: reaches it (again after each
// failure, with backoff), then runs its cache. A cluster never stops the
// others; Start returns nil when ctx ends and every cluster has stopped.
// It runs once: a second call returns an error.
func (f *Fleet) Start(ctx context.Context) error {
	f.updates.Lock()
	f.mu.Lock()
	if f.ctx != nil {
		f.mu.Unlock()
		f.updates.Unlock()
		return errors.New("the fleet was started already")
	}
	f.ctx = ctx
	for _, m := range f.members {
		f.launch(m)
	}
	f.mu.Unlock()
	f.updates.Unlock()
	<-ctx.Done()
	// Update launches nothing once ctx has ended; waiting under its lock
	// orders this Wait after its last launch.
	f.updates.Lock()
	defer f.updates.Unlock()
	f.running.Wait()
	return nil
}

// launch starts m's run, once, under f.mu, after Start.
func (f *Fleet) launch(m *member) {
	if m.cancel != nil || f.ctx == nil || f.ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithCancel(f.ctx)
	m.cancel, m.done = cancel, make(chan struct{})
	f.running.Add(1)
	go func() {
		defer f.running.Done()
		defer close(m.done)
		f.run(ctx, m)
	}()
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
			// Started even when ctx has just ended: Start is what
			// releases what the cache opened (its address history file).
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

// Changes is what an Update did, each list of cluster names in
// configuration order (removed ones in their former order).
type Changes struct {
	Added, Removed, Restarted []string
}

// None tells whether the update changed nothing.
func (c Changes) None() bool {
	return len(c.Added)+len(c.Removed)+len(c.Restarted) == 0
}

// Update makes the fleet the given clusters, in their order, checked as
// New checks them (on error nothing changes). A cluster new by name is
// started; one no longer listed is stopped; one whose Version changed is
// stopped, then started again with its new Connect; every other cluster
// is left alone, its cache and its streams untouched. A stopped cluster's
// server is retired (server.Server.Retire): each of its open streams ends
// saying why. The new list answers at once (a removed cluster is unknown,
// a restarted one unavailable until it is reached again); Update returns
// once the stopped clusters have stopped and their successors are
// launched. Before Start, it only changes the list Start will run.
func (f *Fleet) Update(clusters []Cluster) (Changes, error) {
	if err := check(clusters); err != nil {
		return Changes{}, err
	}
	f.updates.Lock()
	defer f.updates.Unlock()
	f.mu.Lock()
	if f.ctx != nil && f.ctx.Err() != nil {
		f.mu.Unlock()
		return Changes{}, errors.New("the fleet has stopped")
	}
	type retiring struct {
		m   *member
		why string
	}
	var ch Changes
	var stopping []retiring
	members, byName := make([]*member, 0, len(clusters)), make(map[string]*member, len(clusters))
	for _, c := range clusters {
		m := f.byName[c.Name]
		switch {
		case m != nil && m.Version == c.Version:
		case m != nil:
			stopping = append(stopping, retiring{m, fmt.Sprintf("cluster %q restarts with a changed configuration: connect again", c.Name)})
			m = newMember(c)
			m.reason = "restarting with a changed configuration"
			ch.Restarted = append(ch.Restarted, c.Name)
		default:
			m = newMember(c)
			ch.Added = append(ch.Added, c.Name)
		}
		members = append(members, m)
		byName[c.Name] = m
	}
	for _, m := range f.members {
		if byName[m.Name] == nil {
			stopping = append(stopping, retiring{m, fmt.Sprintf("cluster %q was removed from the configuration", m.Name)})
			ch.Removed = append(ch.Removed, m.Name)
		}
	}
	f.members, f.byName = members, byName
	f.mu.Unlock()

	// The old clusters stop before their successors start: what a cache
	// holds open (its address history file) is the old one's until then.
	for _, r := range stopping {
		r.m.stop(r.why)
	}
	f.mu.Lock()
	for _, m := range f.members {
		f.launch(m)
	}
	f.mu.Unlock()
	return ch, nil
}

// stop ends the member's run, waits for it, then retires its server.
func (m *member) stop(why string) {
	if m.cancel != nil {
		m.cancel()
		<-m.done
	}
	m.mu.Lock()
	parts := m.parts
	m.parts, m.reason = nil, why
	m.mu.Unlock()
	if parts != nil {
		parts.Server.Retire(why)
	}
}

// snapshot is the member's parts, or why there are none.
func (m *member) snapshot() (*Parts, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.parts, m.reason
}

// member is the named cluster's member, nil if none.
func (f *Fleet) member(name string) *member {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.byName[name]
}

// Cluster is the named cluster's server (server.Clusters).
func (f *Fleet) Cluster(name string) (*server.Server, error) {
	m := f.member(name)
	if m == nil {
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
	m := f.member(name)
	if m == nil {
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
	f.mu.RLock()
	members := f.members
	f.mu.RUnlock()
	out := make([]server.ClusterState, len(members))
	for i, m := range members {
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
	for _, st := range f.States() {
		ready := st.State == server.ClusterSynced || st.State == server.ClusterStale
		any, all = any || ready, all && ready
	}
	if f.opts.ReadyWhenAny {
		return any
	}
	return all
}

// SetConfigStatus records how the fleet's configuration was last read,
// which GET /api/v1/clusters reports (server.ConfigReporter).
func (f *Fleet) SetConfigStatus(st server.ConfigStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.config = st
}

// ConfigStatus is what SetConfigStatus recorded (server.ConfigReporter).
func (f *Fleet) ConfigStatus() server.ConfigStatus {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.config
}
