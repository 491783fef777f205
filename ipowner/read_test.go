package ipowner

import (
	"reflect"
	"testing"

	"github.com/kubeindex/kubeindex/internal/jsonscan"
)

func TestServiceAndNodeAddresses(t *testing.T) {
	tests := []struct {
		name, kind, spec, status string
		want                     []Held
	}{
		{"cluster IPs, both families", "svc", `{"clusterIP":"10.96.0.5","clusterIPs":["10.96.0.5","FD00:10:96:0:0:0:0:5"]}`, `{}`,
			[]Held{{"10.96.0.5", RoleClusterIP}, {"fd00:10:96::5", RoleClusterIP}}},
		{"clusterIP alone (an old object)", "svc", `{"clusterIP":"10.96.0.6"}`, `{}`, []Held{{"10.96.0.6", RoleClusterIP}}},
		{"headless holds nothing", "svc", `{"clusterIP":"None","clusterIPs":["None"]}`, `{}`, nil},
		{"external and load balancer", "svc", `{"clusterIPs":["10.96.0.7"],"externalIPs":["192.0.2.1","bogus"]}`,
			`{"loadBalancer":{"ingress":[{"ip":"203.0.113.9"},{"hostname":"lb.example"}]}}`,
			[]Held{{"10.96.0.7", RoleClusterIP}, {"192.0.2.1", RoleExternalIP}, {"203.0.113.9", RoleLoadBalancer}}},
		{"ExternalName: nothing", "svc", `{"type":"ExternalName","externalName":"db.example"}`, `{}`, nil},
		{"not strings", "svc", `{"clusterIPs":[1,null,{}],"externalIPs":"x"}`, `{"loadBalancer":[]}`, nil},
		{"node addresses", "node", `{}`, `{"addresses":[{"type":"InternalIP","address":"10.0.0.1"},{"type":"Hostname","address":"n1"},` +
			`{"type":"ExternalIP","address":"198.51.100.1"},{"type":"InternalIP","address":"fd00::1"},{"type":"InternalIP","address":"10.0.0.1"}]}`,
			[]Held{{"10.0.0.1", RoleNodeInternal}, {"198.51.100.1", RoleNodeExternal}, {"fd00::1", RoleNodeInternal}}},
		{"node without status", "node", `{}`, ``, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, status := jsonscan.Doc{Raw: []byte(tt.spec)}, jsonscan.Doc{Raw: []byte(tt.status)}
			var got []Held
			if tt.kind == "svc" {
				got = ServiceAddresses(spec, status)
			} else {
				got = NodeAddresses(status)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v; expect %v", got, tt.want)
			}
		})
	}
}

func TestPorts(t *testing.T) {
	pod := jsonscan.Doc{Raw: []byte(`{"containers":[{"ports":[{"containerPort":9100},{"containerPort":53,"protocol":"UDP","hostPort":53},{"containerPort":"x"}]}],` +
		`"initContainers":[{"ports":[{"containerPort":8080,"hostPort":18080}]}]}`)}
	want := []Port{{9100, "TCP"}, {53, "UDP"}, {8080, "TCP"}, {18080, "TCP"}}
	if got := PodPorts(pod); !reflect.DeepEqual(got, want) {
		t.Errorf("PodPorts: %v; expect %v", got, want)
	}
	svc := jsonscan.Doc{Raw: []byte(`{"ports":[{"port":80,"targetPort":8080},{"port":53,"protocol":"UDP"},{"port":70000}]}`)}
	if got, want := ServicePorts(svc), []Port{{80, "TCP"}, {53, "UDP"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("ServicePorts: %v; expect %v", got, want)
	}
	for _, tt := range []struct {
		n, proto string
		want     Port
		ok       bool
	}{
		{"9100", "", Port{9100, "TCP"}, true}, {"53", "udp", Port{53, "UDP"}, true}, {"1", "SCTP", Port{1, "SCTP"}, true},
		{"0", "", Port{}, false}, {"65536", "", Port{}, false}, {"-1", "", Port{}, false}, {"80", "http", Port{}, false},
		{"+80", "", Port{80, "TCP"}, true}, {"", "", Port{}, false}, {"1e3", "", Port{}, false},
	} {
		if got, ok := ParsePort(tt.n, tt.proto); got != tt.want || ok != tt.ok {
			t.Errorf("ParsePort(%q, %q) = %v, %v; expect %v, %v", tt.n, tt.proto, got, ok, tt.want, tt.ok)
		}
	}
}

func FuzzParsePort(f *testing.F) {
	for _, s := range []string{"9100", "0", "65535", "+1", "-0", "99999999999999999999"} {
		f.Add(s, "TCP")
	}
	f.Fuzz(func(t *testing.T, n, proto string) {
		p, ok := ParsePort(n, proto)
		if ok && (p.Number < 1 || p.Number > 65535 || p.Protocol != "TCP" && p.Protocol != "UDP" && p.Protocol != "SCTP") {
			t.Fatalf("ParsePort(%q, %q) accepted %v", n, proto, p)
		}
	})
}
