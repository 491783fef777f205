package server

import (
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
)

// The route table is the one place that knows a route. Each entry declares
// its facts, and the edge (edge.go), authentication (auth.go), the limits
// (limits.go), the metrics (metrics.go) and the freshness headers
// (headers.go) read them from the entry the request matched, never from
// the path or the request's headers. Adding a route is one line in table.

// kind says how the edge treats a route's requests.
type kind uint8

const (
	// restKind answers from memory: the response has a write deadline and
	// its latency is sampled.
	restKind kind = iota
	// streamKind is a WebSocket or an event stream for its whole life: no
	// deadline, counted against the client's streams, its duration is not
	// a latency, and its token may travel outside the Authorization header
	// (browsers cannot set one on a WebSocket or an EventSource).
	streamKind
	// watchableKind is REST, or a stream when the query asks to watch.
	watchableKind
	// staticKind serves a file that holds no cluster data.
	staticKind
	// probeKind is a health probe.
	probeKind
)

// authz says who may call a route.
type authz uint8

const (
	// public routes answer without credentials: health probes (a kubelet
	// sends no token), the API description and the dashboard's files,
	// which hold no cluster data (the dashboard asks for a token before it
	// reads any).
	public authz = iota
	// byHandler routes need an authenticated caller; the handler asks the
	// authorizer about the resource, verb, namespace and name it serves.
	byHandler
	// nonResourceURL routes need get on the route's path as a non-resource
	// URL, as the API server's own /metrics does.
	nonResourceURL
	// authenticated routes need an authenticated caller and nothing more:
	// the Kubernetes API's discovery, as on the API server.
	authenticated
)

// freshness says who sets an answer's freshness headers.
type freshness uint8

const (
	// cacheFreshness: the edge gives the answer the whole cache's.
	cacheFreshness freshness = iota
	// resourceFreshness: the handler sets the freshness of the resource it
	// answers about on every answer it writes; errors raised before it
	// found its resource get the whole cache's from the error translation.
	resourceFreshness
)

// route is one entry of the route table.
type route struct {
	method, path string
	summary      string // the OpenAPI test holds the spec to these
	kind         kind
	authz        authz
	freshness    freshness
	// maxBody bounds the request body the handler reads; 0: the route
	// takes none, and a request with one is refused before the handler.
	maxBody int64
	handler echo.HandlerFunc
	// refusal routes exist to refuse their method (the Kubernetes API's
	// writes: 405): they are not counted in the path's Allow header.
	refusal bool

	metrics *routeMetrics // set at registration
}

// kubePrefix is where the Kubernetes read API is served: a kubeconfig's
// server is http://host:port/k8s.
const kubePrefix = "/k8s"

