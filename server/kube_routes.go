package server

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// KubePrefix is where the Kubernetes read API is served: a kubeconfig's
// server is http://host:port/k8s. kubeindex's own API owns /api/v1 with
// other meanings, so no path means two things.
const KubePrefix = "/k8s"

// kubeRoute is one route of the Kubernetes API.
type kubeRoute struct {
	path, summary string
	handler       echo.HandlerFunc
	// discovery: any authenticated caller may read it; otherwise the
	// handler authorizes per resource, verb, namespace and name.
	discovery bool
}

func (s *Server) kubeRoutes() []kubeRoute {
	const p = KubePrefix
	read := func(path, summary string) kubeRoute {
		return kubeRoute{path: path, summary: summary, handler: s.kubeHandler(s.kubeResourcePath)}
	}
	disc := func(path, summary string, h echo.HandlerFunc) kubeRoute {
		return kubeRoute{path: path, summary: summary, handler: s.kubeHandler(h), discovery: true}
	}
	return []kubeRoute{
		disc(p+"/version", "Kubernetes API: the upstream API server's version.", s.kubeVersion),
		disc(p+"/api", "Kubernetes API: core versions, or aggregated discovery.", s.kubeAPI),
		disc(p+"/api/v1", "Kubernetes API: the cached core resources.", s.kubeCoreResources),
		disc(p+"/apis", "Kubernetes API: groups of the cached resources, or aggregated discovery.", s.kubeAPIs),
		disc(p+"/apis/:group", "Kubernetes API: one group.", s.kubeGroup),
		disc(p+"/apis/:group/:version", "Kubernetes API: the cached resources of a group version.", s.kubeGroupVersion),
		read(p+"/api/v1/:resource", "Kubernetes API: list or watch a core resource, all namespaces."),
		read(p+"/api/v1/:resource/:name", "Kubernetes API: get a cluster-scoped core object."),
		{path: p + "/api/v1/namespaces/:namespace", summary: "Kubernetes API: get a Namespace.",
			handler: s.kubeHandler(s.kubeNamespace)},
		read(p+"/api/v1/namespaces/:namespace/:resource", "Kubernetes API: list or watch a core resource in a namespace."),
		read(p+"/api/v1/namespaces/:namespace/:resource/:name", "Kubernetes API: get a namespaced core object."),
		read(p+"/apis/:group/:version/:resource", "Kubernetes API: list or watch a resource, all namespaces."),
		read(p+"/apis/:group/:version/:resource/:name", "Kubernetes API: get a cluster-scoped object."),
		read(p+"/apis/:group/:version/namespaces/:namespace/:resource", "Kubernetes API: list or watch a resource in a namespace."),
		read(p+"/apis/:group/:version/namespaces/:namespace/:resource/:name", "Kubernetes API: get a namespaced object."),
	}
}

// kubeOther answers every other request under the prefix: a write with
// 405 (kubeindex is read-only), anything else with the API server's 404.
func (s *Server) kubeOther(c echo.Context) error {
	switch c.Request().Method {
	case http.MethodGet, http.MethodHead:
		return kubeNotFoundPath()
	}
	return kubeReadOnly(c.Request().Method)
}

// registerKube adds the Kubernetes API's routes to echo.
func (s *Server) registerKube() {
	for _, rt := range s.kubeRoutes() {
		s.echo.GET(rt.path, rt.handler)
	}
	s.echo.Any(KubePrefix+"/*", s.kubeHandler(s.kubeOther))
}
