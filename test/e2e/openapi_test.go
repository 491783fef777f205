package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// TestResponsesMatchTheSpec validates what kubeindex answers about a real
// cluster against openapi/openapi.json: status, headers and body of each
// response, as the spec's operation for that request describes them.
func TestResponsesMatchTheSpec(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openapi3.NewLoader().LoadFromFile(filepath.Join(root, "openapi", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the spec is not valid OpenAPI: %v", err)
	}
	c := cluster.StartForTest(t)
	cs, dyn := c.Clients(t)
	seeded := cluster.SeedForTest(t, cs, dyn, cluster.SeedOptions{})
	k := startKubeindex(t, "--kubeconfig", c.Kubeconfig, "--config", writeFile(t, "config.yaml", customConfig))
	doc.Servers = openapi3.Servers{{URL: k.URL}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}

	pod, node, widget := seeded.Pods[0], seeded.Nodes[0], seeded.Widgets[0]
	targets := []string{
		"/healthz", "/readyz", "/metrics", "/openapi.json",
		"/api/v1/resources", "/api/v1/resources/pods", "/api/v1/resources/widgets",
		"/api/v1/resources/pods/indexes/ip", "/api/v1/resources/widgets/indexes/tag?limit=2",
		"/api/v1/pods?limit=3", "/api/v1/pods?namespace=" + pod.Namespace + "&labelSelector=app%3Dweb",
		"/api/v1/pods?index=node&value=" + node.Name,
		"/api/v1/widgets?namespace=" + widget.GetNamespace(),
		"/api/v1/pods/" + pod.Namespace + "/" + pod.Name,
		"/api/v1/nodes/" + node.Name,
		"/api/v1/widgets/" + widget.GetNamespace() + "/" + widget.GetName(),
		"/api/v1/ip/" + seeded.ReusedIP,
		"/api/v1/ip/198.51.100.254",
		"/api/v1/ip/not-an-ip",
		"/api/v1/pods/" + pod.Namespace + "/no-such-pod",
		"/api/v1/pods?labelSelector=app+in+(",
		"/api/v1/frobs",
	}
	for _, ip := range seeded.NodeIPs {
		targets = append(targets, "/api/v1/ip/"+ip)
	}
	for _, target := range targets {
		req, err := http.NewRequest(http.MethodGet, k.URL+target, nil)
		if err != nil {
			t.Fatal(err)
		}
		route, params, err := router.FindRoute(req)
		if err != nil {
			t.Errorf("GET %s: no operation in the spec: %v", target, err)
			continue
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		err = openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
			RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
			Status:                 res.StatusCode,
			Header:                 res.Header,
			Body:                   io.NopCloser(bytes.NewReader(body)),
			Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
		})
		if err != nil {
			t.Errorf("GET %s (%d) does not match the spec:\n%v", target, res.StatusCode, err)
		}
	}
}