// table lists every route. Read it as a table: method, path, facts, summary.
func (s *Server) table() []*route {
	table := []*route{
		probe("/healthz", "Liveness: the process serves HTTP.", s.healthz),
		probe("/readyz", "Readiness: every informer has synced; per-resource detail.", s.readyz),
		{method: http.MethodGet, path: "/metrics", kind: restKind, authz: nonResourceURL,
			summary: "Prometheus metrics.", handler: echo.WrapHandler(s.metrics.handler())},
		static("/openapi.json", "This API's OpenAPI 3.0 document.", s.openAPI),
		static("/", "The web dashboard.", s.dashboardPage),
		static("/ui/:file", "A file of the web dashboard: script, style sheet or icon.", s.dashboardFile),
		{method: http.MethodGet, path: "/api/v1/clusters", kind: restKind, authz: authenticated, freshness: resourceFreshness,
			summary: "The clusters served, each with its state: synced, syncing, stale or failed, and why.", handler: s.clusterStates},
		{method: http.MethodGet, path: "/api/v1/clusters/ip/:ip", kind: restKind, authz: authenticated, freshness: resourceFreshness,
			summary: "Who has this IP in each cluster (or those ?cluster= names): every cluster's own answer, authorized there, and where it is held.", handler: s.clusterIP},
		{method: http.MethodPost, path: `/api/v1/clusters/ip\:lookup`, kind: restKind, authz: authenticated, freshness: resourceFreshness, maxBody: maxBatchBody,
			summary: "Many IP lookups across clusters in one request (read-only): each query of its cluster or of every cluster, answered there.", handler: s.clusterIPBatch},
		rest("/api/v1/resources", cacheFreshness, "Configured resources with counts, indexes and freshness.", s.listResources),
		rest("/api/v1/resources/:resource", resourceFreshness, "One configured resource.", s.getResource),
		rest("/api/v1/resources/:resource/counts", resourceFreshness, "Count the objects a list would select and filter, grouped by up to two keys.", s.counts),
		rest("/api/v1/resources/:resource/indexes/:index", resourceFreshness, "Values of an index with object counts.", s.indexValues),
		rest("/api/v1/ip/:ip", resourceFreshness, "Who has (or had) this IP: pods, Services, nodes; now or at a moment; a port picks among hostNetwork pods.", s.lookupIP),
		{method: http.MethodPost, path: `/api/v1/ip\:lookup`, kind: restKind, authz: byHandler, freshness: cacheFreshness, maxBody: maxBatchBody,
			summary: "Many IP lookups in one request (read-only): answers in order, JSON or NDJSON.", handler: s.lookupIPBatch},
		{method: http.MethodGet, path: `/api/v1/ip\:watch`, kind: streamKind, authz: byHandler, freshness: cacheFreshness,
			summary: "Who holds each address: a snapshot, SYNCED, then every change of an address's owners, resumable; WebSocket or SSE.", handler: s.watchAddresses},
		rest("/api/v1/search", cacheFreshness, "Search every resource by name fragment, label value or IP, ranked and paged.", s.search),
		{method: http.MethodGet, path: "/api/v1/stream", kind: streamKind, authz: byHandler,
			summary: "One WebSocket multiplexing subscriptions to several resources.", handler: s.stream},
		{method: http.MethodGet, path: "/api/v1/:resource", kind: watchableKind, authz: byHandler, freshness: resourceFreshness,
			summary: "List objects; select by namespace, labelSelector or index value; filter, sort, offset and project by any key.", handler: s.list},
		rest("/api/v1/:resource/:name", resourceFreshness, "Get a cluster-scoped object.", s.getClusterScoped),
		rest("/api/v1/:resource/:namespace/:name", resourceFreshness, "Get a namespaced object.", s.getNamespaced),
	}
	// The Kubernetes read API (docs/kubernetes-api.md): a kubeconfig's
	// server is http://host:port/k8s, so that no path means two things.
	reads := []*route{
		s.kubeRead("/k8s/api/v1/:resource", "Kubernetes API: list or watch a core resource in all namespaces."),
		s.kubeRead("/k8s/api/v1/:resource/:name", "Kubernetes API: get a cluster-scoped core object."),
		{method: http.MethodGet, path: "/k8s/api/v1/namespaces/:namespace", kind: restKind, authz: byHandler,
			freshness: resourceFreshness, summary: "Kubernetes API: get a Namespace.", handler: s.kubeHandler(s.kubeNamespace)},
		s.kubeRead("/k8s/api/v1/namespaces/:namespace/:resource", "Kubernetes API: list or watch a core resource in a namespace."),
		s.kubeRead("/k8s/api/v1/namespaces/:namespace/:resource/:name", "Kubernetes API: get a namespaced core object."),
		s.kubeRead("/k8s/apis/:group/:version/:resource", "Kubernetes API: list or watch a resource in all namespaces."),
		s.kubeRead("/k8s/apis/:group/:version/:resource/:name", "Kubernetes API: get a cluster-scoped object."),
		s.kubeRead("/k8s/apis/:group/:version/namespaces/:namespace/:resource", "Kubernetes API: list or watch a resource in a namespace."),
		s.kubeRead("/k8s/apis/:group/:version/namespaces/:namespace/:resource/:name", "Kubernetes API: get a namespaced object."),
		s.kubeRead("/k8s/api/v1/:resource/:name/:subresource", "Kubernetes API: a subresource of a cluster-scoped core object."),
		s.kubeRead("/k8s/api/v1/namespaces/:namespace/:resource/:name/:subresource", "Kubernetes API: a subresource of a namespaced core object."),
		s.kubeRead("/k8s/apis/:group/:version/:resource/:name/:subresource", "Kubernetes API: a subresource of a cluster-scoped object."),
		s.kubeRead("/k8s/apis/:group/:version/namespaces/:namespace/:resource/:name/:subresource", "Kubernetes API: a subresource of a namespaced object."),
	}
	table = append(table,
		s.kubeDiscovery("/k8s/version", "Kubernetes API: the upstream API server's version.", s.kubeVersion),
		s.kubeDiscovery("/k8s/api", "Kubernetes API: the core group's versions, or aggregated discovery.", s.kubeAPI),
		s.kubeDiscovery("/k8s/api/v1", "Kubernetes API: the cached core resources.", s.kubeCoreResources),
		s.kubeDiscovery("/k8s/apis", "Kubernetes API: the groups of the cached resources, or aggregated discovery.", s.kubeAPIs),
		s.kubeDiscovery("/k8s/apis/:group", "Kubernetes API: one group.", s.kubeGroup),
		s.kubeDiscovery("/k8s/apis/:group/:version", "Kubernetes API: the cached resources of a group version.", s.kubeGroupVersion),
		s.kubeDiscovery("/k8s/openapi/v2", "Kubernetes API: the OpenAPI v2 document.", s.kubeOpenAPIV2),
		s.kubeDiscovery("/k8s/openapi/v3", "Kubernetes API: the OpenAPI v3 group versions.", s.kubeOpenAPIV3),
		s.kubeDiscovery("/k8s/openapi/v3/api/v1", "Kubernetes API: the core group's OpenAPI v3 document.", s.kubeOpenAPIV3Core),
		s.kubeDiscovery("/k8s/openapi/v3/apis/:group/:version", "Kubernetes API: a group version's OpenAPI v3 document.", s.kubeOpenAPIV3Group))
	table = append(table, s.kubeReviewRoutes()...)
	table = append(table, reads...)
	table = append(table, s.kubeWrites(reads)...)
	if s.fleetFront() {
		// A fleet's front answers a list and counts across its clusters.
		across := map[string]echo.HandlerFunc{"/api/v1/:resource": s.fleetListOrWatch, "/api/v1/resources/:resource/counts": s.fleetCounts,
			"/api/v1/stream": s.stream, `/api/v1/ip\:watch`: s.fleetWatchAddresses}
		return slices.DeleteFunc(table, func(rt *route) bool {
			if h, ok := across[rt.path]; ok {
				rt.handler = h
				return false
			}
			return !fleetRoutes[rt.path]
		})
	}
	return table
}

