package demo

import "fmt"

// mustPut stores a generated object; generated objects are well-formed, so
// a failure is a bug in this package. c.mu must be held.
func (c *Cluster) mustPut(r *resource, m map[string]any) *object {
	o, err := c.put(r, m)
	if err != nil {
		panic(err)
	}
	return o
}

func (c *Cluster) putNamespace(name string, labels map[string]any) {
	if labels == nil {
		labels = map[string]any{}
	}
	labels["kubernetes.io/metadata.name"] = name
	ns := map[string]any{
		"metadata": c.objectMeta("", name, labels, nil),
		"spec":     map[string]any{"finalizers": []any{"kubernetes"}},
		"status":   map[string]any{"phase": "Active"},
	}
	nested(ns, "metadata")["managedFields"] = managedFields(ns, c.timestamp(),
		fieldManager{"kubectl-create", "Update", "", "v1", []string{"metadata"}})
	c.mustPut(mustResource(Namespaces), ns)
}

func (c *Cluster) putNode(n node, zone string) {
	labels := map[string]any{
		"kubernetes.io/hostname": n.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
		"node.kubernetes.io/instance-type": "m5.xlarge", "topology.kubernetes.io/zone": zone,
		"topology.kubernetes.io/region": "demo-1",
	}
	addrs := []any{map[string]any{"type": "InternalIP", "address": n.ipv4}}
	if n.dualStack() {
		addrs = append(addrs, map[string]any{"type": "InternalIP", "address": n.ipv6})
	}
	addrs = append(addrs, map[string]any{"type": "Hostname", "address": n.name})
	cidrs := []any{}
	for _, c := range n.podCIDRs() {
		cidrs = append(cidrs, c)
	}
	capacity := map[string]any{"cpu": "4", "memory": "16101404Ki", "pods": "110", "ephemeral-storage": "101430960Ki"}
	obj := map[string]any{
		"metadata": c.objectMeta("", n.name, labels, map[string]any{
			"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true",
		}),
		"spec": map[string]any{"podCIDR": cidrs[0], "podCIDRs": cidrs, "providerID": "demo://" + n.name},
		"status": map[string]any{
			"addresses": addrs, "capacity": capacity, "allocatable": capacity,
			"conditions": nodeConditions(c.timestamp()),
			"nodeInfo": map[string]any{
				"kubeletVersion": GitVersion, "containerRuntimeVersion": "containerd://2.0.1",
				"osImage": "Simulated Linux (kubeindex demo)", "kernelVersion": "6.12.0-demo",
				"operatingSystem": "linux", "architecture": "amd64", "machineID": c.hexString(32),
				"systemUUID": c.newUID(), "bootID": c.newUID(),
			},
			"daemonEndpoints": map[string]any{"kubeletEndpoint": map[string]any{"Port": 10250}},
		},
	}
	nested(obj, "metadata")["managedFields"] = managedFields(obj, c.timestamp(),
		fieldManager{"kubelet", "Update", "", "v1", []string{"metadata"}},
		fieldManager{"kube-controller-manager", "Update", "", "v1", []string{"spec"}},
		fieldManager{"kubelet", "Update", "status", "v1", []string{"status"}})
	c.mustPut(mustResource(Nodes), obj)
}

