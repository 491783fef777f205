package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// TestKubeAuthorization: the Kubernetes API reads as the API server
// authorizes: per verb, resource, namespace and name, a list across
// namespaces only with the permission cluster-wide; discovery for any
// authenticated caller; refusals worded as the API server's.
func TestKubeAuthorization(t *testing.T) {
	e := startAuth(t, Options{})
	teamA := cachetest.State(t, e.ss.f.Cache, "pods", cache.ListQuery{Namespace: "team-a"})
	tests := []struct {
		name, token, path string
		// expect
		code    int
		message string // a substring of the Status's
		items   int    // for a 200 list
	}{
		{"no token", "", "/k8s/api/v1/pods", 401, "", 0},
		{"no token, discovery", "", "/k8s/api", 401, "", 0},
		{"discovery for anyone authenticated", "nobody-token", "/k8s/apis", 200, "", 0},
		{"version for anyone authenticated", "nobody-token", "/k8s/version", 200, "", 0},
		{"alice lists pods in team-a", "alice-token", "/k8s/api/v1/namespaces/team-a/pods", 200, "", len(teamA)},
		{"alice lists pods in team-b", "alice-token", "/k8s/api/v1/namespaces/team-b/pods", 403,
			`pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "team-b"`, 0},
		{"alice lists pods cluster-wide: refused, as by the API server", "alice-token", "/k8s/api/v1/pods", 403,
			`pods is forbidden: User "alice" cannot list resource "pods" in API group "" at the cluster scope`, 0},
		{"alice gets a pod in team-a", "alice-token", "/k8s/api/v1/namespaces/team-a/pods/a-0", 200, "", 0},
		{"alice gets a pod in team-b", "alice-token", "/k8s/api/v1/namespaces/team-b/pods/b-0", 403,
			`pods "b-0" is forbidden: User "alice" cannot get resource "pods" in API group "" in the namespace "team-b"`, 0},
		{"alice watches team-b", "alice-token", "/k8s/api/v1/namespaces/team-b/pods?watch=1", 403,
			`cannot watch resource "pods"`, 0},
		{"alice lists deployments", "alice-token", "/k8s/apis/apps/v1/deployments", 403,
			`deployments.apps is forbidden: User "alice" cannot list resource "deployments" in API group "apps" at the cluster scope`, 0},
		{"the admin lists pods cluster-wide", "admin-token", "/k8s/api/v1/pods?labelSelector=app%3Dteam", 200, "", 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := e.get(t, tt.path, tt.token)
			if resp.StatusCode != tt.code {
				t.Fatalf("%d, want %d: %s", resp.StatusCode, tt.code, body)
			}
			b := gjson.ParseBytes(body)
			if tt.code >= 400 {
				if tt.code == http.StatusForbidden {
					wantStatus(t, b, tt.code)
					want(t, b.Get("reason").Str == "Forbidden", "reason Forbidden")
				}
				if !strings.Contains(b.Get("message").Str, tt.message) {
					t.Errorf("message %q, want %q", b.Get("message").Str, tt.message)
				}
				return
			}
			if tt.items > 0 && len(b.Get("items").Array()) != tt.items {
				t.Errorf("%d items, want %d", len(b.Get("items").Array()), tt.items)
			}
		})
	}
}
