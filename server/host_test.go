package server

import (
	"net/http"
	"strings"
	"testing"
)

func TestHostsServedWithoutAuthentication(t *testing.T) {
	for _, tc := range []struct {
		host string
		opts HostOptions
		want bool
	}{
		{"127.0.0.1:8080", HostOptions{}, true},
		{"127.0.0.1", HostOptions{}, true},
		{"[::1]:8080", HostOptions{}, true},
		{"localhost:8080", HostOptions{}, true},
		{"LOCALHOST.", HostOptions{}, true},
		{"attacker.example:8080", HostOptions{}, false},
		{"localhost.attacker.example", HostOptions{}, false},
		{"10.1.2.3:8080", HostOptions{}, false},
		{"10.1.2.3:8080", HostOptions{AcceptIPs: true}, true},
		{"[fd00::1]:8080", HostOptions{AcceptIPs: true}, true},
		{"attacker.example", HostOptions{AcceptIPs: true}, false},
		{"kubeindex.kube-system.svc:8080", HostOptions{AcceptHosts: []string{"kubeindex.kube-system.svc"}}, true},
		{"KubeIndex.Kube-System.svc", HostOptions{AcceptHosts: []string{"kubeindex.kube-system.svc"}}, true},
		{"other.example", HostOptions{AcceptHosts: []string{"kubeindex.kube-system.svc"}}, false},
		{"anything.example", HostOptions{AcceptHosts: []string{"*"}}, true},
		{"", HostOptions{}, false},
	} {
		if got := tc.opts.accepts(tc.host); got != tc.want {
			t.Errorf("given %+v, Host %q: accepted=%v; expect %v", tc.opts, tc.host, got, tc.want)
		}
	}
}

// TestRefusedHostLearnsNothing: with authentication off, the 403 for a
// Host that is not served carries none of the cache's freshness (its
// last event, whether it synced, its watches): a rebinding page learns
// nothing of the cluster, not even how busy it is.
func TestRefusedHostLearnsNothing(t *testing.T) {
	ss := startStreams(t, Options{})
	for _, path := range []string{"/api/v1/pods", "/healthz", "/api/v1/resources", "/nowhere", "/k8s/api/v1/pods"} {
		req, _ := http.NewRequest(http.MethodGet, ss.url+path, nil)
		req.Host = "attacker.example"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s with a foreign Host: %d; expect 403", path, resp.StatusCode)
		}
		for k := range resp.Header {
			if strings.HasPrefix(k, "X-Kubeindex-") {
				t.Errorf("%s with a foreign Host: its 403 carries %s: %q", path, k, resp.Header.Get(k))
			}
		}
	}
}
