package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/demo"
	"github.com/kubeindex/kubeindex/indexers"
	"github.com/kubeindex/kubeindex/server"
)

// Config is the whole configuration, from flags, environment and the
// optional YAML file. Validate checks it before anything starts.
type Config struct {
	Kubeconfig string        // --kubeconfig, else $KUBECONFIG (a path list), else ~/.kube/config, else in-cluster
	Context    string        // --context: kubeconfig context to use
	Listen     string        // --listen: HTTP address
	File       string        // --config: YAML file with resources and indexes
	Demo       bool          // --demo: serve a simulated cluster, no API server needed
	DemoPods   int           // --demo-pods: grow the simulated cluster to this many pods
	StaleAfter time.Duration // --stale-after: watch outage before answers are marked stale
	WatchIdle  time.Duration // --watch-idle-timeout: restart a watch silent for this long
	// --api-compression: ask the API server to gzip responses (off: lists
	// are read uncompressed, cheaper for both sides on a fast network)
	APICompression bool
	// --api-http2: speak HTTP/2 to the API server (off: HTTP/1.1, far
	// cheaper for large lists)
	APIHTTP2 bool
	// --lazy-columns: leave objects' Table column values to the first
	// question over a column instead of making them after the sync
	LazyColumns bool
	// --pod-sort-indexes: pod sorts whose ordered indexes are built after
	// the sync and kept (comma-separated; empty: none)
	PodSortIndexes string
	// --stream-coalesce: after writing events to a stream, wait this long
	// so that the events arriving meanwhile share one write
	StreamCoalesce time.Duration
	// --stream-max-lifetime: a stream ends, resumable, between half this and this
	StreamMaxLifetime time.Duration
	// --window-rate: the most messages a second a live window sends
	WindowRate float64
	// --ip-history: how long who held an address is kept for ?at= (0: off)
	IPHistory time.Duration
	// --ip-history-skew: how near a change a moment is answered as a boundary
	IPHistorySkew time.Duration
	// --ip-history-max: the most intervals the address history keeps
	IPHistoryMax int
	// --ip-history-dir: keep the address history in a file there, across restarts
	IPHistoryDir string
	LogLevel     string // --log-level: debug, info, warn, error
	LogFormat    string // --log-format: text or json
	Resources    []ResourceConfig
	Security     SecurityConfig
	// IndexFlags are the --index flags, attached to their resources after
	// discovery (configure), so that any spelling of a resource finds it.
	IndexFlags []IndexFlag
	// Clusters, from --cluster or the file's clusters, make a fleet: each
	// served under /clusters/{name}/ (clusters.go). None: the one cluster
	// --kubeconfig and --context reach, served at the root and as
	// /clusters/default/.
	Clusters []ClusterConfig
	// --demo-clusters: simulate this many clusters as a fleet
	DemoClusters int
	// --fleet-ready: all or any
	FleetReady  string
	clusterFlag multiFlag // the --cluster flags, as given
}

// IndexFlag is one --index resource:name=type[:arg] flag, parsed.
type IndexFlag struct {
	Flag     string // as given, for messages
	Resource string // as typed; resolved through discovery
	Spec     indexers.Spec
}

// SecurityConfig is who may read what, and the limits on clients.
type SecurityConfig struct {
	Auth                       string        // --auth: none, token or tokenreview
	TokenFile                  string        // --token-file: static tokens, for --auth=token
	TokenAudiences             string        // --token-audiences: comma-separated, for --auth=tokenreview
	Authz                      string        // --authz: none or rbac
	NamespaceAccess            string        // --namespace-access: rbac or review
	AllowUnauthenticatedRemote bool          // --allow-unauthenticated-remote
	AcceptHosts                string        // --accept-hosts: comma-separated Host names served with --auth=none
	MaxConnections             int           // --max-connections
	MaxConnectionsPerAddress   int           // --max-connections-per-address: 0 is a quarter of --max-connections
	UnauthenticatedTimeout     time.Duration // --unauthenticated-timeout: idle and header time of a connection not yet authenticated
	MaxStreamsPerClient        int           // --max-streams-per-client
	TokenReviewsPerClient      float64       // --token-reviews-per-client: TokenReviews a second per client address
	RequestTimeout             time.Duration // --request-timeout
	TLS                        TLSConfig     // --tls-*, --client-ca-file (tls.go)
}

// ResourceConfig is one resource entry of the YAML file.
type ResourceConfig struct {
	// Resource as kubectl names it: pods, deployments.apps, apps/v1/deployments, a CRD plural.
	Resource      string   `json:"resource"`
	Namespaces    []string `json:"namespaces,omitempty"`
	LabelSelector string   `json:"labelSelector,omitempty"`
	FieldSelector string   `json:"fieldSelector,omitempty"`
	// Resync is a Go duration ("10m"); empty or "0s" disables resyncs.
	Resync string `json:"resync,omitempty"`
	// Indexes replaces the resource's default indexes; absent keeps them,
	// an empty list removes them.
	Indexes *[]indexers.Spec `json:"indexes,omitempty"`
	// Redact lists fields dropped at cache entry (dotted paths; escape dots in keys).
	Redact []string `json:"redact,omitempty"`
	// AllowSecretData keeps Secrets' data and stringData, dropped by default.
	AllowSecretData bool `json:"allowSecretData,omitempty"`
}

