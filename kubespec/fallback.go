package kubespec

import (
	"net/http"

	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// When the API server's documents cannot be read (no permission, the
// --demo cluster, an API server down), /k8s serves documents of its own:
// per served resource, the get it serves and the patch it refuses, with
// the fieldValidation parameter, and no schemas. That is what kubectl
// reads before apply, create or edit: a server that takes fieldValidation
// validates by itself, so kubectl sends the write (and gets the read-only
// 405) instead of stopping with "failed to download openapi". kubectl
// explain has nothing to print from them.

const fallbackTitle = "Kubernetes (kubeindex, read-only; the API server's schemas could not be read)"

func gvkExtension(r Served) spec.Extensions {
	return spec.Extensions{"x-kubernetes-group-version-kind": map[string]any{"group": r.Group, "version": r.Version, "kind": r.Kind}}
}

// objectPath is where one object of r is read.
func objectPath(r Served) string {
	p := "/" + r.gvPath() + "/"
	if r.Namespaced {
		p += "namespaces/{namespace}/"
	}
	return p + r.Plural + "/{name}"
}

func fallbackV3(gv string, rs []Served) *spec3.OpenAPI {
	doc := &spec3.OpenAPI{Version: "3.0.0",
		Info:  &spec.Info{InfoProps: spec.InfoProps{Title: fallbackTitle, Version: gv}},
		Paths: &spec3.Paths{Paths: map[string]*spec3.Path{}}}
	fieldValidation := &spec3.Parameter{ParameterProps: spec3.ParameterProps{Name: "fieldValidation", In: "query",
		Description: "Accepted as the API server accepts it; every write is refused anyway.",
		Schema:      spec.StringProperty()}}
	for _, r := range rs {
		op := func(id, desc string, code int, params ...*spec3.Parameter) *spec3.Operation {
			return &spec3.Operation{VendorExtensible: spec.VendorExtensible{Extensions: gvkExtension(r)},
				OperationProps: spec3.OperationProps{OperationId: id + r.Kind, Description: desc, Parameters: params,
					Responses: &spec3.Responses{ResponsesProps: spec3.ResponsesProps{StatusCodeResponses: map[int]*spec3.Response{
						code: {ResponseProps: spec3.ResponseProps{Description: desc}}}}}}}
		}
		if r.Create {
			doc.Paths.Paths["/"+r.gvPath()+"/"+r.Plural] = &spec3.Path{PathProps: spec3.PathProps{
				Post: op("create", "answered as kubeindex decides for the caller; creates nothing", http.StatusCreated)}}
			continue
		}
		doc.Paths.Paths[objectPath(r)] = &spec3.Path{PathProps: spec3.PathProps{
			Get:   op("read", "the object, from kubeindex's cache", http.StatusOK),
			Patch: op("patch", refusal, http.StatusMethodNotAllowed, fieldValidation),
		}}
	}
	return doc
}

func fallbackV2(rs []Served) *spec.Swagger {
	doc := &spec.Swagger{SwaggerProps: spec.SwaggerProps{Swagger: "2.0",
		Info:  &spec.Info{InfoProps: spec.InfoProps{Title: fallbackTitle, Version: "unversioned"}},
		Paths: &spec.Paths{Paths: map[string]spec.PathItem{}}}}
	fieldValidation := spec.Parameter{SimpleSchema: spec.SimpleSchema{Type: "string"}, ParamProps: spec.ParamProps{
		Name: "fieldValidation", In: "query", Description: "Accepted as the API server accepts it; every write is refused anyway."}}
	for _, r := range rs {
		op := func(id, desc string, code int, params ...spec.Parameter) *spec.Operation {
			return &spec.Operation{VendorExtensible: spec.VendorExtensible{Extensions: gvkExtension(r)},
				OperationProps: spec.OperationProps{ID: id + r.Kind, Description: desc, Parameters: params,
					Responses: &spec.Responses{ResponsesProps: spec.ResponsesProps{StatusCodeResponses: map[int]spec.Response{
						code: {ResponseProps: spec.ResponseProps{Description: desc}}}}}}}
		}
		if r.Create {
			doc.Paths.Paths["/"+r.gvPath()+"/"+r.Plural] = spec.PathItem{PathItemProps: spec.PathItemProps{
				Post: op("create", "answered as kubeindex decides for the caller; creates nothing", http.StatusCreated)}}
			continue
		}
		doc.Paths.Paths[objectPath(r)] = spec.PathItem{PathItemProps: spec.PathItemProps{
			Get:   op("read", "the object, from kubeindex's cache", http.StatusOK),
			Patch: op("patch", refusal, http.StatusMethodNotAllowed, fieldValidation),
		}}
	}
	return doc
}
