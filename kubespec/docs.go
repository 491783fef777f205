// Package kubespec serves the Kubernetes API's OpenAPI v2 and v3 for what
// kubeindex's /k8s serves: the API server's own documents, read when first
// asked for, read again when the API server's change, and trimmed to the
// served resources with their writes declared as refused. kubectl explain
// then prints the API server's text, and kubectl apply, create and edit
// find what they look for before they write (and get the read-only 405).
// The documents are served by kube-openapi's handlers, as the API server
// serves them: v2 and v3 as JSON or protobuf, v3 per group version with
// its hash (ETag, immutable caching, a redirect from a stale hash).
package kubespec

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// DefaultRecheck is Options.Recheck's default.
const DefaultRecheck = 30 * time.Second

// Options configures Docs.
type Options struct {
	// Prefix is where the API is served ("/k8s"): the redirect from a
	// stale hash names the path under it.
	Prefix string
	// Recheck is how long the API server's OpenAPI v3 discovery is taken
	// as current before a request reads it again (one small GET; a group
	// version's document is read again only when its hash changed: a CRD
	// updated, the API server upgraded). Default DefaultRecheck.
	Recheck time.Duration
	// Timeout bounds one read from the API server. Default 30s.
	Timeout time.Duration
	Logger  *slog.Logger
}

// Docs serves the trimmed documents. Its methods are safe to call
// concurrently; reads from the API server are made by one request at a
// time, others wait for what it reads.
type Docs struct {
	upstream rest.Interface // nil: none, the fallback documents only
	opts     Options
	served   servedPaths
	byGV     map[string][]Served
	now      func() time.Time

	v3  *handler3.OpenAPIService
	v2  *handler.OpenAPIService
	v2h http.Handler

	mu      sync.Mutex // held while reading from the API server
	checked time.Time  // when the v3 discovery was last read
	loaded  map[string]string
	v2From  string // the served group versions' hashes v2 was trimmed at
	warned  bool
}

// New returns the documents of the served resources, read from upstream
// (a client of the API server's root, as discovery's RESTClient). With a
// nil upstream it serves only the fallback documents.
func New(upstream rest.Interface, served []Served, opts Options) *Docs {
	if opts.Recheck <= 0 {
		opts.Recheck = DefaultRecheck
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	d := &Docs{upstream: upstream, opts: opts, served: newServedPaths(served), byGV: map[string][]Served{},
		now: time.Now, v3: handler3.NewOpenAPIService(), loaded: map[string]string{}}
	for _, r := range served {
		d.byGV[r.gvPath()] = append(d.byGV[r.gvPath()], r)
	}
	d.v2 = handler.NewOpenAPIService(fallbackV2(served))
	d.v2.RegisterOpenAPIVersionedService("/openapi/v2", handlerFunc(func(_ string, h http.Handler) { d.v2h = h }))
	for gv, rs := range d.byGV {
		d.v3.UpdateGroupVersion(gv, fallbackV3(gv, rs))
		d.loaded[gv] = ""
	}
	return d
}

type handlerFunc func(string, http.Handler)

func (f handlerFunc) Handle(path string, h http.Handler) { f(path, h) }

// Serves reports whether gv ("api/v1", "apis/apps/v1") has a document.
func (d *Docs) Serves(gv string) bool { return len(d.byGV[gv]) > 0 }

// ServeV3Index answers GET {prefix}/openapi/v3: the served group versions
// and their documents' hashes.
func (d *Docs) ServeV3Index(w http.ResponseWriter, r *http.Request) {
	d.refresh(r.Context(), false)
	d.v3.HandleDiscovery(w, r)
}

// ServeV3 answers GET {prefix}/openapi/v3/{gv}, gv as Serves takes it.
// The caller answers 404 for a group version Serves does not know.
func (d *Docs) ServeV3(w http.ResponseWriter, r *http.Request, gv string) {
	d.refresh(r.Context(), false)
	in := r.Clone(r.Context())
	in.URL.Path = "/openapi/v3/" + gv
	d.v3.HandleGroupVersion(prefixedRedirect{w, d.opts.Prefix}, in)
}

// ServeV2 answers GET {prefix}/openapi/v2.
func (d *Docs) ServeV2(w http.ResponseWriter, r *http.Request) {
	d.refresh(r.Context(), true)
	d.v2h.ServeHTTP(w, r)
}

// Recheck makes the next request read the API server's discovery again
// (a served CRD changed).
func (d *Docs) Recheck() {
	d.mu.Lock()
	d.checked = time.Time{}
	d.mu.Unlock()
}

// prefixedRedirect puts the prefix before the path of a redirect's
// Location: kube-openapi's handler names the path at the server's root.
type prefixedRedirect struct {
	http.ResponseWriter
	prefix string
}

func (w prefixedRedirect) WriteHeader(code int) {
	if loc := w.Header().Get("Location"); loc != "" && strings.HasPrefix(loc, "/") {
		w.Header().Set("Location", w.prefix+loc)
	}
	w.ResponseWriter.WriteHeader(code)
}

// refresh reads the API server's OpenAPI v3 discovery when it is older
// than Recheck, and each served group version's document whose hash
// changed; with v2, the v2 document too when any of them changed. What
// cannot be read keeps what was served before (the fallback at first),
// and is said once in the log.
func (d *Docs) refresh(ctx context.Context, v2 bool) {
	if d.upstream == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.opts.Timeout)
	defer cancel()
	if d.now().Sub(d.checked) >= d.opts.Recheck {
		// A failure is tried again after Recheck too: an API server that
		// does not answer must not hold up every request.
		d.checked = d.now()
		if err := d.readV3(ctx); err != nil {
			d.warn(err)
			return
		}
	}
	if !v2 {
		return
	}
	from := d.hashes()
	if from == d.v2From {
		return
	}
	if err := d.readV2(ctx); err != nil {
		d.warn(err)
		return
	}
	d.v2From = from
}