// fileConfig is the YAML file's shape. Unknown fields are errors.
type fileConfig struct {
	Resources []ResourceConfig `json:"resources"`
	// Clusters make a fleet (clusters.go); each takes Resources unless it
	// lists its own.
	Clusters []ClusterConfig `json:"clusters,omitempty"`
}

// parseConfig reads flags, falls back to the environment for flags not
// given, then reads the YAML file. It does not validate; Validate does.
func parseConfig(args []string, getenv func(string) string, usageOut io.Writer) (*Config, error) {
	cfg := &Config{}
	var resources string
	var extraIndexes multiFlag
	fs := cfg.flagSet(&resources, &extraIndexes)
	fs.SetOutput(usageOut)
	fs.Usage = func() { usage(usageOut, fs) }
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (flags start with --)", fs.Arg(0))
	}
	if err := applyEnv(fs, getenv); err != nil {
		return nil, err
	}
	if cfg.File != "" {
		if isSet(fs, "resources") {
			return nil, errors.New("--resources and --config both list resources: use one")
		}
		if err := cfg.readFile(); err != nil {
			return nil, err
		}
	} else {
		for _, r := range splitList(resources) {
			cfg.Resources = append(cfg.Resources, ResourceConfig{Resource: r})
		}
	}
	if err := cfg.addIndexes(extraIndexes); err != nil {
		return nil, err
	}
	if err := cfg.addClusterFlags(); err != nil {
		return nil, err
	}
	return cfg, nil
}

func (cfg *Config) readFile() error {
	data, err := os.ReadFile(cfg.File)
	if err != nil {
		return fmt.Errorf("reading --config: %w", err)
	}
	return cfg.useFile(data)
}

// useFile sets the resources and clusters the file's content data lists.
func (cfg *Config) useFile(data []byte) error {
	var fc fileConfig
	if err := yaml.UnmarshalStrict(data, &fc); err != nil {
		return fmt.Errorf("%s: %w", cfg.File, err)
	}
	if len(fc.Resources) == 0 && len(fc.Clusters) == 0 {
		return fmt.Errorf("%s: lists no resources", cfg.File)
	}
	cfg.Resources, cfg.Clusters = fc.Resources, fc.Clusters
	return nil
}

// addIndexes parses --index resource:name=type[:arg] flags. Which resource
// each adds to is known only after discovery (configure).
func (cfg *Config) addIndexes(flags []string) error {
	for _, f := range flags {
		res, def, ok := strings.Cut(f, ":")
		if !ok || strings.TrimSpace(res) == "" {
			return fmt.Errorf("--index %q: want resource:name=type[:arg]", f)
		}
		spec, err := indexers.Parse(def)
		if err != nil {
			return fmt.Errorf("--index %q: %w", f, err)
		}
		cfg.IndexFlags = append(cfg.IndexFlags, IndexFlag{Flag: f, Resource: res, Spec: spec})
	}
	return nil
}

// indexes returns the configured indexes, or the defaults of the resource
// the name resolved to: defaults follow the group and resource, never the
// spelling (po, Pod and v1/pods are all pods).
func (r ResourceConfig) indexes(res cache.Resource) []indexers.Spec {
	if r.Indexes != nil {
		return append([]indexers.Spec(nil), (*r.Indexes)...)
	}
	return indexers.Defaults(res.Group, res.Plural)
}

