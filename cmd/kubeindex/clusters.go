package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/kubeindex/kubeindex/fleet"
)

// ClusterConfig is one cluster of a fleet: a --cluster flag, or an entry
// of the YAML file's clusters.
type ClusterConfig struct {
	// Name is a DNS label: the cluster's path, /clusters/{name}/.
	Name string `json:"name"`
	// Kubeconfig is the kubeconfig file to reach it with; empty: the one
	// --kubeconfig (or $KUBECONFIG, ~/.kube/config) names.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Context is the kubeconfig context; empty: its current context.
	Context string `json:"context,omitempty"`
	// Resources replaces the shared resources (the file's resources, or
	// --resources) for this cluster; absent keeps them.
	Resources []ResourceConfig `json:"resources,omitempty"`
}

// Bounds of --demo-clusters.
const maxDemoClusters = 20

// Values of --fleet-ready.
const (
	fleetReadyAll = "all"
	fleetReadyAny = "any"
)

func (cfg *Config) clusterFlags(fs *flag.FlagSet) {
	fs.Var(&cfg.clusterFlag, "cluster", "serve this cluster besides any others given, repeatable: name=NAME[,context=CONTEXT][,kubeconfig=PATH]; "+
		"the kubeconfig defaults to --kubeconfig's; each cluster is served under /clusters/NAME/ (docs/clusters.md)")
	fs.IntVar(&cfg.DemoClusters, "demo-clusters", 0, fmt.Sprintf(
		"with --demo: simulate this many clusters (at most %d) as a fleet, demo-1, demo-2, …: the odd ones with overlapping pod CIDRs (10.244.0.0/16), each even one its own; 0 serves one simulated cluster as a single cluster", maxDemoClusters))
	fs.StringVar(&cfg.FleetReady, "fleet-ready", fleetReadyAll, "with several clusters, when /readyz is 200: all (every cluster synced or stale) or any (at least one)")
}

// fleet tells whether the configuration names clusters: they are then
// served as a fleet, each under /clusters/{name}/.
func (cfg *Config) fleet() bool { return len(cfg.Clusters) > 0 || cfg.DemoClusters > 0 }

// parseClusterFlag reads name=NAME,context=CONTEXT,kubeconfig=PATH.
func parseClusterFlag(f string) (ClusterConfig, error) {
	var c ClusterConfig
	seen := map[string]bool{}
	for _, part := range strings.Split(f, ",") {
		key, value, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || seen[key] {
			return c, fmt.Errorf("--cluster %q: want name=NAME[,context=CONTEXT][,kubeconfig=PATH], each key once", f)
		}
		seen[key] = true
		switch key {
		case "name":
			c.Name = value
		case "context":
			c.Context = value
		case "kubeconfig":
			c.Kubeconfig = value
		default:
			return c, fmt.Errorf("--cluster %q: unknown key %q (name, context, kubeconfig)", f, key)
		}
	}
	if !seen["name"] {
		return c, fmt.Errorf("--cluster %q: no name=", f)
	}
	return c, nil
}

// addClusterFlags turns the --cluster flags into clusters; the file's
// clusters and the flags do not mix.
func (cfg *Config) addClusterFlags() error {
	if len(cfg.clusterFlag) > 0 && len(cfg.Clusters) > 0 {
		return errors.New("--cluster and --config both list clusters: use one")
	}
	for _, f := range cfg.clusterFlag {
		c, err := parseClusterFlag(f)
		if err != nil {
			return err
		}
		cfg.Clusters = append(cfg.Clusters, c)
	}
	return nil
}

// validateClusters reports what is wrong with the clusters: names, a
// kubeconfig that is not there, settings that mean one cluster only.
func (cfg *Config) validateClusters() []error {
	var errs []error
	if cfg.DemoClusters < 0 || cfg.DemoClusters > maxDemoClusters {
		errs = append(errs, fmt.Errorf("--demo-clusters must be between 0 and %d, got %d", maxDemoClusters, cfg.DemoClusters))
	} else if cfg.DemoClusters > 0 && !cfg.Demo {
		errs = append(errs, errors.New("--demo-clusters needs --demo"))
	}
	if !oneOf(cfg.FleetReady, fleetReadyAll, fleetReadyAny) {
		errs = append(errs, fmt.Errorf("--fleet-ready %q: want all or any", cfg.FleetReady))
	}
	if len(cfg.Clusters) == 0 {
		return errs
	}
	if cfg.Demo {
		errs = append(errs, errors.New("--demo simulates its own clusters: use --demo-clusters, not --cluster or the file's clusters"))
	}
	if cfg.Context != "" {
		errs = append(errs, errors.New("--context names one cluster's context: with several clusters, give each its context (context= in --cluster)"))
	}
	names := make([]string, len(cfg.Clusters))
	for i, c := range cfg.Clusters {
		names[i] = c.Name
		if c.Kubeconfig != "" {
			if _, err := os.Stat(c.Kubeconfig); err != nil {
				errs = append(errs, fmt.Errorf("cluster %q: kubeconfig: %w", c.Name, err))
			}
		}
		seen := map[string]bool{}
		for _, r := range c.Resources {
			if seen[r.Resource] {
				errs = append(errs, fmt.Errorf("cluster %q: resource %q is listed twice", c.Name, r.Resource))
			}
			seen[r.Resource] = true
			if err := r.validate(); err != nil {
				errs = append(errs, fmt.Errorf("cluster %q: %w", c.Name, err))
			}
		}
		if c.Resources == nil && len(cfg.Resources) == 0 {
			errs = append(errs, fmt.Errorf("cluster %q: no resources configured, for it or shared", c.Name))
		}
	}
	if err := fleet.ValidateNames(names); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// demoClusterNames are the names of --demo-clusters' clusters.
func demoClusterNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("demo-%d", i+1)
	}
	return out
}

// readyWhenAny is --fleet-ready as the fleet's option.
func (cfg *Config) readyWhenAny() bool { return cfg.FleetReady == fleetReadyAny }
