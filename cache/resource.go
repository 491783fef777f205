package cache

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/kubeindex/kubeindex/indexers"
	"github.com/kubeindex/kubeindex/ipowner"
)

// Resource is a resolved API resource: what discovery says about a name the
// user configured. It is immutable after resolution.
type Resource struct {
	// Name is how the resource is addressed in URLs: the plural, or
	// plural.group when two configured resources share a plural.
	Name       string   `json:"name"`
	Group      string   `json:"group"`
	Version    string   `json:"version"`
	Plural     string   `json:"plural"`
	Singular   string   `json:"singular,omitempty"`
	Kind       string   `json:"kind"`
	ShortNames []string `json:"shortNames,omitempty"`
	// Categories are the groupings discovery put the resource in ("all").
	Categories []string `json:"categories,omitempty"`
	Namespaced bool     `json:"namespaced"`
	// Subresources are the subresources discovery lists for it ("status",
	// "scale", "log"), in discovery's order. The Kubernetes API under /k8s
	// reads them; kubeindex's own API does not show them.
	Subresources []string `json:"-"`
}

// APIVersion is the apiVersion field of the resource's objects.
func (r *Resource) APIVersion() string {
	if r.Group == "" {
		return r.Version
	}
	return r.Group + "/" + r.Version
}

// GroupResource returns "plural" for the core group, else "plural.group".
func (r *Resource) GroupResource() string {
	if r.Group == "" {
		return r.Plural
	}
	return r.Plural + "." + r.Group
}

// Spec is the configuration of one cached resource.
type Spec struct {
	// Resource names the resource as kubectl accepts it: "pods",
	// "deployments.apps", "apps/v1/deployments", a short name or a CRD plural.
	Resource string
	// Namespaces restricts the cache to these namespaces; empty means all.
	// Each namespace is watched by its own informer.
	Namespaces []string
	// LabelSelector and FieldSelector filter on the API server side.
	LabelSelector string
	FieldSelector string
	// Resync is the informer resync period; 0 disables resyncs.
	Resync time.Duration
	// Indexes are the lookups the resource answers besides namespace/name.
	Indexes []indexers.Spec
	// Redact lists fields removed at cache entry (ValidateRedactPath).
	Redact []string
	// AllowSecretData keeps data and stringData of Secrets; by default they
	// are removed at cache entry and never held in memory.
	AllowSecretData bool
}

// Options configures a Cache. The zero value is usable.
type Options struct {
	// StaleAfter is how long a watch may stay disconnected before responses
	// are marked stale. Default DefaultStaleAfter.
	StaleAfter time.Duration
	// ListTimeout bounds one list request. Default 60s.
	ListTimeout time.Duration
	// WatchIdleTimeout is how long a watch may deliver nothing, not even a
	// bookmark, before it is presumed hung: answers are marked stale and
	// the watch is replaced. Default DefaultWatchIdleTimeout.
	WatchIdleTimeout time.Duration
	// Compression asks the API server to gzip its responses. Off by default:
	// compressing a large list costs the API server more CPU and time than
	// sending it takes on a cluster network, and costs the cache again to
	// decompress (figures: BENCHMARKS.md, "Lists read uncompressed").
	Compression bool
	// HTTP2 speaks HTTP/2 to the API server. Off by default: Go's HTTP/2
	// client sends a flow-control update for every 4 KiB it reads, a large
	// share of the CPU of reading a large list (BENCHMARKS.md, "HTTP/1.1
	// to the API server"); over HTTP/1.1 each watch holds its own
	// connection instead.
	HTTP2 bool
	// HTTPClient is the client to read the API server with; nil: New
	// builds HTTPClient's. Given, it must be HTTPClient's for the same
	// rest.Config and options.
	HTTPClient *http.Client
	// Streams bounds the event history kept for resuming streams and sets
	// the bookmark interval, for every resource. The zero value takes
	// StreamOptions' defaults.
	Streams StreamOptions
	// Simulated marks every status as coming from the --demo cluster.
	Simulated bool
	// IPHistory bounds the history of who held which address.
	IPHistory ipowner.HistoryOptions
	// LazyColumns leaves each object's Table column values to the first
	// question that reads them. By default they are made in the
	// background once a resource has synced (warm.go), so that the first
	// question over a column, a dashboard's first sort, does not wait for
	// every row; lazily, a cache nobody asks about columns keeps none.
	LazyColumns bool
	// PodSortIndexes are pod sorts (each as the sort parameter takes it:
	// a column or a path) whose ordered indexes are built after the sync
	// and kept, with the namespace/name order's, so that a first question
	// of one, a dashboard's click on a column header, finds its index
	// ready (order_standing.go). A key descending reads its key's index.
	// None by default; LazyColumns builds none either.
	PodSortIndexes []string
	// Now is the clock; default time.Now. Tests replace it.
	Now func() time.Time
	// Logger says what the operator should know (a CRD that may not be
	// read). Default: nothing is logged.
	Logger *slog.Logger
}

// Options' defaults.
const (
	DefaultStaleAfter = 30 * time.Second
	// DefaultWatchIdleTimeout: the API server sends a bookmark on every
	// watch about once a minute (and 2s before a watch's timeout), so a
	// quiet cluster never stays silent this long, and a hang is reported
	// within it.
	DefaultWatchIdleTimeout = 80 * time.Second
)

func (o Options) withDefaults() Options {
	if o.StaleAfter <= 0 {
		o.StaleAfter = DefaultStaleAfter
	}
	if o.ListTimeout <= 0 {
		o.ListTimeout = 60 * time.Second
	}
	if o.WatchIdleTimeout <= 0 {
		o.WatchIdleTimeout = DefaultWatchIdleTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}
