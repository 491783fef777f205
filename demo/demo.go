package demo

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/kubeindex/kubeindex/demo/crowd"
	"github.com/kubeindex/kubeindex/demo/fakeapi"
	"github.com/kubeindex/kubeindex/demo/scenario"
)

// Cluster is a simulated cluster: a scenario written into a fake API
// server. All methods are safe for concurrent use.
type Cluster struct {
	api      *fakeapi.Server
	scenario *scenario.Scenario
	crowd    *crowd.Crowd // nil unless Options.Pods asks for more pods than the scenario makes
	churn    time.Duration
}

// New generates a cluster from opts. It starts no goroutine: Run churns
// it, and every watch lives as long as its HTTP request. The generated
// objects are the starting point: a watch must start from a
// resourceVersion a list returned.
func New(opts Options) (*Cluster, error) {
	if opts.Pods < 0 || opts.Pods > MaxPods {
		return nil, fmt.Errorf("demo: %d pods: want 0 to %d", opts.Pods, MaxPods)
	}
	opts = opts.withDefaults()
	api := fakeapi.New(fakeapi.Options{Seed: opts.Seed, GitVersion: scenario.GitVersion,
		HistorySize: opts.HistorySize, BookmarkInterval: opts.BookmarkInterval,
		WatchBuffer: opts.WatchBuffer, Now: opts.Now})
	var cr *crowd.Crowd
	var skip func(string) bool
	if opts.Pods > 0 {
		cr = crowd.New(crowd.Options{Seed: opts.Seed, Pods: opts.Pods, Now: opts.Now})
		skip = cr.Owns
	}
	sc, err := scenario.New(scenario.Options{Seed: opts.Seed, Namespaces: opts.Namespaces, Nodes: opts.Nodes,
		DeploymentsPerNamespace: opts.DeploymentsPerNamespace, Skip: skip, Now: opts.Now, PodNetwork: opts.PodNetwork}, api)
	if err != nil {
		return nil, fmt.Errorf("demo: generating the cluster: %w", err)
	}
	if cr != nil {
		if err := populate(api, sc, cr, opts.Pods); err != nil {
			return nil, fmt.Errorf("demo: generating the cluster: %w", err)
		}
	}
	api.ForgetHistory()
	return &Cluster{api: api, scenario: sc, crowd: cr, churn: opts.ChurnInterval}, nil
}

// populate adds to the scenario's pods a crowd that makes pods of them in
// all, on the scenario's nodes.
func populate(api *fakeapi.Server, sc *scenario.Scenario, cr *crowd.Crowd, pods int) error {
	have := 0
	api.Each(Pods, func(uint64, []byte) { have++ })
	var nodes []crowd.Node
	for _, n := range sc.Nodes() {
		nodes = append(nodes, crowd.Node{Name: n.Name, IP: n.IPv4})
	}
	return cr.Populate(api, nodes, max(0, pods-have))
}

// Handler returns the fake API server: discovery, lists, watches and
// single objects, read-only, as JSON. It is safe for any number of
// concurrent requests, also while the cluster churns.
func (c *Cluster) Handler() http.Handler { return c.api.Handler() }

// Step makes one churn step; see [scenario.Scenario.Step], and
// [crowd.Crowd.Step] when the cluster has a crowd.
func (c *Cluster) Step() error {
	if err := c.scenario.Step(); err != nil || c.crowd == nil {
		return err
	}
	return c.crowd.Step()
}

// Run makes one churn Step every ChurnInterval until ctx is done, or until
// a step fails. It blocks; it is the only goroutine the package starts on
// its own behalf.
func (c *Cluster) Run(ctx context.Context) error {
	t := time.NewTicker(c.churn)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := c.Step(); err != nil {
				return err
			}
		}
	}
}
