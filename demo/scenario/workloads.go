package scenario

import (
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var update = metav1.ManagedFieldsOperationUpdate

func (s *Scenario) putNamespace(name string, labels map[string]string) {
	if labels == nil {
		labels = map[string]string{}
	}
	labels["kubernetes.io/metadata.name"] = name
	ns := &corev1.Namespace{
		ObjectMeta: s.objectMeta("", name, labels, nil),
		Spec:       corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
		Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
	}
	ns.ManagedFields = managedFields(ns, s.now(), fieldManager{"kubectl-create", update, "", "v1", []string{"metadata"}})
	s.put(namespaces, ns)
}

func (s *Scenario) putNode(n node, zone string) {
	labels := map[string]string{
		"kubernetes.io/hostname": n.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
		"node.kubernetes.io/instance-type": "m5.xlarge", "topology.kubernetes.io/zone": zone,
		"topology.kubernetes.io/region": "demo-1",
	}
	md := s.objectMeta("", n.name, labels, map[string]string{
		"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true",
	})
	addrs := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.ipv4}}
	if n.dualStack() {
		addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: n.ipv6})
	}
	addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeHostName, Address: n.name})
	capacity := corev1.ResourceList{}
	for name, q := range map[corev1.ResourceName]string{"cpu": "4", "memory": "16101404Ki", "pods": "110", "ephemeral-storage": "101430960Ki"} {
		capacity[name] = resourceMustParse(q)
	}
	machineID := s.hexString(32)
	systemUUID := s.newUID()
	bootID := s.newUID()
	cidrs := n.podCIDRs()
	obj := &corev1.Node{
		ObjectMeta: md,
		Spec:       corev1.NodeSpec{PodCIDR: cidrs[0], PodCIDRs: cidrs, ProviderID: "demo://" + n.name},
		Status: corev1.NodeStatus{
			Addresses: addrs, Capacity: capacity, Allocatable: capacity.DeepCopy(),
			Conditions: nodeConditions(s.now()),
			NodeInfo: corev1.NodeSystemInfo{
				KubeletVersion: GitVersion, ContainerRuntimeVersion: "containerd://2.0.1",
				OSImage: "Simulated Linux (kubeindex demo)", KernelVersion: "6.12.0-demo",
				OperatingSystem: "linux", Architecture: "amd64", MachineID: machineID,
				SystemUUID: systemUUID, BootID: bootID,
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
		},
	}
	obj.ManagedFields = managedFields(obj, s.now(),
		fieldManager{"kubelet", update, "", "v1", []string{"metadata"}},
		fieldManager{"kube-controller-manager", update, "", "v1", []string{"spec"}},
		fieldManager{"kubelet", update, "status", "v1", []string{"status"}})
	s.put(nodes, obj)
}

func nodeConditions(now metav1.Time) []corev1.NodeCondition {
	cond := func(typ corev1.NodeConditionType, status corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: typ, Status: status, Reason: reason, Message: msg,
			LastHeartbeatTime: now, LastTransitionTime: now}
	}
	return []corev1.NodeCondition{
		cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
		cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
		cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
		cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
	}
}