// fleetRoutes are the routes a fleet's front serves itself: every other is
// a cluster's, under /clusters/{name}/.
var fleetRoutes = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true, "/openapi.json": true,
	"/": true, "/ui/:file": true, "/api/v1/clusters": true, "/api/v1/clusters/ip/:ip": true,
	`/api/v1/clusters/ip\:lookup`: true}

// kubeRead is a read path of the Kubernetes API: get, list, or a watch
// when the query asks; the handler authorizes the verb on the resource.
func (s *Server) kubeRead(path, summary string) *route {
	return &route{method: http.MethodGet, path: path, kind: watchableKind, authz: byHandler, freshness: resourceFreshness,
		summary: summary, handler: s.kubeHandler(s.kubeResourcePath)}
}

// kubeDiscovery is a discovery path of the Kubernetes API: any
// authenticated caller may read it, as on the API server.
func (s *Server) kubeDiscovery(path, summary string, h echo.HandlerFunc) *route {
	return &route{method: http.MethodGet, path: path, kind: restKind, authz: authenticated, summary: summary, handler: s.kubeHandler(h)}
}

// kubeWrites refuses every write on the Kubernetes API's paths with the
// API server's 405: kubectl apply, edit and delete get a Status that says
// why. The body (an object, a patch) is allowed in, never read.
func (s *Server) kubeWrites(reads []*route) []*route {
	var out []*route
	for _, rd := range reads {
		for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			out = append(out, &route{method: m, path: rd.path, kind: restKind, authz: authenticated, maxBody: kubeMaxWriteBody, refusal: true,
				summary: "Kubernetes API: refused, kubeindex is read-only (405).", handler: s.kubeHandler(s.kubeWrite)})
		}
	}
	return out
}

// rest is a GET that answers JSON from the cache to an authorized caller.
func rest(path string, f freshness, summary string, h echo.HandlerFunc) *route {
	return &route{method: http.MethodGet, path: path, kind: restKind, authz: byHandler, freshness: f, summary: summary, handler: h}
}

