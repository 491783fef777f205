package scenario

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var namespaceNames = []string{"shop", "payments", "search", "media", "analytics", "identity", "logistics", "support"}

var environments = []string{"production", "staging"}

// catalog is what application namespaces run.
var catalog = []app{
	{name: "web", image: "nginx:1.27.3", port: 80, probe: "http"},
	{name: "api", image: "ghcr.io/kubeindex-demo/api:2.14.0", port: 8080, probe: "http"},
	{name: "worker", image: "ghcr.io/kubeindex-demo/worker:2.14.0", port: 8080, probe: "http"},
	{name: "cache", image: "redis:7.4.1", port: 6379, probe: "tcp"},
	{name: "gateway", image: "envoyproxy/envoy:v1.32.3", port: 8080, probe: "http"},
	{name: "auth", image: "quay.io/keycloak/keycloak:26.0.7", port: 8080, probe: "http"},
	{name: "catalog", image: "ghcr.io/kubeindex-demo/catalog:1.9.4", port: 8080, probe: "http"},
	{name: "orders", image: "ghcr.io/kubeindex-demo/orders:3.0.1", port: 8080, probe: "http"},
	{name: "notifier", image: "ghcr.io/kubeindex-demo/notifier:0.7.2", port: 8080, probe: "http"},
	{name: "search", image: "opensearchproject/opensearch:2.18.0", port: 9200, probe: "http"},
}

// generate creates the initial cluster. s.mu must be held.
func (s *Scenario) generate() {
	for i := 1; i <= s.opts.Nodes; i++ {
		s.nodes = append(s.nodes, newNode(i, s.opts.PodNetwork))
	}
	for _, ns := range []string{"default", "kube-node-lease", "kube-public", "kube-system"} {
		s.putNamespace(ns, nil)
	}
	apps := s.appNamespaces()
	for i, ns := range apps {
		s.putNamespace(ns, map[string]string{"team": ns, "environment": environments[i%len(environments)]})
	}
	for i, n := range s.nodes {
		s.putNode(n, fmt.Sprintf("demo-1%c", 'a'+i%3))
	}
	s.generateSystem()
	for i, ns := range apps {
		s.generateApps(ns, i%2 == 0)
	}
	if len(apps) > 0 {
		s.generateReuse(apps[0])
	}
}

func (s *Scenario) appNamespaces() []string {
	var out []string
	for i := range s.opts.Namespaces {
		name := namespaceNames[i%len(namespaceNames)]
		if i >= len(namespaceNames) {
			name = fmt.Sprintf("%s-%d", name, i/len(namespaceNames)+1)
		}
		out = append(out, name)
	}
	return out
}

// generateSystem creates the kubernetes and kube-dns services, CoreDNS, and
// on every node two hostNetwork DaemonSet pods that share the node's IP.
func (s *Scenario) generateSystem() {
	s.putService("default", "kubernetes", nil,
		[]corev1.ServicePort{servicePort("https", 443, intstr.FromInt32(6443), corev1.ProtocolTCP)}, "10.96.0.1", "")
	dns := app{name: "coredns", image: "registry.k8s.io/coredns/coredns:v1.12.0", port: 8080, probe: "http",
		selector: map[string]string{"k8s-app": "kube-dns"}}
	s.putDeployment("kube-system", dns, 2)
	s.putService("kube-system", "kube-dns", map[string]string{"k8s-app": "kube-dns"}, []corev1.ServicePort{
		servicePort("dns", 53, intstr.FromInt32(53), corev1.ProtocolUDP),
		servicePort("dns-tcp", 53, intstr.FromInt32(53), corev1.ProtocolTCP),
		servicePort("metrics", 9153, intstr.FromInt32(9153), corev1.ProtocolTCP),
	}, "10.96.0.10", "")
	daemons := []app{
		{name: "kube-proxy", image: "registry.k8s.io/kube-proxy:" + GitVersion, port: 10256, probe: "http",
			selector: map[string]string{"k8s-app": "kube-proxy"}},
		{name: "node-exporter", image: "quay.io/prometheus/node-exporter:v1.8.2", port: 9100, probe: "http",
			selector: map[string]string{"app.kubernetes.io/name": "node-exporter"}},
	}
	for _, d := range daemons {
		uid := s.newUID()
		rev := s.suffix(10)
		tmpl := podTemplate(d)
		tmpl.Spec.HostNetwork, tmpl.Spec.DNSPolicy, tmpl.Spec.PriorityClassName = true, corev1.DNSClusterFirstWithHostNet, "system-node-critical"
		tmpl.Labels["controller-revision-hash"], tmpl.Labels["pod-template-generation"] = rev, "1"
		owner := ownerRef("apps/v1", "DaemonSet", d.name, uid)
		for _, n := range s.nodes {
			pod := s.newPod("kube-system", s.podName(d.name), tmpl, owner, n)
			s.setPodPhase(pod, corev1.PodRunning, n, n.hostIPs())
			s.put(pods, pod)
		}
	}
}