func (d *Docs) warn(err error) {
	if !d.warned {
		d.warned = true
		d.opts.Logger.Warn("cannot read the API server's OpenAPI: /k8s/openapi serves documents without schemas "+
			"(kubectl explain has nothing to show; writes are still refused with the read-only 405)", "err", err)
	}
}

// hashes names the documents loaded: the API server's hash of each.
func (d *Docs) hashes() string {
	var parts []string
	for gv, h := range d.loaded {
		parts = append(parts, gv+"="+h)
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

func (d *Docs) readV3(ctx context.Context) error {
	b, err := d.upstream.Get().AbsPath("/openapi/v3").Do(ctx).Raw()
	if err != nil {
		return fmt.Errorf("GET /openapi/v3: %w", err)
	}
	var index handler3.OpenAPIV3Discovery
	if err := json.Unmarshal(b, &index); err != nil {
		return fmt.Errorf("GET /openapi/v3: %w", err)
	}
	for gv := range d.byGV {
		entry, ok := index.Paths[gv]
		if !ok {
			continue // the API server has none: the fallback stays
		}
		u, err := url.Parse(entry.ServerRelativeURL)
		if err != nil {
			return fmt.Errorf("GET /openapi/v3: %s: %w", gv, err)
		}
		hash := u.Query().Get("hash")
		if hash != "" && hash == d.loaded[gv] {
			continue
		}
		req := d.upstream.Get().AbsPath(u.Path).SetHeader("Accept", "application/json")
		for k, vs := range u.Query() {
			for _, v := range vs {
				req.Param(k, v)
			}
		}
		b, err := req.Do(ctx).Raw()
		if err != nil {
			return fmt.Errorf("GET %s: %w", u.Path, err)
		}
		var doc spec3.OpenAPI
		if err := json.Unmarshal(b, &doc); err != nil {
			return fmt.Errorf("GET %s: %w", u.Path, err)
		}
		if doc.Paths == nil {
			return fmt.Errorf("GET %s: a document without paths", u.Path)
		}
		trimmed, err := trimV3(&doc, d.served)
		if err != nil {
			return fmt.Errorf("GET %s: %w", u.Path, err)
		}
		d.v3.UpdateGroupVersion(gv, trimmed)
		d.loaded[gv] = hash
	}
	return nil
}

func (d *Docs) readV2(ctx context.Context) error {
	b, err := d.upstream.Get().AbsPath("/openapi/v2").SetHeader("Accept", "application/json").Do(ctx).Raw()
	if err != nil {
		return fmt.Errorf("GET /openapi/v2: %w", err)
	}
	var doc spec.Swagger
	if err := json.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("GET /openapi/v2: %w", err)
	}
	trimmed, err := trimV2(&doc, d.served)
	if err != nil {
		return fmt.Errorf("GET /openapi/v2: %w", err)
	}
	return d.v2.UpdateSpec(trimmed)
}
