package e2e

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestDeployRunsTwoReplicas holds deploy/ to what its comments promise
// (TestDeploy proves the API server accepts it): two replicas, rolled one
// at a time with the new one ready first, spread over nodes, and a
// PodDisruptionBudget over exactly the Deployment's pods that lets one go
// at a time.
func TestDeployRunsTwoReplicas(t *testing.T) {
	objs := renderDeploy(t)
	var d appsv1.Deployment
	one(t, objs, "Deployment", &d)
	var pdb policyv1.PodDisruptionBudget
	one(t, objs, "PodDisruptionBudget", &pdb)

	if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
		t.Errorf("the Deployment runs %v replicas; want at least 2", d.Spec.Replicas)
	}
	if ru := d.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 {
		t.Errorf("rolling update %+v: a rollout must not take a replica away before its successor is ready (maxUnavailable 0)", d.Spec.Strategy.RollingUpdate)
	}
	podLabels := labels.Set(d.Spec.Template.Labels)
	spread := false
	for _, c := range d.Spec.Template.Spec.TopologySpreadConstraints {
		sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
		if err == nil && c.TopologyKey == "kubernetes.io/hostname" && c.MaxSkew == 1 && sel.Matches(podLabels) {
			spread = true
		}
	}
	if !spread {
		t.Errorf("no topology spread over kubernetes.io/hostname that selects the Deployment's pods: %+v", d.Spec.Template.Spec.TopologySpreadConstraints)
	}
	if pdb.Namespace != d.Namespace {
		t.Errorf("the PodDisruptionBudget is in %q, the Deployment in %q", pdb.Namespace, d.Namespace)
	}
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(podLabels) {
		t.Errorf("the PodDisruptionBudget's selector %v (%v) does not select the Deployment's pods %v", pdb.Spec.Selector, err, podLabels)
	}
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 || pdb.Spec.MaxUnavailable != nil {
		t.Errorf("the PodDisruptionBudget says minAvailable %v, maxUnavailable %v; want minAvailable 1: one replica answers during a drain", pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable)
	}
}

// one decodes the only rendered object of kind into out.
func one(t *testing.T, objs []*unstructured.Unstructured, kind string, out any) {
	t.Helper()
	found := ofKind(objs, kind)
	if len(found) != 1 {
		t.Fatalf("deploy/ renders %d %s objects; want 1", len(found), kind)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(found[0].Object, out); err != nil {
		t.Fatalf("%s: %v", describe(found[0]), err)
	}
}
