package server

import "testing"

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