// generateApps creates the deployments of one application namespace, each
// with a service; dualStack services get an IPv6 ClusterIP too.
func (s *Scenario) generateApps(ns string, dualStack bool) {
	order := s.rng.Perm(len(catalog))
	for i := range s.opts.DeploymentsPerNamespace {
		a := catalog[order[i%len(catalog)]]
		if i >= len(catalog) {
			a.name = fmt.Sprintf("%s-%d", a.name, i/len(catalog)+1)
		}
		a.selector = map[string]string{"app": a.name}
		a.extra = map[string]string{"app.kubernetes.io/part-of": ns, "tier": tierOf(a.name)}
		s.putDeployment(ns, a, int32(2+s.rng.IntN(4)))
		v4, v6 := s.nextServiceIP()
		if !dualStack {
			v6 = ""
		}
		s.putService(ns, a.name, map[string]string{"app": a.name}, []corev1.ServicePort{
			servicePort("http", 80, intstr.FromString("http"), corev1.ProtocolTCP),
			servicePort("metrics", 9090, intstr.FromString("metrics"), corev1.ProtocolTCP),
		}, v4, v6)
	}
}

func tierOf(name string) string {
	switch name {
	case "web", "gateway":
		return "frontend"
	case "cache", "search":
		return "data"
	}
	return "backend"
}

// generateReuse adds a completed Job pod that holds the same IP as a
// running pod on the same node: the IP-reuse case a lookup by IP must
// report rather than hide.
func (s *Scenario) generateReuse(ns string) {
	for _, p := range list[corev1.Pod](s, pods) {
		if p.Namespace != ns || p.Status.Phase != corev1.PodRunning || p.Spec.HostNetwork {
			continue
		}
		n, _ := s.nodeByName(p.Spec.NodeName)
		job := s.newJobPod(ns, "db-migrate", n)
		s.setPodPhase(job, corev1.PodSucceeded, n, podIPs(p))
		s.put(pods, job)
		s.keep = keyOf(&job.ObjectMeta)
		return
	}
}

// newJobPod builds a Pending pod of a new Job named base.
func (s *Scenario) newJobPod(ns, base string, n node) *corev1.Pod {
	a := app{name: base, image: "ghcr.io/kubeindex-demo/" + base + ":1.3.0", port: 8080, probe: "http",
		selector: map[string]string{"job-name": base, "batch.kubernetes.io/job-name": base}}
	tmpl := podTemplate(a)
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	uid := s.newUID()
	tmpl.Labels["controller-uid"], tmpl.Labels["batch.kubernetes.io/controller-uid"] = uid, uid
	owner := ownerRef("batch/v1", "Job", base, uid)
	return s.newPod(ns, s.podName(base), tmpl, owner, n)
}

// podIPs returns status.podIPs of a pod.
func podIPs(p *corev1.Pod) []string {
	var ips []string
	for _, ip := range p.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	return ips
}