// putDeployment creates a deployment, its ReplicaSet and replicas Running
// pods.
func (s *Scenario) putDeployment(namespace string, a app, replicas int32) {
	tmpl := podTemplate(a)
	labels := maps.Clone(a.selector)
	maps.Copy(labels, a.extra)
	dep := &appsv1.Deployment{
		ObjectMeta: s.objectMeta(namespace, a.name, labels, map[string]string{"deployment.kubernetes.io/revision": "1"}),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptrTo(replicas), Selector: &metav1.LabelSelector{MatchLabels: maps.Clone(a.selector)},
			Template: *tmpl.DeepCopy(), RevisionHistoryLimit: ptrTo[int32](10), ProgressDeadlineSeconds: ptrTo[int32](600),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxSurge: ptrTo(intstr.FromString("25%")), MaxUnavailable: ptrTo(intstr.FromString("25%"))}},
		},
	}
	dep.Generation = 1
	dep.ManagedFields = managedFields(dep, s.now(),
		fieldManager{"kubectl-client-side-apply", update, "", "apps/v1", []string{"metadata", "spec"}},
		fieldManager{"kube-controller-manager", update, "status", "apps/v1", []string{"status"}})
	s.put(deployments, dep)

	hash := s.suffix(10)
	rsTmpl := *tmpl.DeepCopy()
	rsTmpl.Labels["pod-template-hash"] = hash
	rsLabels := maps.Clone(labels)
	rsLabels["pod-template-hash"] = hash
	selector := maps.Clone(a.selector)
	selector["pod-template-hash"] = hash
	rs := &appsv1.ReplicaSet{
		ObjectMeta: s.objectMeta(namespace, a.name+"-"+hash, rsLabels, map[string]string{
			"deployment.kubernetes.io/desired-replicas": fmt.Sprint(replicas),
			"deployment.kubernetes.io/max-replicas":     fmt.Sprint(replicas + 1),
			"deployment.kubernetes.io/revision":         "1",
		}),
		Spec: appsv1.ReplicaSetSpec{Replicas: ptrTo(replicas), Selector: &metav1.LabelSelector{MatchLabels: selector}, Template: rsTmpl},
	}
	rs.Generation = 1
	rs.OwnerReferences = []metav1.OwnerReference{ownerRef("apps/v1", "Deployment", a.name, string(dep.UID))}
	rs.ManagedFields = managedFields(rs, s.now(),
		fieldManager{"kube-controller-manager", update, "", "apps/v1", []string{"metadata", "spec"}},
		fieldManager{"kube-controller-manager", update, "status", "apps/v1", []string{"status"}})
	s.put(replicaSets, rs)

	for range replicas {
		n := s.pickNode()
		pod := s.replicaPod(rs, n)
		s.setPodPhase(pod, corev1.PodRunning, n, s.allocPodIPs(n))
		s.put(pods, pod)
	}
	s.syncWorkloadStatus(keyOf(&rs.ObjectMeta))
}

// replicaPod builds a Pending pod of a ReplicaSet on n from the set's pod
// template.
func (s *Scenario) replicaPod(rs *appsv1.ReplicaSet, n node) *corev1.Pod {
	owner := ownerRef("apps/v1", "ReplicaSet", rs.Name, string(rs.UID))
	return s.newPod(rs.Namespace, s.podName(rs.Name), rs.Spec.Template, owner, n)
}

// startPod moves a Pending pod to Running, with addresses: its node's for
// a hostNetwork pod, else fresh ones from the node's pod range.
func (s *Scenario) startPod(pod *corev1.Pod) {
	n, ok := s.nodeByName(pod.Spec.NodeName)
	if !ok {
		n = s.pickNode()
	}
	ips := n.hostIPs()
	if !pod.Spec.HostNetwork {
		ips = s.allocPodIPs(n)
	}
	pod = pod.DeepCopy()
	s.setPodPhase(pod, corev1.PodRunning, n, ips)
	s.put(pods, pod)
}

// putService creates a ClusterIP service selecting selector (none for nil).
func (s *Scenario) putService(namespace, name string, selector map[string]string, ports []corev1.ServicePort, ip, ipv6 string) {
	spec := corev1.ServiceSpec{
		Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip}, Ports: ports,
		SessionAffinity: corev1.ServiceAffinityNone, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
		IPFamilyPolicy:        ptrTo(corev1.IPFamilyPolicySingleStack),
		InternalTrafficPolicy: ptrTo(corev1.ServiceInternalTrafficPolicyCluster),
		Selector:              selector,
	}
	if ipv6 != "" {
		spec.ClusterIPs = append(spec.ClusterIPs, ipv6)
		spec.IPFamilies = append(spec.IPFamilies, corev1.IPv6Protocol)
		spec.IPFamilyPolicy = ptrTo(corev1.IPFamilyPolicyPreferDualStack)
	}
	labels := map[string]string{"component": "apiserver", "provider": "kubernetes"}
	if selector != nil {
		labels = maps.Clone(selector)
	}
	svc := &corev1.Service{ObjectMeta: s.objectMeta(namespace, name, labels, nil), Spec: spec}
	svc.ManagedFields = managedFields(svc, s.now(),
		fieldManager{"kubectl-client-side-apply", update, "", "v1", []string{"metadata", "spec"}})
	s.put(services, svc)
}

func servicePort(name string, port int32, target intstr.IntOrString, protocol corev1.Protocol) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: port, TargetPort: target, Protocol: protocol}
}
