package server

import (
	"github.com/labstack/echo/v4"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/kubeindex/kubeindex/cache"
)

// The Kubernetes API's OpenAPI v3: the discovery of the cached group
// versions, and for each a document that declares, per resource, the get
// kubeindex serves and the patch it refuses (405), with the
// fieldValidation parameter. That is what kubectl reads before apply,
// create or edit: a server that takes fieldValidation validates by itself,
// so kubectl sends the request (and gets the read-only 405) instead of
// stopping with "failed to download openapi". The documents hold no
// schemas: kubeindex serves objects as the API server stored them and
// takes none.

// kubeOpenAPIGVPath is a group version's key in the OpenAPI v3 discovery,
// and the tail of its document's path.
func kubeOpenAPIGVPath(group, version string) string {
	if group == "" {
		return "api/" + version
	}
	return "apis/" + group + "/" + version
}

func (s *Server) kubeOpenAPIV3(c echo.Context) error {
	d := handler3.OpenAPIV3Discovery{Paths: map[string]handler3.OpenAPIV3DiscoveryGroupVersion{}}
	for _, g := range kubeGroups(s.kubeServed()) {
		for _, v := range g.versions {
			if len(g.byVer[v]) == 0 {
				continue // the core group when no core resource is cached
			}
			p := kubeOpenAPIGVPath(g.name, v)
			d.Paths[p] = handler3.OpenAPIV3DiscoveryGroupVersion{ServerRelativeURL: "/openapi/v3/" + p}
		}
	}
	return writeKubeJSON(c, "application/json", d)
}

func (s *Server) kubeOpenAPIV3Core(c echo.Context) error {
	return s.kubeOpenAPIV3Doc(c, "", "v1")
}

func (s *Server) kubeOpenAPIV3Group(c echo.Context) error {
	return s.kubeOpenAPIV3Doc(c, c.Param("group"), c.Param("version"))
}

func (s *Server) kubeOpenAPIV3Doc(c echo.Context, group, version string) error {
	var rs []cache.Resource
	for _, g := range kubeGroups(s.kubeServed()) {
		if g.name == group {
			rs = g.byVer[version]
		}
	}
	if len(rs) == 0 {
		return kubeNotFoundPath()
	}
	doc := spec3.OpenAPI{Version: "3.0.0",
		Info:  &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes (kubeindex, read-only)", Version: version}},
		Paths: &spec3.Paths{Paths: map[string]*spec3.Path{}}}
	fieldValidation := &spec3.Parameter{ParameterProps: spec3.ParameterProps{Name: "fieldValidation", In: "query",
		Description: "Accepted as the API server accepts it; every write is refused anyway.",
		Schema:      spec.StringProperty()}}
	for _, r := range rs {
		gvk := spec.Extensions{"x-kubernetes-group-version-kind": map[string]string{"group": r.Group, "version": r.Version, "kind": r.Kind}}
		p := "/" + kubeOpenAPIGVPath(group, version) + "/"
		if r.Namespaced {
			p += "namespaces/{namespace}/"
		}
		p += r.Plural + "/{name}"
		op := func(id, desc string, code int, params ...*spec3.Parameter) *spec3.Operation {
			return &spec3.Operation{VendorExtensible: spec.VendorExtensible{Extensions: gvk},
				OperationProps: spec3.OperationProps{OperationId: id + r.Kind, Description: desc, Parameters: params,
					Responses: &spec3.Responses{ResponsesProps: spec3.ResponsesProps{StatusCodeResponses: map[int]*spec3.Response{
						code: {ResponseProps: spec3.ResponseProps{Description: desc}}}}}}}
		}
		if isKubeReview(r.Group, r.Plural) {
			doc.Paths.Paths["/"+kubeOpenAPIGVPath(group, version)+"/"+r.Plural] = &spec3.Path{PathProps: spec3.PathProps{
				Post: op("create", "answered as kubeindex decides for the caller; creates nothing", 201)}}
			continue
		}
		doc.Paths.Paths[p] = &spec3.Path{PathProps: spec3.PathProps{
			Get:   op("read", "the object, from kubeindex's cache", 200),
			Patch: op("patch", "refused: kubeindex is read-only (405 MethodNotAllowed)", 405, fieldValidation),
		}}
	}
	return writeKubeJSON(c, "application/json", doc)
}
