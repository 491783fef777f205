package server

import (
	"github.com/labstack/echo/v4"

	"github.com/kubeindex/kubeindex/kubespec"
)

// The Kubernetes API's OpenAPI v2 and v3 (kubespec): the API server's
// documents trimmed to what /k8s serves, with the writes declared as
// refused; documents without schemas when the API server's cannot be read.

// kubeSpecServed is what /k8s serves, as kubespec reads the API server's
// paths: the cached resources with the subresources read, and the reviews.
func (s *Server) kubeSpecServed() []kubespec.Served {
	var out []kubespec.Served
	for _, r := range s.kubeServed() {
		ks := kubespec.Served{Group: r.Group, Version: r.Version, Plural: r.Plural, Kind: r.Kind,
			Namespaced: r.Namespaced, Create: isKubeReview(r.Group, r.Plural)}
		for _, sub := range r.Subresources {
			if servedSubresource(r, sub) {
				ks.Subresources = append(ks.Subresources, sub)
			}
		}
		out = append(out, ks)
	}
	return out
}

func (s *Server) kubeOpenAPIV2(c echo.Context) error {
	s.kubeSpecs.ServeV2(c.Response(), c.Request())
	return nil
}

func (s *Server) kubeOpenAPIV3(c echo.Context) error {
	s.kubeSpecs.ServeV3Index(c.Response(), c.Request())
	return nil
}

func (s *Server) kubeOpenAPIV3Core(c echo.Context) error {
	return s.kubeOpenAPIV3Doc(c, "api/v1")
}

func (s *Server) kubeOpenAPIV3Group(c echo.Context) error {
	return s.kubeOpenAPIV3Doc(c, "apis/"+c.Param("group")+"/"+c.Param("version"))
}

func (s *Server) kubeOpenAPIV3Doc(c echo.Context, gv string) error {
	if !s.kubeSpecs.Serves(gv) {
		return kubeNotFoundPath()
	}
	s.kubeSpecs.ServeV3(c.Response(), c.Request(), gv)
	return nil
}
