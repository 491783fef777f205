package e2e

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// Addresses of the IP owner tests, from the documentation ranges no seed uses
// (seeds take 198.18.0.0/15 and 2001:db8::/32).
const (
	ownersNodeInternal = "198.51.100.11"
	ownersNodeExternal = "203.0.113.11"
	ownersExternalIP   = "203.0.113.21"
	ownersLBIP         = "203.0.113.31"
	ownersSharedIP     = "203.0.113.41"
)

// TestIPOwnersServicesAndNodes: Services and nodes own addresses as the API
// server says. ClusterIPs come from the real allocator, in both families:
// the test cluster runs with --service-cluster-ip-range
// 10.96.0.0/16,fd00:10:96::/112, so a RequireDualStack Service gets one of
// each. External IPs, a LoadBalancer's ingress (written through the status
// subresource, as a cloud controller would) and node InternalIP/ExternalIP
// addresses are owned with their roles; a headless Service owns nothing; a
// node's address names the node and its hostNetwork pods, and ?port= picks
// the pod declaring the port or says that none does. Every answer is
// compared with the API server's objects (UIDs included).
func TestIPOwnersServicesAndNodes(t *testing.T) {
	c := cluster.StartForTest(t)
	cs, _ := c.Clients(t)
	ctx := t.Context()
	k := startKubeindex(t, "--kubeconfig", c.Kubeconfig)

	const ns, node = "ipowners-owners", "ipowners-owners-node"
	if err := cluster.EnsureNamespace(ctx, cs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}

	// A node with an InternalIP and an ExternalIP, as a kubelet reports.
	n, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: ownersNodeInternal},
		{Type: corev1.NodeExternalIP, Address: ownersNodeExternal},
		{Type: corev1.NodeHostName, Address: node},
	}
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}) })

	// Three hostNetwork pods on it, which report the node's address as
	// theirs: one declares 9100/TCP, one 24224 TCP and UDP, one nothing.
	for _, p := range []*corev1.Pod{
		newPod(ns, "node-exporter", node, true, corev1.ContainerPort{Name: "metrics", ContainerPort: 9100}),
		newPod(ns, "log-agent", node, true, corev1.ContainerPort{Name: "fwd", ContainerPort: 24224},
			corev1.ContainerPort{Name: "fwd-udp", ContainerPort: 24224, Protocol: corev1.ProtocolUDP}),
		newPod(ns, "kube-proxy", node, true),
	} {
		if _, err := runningPod(ctx, cs, p, []string{ownersNodeInternal}); err != nil {
			t.Fatal(err)
		}
	}

	svc := func(name string, spec corev1.ServiceSpec) *corev1.Service {
		if spec.Selector == nil {
			spec.Selector = map[string]string{"app": name}
		}
		s, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ports := func(ps ...int32) []corev1.ServicePort {
		var out []corev1.ServicePort
		for _, p := range ps {
			out = append(out, corev1.ServicePort{Name: fmt.Sprintf("p%d", p), Port: p})
		}
		return out
	}
	dual := svc("dual", corev1.ServiceSpec{
		IPFamilyPolicy: ptr.To(corev1.IPFamilyPolicyRequireDualStack),
		Ports:          ports(80), ExternalIPs: []string{ownersExternalIP},
	})
	lb := svc("lb", corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: ports(443)})
	lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ownersLBIP}, {Hostname: "lb.example.com"}}
	if lb, err = cs.CoreV1().Services(ns).UpdateStatus(ctx, lb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc("shared-a", corev1.ServiceSpec{Ports: ports(8443), ExternalIPs: []string{ownersSharedIP}})
	svc("shared-b", corev1.ServiceSpec{Ports: ports(9443), ExternalIPs: []string{ownersSharedIP}})
	headless := svc("headless", corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: ports(80)})

	// The real allocator gave the dual-stack Service one address of each
	// family, from the cluster's ranges.
	if len(dual.Spec.ClusterIPs) != 2 {
		t.Fatalf("the dual-stack Service got clusterIPs %v: the test cluster should allow dual-stack", dual.Spec.ClusterIPs)
	}
	v4, v6 := netip.MustParseAddr(dual.Spec.ClusterIPs[0]), netip.MustParseAddr(dual.Spec.ClusterIPs[1])
	if !netip.MustParsePrefix("10.96.0.0/16").Contains(v4) || !netip.MustParsePrefix("fd00:10:96::/112").Contains(v6) {
		t.Fatalf("clusterIPs %v are not from the cluster's ranges", dual.Spec.ClusterIPs)
	}

	type lookupCase struct {
		ip       string
		port     int32
		protocol corev1.Protocol
		// What docs/ip.md promises here, besides agreeing with the
		// API server: the match and the roles named.
		match, via string
		roles      []string
		declared   *bool
	}
	cases := []lookupCase{
		{ip: v4.String(), match: "service", roles: []string{"clusterIP"}},
		{ip: v6.String(), match: "service", roles: []string{"clusterIP"}},
		{ip: expandIPv6(v6.String()), match: "service", roles: []string{"clusterIP"}},
		{ip: lb.Spec.ClusterIP, match: "service", roles: []string{"clusterIP"}},
		{ip: ownersExternalIP, match: "service", roles: []string{"externalIP"}},
		{ip: ownersLBIP, match: "service", roles: []string{"loadBalancer"}},
		{ip: ownersSharedIP, match: "ambiguous", roles: []string{"externalIP", "externalIP"}},
		{ip: ownersSharedIP, port: 9443, match: "service", via: "port", roles: []string{"externalIP"}, declared: ptr.To(true)},
		{ip: ownersSharedIP, port: 9443, protocol: corev1.ProtocolUDP, match: "ambiguous", roles: []string{"externalIP", "externalIP"}, declared: ptr.To(false)},
		{ip: ownersNodeInternal, match: "hostNetwork", roles: []string{"nodeInternal"}},
		{ip: ownersNodeInternal, port: 9100, match: "pod", via: "port", roles: []string{"nodeInternal"}, declared: ptr.To(true)},
		{ip: ownersNodeInternal, port: 24224, protocol: corev1.ProtocolUDP, match: "pod", via: "port", roles: []string{"nodeInternal"}, declared: ptr.To(true)},
		// Nobody declares it: said, not guessed: every pod stays.
		{ip: ownersNodeInternal, port: 9999, match: "hostNetwork", roles: []string{"nodeInternal"}, declared: ptr.To(false)},
		{ip: ownersNodeInternal, port: 9100, protocol: corev1.ProtocolUDP, match: "hostNetwork", roles: []string{"nodeInternal"}, declared: ptr.To(false)},
		{ip: ownersNodeExternal, match: "node", roles: []string{"nodeExternal"}},
	}
	answers := make([]ownersAnswer, len(cases))
	for i, tc := range cases {
		eventually(t, converge, "the holders of "+ipPath(tc.ip, "", tc.port, tc.protocol), func() error {
			var err error
			answers[i], err = sameOwnersNow(ctx, k, cs, tc.ip, tc.port, tc.protocol)
			return err
		})
	}
	converged := time.Now() // every change above is older
	for i, tc := range cases {
		got, path := answers[i], ipPath(tc.ip, "", tc.port, tc.protocol)
		var roles []string
		for _, s := range got.Services {
			roles = append(roles, s.Role)
		}
		for _, n := range got.Nodes {
			roles = append(roles, n.Role)
		}
		if got.Match != tc.match || got.Via != tc.via || !slices.Equal(roles, tc.roles) {
			t.Errorf("GET %s: match %q via %q roles %v, want %q via %q roles %v", path, got.Match, got.Via, roles, tc.match, tc.via, tc.roles)
		}
		if tc.declared != nil && (got.Port == nil || got.Port.Declared != *tc.declared) {
			t.Errorf("GET %s: port %+v, want declared %v", path, got.Port, *tc.declared)
		}
		if tc.ip == ownersNodeInternal {
			want := 3
			if tc.via == "port" {
				want = 1
			}
			if len(got.Pods) != want || len(got.Nodes) != 1 || got.Nodes[0].UID != string(n.UID) {
				t.Errorf("GET %s: %d pods and nodes %+v, want %d pods and node %s (%s)", path, len(got.Pods), got.Nodes, want, node, n.UID)
			}
		}
	}

	// A headless Service is cached but owns nothing: no answer names it.
	eventually(t, converge, "the headless Service in kubeindex", func() error {
		return sameObject(ctx, k, newAPIServer(t, c), servicesR, ns, headless.Name)
	})
	for i, got := range answers {
		for _, s := range got.Services {
			if s.UID == string(headless.UID) {
				t.Errorf("GET %s names the headless Service", ipPath(cases[i].ip, "", cases[i].port, cases[i].protocol))
			}
		}
	}
	if r := k.get(t, "/api/v1/ip/None"); r.code != http.StatusBadRequest {
		t.Errorf("GET /api/v1/ip/None: %d, want 400: %s", r.code, r.body)
	}

	// Batches: the same questions, plus bad ones, each answered in its slot
	// as GET answers it.
	t.Run("Batch", func(t *testing.T) {
		var qs []batchQ
		for _, tc := range cases {
			q := batchQ{IP: tc.ip, Protocol: string(tc.protocol)}
			if tc.port != 0 {
				q.Port = tc.port
			}
			qs = append(qs, q)
		}
		qs = append(qs,
			batchQ{IP: "not-an-ip"},
			batchQ{IP: ownersNodeInternal, Port: "70000"},
			batchQ{IP: ownersNodeInternal, Protocol: "TCP"},
			batchQ{IP: "198.51.100.249"},
			batchQ{IP: ownersNodeInternal, Port: 9100, Protocol: "ICMP"},
		)
		slots := checkBatchAgreesWithGets(t, k, qs)
		wantCodes := []int{http.StatusBadRequest, http.StatusBadRequest, http.StatusBadRequest, http.StatusNotFound, http.StatusBadRequest}
		for i, code := range wantCodes {
			if got := slotCode(slots[len(cases)+i]); got != code {
				t.Errorf("batch slot %d %+v: code %d, want %d", len(cases)+i, qs[len(cases)+i], got, code)
			}
		}
		for i := range cases {
			if got := slotCode(slots[i]); got != http.StatusOK {
				t.Errorf("batch slot %d %+v: code %d, want an answer", i, qs[i], got)
			}
		}
	})

	// The history has the same holders, with the same roles, at a moment
	// past every change by more than the default --ip-history-skew (2s)
	// and a margin for the history's handler to follow the index.
	t.Run("At", func(t *testing.T) {
		at := converged.Add(3 * time.Second)
		clockPast(at.Add(100 * time.Millisecond))
		pod := func(name string) string {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return fmt.Sprintf("Pod %s/%s %s podIP", ns, name, p.UID)
		}
		nodeLine := fmt.Sprintf("Node /%s %s nodeInternal", node, n.UID)
		for _, tc := range []struct {
			ip         string
			port       int32
			match, via string
			owners     []string
		}{
			{ip: v4.String(), match: "service", owners: []string{fmt.Sprintf("Service %s/dual %s clusterIP", ns, dual.UID)}},
			{ip: v6.String(), match: "service", owners: []string{fmt.Sprintf("Service %s/dual %s clusterIP", ns, dual.UID)}},
			{ip: ownersLBIP, match: "service", owners: []string{fmt.Sprintf("Service %s/lb %s loadBalancer", ns, lb.UID)}},
			{ip: ownersExternalIP, match: "service", owners: []string{fmt.Sprintf("Service %s/dual %s externalIP", ns, dual.UID)}},
			{ip: ownersNodeExternal, match: "node", owners: []string{fmt.Sprintf("Node /%s %s nodeExternal", node, n.UID)}},
			{ip: ownersNodeInternal, match: "hostNetwork", owners: []string{nodeLine, pod("kube-proxy"), pod("log-agent"), pod("node-exporter")}},
			// As a lookup of now: the pod declaring the port, and the node.
			{ip: ownersNodeInternal, port: 9100, match: "pod", via: "port", owners: []string{nodeLine, pod("node-exporter")}},
			{ip: ownersNodeInternal, port: 9999, match: "hostNetwork", owners: []string{nodeLine, pod("kube-proxy"), pod("log-agent"), pod("node-exporter")}},
		} {
			path := ipPath(tc.ip, rfc3339(at), tc.port, "")
			var got historyAnswer
			if err := k.getJSON(path, &got); err != nil {
				t.Error(err)
				continue
			}
			var owners []string
			for _, o := range got.Owners {
				owners = append(owners, o.String())
			}
			slices.Sort(owners)
			slices.Sort(tc.owners)
			if got.Certainty != "exact" || got.Match != tc.match || got.Via != tc.via || !slices.Equal(owners, tc.owners) {
				t.Errorf("GET %s: %s %s via %q %v, want exact %s via %q %v", path, got.Certainty, got.Match, got.Via, owners, tc.match, tc.via, tc.owners)
			}
		}
	})

	// Releases: the LoadBalancer's ingress goes, then the dual-stack
	// Service: their addresses are nobody's (404), as the API server says.
	t.Run("Released", func(t *testing.T) {
		lb, err := cs.CoreV1().Services(ns).Get(ctx, "lb", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		lb.Status.LoadBalancer.Ingress = nil
		if _, err := cs.CoreV1().Services(ns).UpdateStatus(ctx, lb, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := cs.CoreV1().Services(ns).Delete(ctx, "dual", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, ip := range []string{ownersLBIP, v4.String(), v6.String(), ownersExternalIP} {
			eventually(t, converge, "the release of "+ip, func() error {
				_, err := sameOwnersNow(ctx, k, cs, ip, 0, "")
				return err
			})
			if r := k.get(t, "/api/v1/ip/"+ip); r.code != http.StatusNotFound {
				t.Errorf("GET /api/v1/ip/%s: %d, want 404 once released: %s", ip, r.code, r.body)
			}
		}
	})
}
