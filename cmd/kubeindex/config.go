package main

import (
	"errors"
	"flag"
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
	"github.com/kubeindex/kubeindex/indexers"
	"github.com/kubeindex/kubeindex/server"
)

// defaultResources is what kubeindex caches when nothing is configured.
var defaultResources = []string{"pods", "services", "nodes", "deployments.apps", "replicasets.apps", "namespaces"}

// Config is the whole configuration, from flags, environment and the
// optional YAML file. Validate checks it before anything starts.
type Config struct {
	Kubeconfig string        // --kubeconfig, else $KUBECONFIG (a path list), else ~/.kube/config, else in-cluster
	Context    string        // --context: kubeconfig context to use
	Listen     string        // --listen: HTTP address; default 127.0.0.1:8080
	File       string        // --config: YAML file with resources and indexes
	Demo       bool          // --demo: serve a simulated cluster, no API server needed
	StaleAfter time.Duration // --stale-after: watch outage before answers are marked stale
	WatchIdle  time.Duration // --watch-idle-timeout: restart a watch silent for this long
	// --api-compression: ask the API server to gzip responses (off: lists
	// are read uncompressed, cheaper for both sides on a fast network)
	APICompression bool
	// --api-http2: speak HTTP/2 to the API server (off: HTTP/1.1, far
	// cheaper for large lists)
	APIHTTP2 bool
	// --stream-coalesce: after writing events to a stream, wait this long
	// so that the events arriving meanwhile share one write
	StreamCoalesce time.Duration
	// --stream-max-lifetime: a stream ends, resumable, between half this and this
	StreamMaxLifetime time.Duration
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
}

// envNames maps flags to the environment variables that back them.
var envNames = map[string]string{
	"kubeconfig":          "KUBECONFIG",
	"context":             "KUBEINDEX_CONTEXT",
	"listen":              "KUBEINDEX_LISTEN",
	"config":              "KUBEINDEX_CONFIG",
	"demo":                "KUBEINDEX_DEMO",
	"resources":           "KUBEINDEX_RESOURCES",
	"stale-after":         "KUBEINDEX_STALE_AFTER",
	"watch-idle-timeout":  "KUBEINDEX_WATCH_IDLE_TIMEOUT",
	"api-compression":     "KUBEINDEX_API_COMPRESSION",
	"api-http2":           "KUBEINDEX_API_HTTP2",
	"stream-coalesce":     "KUBEINDEX_STREAM_COALESCE",
	"stream-max-lifetime": "KUBEINDEX_STREAM_MAX_LIFETIME",
	"ip-history":          "KUBEINDEX_IP_HISTORY",
	"ip-history-skew":     "KUBEINDEX_IP_HISTORY_SKEW",
	"ip-history-max":      "KUBEINDEX_IP_HISTORY_MAX",
	"ip-history-dir":      "KUBEINDEX_IP_HISTORY_DIR",
	"log-level":           "KUBEINDEX_LOG_LEVEL",
	"log-format":          "KUBEINDEX_LOG_FORMAT",

	"auth":                         "KUBEINDEX_AUTH",
	"token-file":                   "KUBEINDEX_TOKEN_FILE",
	"token-audiences":              "KUBEINDEX_TOKEN_AUDIENCES",
	"authz":                        "KUBEINDEX_AUTHZ",
	"namespace-access":             "KUBEINDEX_NAMESPACE_ACCESS",
	"allow-unauthenticated-remote": "KUBEINDEX_ALLOW_UNAUTHENTICATED_REMOTE",
	"accept-hosts":                 "KUBEINDEX_ACCEPT_HOSTS",
	"max-connections":              "KUBEINDEX_MAX_CONNECTIONS",
	"max-connections-per-address":  "KUBEINDEX_MAX_CONNECTIONS_PER_ADDRESS",
	"unauthenticated-timeout":      "KUBEINDEX_UNAUTHENTICATED_TIMEOUT",
	"max-streams-per-client":       "KUBEINDEX_MAX_STREAMS_PER_CLIENT",
	"token-reviews-per-client":     "KUBEINDEX_TOKEN_REVIEWS_PER_CLIENT",
	"request-timeout":              "KUBEINDEX_REQUEST_TIMEOUT",
}

