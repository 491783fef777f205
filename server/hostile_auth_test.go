package server

import (
	"net/http"
	"strings"
	"testing"
)

// hostileRestricted are the security probe's attempts of a restricted
// caller (alice: pods in team-a only) to read beyond her namespace, and of
// callers with no token or no permission. Each must keep its answer; none
// may show another namespace's object.
var hostileRestricted = []struct {
	name, token, path string
	code              int
}{
	{"another namespace's list", "alice-token", "/api/v1/pods?namespace=team-b", 403},
	{"another namespace's pod", "alice-token", "/api/v1/pods/team-b/b-0", 403},
	{"an encoded slash into another namespace", "alice-token", "/api/v1/pods/team-a%2F..%2Fteam-b/b-0", 403},
	{"../ into another namespace", "alice-token", "/api/v1/pods/team-a/../team-b/b-0", 404},
	{"upper case", "alice-token", "/api/v1/PODS/team-b/b-0", 403},
	{"an alias", "alice-token", "/api/v1/po/team-b/b-0", 403},
	{"a resource she may not read", "alice-token", "/api/v1/services", 403},
	{"index values (cluster-wide figures)", "alice-token", "/api/v1/resources/pods/indexes/node", 403},
	{"/metrics", "alice-token", "/metrics", 403},
	{"a /k8s list of another namespace", "alice-token", "/k8s/api/v1/namespaces/team-b/pods", 403},
	{"a /k8s get in another namespace", "alice-token", "/k8s/api/v1/namespaces/team-b/pods/b-0", 403},
	{"a /k8s list of services", "alice-token", "/k8s/api/v1/services", 403},
	{"a /k8s Table of another namespace", "alice-token", "/k8s/api/v1/namespaces/team-b/pods?includeObject=Object", 403},
	{"the address stream with no permission", "nobody-token", "/api/v1/ip:watch", 403},
	{"an IP lookup with no permission", "nobody-token", "/api/v1/ip/10.77.0.2", 403},
	{"another namespace's pod IP", "alice-token", "/api/v1/ip/10.77.0.2", 404},
	{"another namespace's pod IP, long ago", "alice-token", "/api/v1/ip/10.77.0.2?at=1767323045", 410},
	{"a free IP, long ago", "alice-token", "/api/v1/ip/10.77.200.200?at=1767323045", 410},
	{"another namespace's pod IP and port", "alice-token", "/api/v1/ip/10.77.0.2?port=80", 404},
	{"a free IP", "alice-token", "/api/v1/ip/10.77.200.200", 404},
	{"no token", "", "/api/v1/pods", 401},
	{"a bad token", "forged-token", "/api/v1/pods", 401},
	{"no token, /metrics", "", "/metrics", 401},
}

// TestHostileRestrictedRequests: each attempt gets its answer, and no
// answer names an object of team-b.
func TestHostileRestrictedRequests(t *testing.T) {
	e := startAuth(t, Options{})
	for _, tt := range hostileRestricted {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := e.get(t, tt.path, tt.token)
			if resp.StatusCode != tt.code {
				t.Errorf("%s: %d %.200s; expect %d", tt.path, resp.StatusCode, body, tt.code)
			}
			if strings.Contains(string(body), `"namespace":"team-b"`) || strings.Contains(string(body), "b-shared") {
				t.Errorf("%s: the answer holds team-b's pod: %.300s", tt.path, body)
			}
			if resp.StatusCode == http.StatusUnauthorized && resp.Header.Get("X-Kubeindex-Last-Event") != "" {
				t.Errorf("%s: a 401 carries the cache's last event", tt.path)
			}
		})
	}
}
