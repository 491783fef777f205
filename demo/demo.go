package demo

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/kubeindex/kubeindex/demo/fakeapi"
	"github.com/kubeindex/kubeindex/demo/scenario"
)

// Cluster is a simulated cluster: a scenario written into a fake API
// server. All methods are safe for concurrent use.
type Cluster struct {
	api      *fakeapi.Server
	scenario *scenario.Scenario
	churn    time.Duration
}

// New generates a cluster from opts. It starts no goroutine: Run churns
// it, and every watch lives as long as its HTTP request. The generated
// objects are the starting point: a watch must start from a
// resourceVersion a list returned.
func New(opts Options) (*Cluster, error) {
	opts = opts.withDefaults()
	api := fakeapi.New(fakeapi.Options{Seed: opts.Seed, GitVersion: scenario.GitVersion,
		HistorySize: opts.HistorySize, BookmarkInterval: opts.BookmarkInterval,
		WatchBuffer: opts.WatchBuffer, Now: opts.Now})
	sc, err := scenario.New(scenario.Options{Seed: opts.Seed, Namespaces: opts.Namespaces, Nodes: opts.Nodes,
		DeploymentsPerNamespace: opts.DeploymentsPerNamespace, Now: opts.Now}, api)
	if err != nil {
		return nil, fmt.Errorf("demo: generating the cluster: %w", err)
	}
	api.ForgetHistory()
	return &Cluster{api: api, scenario: sc, churn: opts.ChurnInterval}, nil
}

// Handler returns the fake API server: discovery, lists, watches and
// single objects, read-only, as JSON. It is safe for any number of
// concurrent requests, also while the cluster churns.
func (c *Cluster) Handler() http.Handler { return c.api.Handler() }

// Step makes one churn step; see [scenario.Scenario.Step].
func (c *Cluster) Step() error { return c.scenario.Step() }

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