func probe(path, summary string, h echo.HandlerFunc) *route {
	return &route{method: http.MethodGet, path: path, kind: probeKind, authz: public, summary: summary, handler: h}
}

func static(path, summary string, h echo.HandlerFunc) *route {
	return &route{method: http.MethodGet, path: path, kind: staticKind, authz: public, summary: summary, handler: h}
}

// routeKey finds a request's route: echo's matched path and the method.
type routeKey struct{ method, path string }

// routes registers the table with echo and keeps each entry for the edge.
// Every other method on a table path is registered too, answering 405
// (OPTIONS: 204) with the path's Allow header: otherwise echo's router,
// finding a path without the method, backtracks to a less specific path
// that has it, and GET /api/v1/ip:lookup would be a list of a resource
// named "ip:lookup" (404) instead of the 405 it is.
func (s *Server) routes() {
	s.routeInfo, s.allow = map[routeKey]*route{}, map[string]string{}
	var paths []string
	served := map[string][]string{}
	for _, rt := range s.table() {
		rt.metrics = s.metrics.forRoute(rt.path)
		s.echo.Add(rt.method, rt.path, rt.handler)
		s.routeInfo[routeKey{rt.method, rt.path}] = rt
		if served[rt.path] == nil {
			paths = append(paths, rt.path)
		}
		served[rt.path] = append(served[rt.path], rt.method)
		if !rt.refusal {
			s.allow[rt.path] += rt.method + ", "
		}
	}
	for _, p := range paths {
		s.allow[p] += http.MethodOptions
		for _, m := range routerMethods {
			switch {
			case slices.Contains(served[p], m):
			case m == http.MethodOptions:
				s.echo.Add(m, p, s.options)
			default:
				s.echo.Add(m, p, wrongMethod)
			}
		}
	}
}

// routerMethods are the methods echo's router keeps apart; it answers any
// other (an invented one) with its own 405 on the most specific path,
// which handleError gives the same Allow header.
var routerMethods = []string{http.MethodConnect, http.MethodDelete, http.MethodGet, http.MethodHead,
	http.MethodOptions, http.MethodPatch, http.MethodPost, echo.PROPFIND, http.MethodPut, http.MethodTrace, echo.REPORT}

// wrongMethod answers a method the path does not serve.
func wrongMethod(echo.Context) error { return echo.ErrMethodNotAllowed }

// options answers OPTIONS with the methods the path serves, as echo does.
func (s *Server) options(c echo.Context) error {
	s.setAllow(c)
	return c.NoContent(http.StatusNoContent)
}

// setAllow sets the Allow header of an answer on a table path: the methods
// the path serves (refusals left out) and OPTIONS.
func (s *Server) setAllow(c echo.Context) {
	if allow := s.allow[c.Path()]; allow != "" {
		c.Response().Header().Set(echo.HeaderAllow, allow)
	}
}

// unmatched is the entry of requests that match no route (echo answers
// 404 or 405): they are authenticated like any data route, so that an
// unauthenticated caller learns nothing about which paths exist.
var unmatched = route{kind: restKind, authz: byHandler}

// routeOf returns the entry of the route c matched.
func (s *Server) routeOf(c echo.Context) *route {
	if rt := s.routeInfo[routeKey{c.Request().Method, c.Path()}]; rt != nil {
		return rt
	}
	return &unmatched
}

// isStream tells whether this request is served as a stream.
func (rt *route) isStream(r *http.Request) bool {
	switch rt.kind {
	case streamKind:
		return true
	case watchableKind:
		return watchRequested(r.URL.RawQuery)
	}
	return false
}

// watchRequested reports whether a query asks to watch: a watch parameter
// whose value is not false, as the API server reads it (a bare "watch", "1"
// and "true" watch; "0" and "false" do not).
func watchRequested(rawQuery string) bool {
	if !strings.Contains(rawQuery, "watch") {
		return false // the common case, without parsing
	}
	for part := range strings.SplitSeq(rawQuery, "&") {
		key, value, _ := strings.Cut(part, "=")
		if key != "watch" {
			continue
		}
		switch strings.ToLower(value) {
		case "0", "false":
			return false
		}
		return true
	}
	return false
}
