package scenario

import (
	"fmt"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Step makes one random (seeded) change of the kind a live cluster sees:
// a deployment scaled (a pod created Pending, or one marked terminating),
// a Pending pod started and given an IP, a terminating pod deleted, a
// container restart, a label or annotation change, a Job pod run,
// completed or removed once completed, a node heartbeat. Each change is
// one or more writes. Churn changes only generated objects (those with
// SimulatedAnnotation). IPs stay unique among pods that are not
// hostNetwork and not completed. It fails only when the store refuses a
// write.
func (s *Scenario) Step() (err error) {
	defer recoverStoreError(&err)
	s.mu.Lock()
	defer s.mu.Unlock()
	actions := []struct {
		weight int
		do     func() bool
	}{
		{3, s.scaleDeployment},
		{4, s.startPendingPod},
		{4, s.finishTerminatingPod},
		{1, s.restartContainer},
		{3, s.touchPod},
		{1, s.runJob},
		{2, s.completeJob},
		{1, s.removeCompletedPod},
		{1, s.heartbeatNode},
	}
	total := 0
	for _, a := range actions {
		total += a.weight
	}
	n := s.rng.IntN(total)
	for _, a := range actions {
		if n -= a.weight; n < 0 {
			if !a.do() && !s.touchPod() {
				s.heartbeatNode()
			}
			return nil
		}
	}
	return nil
}

// candidates returns the generated objects of resource that pass keep, in
// list order. s.mu must be held.
func candidates[T any, PT interface {
	*T
	metav1.Object
}](s *Scenario, resource string, keep func(*T) bool) []*T {
	var out []*T
	for _, o := range list[T](s, resource) {
		if PT(o).GetAnnotations()[SimulatedAnnotation] == "true" && keep(o) {
			out = append(out, o)
		}
	}
	return out
}

// pick returns a random element of objs, or nil. s.mu must be held.
func pick[T any](s *Scenario, objs []*T) *T {
	if len(objs) == 0 {
		return nil
	}
	return objs[s.rng.IntN(len(objs))]
}

func terminating(p *corev1.Pod) bool { return p.DeletionTimestamp != nil }

// ownerReplicaSet returns the key of the ReplicaSet that owns pod, if one does.
func ownerReplicaSet(p *corev1.Pod) (key, bool) {
	ref := owner(&p.ObjectMeta)
	return key{p.Namespace, ref.Name}, ref.Kind == "ReplicaSet"
}

func (s *Scenario) scaleDeployment() bool {
	dep := pick(s, candidates(s, deployments, func(*appsv1.Deployment) bool { return true }))
	if dep == nil {
		return false
	}
	rs := pick(s, candidates(s, replicaSets, func(o *appsv1.ReplicaSet) bool {
		return o.Namespace == dep.Namespace && owner(&o.ObjectMeta).UID == dep.UID
	}))
	if rs == nil {
		return false
	}
	replicas := *dep.Spec.Replicas
	switch {
	case replicas <= 1:
		replicas++
	case replicas >= 6:
		replicas--
	default:
		replicas += int32(2*s.rng.IntN(2) - 1)
	}
	newDep := dep.DeepCopy()
	newDep.Spec.Replicas, newDep.Generation = ptrTo(replicas), dep.Generation+1
	s.put(deployments, newDep)
	newRS := rs.DeepCopy()
	newRS.Spec.Replicas, newRS.Generation = ptrTo(replicas), rs.Generation+1
	if newRS.Annotations == nil {
		newRS.Annotations = map[string]string{}
	}
	newRS.Annotations["deployment.kubernetes.io/desired-replicas"] = fmt.Sprint(replicas)
	s.put(replicaSets, newRS)
	live := candidates(s, pods, func(p *corev1.Pod) bool {
		return p.Namespace == rs.Namespace && owner(&p.ObjectMeta).UID == rs.UID && !terminating(p)
	})
	switch {
	case int32(len(live)) < replicas:
		n := s.pickNode()
		s.put(pods, s.replicaPod(rs, n))
	case int32(len(live)) > replicas:
		p := pick(s, live).DeepCopy()
		p.DeletionTimestamp = ptrTo(metav1.NewTime(s.opts.Now().Add(30 * time.Second).UTC().Truncate(time.Second)))
		p.DeletionGracePeriodSeconds = ptrTo[int64](30)
		s.put(pods, p)
	}
	s.syncWorkloadStatus(keyOf(&rs.ObjectMeta))
	return true
}

func (s *Scenario) startPendingPod() bool {
	pod := pick(s, candidates(s, pods, func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodPending && !terminating(p)
	}))
	if pod == nil {
		return false
	}
	s.startPod(pod)
	if k, ok := ownerReplicaSet(pod); ok {
		s.syncWorkloadStatus(k)
	}
	return true
}

