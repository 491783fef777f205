package scenario

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// syncWorkloadStatus recomputes the status of the ReplicaSet at k and of
// its Deployment from the pods the ReplicaSet owns, as the controllers do,
// and stores each only when it changed. s.mu must be held.
func (s *Scenario) syncWorkloadStatus(k key) {
	rs := find[appsv1.ReplicaSet](s, replicaSets, k)
	if rs == nil {
		return
	}
	var total, ready int32
	for _, p := range list[corev1.Pod](s, pods) {
		if p.Namespace != rs.Namespace || owner(&p.ObjectMeta).UID != rs.UID || p.DeletionTimestamp != nil {
			continue
		}
		total++
		if p.Status.Phase == corev1.PodRunning {
			ready++
		}
	}
	rsStatus := appsv1.ReplicaSetStatus{Replicas: total, FullyLabeledReplicas: total, ReadyReplicas: ready,
		AvailableReplicas: ready, ObservedGeneration: rs.Generation}
	if !equality.Semantic.DeepEqual(rs.Status, rsStatus) {
		rs = rs.DeepCopy()
		rs.Status = rsStatus
		s.put(replicaSets, rs)
	}
	dep := find[appsv1.Deployment](s, deployments, key{rs.Namespace, owner(&rs.ObjectMeta).Name})
	if dep == nil {
		return
	}
	var want int32
	if dep.Spec.Replicas != nil {
		want = *dep.Spec.Replicas
	}
	available := corev1.ConditionTrue
	if ready < want {
		available = corev1.ConditionFalse
	}
	now := s.now()
	depStatus := appsv1.DeploymentStatus{
		ObservedGeneration: dep.Generation,
		Replicas:           total, UpdatedReplicas: total, ReadyReplicas: ready,
		AvailableReplicas: ready, UnavailableReplicas: max(0, want-ready),
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: available, Reason: "MinimumReplicasAvailable",
				Message: "Deployment has minimum availability.", LastUpdateTime: now, LastTransitionTime: now},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable",
				Message:        fmt.Sprintf("ReplicaSet %q has successfully progressed.", rs.Name),
				LastUpdateTime: now, LastTransitionTime: now},
		},
	}
	if !sameDeploymentStatus(dep.Status, depStatus) {
		dep = dep.DeepCopy()
		dep.Status = depStatus
		s.put(deployments, dep)
	}
}

// sameDeploymentStatus compares two statuses, ignoring condition timestamps.
func sameDeploymentStatus(a, b appsv1.DeploymentStatus) bool {
	strip := func(st appsv1.DeploymentStatus) appsv1.DeploymentStatus {
		st = *st.DeepCopy()
		for i := range st.Conditions {
			st.Conditions[i].LastUpdateTime, st.Conditions[i].LastTransitionTime = metav1.Time{}, metav1.Time{}
		}
		return st
	}
	return equality.Semantic.DeepEqual(strip(a), strip(b))
}

// find returns the current object of resource at k, or nil. s.mu must be
// held.
func find[T any, PT interface {
	*T
	metav1.Object
}](s *Scenario, resource string, k key) *T {
	for _, o := range list[T](s, resource) {
		if m := PT(o); m.GetNamespace() == k.namespace && m.GetName() == k.name {
			return o
		}
	}
	return nil
}
