package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/demo"
	"github.com/kubeindex/kubeindex/ipowner"
	"github.com/kubeindex/kubeindex/server"
)

// The flags are the one statement of the configuration: each takes its
// default from the package that applies it (cache, server, auth), or from
// the constants below where the command owns the setting; the environment
// variables are derived from the flag names; the help text and
// docs/configuration.md are generated from the flag set (make docs).

// Defaults the command owns.
const (
	defaultListen    = "127.0.0.1:8080"
	defaultLogLevel  = "info"
	defaultLogFormat = "text"
)

// defaultResources is what kubeindex caches when nothing is configured.
var defaultResources = []string{"pods", "services", "nodes", "deployments.apps", "replicasets.apps", "namespaces"}

// Bounds Validate holds flags to, where the help text states them too.
const (
	minStreamLifetime = time.Minute
	maxIPHistorySkew  = time.Minute
)

// envPrefix starts the environment variable of every flag but the
// exceptions: --max-connections is KUBEINDEX_MAX_CONNECTIONS.
const envPrefix = "KUBEINDEX_"

// envExceptions are the flags whose environment variable is not derived
// from their name; "" means the flag has none.
var envExceptions = map[string]string{
	// Not set from $KUBECONFIG: that is a list of paths, which
	// clusterConfig hands to client-go's loading rules as kubectl does,
	// when --kubeconfig is not given.
	"kubeconfig": "",
	// Repeatable: one variable would hold only one of them.
	"index":   "",
	"cluster": "",
}

