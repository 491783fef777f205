package server

import (
	"errors"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi3"
	restclient "k8s.io/client-go/rest"
	"k8s.io/kube-openapi/pkg/spec3"
)

// kubectl apply first reads the OpenAPI v3 document of the object's group
// version through client-go's openapi3 root (as below) and looks for a
// patch operation of the kind that takes fieldValidation
// (k8s.io/cli-runtime's query param verifier): found, it leaves validation
// to the server and sends the write, which gets the read-only 405.
func TestKubeOpenAPIDeclaresServerSideFieldValidation(t *testing.T) {
	_, srv := startKube(t)
	dc := discovery.NewDiscoveryClientForConfigOrDie(&restclient.Config{Host: srv.URL + "/k8s"})
	root := openapi3.NewRoot(dc.OpenAPIV3())
	gvs, err := root.GroupVersions()
	if err != nil {
		t.Fatal(err)
	}
	for _, gv := range []schema.GroupVersion{{Version: "v1"}, {Group: "apps", Version: "v1"}} {
		if !slices.Contains(gvs, gv) {
			t.Errorf("the OpenAPI v3 discovery lists %v, not %v", gvs, gv)
		}
	}
	for _, gvk := range []schema.GroupVersionKind{{Version: "v1", Kind: "Pod"}, {Version: "v1", Kind: "Node"},
		{Group: "apps", Version: "v1", Kind: "Deployment"}} {
		doc, err := root.GVSpec(gvk.GroupVersion())
		if err != nil {
			t.Fatalf("%v: %v", gvk, err)
		}
		found := false
		for path, item := range doc.Paths.Paths {
			op := item.Patch
			if op == nil {
				continue
			}
			var got map[string]string
			if err := op.Extensions.GetObject("x-kubernetes-group-version-kind", &got); err != nil ||
				got["group"] != gvk.Group || got["version"] != gvk.Version || got["kind"] != gvk.Kind {
				continue
			}
			found = true
			if !slices.ContainsFunc(op.Parameters, func(p *spec3.Parameter) bool { return p.Name == "fieldValidation" && p.In == "query" }) {
				t.Errorf("%v: the patch of %s takes no fieldValidation: kubectl would validate client-side", gvk, path)
			}
		}
		if !found {
			t.Errorf("%v: no patch operation for the kind", gvk)
		}
	}
	if _, err := root.GVSpec(schema.GroupVersion{Group: "example.com", Version: "v1"}); !errors.As(err, new(*openapi3.GroupVersionNotFoundError)) {
		t.Errorf("an uncached group version: %v; expect GroupVersionNotFoundError", err)
	}
}
