package server

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// Route is one entry of the route table. The OpenAPI test walks this table.
type Route struct {
	Method, Path string
	Summary      string
}

// routes is the one place routes are registered.
func (s *Server) routes() {
	s.routeInfo = map[string]*routeInfo{}
	for _, rt := range s.table() {
		s.echo.Add(rt.route.Method, rt.route.Path, rt.handler)
		s.routeInfo[rt.route.Path] = &routeInfo{freshness: rt.freshness, metrics: s.metrics.forRoute(rt.route.Path)}
	}
}

// Routes lists every registered route.
func (s *Server) Routes() []Route {
	var out []Route
	for _, rt := range s.table() {
		out = append(out, rt.route)
	}
	return out
}

type routeEntry struct {
	route   Route
	handler echo.HandlerFunc
	// freshness: the handler sets the freshness of the resource it answers
	// about on every answer (see routeInfo).
	freshness bool
}

func (s *Server) table() []routeEntry {
	get := func(path, summary string, h echo.HandlerFunc) routeEntry {
		return routeEntry{Route{http.MethodGet, path, summary}, h, false}
	}
	// about a resource: its handler sets the resource's freshness.
	about := func(path, summary string, h echo.HandlerFunc) routeEntry {
		return routeEntry{Route{http.MethodGet, path, summary}, h, true}
	}
	return []routeEntry{
		get("/healthz", "Liveness: the process serves HTTP.", s.healthz),
		get("/readyz", "Readiness: every informer has synced; per-resource detail.", s.readyz),
		get("/metrics", "Prometheus metrics.", echo.WrapHandler(s.metrics.handler())),
		get("/openapi.json", "This API's OpenAPI 3.0 document.", s.openAPI),
		get("/", "The web dashboard.", s.dashboardPage),
		get("/ui/:file", "A file of the web dashboard: script, style sheet or icon.", s.dashboardFile),
		get("/api/v1/resources", "Configured resources with counts, indexes and freshness.", s.listResources),
		about("/api/v1/resources/:resource", "One configured resource.", s.getResource),
		about("/api/v1/resources/:resource/indexes/:index", "Values of an index with object counts.", s.indexValues),
		about("/api/v1/ip/:ip", "Who has (or had) this IP: pods, Services, nodes; now or at a moment; a port picks among hostNetwork pods.", s.lookupIP),
		get("/api/v1/stream", "One WebSocket multiplexing subscriptions to several resources.", s.stream),
		about("/api/v1/:resource", "List objects; filter by namespace, labelSelector or index value.", s.list),
		about("/api/v1/:resource/:name", "Get a cluster-scoped object.", s.getClusterScoped),
		about("/api/v1/:resource/:namespace/:name", "Get a namespaced object.", s.getNamespaced),
	}
}
