package demo

import "fmt"

// simState is what churn needs besides the objects themselves.
type simState struct {
	nodes      []node
	serviceIPs int
	jobs       int
	keep       key // the completed pod kept to show IP reuse
}

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

// generate creates the initial cluster. c.mu must be held.
func (c *Cluster) generate() {
	for i := 1; i <= c.opts.Nodes; i++ {
		c.sim.nodes = append(c.sim.nodes, newNode(i))
	}
	for _, ns := range []string{"default", "kube-node-lease", "kube-public", "kube-system"} {
		c.putNamespace(ns, nil)
	}
	apps := c.appNamespaces()
	for i, ns := range apps {
		c.putNamespace(ns, map[string]any{"team": ns, "environment": environments[i%len(environments)]})
	}
	for i, n := range c.sim.nodes {
		c.putNode(n, fmt.Sprintf("demo-1%c", 'a'+i%3))
	}
	c.generateSystem()
	for i, ns := range apps {
		c.generateApps(ns, i%2 == 0)
	}
	if len(apps) > 0 {
		c.generateReuse(apps[0])
	}
}

func (c *Cluster) appNamespaces() []string {
	var out []string
	for i := range c.opts.Namespaces {
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
func (c *Cluster) generateSystem() {
	c.putService("default", "kubernetes", nil,
		[]any{servicePort("https", 443, 6443, "TCP")}, "10.96.0.1", "")
	dns := app{name: "coredns", image: "registry.k8s.io/coredns/coredns:v1.12.0", port: 8080, probe: "http",
		selector: map[string]any{"k8s-app": "kube-dns"}}
	c.putDeployment("kube-system", dns, 2)
	c.putService("kube-system", "kube-dns", map[string]any{"k8s-app": "kube-dns"}, []any{
		servicePort("dns", 53, 53, "UDP"), servicePort("dns-tcp", 53, 53, "TCP"), servicePort("metrics", 9153, 9153, "TCP"),
	}, "10.96.0.10", "")
	daemons := []app{
		{name: "kube-proxy", image: "registry.k8s.io/kube-proxy:" + GitVersion, port: 10256, probe: "http",
			selector: map[string]any{"k8s-app": "kube-proxy"}},
		{name: "node-exporter", image: "quay.io/prometheus/node-exporter:v1.8.2", port: 9100, probe: "http",
			selector: map[string]any{"app.kubernetes.io/name": "node-exporter"}},
	}
	for _, d := range daemons {
		uid, rev := c.newUID(), c.suffix(10)
		tmpl := podTemplate(d)
		spec := nested(tmpl, "spec")
		spec["hostNetwork"], spec["dnsPolicy"], spec["priorityClassName"] = true, "ClusterFirstWithHostNet", "system-node-critical"
		labels := nested(tmpl, "metadata", "labels")
		labels["controller-revision-hash"], labels["pod-template-generation"] = rev, "1"
		owner := ownerRef("apps/v1", "DaemonSet", d.name, uid, true)
		for _, n := range c.sim.nodes {
			pod := c.newPod("kube-system", c.podName(d.name), clone(tmpl).(map[string]any), owner, n)
			c.setPodPhase(pod, "Running", n, n.hostIPs())
			c.mustPut(mustResource(Pods), pod)
		}
	}
}

// generateApps creates the deployments of one application namespace, each
// with a service; dualStack services get an IPv6 ClusterIP too.
func (c *Cluster) generateApps(ns string, dualStack bool) {
	order := c.rng.Perm(len(catalog))
	for i := range c.opts.DeploymentsPerNamespace {
		a := catalog[order[i%len(catalog)]]
		if i >= len(catalog) {
			a.name = fmt.Sprintf("%s-%d", a.name, i/len(catalog)+1)
		}
		a.selector = map[string]any{"app": a.name}
		a.extra = map[string]any{"app.kubernetes.io/part-of": ns, "tier": tierOf(a.name)}
		c.putDeployment(ns, a, 2+c.rng.IntN(4))
		v4, v6 := c.nextServiceIP()
		if !dualStack {
			v6 = ""
		}
		c.putService(ns, a.name, map[string]any{"app": a.name},
			[]any{servicePort("http", 80, "http", "TCP"), servicePort("metrics", 9090, "metrics", "TCP")}, v4, v6)
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
func (c *Cluster) generateReuse(ns string) {
	for _, o := range c.sorted(c.objects[Pods]) {
		if o.namespace != ns || o.fields["status.phase"] != "Running" || o.fields["spec.hostNetwork"] == "true" {
			continue
		}
		n, _ := c.nodeByName(o.fields["spec.nodeName"])
		job := c.newJobPod(ns, "db-migrate", n)
		c.setPodPhase(job, "Succeeded", n, podIPs(o))
		c.sim.keep = c.mustPut(mustResource(Pods), job).key()
		return
	}
}

// newJobPod builds a Pending pod of a new Job named base.
func (c *Cluster) newJobPod(ns, base string, n node) map[string]any {
	a := app{name: base, image: "ghcr.io/kubeindex-demo/" + base + ":1.3.0", port: 8080, probe: "http",
		selector: map[string]any{"job-name": base, "batch.kubernetes.io/job-name": base}}
	tmpl := podTemplate(a)
	nested(tmpl, "spec")["restartPolicy"] = "Never"
	uid := c.newUID()
	labels := nested(tmpl, "metadata", "labels")
	labels["controller-uid"], labels["batch.kubernetes.io/controller-uid"] = uid, uid
	owner := ownerRef("batch/v1", "Job", base, uid, true)
	return c.newPod(ns, c.podName(base), tmpl, owner, n)
}
