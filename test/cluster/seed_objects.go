package cluster

import (
	"fmt"
	"hash/fnv"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func newNode(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{ProviderID: "testcluster://" + name},
	}
}

// readyNodeStatus is what a kubelet reports for a healthy node.
func readyNodeStatus(name, ip string) corev1.NodeStatus {
	now := metav1.Now()
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity,
		Phase:       corev1.NodeRunning,
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "kubelet is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now,
		}},
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: ip},
			{Type: corev1.NodeHostName, Address: name},
		},
		NodeInfo: corev1.NodeSystemInfo{
			KubeletVersion: "v1.36.3", ContainerRuntimeVersion: "containerd://2.1.0",
			OperatingSystem: "linux", Architecture: "amd64", OSImage: "Debian GNU/Linux 13 (trixie)",
		},
	}
}

func podTemplate(labels map[string]string, image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(labels)},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  "main",
				Image: image,
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			}},
			TerminationGracePeriodSeconds: ptr.To(int64(30)),
		},
	}
}

// podFromTemplate is the pod a controller would create from tmpl, already
// bound to node (there is no scheduler).
func podFromTemplate(ns, name string, tmpl corev1.PodTemplateSpec, owner metav1.OwnerReference, node string) *corev1.Pod {
	spec := *tmpl.Spec.DeepCopy()
	spec.NodeName = node
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns,
			Labels:          maps.Clone(tmpl.Labels),
			OwnerReferences: []metav1.OwnerReference{owner},
		},
		Spec: spec,
	}
}

func controllerRef(owner metav1.Object, apiVersion, kind string) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: apiVersion, Kind: kind, Name: owner.GetName(), UID: owner.GetUID(),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}
}

// runningStatus is what a kubelet reports for a started, ready pod.
func runningStatus(pod *corev1.Pod, podIPs []string, hostIP string) corev1.PodStatus {
	start := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	st := baseStatus(corev1.PodRunning, podIPs, hostIP, start)
	st.Conditions = podConditions(start, corev1.ConditionTrue, "")
	for _, c := range pod.Spec.Containers {
		cs := containerStatus(pod, c)
		cs.Ready, cs.Started = true, ptr.To(true)
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: start}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	return st
}

// succeededStatus is what a kubelet reports for a pod whose containers all
// exited 0 and will not restart.
func succeededStatus(pod *corev1.Pod, podIP, hostIP string) corev1.PodStatus {
	start := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	finish := metav1.NewTime(start.Add(5 * time.Minute))
	st := baseStatus(corev1.PodSucceeded, []string{podIP}, hostIP, start)
	st.Conditions = podConditions(start, corev1.ConditionFalse, "PodCompleted")
	for _, c := range pod.Spec.Containers {
		cs := containerStatus(pod, c)
		cs.Started = ptr.To(false)
		cs.State.Terminated = &corev1.ContainerStateTerminated{
			ExitCode: 0, Reason: "Completed", StartedAt: start, FinishedAt: finish, ContainerID: cs.ContainerID,
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	return st
}

func baseStatus(phase corev1.PodPhase, podIPs []string, hostIP string, start metav1.Time) corev1.PodStatus {
	st := corev1.PodStatus{
		Phase:     phase,
		HostIP:    hostIP,
		HostIPs:   []corev1.HostIP{{IP: hostIP}},
		PodIP:     podIPs[0],
		StartTime: &start,
	}
	for _, ip := range podIPs {
		st.PodIPs = append(st.PodIPs, corev1.PodIP{IP: ip})
	}
	return st
}

// podConditions: scheduled and initialized; ready is ready (Running) or
// not with reason (Succeeded).
func podConditions(at metav1.Time, ready corev1.ConditionStatus, reason string) []corev1.PodCondition {
	cond := func(t corev1.PodConditionType, s corev1.ConditionStatus, r string) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: s, Reason: r, LastTransitionTime: at}
	}
	return []corev1.PodCondition{
		cond(corev1.PodReadyToStartContainers, ready, ""),
		cond(corev1.PodInitialized, corev1.ConditionTrue, reason),
		cond(corev1.PodReady, ready, reason),
		cond(corev1.ContainersReady, ready, reason),
		cond(corev1.PodScheduled, corev1.ConditionTrue, ""),
	}
}

func containerStatus(pod *corev1.Pod, c corev1.Container) corev1.ContainerStatus {
	id := shortHash(pod.Namespace, pod.Name, c.Name)
	return corev1.ContainerStatus{
		Name:        c.Name,
		Image:       c.Image,
		ImageID:     c.Image + "@sha256:" + strings.Repeat(id, 64/len(id)+1)[:64],
		ContainerID: "containerd://" + strings.Repeat(id, 64/len(id)+1)[:64],
	}
}

// templateHash and podSuffix are stable stand-ins for the random suffixes
// controllers give names (same alphabet), so reruns create the same names.
func templateHash(parts ...string) string { return safeEncode(hashOf(parts...), 10) }

func podSuffix(ns, owner string, i int) string {
	return safeEncode(hashOf(ns, owner, fmt.Sprint(i)), 5)
}

// safeAlphabet is apimachinery's rand.SafeEncodeString alphabet: no vowels,
// no confusable characters.
const safeAlphabet = "bcdfghjklmnpqrstvwxz2456789"

func safeEncode(h uint64, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = safeAlphabet[h%uint64(len(safeAlphabet))]
		h /= uint64(len(safeAlphabet))
	}
	return string(b)
}

func hashOf(parts ...string) uint64 {
	f := fnv.New64a()
	for _, p := range parts {
		f.Write([]byte(p))
		f.Write([]byte{0})
	}
	return f.Sum64()
}

func shortHash(parts ...string) string { return fmt.Sprintf("%016x", hashOf(parts...)) }

func intOrString(port int32) intstr.IntOrString { return intstr.FromInt32(port) }

// dnsLabel turns a test name into a prefix that keeps "<prefix>-ns-N" a
// valid DNS label: lower case, [a-z0-9-], at most 40 characters (a hash of
// the full name replaces the tail of longer ones).
func dnsLabel(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	s := strings.Trim(b.String(), "-")
	if len(s) > 40 {
		s = strings.TrimRight(s[:33], "-") + "-" + safeEncode(hashOf(name), 6)
	}
	if s == "" || s[0] < 'a' {
		s = "t" + s
	}
	return s
}
