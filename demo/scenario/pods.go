package scenario

import (
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// app describes a workload: what its pods run.
type app struct {
	name     string
	image    string
	port     int32
	probe    string            // "http" or "tcp"
	selector map[string]string // pod labels the controller selects on
	extra    map[string]string // further pod labels
}

// podTemplate is the pod template of a workload: two containers (the app
// and a log-shipping sidecar) with env, ports, probes, resources and
// volume mounts.
func podTemplate(a app) corev1.PodTemplateSpec {
	labels := map[string]string{}
	maps.Copy(labels, a.selector)
	maps.Copy(labels, a.extra)
	handler := corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http"), Scheme: corev1.URISchemeHTTP}}
	if a.probe == "tcp" {
		handler = corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("http")}}
	}
	probe := func(h corev1.ProbeHandler, delay int32) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: *h.DeepCopy(), InitialDelaySeconds: delay, PeriodSeconds: 10,
			TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}
	}
	fieldRef := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}
	}
	main := corev1.Container{
		Name:  a.name,
		Image: a.image,
		Env: []corev1.EnvVar{
			{Name: "LOG_LEVEL", Value: "info"},
			{Name: "POD_IP", ValueFrom: fieldRef("status.podIP")},
			{Name: "NODE_NAME", ValueFrom: fieldRef("spec.nodeName")},
		},
		Ports: []corev1.ContainerPort{
			{Name: "http", ContainerPort: a.port, Protocol: corev1.ProtocolTCP},
			{Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP},
		},
		ReadinessProbe: probe(handler, 2),
		LivenessProbe:  probe(handler, 15),
		Resources: corev1.ResourceRequirements{
			Requests: resources("100m", "128Mi"),
			Limits:   resources("500m", "256Mi"),
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "config", MountPath: "/etc/" + a.name, ReadOnly: true},
			{Name: "logs", MountPath: "/var/log/app"},
		},
		ImagePullPolicy: corev1.PullIfNotPresent, TerminationMessagePath: "/dev/termination-log",
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
	}
	sidecar := corev1.Container{
		Name:  "log-shipper",
		Image: "cr.fluentbit.io/fluent/fluent-bit:3.2.4",
		Args:  []string{"--config=/fluent-bit/etc/fluent-bit.yaml"},
		Env:   []corev1.EnvVar{{Name: "APP", Value: a.name}},
		Ports: []corev1.ContainerPort{{Name: "fb-metrics", ContainerPort: 2020, Protocol: corev1.ProtocolTCP}},
		ReadinessProbe: probe(corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/api/v1/health", Port: intstr.FromString("fb-metrics"), Scheme: corev1.URISchemeHTTP}}, 1),
		Resources: corev1.ResourceRequirements{
			Requests: resources("10m", "32Mi"),
			Limits:   resources("", "64Mi"),
		},
		VolumeMounts:    []corev1.VolumeMount{{Name: "logs", MountPath: "/var/log/app", ReadOnly: true}},
		ImagePullPolicy: corev1.PullIfNotPresent, TerminationMessagePath: "/dev/termination-log",
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      labels,
			Annotations: map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "9090"},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{main, sidecar},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: a.name + "-config"}, DefaultMode: ptrTo[int32](420)}}},
				{Name: "logs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
			RestartPolicy: corev1.RestartPolicyAlways, TerminationGracePeriodSeconds: ptrTo[int64](30),
			DNSPolicy: corev1.DNSClusterFirst, ServiceAccountName: "default",
			SecurityContext: &corev1.PodSecurityContext{}, SchedulerName: "default-scheduler",
		},
	}
}

// resources is a cpu and memory list; "" leaves one out.
func resources(cpu, memory string) corev1.ResourceList {
	l := corev1.ResourceList{}
	if cpu != "" {
		l[corev1.ResourceCPU] = resourceMustParse(cpu)
	}
	if memory != "" {
		l[corev1.ResourceMemory] = resourceMustParse(memory)
	}
	return l
}