// Validate reports every problem in the configuration at once, each naming
// the setting it is about.
func (cfg *Config) Validate() error {
	var errs []error
	if _, _, err := net.SplitHostPort(cfg.Listen); err != nil {
		errs = append(errs, fmt.Errorf("--listen %q: %w", cfg.Listen, err))
	}
	if cfg.StaleAfter <= 0 {
		errs = append(errs, fmt.Errorf("--stale-after must be positive, got %s", cfg.StaleAfter))
	}
	if cfg.IPHistory < 0 {
		errs = append(errs, fmt.Errorf("--ip-history must be 0 (off) or positive, got %s", cfg.IPHistory))
	}
	if cfg.IPHistorySkew <= 0 || cfg.IPHistorySkew > maxIPHistorySkew {
		errs = append(errs, fmt.Errorf("--ip-history-skew must be above 0 and at most %s, got %s", shortDuration(maxIPHistorySkew), cfg.IPHistorySkew))
	}
	if cfg.IPHistoryDir != "" && cfg.IPHistory == 0 {
		errs = append(errs, errors.New("--ip-history-dir needs the history on (--ip-history above 0)"))
	}
	if cfg.IPHistoryMax < 1 {
		errs = append(errs, fmt.Errorf("--ip-history-max must be positive, got %d", cfg.IPHistoryMax))
	}
	if cfg.StreamCoalesce < 0 || cfg.StreamCoalesce > server.MaxCoalesce {
		errs = append(errs, fmt.Errorf("--stream-coalesce must be between 0 and %s, got %s", server.MaxCoalesce, cfg.StreamCoalesce))
	}
	if err := cache.ValidatePodSortIndexes(splitList(cfg.PodSortIndexes)); err != nil {
		errs = append(errs, fmt.Errorf("--pod-sort-indexes: %w", err))
	}
	if cfg.WindowRate <= 0 || cfg.WindowRate > cache.MaxWindowRate {
		errs = append(errs, fmt.Errorf("--window-rate must be above 0 and at most %d, got %v", cache.MaxWindowRate, cfg.WindowRate))
	}
	if cfg.StreamMaxLifetime < minStreamLifetime {
		errs = append(errs, fmt.Errorf("--stream-max-lifetime must be at least %s, got %s", shortDuration(minStreamLifetime), cfg.StreamMaxLifetime))
	}
	if cfg.WatchIdle < time.Second {
		errs = append(errs, fmt.Errorf("--watch-idle-timeout must be at least 1s, got %s", cfg.WatchIdle))
	}
	if !oneOf(cfg.LogLevel, "debug", "info", "warn", "error") {
		errs = append(errs, fmt.Errorf("--log-level %q: want debug, info, warn or error", cfg.LogLevel))
	}
	if !oneOf(cfg.LogFormat, "text", "json") {
		errs = append(errs, fmt.Errorf("--log-format %q: want text or json", cfg.LogFormat))
	}
	if cfg.DemoPods < 0 || cfg.DemoPods > demo.MaxPods {
		errs = append(errs, fmt.Errorf("--demo-pods must be between 0 and %d, got %d", demo.MaxPods, cfg.DemoPods))
	} else if cfg.DemoPods > 0 && !cfg.Demo {
		errs = append(errs, errors.New("--demo-pods needs --demo"))
	}
	if len(cfg.Resources) == 0 && len(cfg.Clusters) == 0 {
		errs = append(errs, errors.New("no resources configured"))
	}
	errs = append(errs, cfg.validateClusters()...)
	errs = append(errs, cfg.Security.validate(cfg.Listen, cfg.Demo)...)
	seen := map[string]bool{}
	for _, r := range cfg.Resources {
		if seen[r.Resource] {
			errs = append(errs, fmt.Errorf("resource %q is listed twice", r.Resource))
		}
		seen[r.Resource] = true
		if err := r.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (r ResourceConfig) validate() error {
	var errs []error
	if strings.TrimSpace(r.Resource) == "" {
		return errors.New("a resource entry has no name (resource: is empty)")
	}
	if _, err := labels.Parse(r.LabelSelector); err != nil {
		errs = append(errs, fmt.Errorf("labelSelector %q: %w", r.LabelSelector, err))
	}
	if _, err := fields.ParseSelector(r.FieldSelector); err != nil {
		errs = append(errs, fmt.Errorf("fieldSelector %q: %w", r.FieldSelector, err))
	}
	if _, err := r.resync(); err != nil {
		errs = append(errs, err)
	}
	for _, ns := range r.Namespaces {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("namespace %q: %s", ns, strings.Join(msgs, "; ")))
		}
	}
	for _, p := range r.Redact {
		if err := cache.ValidateRedactPath(p); err != nil {
			errs = append(errs, err)
		}
	}
	if r.Indexes != nil {
		errs = append(errs, validateIndexes(*r.Indexes)...)
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("resource %q: %w", r.Resource, errors.Join(errs...))
}

func (r ResourceConfig) resync() (time.Duration, error) {
	if r.Resync == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(r.Resync)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("resync %q: want a non-negative duration such as 10m", r.Resync)
	}
	return d, nil
}

// validateIndexes reports every invalid index and every name used twice.
func validateIndexes(specs []indexers.Spec) []error {
	var errs []error
	names := map[string]bool{}
	for _, s := range specs {
		if err := s.Validate(); err != nil {
			errs = append(errs, err)
		}
		if names[s.Name] {
			errs = append(errs, fmt.Errorf("index %q is defined twice", s.Name))
		}
		names[s.Name] = true
	}
	return errs
}

// spec converts the validated configuration, with the indexes chosen after
// discovery, into the cache's own type.
func (r ResourceConfig) spec(indexes []indexers.Spec) cache.Spec {
	resync, _ := r.resync()
	return cache.Spec{
		Resource:      r.Resource,
		Namespaces:    r.Namespaces,
		LabelSelector: r.LabelSelector,
		FieldSelector: r.FieldSelector,
		Resync:        resync,
		Indexes:       indexes,
		Redact:        r.Redact,

		AllowSecretData: r.AllowSecretData,
	}
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, " ") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func oneOf(v string, options ...string) bool {
	for _, o := range options {
		if v == o {
			return true
		}
	}
	return false
}