func (s *Scenario) finishTerminatingPod() bool {
	pod := pick(s, candidates(s, pods, terminating))
	if pod == nil {
		return false
	}
	if !s.remove(pods, keyOf(&pod.ObjectMeta)) {
		return false
	}
	if k, ok := ownerReplicaSet(pod); ok {
		s.syncWorkloadStatus(k)
	}
	return true
}

func (s *Scenario) restartContainer() bool {
	pod := pick(s, candidates(s, pods, func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && p.Spec.RestartPolicy == corev1.RestartPolicyAlways
	}))
	if pod == nil || len(pod.Status.ContainerStatuses) == 0 {
		return false
	}
	pod = pod.DeepCopy()
	cs := &pod.Status.ContainerStatuses[0]
	now := s.now()
	reason := []string{"Error", "OOMKilled"}[s.rng.IntN(2)]
	cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: map[string]int32{"Error": 1, "OOMKilled": 137}[reason], Reason: reason,
		StartedAt: now, FinishedAt: now, ContainerID: cs.ContainerID,
	}}
	cs.RestartCount++
	cs.ContainerID = "containerd://" + s.hexString(64)
	cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}
	s.put(pods, pod)
	return true
}

// touchPod toggles a pod's "canary" label (so label-selected watches see
// objects enter and leave) or bumps an annotation.
func (s *Scenario) touchPod() bool {
	pod := pick(s, candidates(s, pods, func(p *corev1.Pod) bool { return !terminating(p) }))
	if pod == nil {
		return false
	}
	pod = pod.DeepCopy()
	if s.rng.IntN(2) == 0 {
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		if _, ok := pod.Labels["canary"]; ok {
			delete(pod.Labels, "canary")
		} else {
			pod.Labels["canary"] = "true"
		}
	} else {
		bump(&pod.ObjectMeta, "demo.kubeindex.dev/touched")
	}
	s.put(pods, pod)
	return true
}

// bump adds one to a counting annotation.
func bump(md *metav1.ObjectMeta, annotation string) {
	n, _ := strconv.Atoi(md.Annotations[annotation])
	if md.Annotations == nil {
		md.Annotations = map[string]string{}
	}
	md.Annotations[annotation] = strconv.Itoa(n + 1)
}

func (s *Scenario) runJob() bool {
	nss := s.appNamespaces()
	if len(nss) == 0 || len(s.nodes) == 0 {
		return false
	}
	s.jobs++
	base := fmt.Sprintf("report-%d", 29000000+s.jobs)
	ns := nss[s.rng.IntN(len(nss))]
	n := s.pickNode()
	s.put(pods, s.newJobPod(ns, base, n))
	return true
}

func (s *Scenario) completeJob() bool {
	pod := pick(s, candidates(s, pods, func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && owner(&p.ObjectMeta).Kind == "Job"
	}))
	if pod == nil {
		return false
	}
	n, ok := s.nodeByName(pod.Spec.NodeName)
	if !ok {
		return false
	}
	ips := podIPs(pod)
	pod = pod.DeepCopy()
	s.setPodPhase(pod, corev1.PodSucceeded, n, ips)
	s.put(pods, pod)
	return true
}

func (s *Scenario) removeCompletedPod() bool {
	pod := pick(s, candidates(s, pods, func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded && keyOf(&p.ObjectMeta) != s.keep
	}))
	return pod != nil && s.remove(pods, keyOf(&pod.ObjectMeta))
}

func (s *Scenario) heartbeatNode() bool {
	n := pick(s, candidates(s, nodes, func(*corev1.Node) bool { return true }))
	if n == nil {
		return false
	}
	n = n.DeepCopy()
	now := s.now()
	for i := range n.Status.Conditions {
		n.Status.Conditions[i].LastHeartbeatTime = now
	}
	bump(&n.ObjectMeta, "demo.kubeindex.dev/heartbeats")
	s.put(nodes, n)
	return true
}
