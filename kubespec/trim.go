package kubespec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// The API server's documents, trimmed to what /k8s serves: the paths of
// the served resources (their reads as the API server declares them; its
// writes kept with their parameters, so that kubectl finds server-side
// field validation and sends the write, but answering only the read-only
// 405), and of the schemas only those the kept paths reach. Descriptions
// and schemas are the API server's own, so kubectl explain prints its
// text.

// refusal is what a refused write answers.
const refusal = "MethodNotAllowed: kubeindex is a read-only cache of the cluster; send writes to the Kubernetes API server itself"

const statusSchema = "io.k8s.apimachinery.pkg.apis.meta.v1.Status"

// trimV3 trims the API server's OpenAPI v3 document of one group version.
// It does not modify doc's paths or schemas it keeps; the result shares them.
func trimV3(doc *spec3.OpenAPI, served servedPaths) (*spec3.OpenAPI, error) {
	out := *doc
	out.Paths = &spec3.Paths{Paths: map[string]*spec3.Path{}, VendorExtensible: doc.Paths.VendorExtensible}
	var schemas map[string]*spec.Schema
	if doc.Components != nil {
		schemas = doc.Components.Schemas
	}
	refusedV3 := &spec3.Responses{ResponsesProps: spec3.ResponsesProps{StatusCodeResponses: map[int]*spec3.Response{
		http.StatusMethodNotAllowed: {ResponseProps: spec3.ResponseProps{Description: refusal}}}}}
	if _, ok := schemas[statusSchema]; ok {
		refusedV3.StatusCodeResponses[http.StatusMethodNotAllowed].Content = map[string]*spec3.MediaType{
			"application/json": {MediaTypeProps: spec3.MediaTypeProps{Schema: spec.RefSchema("#/components/schemas/" + statusSchema)}}}
	}
	refuse := func(op *spec3.Operation) *spec3.Operation {
		if op == nil {
			return nil
		}
		r := *op
		r.RequestBody, r.Responses = nil, refusedV3
		return &r
	}
	for p, item := range doc.Paths.Paths {
		r, ok := served.lookup(p)
		if !ok || item == nil {
			continue
		}
		kept := *item
		kept.Put, kept.Patch, kept.Delete = refuse(item.Put), refuse(item.Patch), refuse(item.Delete)
		if !r.Create {
			kept.Post = refuse(item.Post)
		}
		out.Paths.Paths[p] = &kept
	}
	if doc.Components != nil {
		comps := *doc.Components
		// Reusable parameters, responses and bodies stay; what they
		// reference stays with them.
		roots := []any{out.Paths, comps.Parameters, comps.Responses, comps.RequestBodies, comps.Headers}
		keep, err := reachable(roots, "#/components/schemas/", func(name string) (any, bool) {
			s, ok := schemas[name]
			return s, ok
		})
		if err != nil {
			return nil, err
		}
		comps.Schemas = map[string]*spec.Schema{}
		for _, name := range keep {
			comps.Schemas[name] = schemas[name]
		}
		out.Components = &comps
	}
	return &out, nil
}

// trimV2 trims the API server's OpenAPI v2 document (all group versions).
func trimV2(doc *spec.Swagger, served servedPaths) (*spec.Swagger, error) {
	out := *doc
	out.Paths = &spec.Paths{Paths: map[string]spec.PathItem{}}
	if doc.Paths != nil {
		out.Paths.VendorExtensible = doc.Paths.VendorExtensible
	}
	refused := &spec.Responses{ResponsesProps: spec.ResponsesProps{StatusCodeResponses: map[int]spec.Response{
		http.StatusMethodNotAllowed: {ResponseProps: spec.ResponseProps{Description: refusal}}}}}
	if _, ok := doc.Definitions[statusSchema]; ok {
		refused.StatusCodeResponses[http.StatusMethodNotAllowed] = spec.Response{ResponseProps: spec.ResponseProps{
			Description: refusal, Schema: spec.RefSchema("#/definitions/" + statusSchema)}}
	}
	refuse := func(op *spec.Operation) *spec.Operation {
		if op == nil {
			return nil
		}
		r := *op
		// The body parameter goes: a refused write takes nothing.
		r.Parameters = slices.DeleteFunc(slices.Clone(op.Parameters), func(p spec.Parameter) bool { return p.In == "body" })
		r.Responses = refused
		return &r
	}
	if doc.Paths != nil {
		for p, item := range doc.Paths.Paths {
			r, ok := served.lookup(p)
			if !ok {
				continue
			}
			item.Put, item.Patch, item.Delete = refuse(item.Put), refuse(item.Patch), refuse(item.Delete)
			if !r.Create {
				item.Post = refuse(item.Post)
			}
			out.Paths.Paths[p] = item
		}
	}
	// The global parameters stay (kubectl reads fieldValidation from them
	// too); what they reference stays with them.
	keep, err := reachable([]any{out.Paths, out.Parameters, out.Responses}, "#/definitions/", func(name string) (any, bool) {
		s, ok := doc.Definitions[name]
		return s, ok
	})
	if err != nil {
		return nil, err
	}
	out.Definitions = spec.Definitions{}
	for _, name := range keep {
		out.Definitions[name] = doc.Definitions[name]
	}
	return &out, nil
}

// reachable lists the schemas that roots reach through "$ref"s starting
// with prefix, directly or through other schemas, which get finds by name.
// A reference to a schema get does not know is an error: the document
// would not be whole.
func reachable(roots []any, prefix string, get func(string) (any, bool)) ([]string, error) {
	seen := map[string]bool{}
	var order []string
	queue := slices.Clone(roots)
	for len(queue) > 0 {
		b, err := json.Marshal(queue[0])
		queue = queue[1:]
		if err != nil {
			return nil, err
		}
		for _, name := range refs(b, prefix) {
			if seen[name] {
				continue
			}
			seen[name] = true
			s, ok := get(name)
			if !ok {
				return nil, fmt.Errorf("a $ref to %s%s, which the document does not define", prefix, name)
			}
			order = append(order, name)
			queue = append(queue, s)
		}
	}
	slices.Sort(order)
	return order, nil
}

// refs finds the names in "$ref":"<prefix><name>" in encoded JSON. Names of
// Kubernetes schemas need no escaping; one that would is read as written.
func refs(b []byte, prefix string) []string {
	needle := []byte(`"$ref":"` + prefix)
	var out []string
	for {
		i := bytes.Index(b, needle)
		if i < 0 {
			return out
		}
		b = b[i+len(needle):]
		end := bytes.IndexByte(b, '"')
		if end < 0 {
			return out
		}
		out = append(out, string(b[:end]))
		b = b[end:]
	}
}