// parseConfig reads flags, falls back to the environment for flags not
// given, then reads the YAML file. It does not validate; Validate does.
func parseConfig(args []string, getenv func(string) string, usageOut io.Writer) (*Config, error) {
	cfg := &Config{}
	var resources string
	var extraIndexes multiFlag
	fs := flag.NewFlagSet("kubeindex", flag.ContinueOnError)
	fs.SetOutput(usageOut)
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "path to a kubeconfig; default $KUBECONFIG, ~/.kube/config, then the in-cluster service account")
	fs.StringVar(&cfg.Context, "context", "", "kubeconfig context to use (default: the current context)")
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:8080", "address for the HTTP API")
	fs.StringVar(&cfg.File, "config", "", "YAML file listing resources, selectors and indexes (see README)")
	fs.BoolVar(&cfg.Demo, "demo", false, "serve a simulated cluster generated inside the process (no API server needed)")
	fs.StringVar(&resources, "resources", strings.Join(defaultResources, ","), "comma-separated resources to cache, as kubectl names them (ignored with --config)")
	fs.Var(&extraIndexes, "index", "add an index, repeatable: resource:name=type[:arg], e.g. pods:app=label:app or pods:image=path:spec.containers.#.image")
	fs.DurationVar(&cfg.StaleAfter, "stale-after", 30*time.Second, "how long a watch may be down before answers are marked stale")
	fs.DurationVar(&cfg.WatchIdle, "watch-idle-timeout", cache.DefaultWatchIdleTimeout, "mark answers stale and restart a watch that sent nothing, not even a bookmark (about one a minute), for this long (detects hung connections)")
	fs.BoolVar(&cfg.APIHTTP2, "api-http2", false, "speak HTTP/2 to the API server (one connection for every watch) instead of HTTP/1.1 (a connection per watch; far less CPU for large lists)")
	fs.BoolVar(&cfg.APICompression, "api-compression", false, "ask the API server to gzip list responses: less traffic, much more CPU on both sides (for slow links to a remote cluster)")
	fs.DurationVar(&cfg.StreamCoalesce, "stream-coalesce", server.DefaultCoalesce, "after writing events to a stream, wait this long so that events arriving meanwhile go out in one write (the first event after a quiet spell is never held); 0 to 1s, 0 writes each at once")
	fs.DurationVar(&cfg.StreamMaxLifetime, "stream-max-lifetime", server.DefaultMaxLifetime, "a stream (WebSocket, SSE, /k8s watch) ends at random between half this and this, as the API server ends watches after 30 to 60 min; WebSocket and SSE streams end with a BOOKMARK of their position to resume from without loss; at least 1m")
	fs.DurationVar(&cfg.IPHistory, "ip-history", time.Hour, "how long the history of who held each address (pods, Services, nodes) is kept, for lookups ?at= a moment; 0 turns it off")
	fs.DurationVar(&cfg.IPHistorySkew, "ip-history-skew", 2*time.Second, "a moment this near a change of owner is answered as a boundary, with the owners on both sides")
	fs.IntVar(&cfg.IPHistoryMax, "ip-history-max", 1_000_000, "the most ownership intervals kept (about 200 bytes each); beyond it the oldest go and the history starts later")
	fs.StringVar(&cfg.IPHistoryDir, "ip-history-dir", "", "keep the address history in a file in this directory (bbolt), so that it survives restarts; without it a restart begins the history anew")
	fs.StringVar(&cfg.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&cfg.LogFormat, "log-format", "text", "log format: text or json")
	cfg.Security.flags(fs)
	fs.Usage = func() {
		fmt.Fprintf(usageOut, "kubeindex: a read-only, indexed query service for a Kubernetes cluster.\n\nUsage: kubeindex [flags]\n\nFlags (environment variable in brackets):\n")
		fs.VisitAll(func(f *flag.Flag) {
			fmt.Fprintf(usageOut, "  --%s [%s]\n    \t%s (default %q)\n", f.Name, envNames[f.Name], f.Usage, f.DefValue)
		})
	}
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
	return cfg, nil
}

// applyEnv sets every flag not given on the command line from its
// environment variable, naming the variable when its value is bad.
func applyEnv(fs *flag.FlagSet, getenv func(string) string) error {
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		env, ok := envNames[f.Name]
		if !ok || isSet(fs, f.Name) {
			return
		}
		if v := getenv(env); v != "" {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("$%s: %w", env, err))
			}
		}
	})
	return errors.Join(errs...)
}

func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func (cfg *Config) readFile() error {
	data, err := os.ReadFile(cfg.File)
	if err != nil {
		return fmt.Errorf("reading --config: %w", err)
	}
	var fc fileConfig
	if err := yaml.UnmarshalStrict(data, &fc); err != nil {
		return fmt.Errorf("%s: %w", cfg.File, err)
	}
	if len(fc.Resources) == 0 {
		return fmt.Errorf("%s: lists no resources", cfg.File)
	}
	cfg.Resources = fc.Resources
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
	if cfg.IPHistorySkew <= 0 || cfg.IPHistorySkew > time.Minute {
		errs = append(errs, fmt.Errorf("--ip-history-skew must be above 0 and at most 1m, got %s", cfg.IPHistorySkew))
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
	if cfg.StreamMaxLifetime < time.Minute {
		errs = append(errs, fmt.Errorf("--stream-max-lifetime must be at least 1m, got %s", cfg.StreamMaxLifetime))
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
	if len(cfg.Resources) == 0 {
		errs = append(errs, errors.New("no resources configured"))
	}
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