// newPod builds a Pending pod on n from a workload's template, owned by owner, the way the controller and the admission
// chain would create it.
func (s *Scenario) newPod(namespace, name string, tmpl corev1.PodTemplateSpec, owner metav1.OwnerReference, n node) *corev1.Pod {
	tmpl = *tmpl.DeepCopy()
	md := s.objectMeta(namespace, name, tmpl.Labels, tmpl.Annotations)
	md.OwnerReferences = []metav1.OwnerReference{owner}
	md.GenerateName = name[:len(name)-5]
	spec := tmpl.Spec
	token := "kube-api-access-" + s.suffix(5)
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: token, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: ptrTo[int32](420),
		Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
			ExpirationSeconds: ptrTo[int64](3607), Path: "token"}}},
	}}})
	for i := range spec.Containers {
		spec.Containers[i].VolumeMounts = append(spec.Containers[i].VolumeMounts, corev1.VolumeMount{
			Name: token, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true,
		})
	}
	spec.NodeName = n.name
	spec.EnableServiceLinks, spec.Priority = ptrTo(true), ptrTo[int32](0)
	spec.PreemptionPolicy = ptrTo(corev1.PreemptLowerPriority)
	spec.Tolerations = []corev1.Toleration{
		{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptrTo[int64](300)},
		{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptrTo[int64](300)},
	}
	pod := &corev1.Pod{ObjectMeta: md, Spec: spec}
	s.setPodPhase(pod, corev1.PodPending, n, nil)
	pod.ManagedFields = managedFields(pod, s.now(),
		fieldManager{"kube-controller-manager", metav1.ManagedFieldsOperationUpdate, "", "v1", []string{"metadata", "spec"}},
		fieldManager{"kubelet", metav1.ManagedFieldsOperationUpdate, "status", "v1", []string{"status"}})
	return pod
}

// setPodPhase rewrites a pod's status for phase: Pending (scheduled,
// containers being created, no IP yet), Running (ready, with ips) or
// Succeeded (completed; the IPs are kept, as the kubelet does).
func (s *Scenario) setPodPhase(pod *corev1.Pod, phase corev1.PodPhase, n node, ips []string) {
	now := s.now()
	st := corev1.PodStatus{Phase: phase, HostIP: n.ipv4, QOSClass: corev1.PodQOSBurstable}
	st.HostIPs = []corev1.HostIP{}
	for _, ip := range n.hostIPs() {
		st.HostIPs = append(st.HostIPs, corev1.HostIP{IP: ip})
	}
	st.StartTime = pod.Status.StartTime
	if st.StartTime == nil {
		st.StartTime = &now
	}
	if len(ips) > 0 {
		st.PodIP = ips[0]
		for _, ip := range ips {
			st.PodIPs = append(st.PodIPs, corev1.PodIP{IP: ip})
		}
	}
	ready := map[corev1.PodPhase]corev1.ConditionStatus{corev1.PodPending: "False", corev1.PodRunning: "True", corev1.PodSucceeded: "False"}[phase]
	reason := map[corev1.PodPhase]string{corev1.PodPending: "ContainersNotReady", corev1.PodSucceeded: "PodCompleted"}[phase]
	cond := func(typ corev1.PodConditionType, status corev1.ConditionStatus, reason string) corev1.PodCondition {
		return corev1.PodCondition{Type: typ, Status: status, LastTransitionTime: now, Reason: reason}
	}
	started := corev1.ConditionTrue
	if phase == corev1.PodPending {
		started = corev1.ConditionFalse
	}
	st.Conditions = []corev1.PodCondition{
		cond("PodReadyToStartContainers", started, ""),
		cond(corev1.PodInitialized, corev1.ConditionTrue, ""),
		cond(corev1.PodReady, ready, reason),
		cond(corev1.ContainersReady, ready, reason),
		cond(corev1.PodScheduled, corev1.ConditionTrue, ""),
	}
	for _, ct := range pod.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, s.containerStatus(ct, phase, now))
	}
	pod.Status = st
}

func (s *Scenario) containerStatus(ct corev1.Container, phase corev1.PodPhase, now metav1.Time) corev1.ContainerStatus {
	running := phase == corev1.PodRunning
	cs := corev1.ContainerStatus{Name: ct.Name, Image: ct.Image, ImageID: ct.Image + "@sha256:" + s.hexString(64),
		Ready: running, Started: ptrTo(running)}
	switch phase {
	case corev1.PodPending:
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
		cs.ImageID = ""
	case corev1.PodRunning:
		cs.ContainerID = "containerd://" + s.hexString(64)
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: now}
	default:
		cs.ContainerID = "containerd://" + s.hexString(64)
		cs.State.Terminated = &corev1.ContainerStateTerminated{Reason: "Completed", StartedAt: now, FinishedAt: now}
	}
	return cs
}

// podName is {base}-{suffix}, as a controller names pods.
func (s *Scenario) podName(base string) string { return fmt.Sprintf("%s-%s", base, s.suffix(5)) }

// resourceMustParse parses a quantity written in this package.
func resourceMustParse(q string) resource.Quantity { return resource.MustParse(q) }