// envName is the environment variable that backs the flag named name, ""
// when none does.
func envName(name string) string {
	if env, ok := envExceptions[name]; ok {
		return env
	}
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// flagSet declares every flag, bound to cfg and, for the two that need
// parsing after the others, to resources and indexes.
func (cfg *Config) flagSet(resources *string, indexes *multiFlag) *flag.FlagSet {
	fs := flag.NewFlagSet("kubeindex", flag.ContinueOnError)
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "path to a kubeconfig; default the files $KUBECONFIG lists (merged as kubectl merges them), ~/.kube/config, then the in-cluster service account")
	fs.StringVar(&cfg.Context, "context", "", "kubeconfig context to use (default: the current context)")
	fs.StringVar(&cfg.Listen, "listen", defaultListen, "address for the HTTP API")
	fs.StringVar(&cfg.File, "config", "", "YAML file listing resources, selectors and indexes (docs/configuration.md); a fleet's clusters too, watched and applied while serving (docs/clusters.md)")
	fs.BoolVar(&cfg.Demo, "demo", false, "serve a simulated cluster generated inside the process (no API server needed)")
	fs.IntVar(&cfg.DemoPods, "demo-pods", demo.DefaultPods, fmt.Sprintf("with --demo: grow the simulated cluster to this many pods (at most %d), in namespaces of their own over one node per 500 pods; 0 keeps the small cluster", demo.MaxPods))
	fs.StringVar(resources, "resources", strings.Join(defaultResources, ","), "comma-separated resources to cache, as kubectl names them (ignored with --config)")
	fs.Var(indexes, "index", "add an index, repeatable: resource:name=type[:arg], e.g. pods:app=label:app or pods:image=path:spec.containers.#.image")
	fs.DurationVar(&cfg.StaleAfter, "stale-after", cache.DefaultStaleAfter, "how long a watch may be down before answers are marked stale")
	fs.DurationVar(&cfg.WatchIdle, "watch-idle-timeout", cache.DefaultWatchIdleTimeout, "mark answers stale and restart a watch that sent nothing, not even a bookmark (about one a minute), for this long (detects hung connections)")
	fs.BoolVar(&cfg.APIHTTP2, "api-http2", false, "speak HTTP/2 to the API server (one connection for every watch) instead of HTTP/1.1 (a connection per watch; far less CPU for large lists)")
	fs.BoolVar(&cfg.LazyColumns, "lazy-columns", false, "leave each object's Table column values to the first question over a column (a sort or filter by status, restarts, node …) instead of making them in the background once a resource has synced: less memory where nobody asks about columns, a slow first such question at scale")
	fs.StringVar(&cfg.PodSortIndexes, "pod-sort-indexes", strings.Join(cache.DefaultPodSortIndexes, ","), "comma-separated pod sort keys (columns or paths) whose ordered indexes, with the namespace/name order's, are built in the background after the sync and kept, so that a first sort by one (a click on the dashboard's column header) does not wait for a build over every pod; a key descending reads its key's index; empty for none, and none with --lazy-columns")
	fs.BoolVar(&cfg.APICompression, "api-compression", false, "ask the API server to gzip list responses: less traffic, much more CPU on both sides (for slow links to a remote cluster)")
	fs.DurationVar(&cfg.StreamCoalesce, "stream-coalesce", server.DefaultCoalesce, fmt.Sprintf(
		"after writing events to a stream, wait this long so that events arriving meanwhile go out in one write (the first event after a quiet spell is never held); 0 to %s, 0 writes each at once",
		shortDuration(server.MaxCoalesce)))
	fs.DurationVar(&cfg.StreamMaxLifetime, "stream-max-lifetime", server.DefaultMaxLifetime, fmt.Sprintf(
		"a stream (WebSocket, SSE, /k8s watch) ends at random between half this and this, as the API server ends watches after 30 to 60 min; WebSocket and SSE streams end with a BOOKMARK of their position to resume from without loss; at least %s",
		shortDuration(minStreamLifetime)))
	fs.Float64Var(&cfg.WindowRate, "window-rate", cache.DefaultWindowRate, fmt.Sprintf(
		"the most messages a second a live window (docs/streams.md) sends: the changes of the meantime go out together; above 0, at most %d", cache.MaxWindowRate))
	fs.DurationVar(&cfg.IPHistory, "ip-history", ipowner.DefaultHistoryRetention, "how long the history of who held each address (pods, Services, nodes) is kept, for lookups ?at= a moment; 0 turns it off")
	fs.DurationVar(&cfg.IPHistorySkew, "ip-history-skew", ipowner.DefaultHistorySkew, fmt.Sprintf(
		"a moment this near a change of owner is answered as a boundary, with the owners on both sides; at most %s", shortDuration(maxIPHistorySkew)))
	fs.IntVar(&cfg.IPHistoryMax, "ip-history-max", ipowner.DefaultHistoryMaxIntervals, "the most ownership intervals kept (about 200 bytes each); beyond it the oldest go and the history starts later")
	fs.StringVar(&cfg.IPHistoryDir, "ip-history-dir", "", "keep the address history in a file in this directory (bbolt), so that it survives restarts; without it a restart begins the history anew")
	fs.StringVar(&cfg.LogLevel, "log-level", defaultLogLevel, "log level: debug, info, warn or error")
	fs.StringVar(&cfg.LogFormat, "log-format", defaultLogFormat, "log format: text or json")
	cfg.clusterFlags(fs)
	cfg.Security.flags(fs)
	return fs
}

// usage writes the help: every flag with its environment variable.
func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "kubeindex: a read-only, indexed query service for a Kubernetes cluster.\n\nUsage: kubeindex [flags]\n\nFlags (environment variable in brackets):\n")
	fs.VisitAll(func(f *flag.Flag) {
		env := ""
		if e := envName(f.Name); e != "" {
			env = " [" + e + "]"
		}
		fmt.Fprintf(w, "  --%s%s\n    \t%s (default %q)\n", f.Name, env, f.Usage, f.DefValue)
	})
}

// applyEnv sets every flag not given on the command line from its
// environment variable, naming the variable when its value is bad.
func applyEnv(fs *flag.FlagSet, getenv func(string) string) error {
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		env := envName(f.Name)
		if env == "" || isSet(fs, f.Name) {
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

// shortDuration writes d as a person would: 2m, 1h, 1m20s, 20ms; not
// time.Duration's 2m0s and 1h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