func nodeConditions(now string) []any {
	cond := func(typ, status, reason, msg string) any {
		return map[string]any{"type": typ, "status": status, "reason": reason, "message": msg,
			"lastHeartbeatTime": now, "lastTransitionTime": now}
	}
	return []any{
		cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
		cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
		cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
		cond("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
	}
}

// putDeployment creates a deployment, its ReplicaSet and replicas Running
// pods. It returns the ReplicaSet.
func (c *Cluster) putDeployment(namespace string, a app, replicas int) *object {
	tmpl := podTemplate(a)
	labels := clone(a.selector).(map[string]any)
	for k, v := range a.extra {
		labels[k] = v
	}
	dep := map[string]any{
		"metadata": c.objectMeta(namespace, a.name, labels, map[string]any{"deployment.kubernetes.io/revision": "1"}),
		"spec": map[string]any{
			"replicas": replicas, "selector": map[string]any{"matchLabels": a.selector},
			"template": tmpl, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
			"strategy": map[string]any{"type": "RollingUpdate",
				"rollingUpdate": map[string]any{"maxSurge": "25%", "maxUnavailable": "25%"}},
		},
	}
	md := nested(dep, "metadata")
	md["generation"] = 1
	md["managedFields"] = managedFields(dep, c.timestamp(),
		fieldManager{"kubectl-client-side-apply", "Update", "", "apps/v1", []string{"metadata", "spec"}},
		fieldManager{"kube-controller-manager", "Update", "status", "apps/v1", []string{"status"}})
	depObj := c.mustPut(mustResource(Deployments), dep)

	hash := c.suffix(10)
	rsTmpl := clone(tmpl).(map[string]any)
	nested(rsTmpl, "metadata", "labels")["pod-template-hash"] = hash
	rsLabels := clone(labels).(map[string]any)
	rsLabels["pod-template-hash"] = hash
	selector := clone(a.selector).(map[string]any)
	selector["pod-template-hash"] = hash
	rs := map[string]any{
		"metadata": c.objectMeta(namespace, a.name+"-"+hash, rsLabels, map[string]any{
			"deployment.kubernetes.io/desired-replicas": fmt.Sprint(replicas),
			"deployment.kubernetes.io/max-replicas":     fmt.Sprint(replicas + 1),
			"deployment.kubernetes.io/revision":         "1",
		}),
		"spec": map[string]any{"replicas": replicas, "selector": map[string]any{"matchLabels": selector}, "template": rsTmpl},
	}
	rmd := nested(rs, "metadata")
	rmd["generation"] = 1
	rmd["ownerReferences"] = []any{ownerRef("apps/v1", "Deployment", a.name, depObj.uid, true)}
	rmd["managedFields"] = managedFields(rs, c.timestamp(),
		fieldManager{"kube-controller-manager", "Update", "", "apps/v1", []string{"metadata", "spec"}},
		fieldManager{"kube-controller-manager", "Update", "status", "apps/v1", []string{"status"}})
	rsObj := c.mustPut(mustResource(ReplicaSets), rs)

	for range replicas {
		n := c.pickNode()
		pod := c.replicaPod(rsObj, rsTmpl, n)
		c.setPodPhase(pod, "Running", n, c.allocPodIPs(n))
		c.mustPut(mustResource(Pods), pod)
	}
	c.syncWorkloadStatus(rsObj)
	return rsObj
}

// replicaPod builds a Pending pod of a ReplicaSet on n from the set's pod
// template (which it copies).
func (c *Cluster) replicaPod(rs *object, tmpl map[string]any, n node) map[string]any {
	owner := ownerRef("apps/v1", "ReplicaSet", rs.name, rs.uid, true)
	return c.newPod(rs.namespace, c.podName(rs.name), clone(tmpl).(map[string]any), owner, n)
}

// startPod moves a Pending pod to Running, with addresses: its node's for
// a hostNetwork pod, else fresh ones from the node's pod range.
func (c *Cluster) startPod(pod *object) *object {
	n, ok := c.nodeByName(pod.fields["spec.nodeName"])
	if !ok {
		n = c.pickNode()
	}
	ips := n.hostIPs()
	if pod.fields["spec.hostNetwork"] != "true" {
		ips = c.allocPodIPs(n)
	}
	m := pod.decode()
	c.setPodPhase(m, "Running", n, ips)
	return c.mustPut(pod.res, m)
}

// putService creates a ClusterIP service selecting selector (none for nil).
func (c *Cluster) putService(namespace, name string, selector map[string]any, ports []any, ip string, ipv6 string) {
	ips := []any{ip}
	families, policy := []any{"IPv4"}, "SingleStack"
	if ipv6 != "" {
		ips, families, policy = append(ips, ipv6), append(families, "IPv6"), "PreferDualStack"
	}
	spec := map[string]any{
		"type": "ClusterIP", "clusterIP": ip, "clusterIPs": ips, "ports": ports, "sessionAffinity": "None",
		"ipFamilies": families, "ipFamilyPolicy": policy, "internalTrafficPolicy": "Cluster",
	}
	if selector != nil {
		spec["selector"] = selector
	}
	labels := map[string]any{"component": "apiserver", "provider": "kubernetes"}
	if selector != nil {
		labels = clone(selector).(map[string]any)
	}
	svc := map[string]any{
		"metadata": c.objectMeta(namespace, name, labels, nil),
		"spec":     spec,
		"status":   map[string]any{"loadBalancer": map[string]any{}},
	}
	nested(svc, "metadata")["managedFields"] = managedFields(svc, c.timestamp(),
		fieldManager{"kubectl-client-side-apply", "Update", "", "v1", []string{"metadata", "spec"}})
	c.mustPut(mustResource(Services), svc)
}

func servicePort(name string, port int, target any, protocol string) any {
	return map[string]any{"name": name, "port": port, "targetPort": target, "protocol": protocol}
}
