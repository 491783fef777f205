package e2e

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// Probe addresses come from TEST-NET-1 and the documentation prefix, far
// from the seed's blocks.
const (
	probeIPv4     = "192.0.2.10"
	probeIPv6     = "2001:db8:ffff::10"
	probeIPv4Next = "192.0.2.11"
)

// probePod is a pod created by a test, not yet scheduled.
func probePod(ns, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "main", Image: "example.com/probe:1.0"}},
		},
	}
}

// indexHas is nil when kubeindex's lookup of value in index lists exactly
// want (namespace/name keys).
func indexHas(k *kubeindex, r resource, index, value string, want ...string) error {
	got, err := k.list(r, url.Values{"index": {index}, "value": {value}})
	if err != nil {
		return err
	}
	slices.Sort(want)
	if !slices.Equal(keys(got), want) && !(len(want) == 0 && len(got) == 0) {
		return fmt.Errorf("%s?index=%s&value=%s: %v, want %v", r.ki, index, value, keys(got), want)
	}
	return nil
}

// changes is the state testChanges' steps pass on: the probe pod as the
// API server last returned it.
type changes struct {
	*agreeEnv
	ns  string
	key string // the probe pod's namespace/name
	pod *corev1.Pod
}

// probeName is the pod testChanges creates, changes and deletes.
const probeName = "e2e-probe"

// testChanges makes creates, updates and deletes through the API server
// and waits, with a deadline, for kubeindex to show each of them. Each
// step is a subtest that builds on the ones before it, so the first that
// fails ends the sequence.
func testChanges(t *testing.T, e *agreeEnv) {
	ns := e.seeded.Namespaces[0]
	ch := &changes{agreeEnv: e, ns: ns, key: ns + "/" + probeName}
	t.Cleanup(func() {
		_ = e.cs.CoreV1().Pods(ns).Delete(context.Background(), probeName, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
	})
	for _, step := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"CreatePod", ch.createPod},
		{"DualStackStatus", ch.dualStackStatus},
		{"AddressChange", ch.addressChange},
		{"Relabel", ch.relabel},
		{"ScaleDeployment", ch.scaleDeployment},
		{"CustomResource", ch.customResource},
		{"Deletes", ch.deletes},
	} {
		if !t.Run(step.name, step.run) {
			return
		}
	}
}

func (ch *changes) pods() typedcorev1.PodInterface { return ch.cs.CoreV1().Pods(ch.ns) }

func (ch *changes) kubeindexes() []*kubeindex { return []*kubeindex{ch.def, ch.custom} }

func appLabel(app string) url.Values { return url.Values{"labelSelector": {"app=" + app}} }

// createPod: a created pod shows in GET, in label-selected lists and in
// the label index.
func (ch *changes) createPod(t *testing.T) {
	ctx := t.Context()
	pod, err := ch.pods().Create(ctx, probePod(ch.ns, probeName, map[string]string{"app": "probe"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ch.pod = pod
	for _, k := range ch.kubeindexes() {
		eventually(t, converge, "the created pod", func() error {
			if err := sameObject(ctx, k, ch.api, podsR, ch.ns, probeName); err != nil {
				return err
			}
			return sameList(ctx, k, ch.api, podsR, "", appLabel("probe"), appLabel("probe"))
		})
	}
	eventually(t, converge, "the created pod in the label index", func() error {
		return indexHas(ch.custom, podsR, "app", "probe", ch.key)
	})
}

// dualStackStatus: a status update, as a kubelet would make it, gives the
// pod a dual-stack address, and both addresses find it.
func (ch *changes) dualStackStatus(t *testing.T) {
	ctx := t.Context()
	ch.pod.Status = corev1.PodStatus{
		Phase:  corev1.PodRunning,
		PodIP:  probeIPv4,
		PodIPs: []corev1.PodIP{{IP: probeIPv4}, {IP: probeIPv6}},
	}
	pod, err := ch.pods().UpdateStatus(ctx, ch.pod, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ch.pod = pod
	for _, ip := range []string{probeIPv4, probeIPv6} {
		eventually(t, converge, "the probe's address "+ip, func() error {
			got, err := sameIPLookup(ctx, ch.def, ch.cs, ip)
			if err == nil && !slices.Equal(got.keys(), []string{ch.key}) {
				err = fmt.Errorf("lookup of %s: %v, want %s", ip, got.keys(), ch.key)
			}
			return err
		})
	}
}

// addressChange: a status update changing the address frees the old ones.
func (ch *changes) addressChange(t *testing.T) {
	ctx := t.Context()
	ch.pod.Status.PodIP = probeIPv4Next
	ch.pod.Status.PodIPs = []corev1.PodIP{{IP: probeIPv4Next}}
	pod, err := ch.pods().UpdateStatus(ctx, ch.pod, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ch.pod = pod
	for _, ip := range []string{probeIPv4, probeIPv6, probeIPv4Next} {
		eventually(t, converge, "the lookup of "+ip+" after the address changed", func() error {
			_, err := sameIPLookup(ctx, ch.def, ch.cs, ip)
			return err
		})
	}
	if got := lookup(t, ch.def, probeIPv4Next); !slices.Equal(got.keys(), []string{ch.key}) || got.Match != "pod" {
		t.Errorf("lookup of %s: %q %v, want pod %s", probeIPv4Next, got.Match, got.keys(), ch.key)
	}
}

// relabel: a label change moves the pod between label-selected lists and
// between the label index's values.
func (ch *changes) relabel(t *testing.T) {
	ctx := t.Context()
	patch := []byte(`{"metadata":{"labels":{"app":"probe2"}}}`)
	if _, err := ch.pods().Patch(ctx, probeName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, k := range ch.kubeindexes() {
		eventually(t, converge, "the relabelled pod", func() error {
			if err := sameObject(ctx, k, ch.api, podsR, ch.ns, probeName); err != nil {
				return err
			}
			if err := sameList(ctx, k, ch.api, podsR, "", appLabel("probe"), appLabel("probe")); err != nil {
				return err
			}
			return sameList(ctx, k, ch.api, podsR, "", appLabel("probe2"), appLabel("probe2"))
		})
	}
	eventually(t, converge, "the label index to follow the relabel", func() error {
		if err := indexHas(ch.custom, podsR, "app", "probe"); err != nil {
			return err
		}
		return indexHas(ch.custom, podsR, "app", "probe2", ch.key)
	})
}

// scaleDeployment: a spec update of another resource.
func (ch *changes) scaleDeployment(t *testing.T) {
	ctx := t.Context()
	d := ch.seeded.Deployments[0]
	scale := []byte(`{"spec":{"replicas":5}}`)
	if _, err := ch.cs.AppsV1().Deployments(d.Namespace).Patch(ctx, d.Name, types.MergePatchType, scale, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, converge, "the scaled deployment", func() error {
		return sameObject(ctx, ch.def, ch.api, deploymentsR, d.Namespace, d.Name)
	})
}

// customResource: a Widget is created, has its indexed fields changed (a
// scalar and an array), and is deleted; its indexes follow each step.
func (ch *changes) customResource(t *testing.T) {
	ctx, ns, custom := t.Context(), ch.ns, ch.custom
	widgets := ch.dyn.Resource(cluster.WidgetGVR).Namespace(ns)
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "e2e-widget", "namespace": ns},
		"spec":     map[string]any{"color": "red", "size": int64(7), "tags": []any{"e2e-tag"}},
	}}
	if _, err := widgets.Create(ctx, w, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wkey := ns + "/e2e-widget"
	eventually(t, converge, "the created widget", func() error {
		if err := sameObject(ctx, custom, ch.api, widgetsR, ns, "e2e-widget"); err != nil {
			return err
		}
		return indexHas(custom, widgetsR, "tag", "e2e-tag", wkey)
	})
	recolor := []byte(`{"spec":{"color":"blue","tags":["e2e-tag2"]}}`)
	if _, err := widgets.Patch(ctx, "e2e-widget", types.MergePatchType, recolor, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, converge, "the widget's indexes to follow the change", func() error {
		if err := sameObject(ctx, custom, ch.api, widgetsR, ns, "e2e-widget"); err != nil {
			return err
		}
		if err := indexHas(custom, widgetsR, "tag", "e2e-tag"); err != nil {
			return err
		}
		if err := indexHas(custom, widgetsR, "tag", "e2e-tag2", wkey); err != nil {
			return err
		}
		red, err := custom.list(widgetsR, url.Values{"index": {"color"}, "value": {"red"}})
		if err != nil {
			return err
		}
		if slices.Contains(keys(red), wkey) {
			return fmt.Errorf("%s still under color=red", wkey)
		}
		return nil
	})
	if err := widgets.Delete(ctx, "e2e-widget", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, converge, "the deleted widget to go", func() error {
		if err := absent(custom, widgetsR, ns, "e2e-widget"); err != nil {
			return err
		}
		return indexHas(custom, widgetsR, "tag", "e2e-tag2")
	})
}

// deletes: the probe, a seeded pod with an address, a service and a node
// are deleted; they leave the answers, the indexes and the counts.
func (ch *changes) deletes(t *testing.T) {
	ctx, cs, seeded := t.Context(), ch.cs, ch.seeded
	victim := seeded.Pods[1]
	victimIP := victim.Status.PodIP
	svc := seeded.Services[0]
	node := seeded.Nodes[len(seeded.Nodes)-1].Name
	now := metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}
	for _, del := range []func() error{
		func() error { return ch.pods().Delete(ctx, probeName, now) },
		func() error { return cs.CoreV1().Pods(victim.Namespace).Delete(ctx, victim.Name, now) },
		func() error { return cs.CoreV1().Services(svc.Namespace).Delete(ctx, svc.Name, metav1.DeleteOptions{}) },
		func() error { return cs.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}) },
	} {
		if err := del(); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range ch.kubeindexes() {
		eventually(t, converge, "the deleted pods to go", func() error {
			if err := absent(k, podsR, ch.ns, probeName); err != nil {
				return err
			}
			if err := absent(k, podsR, victim.Namespace, victim.Name); err != nil {
				return err
			}
			return sameList(ctx, k, ch.api, podsR, "", appLabel("probe2"), appLabel("probe2"))
		})
	}
	for _, ip := range []string{probeIPv4Next, victimIP} {
		eventually(t, converge, "the deleted pods' addresses to be free", func() error {
			_, err := sameIPLookup(ctx, ch.def, cs, ip)
			return err
		})
	}
	eventually(t, converge, "the label index to drop the deleted pod", func() error {
		return indexHas(ch.custom, podsR, "app", "probe2")
	})
	eventually(t, converge, "the deleted service and node to go", func() error {
		if err := absent(ch.def, servicesR, svc.Namespace, svc.Name); err != nil {
			return err
		}
		return absent(ch.def, nodesR, "", node)
	})
	eventually(t, converge, "counts after the changes", func() error {
		return sameCounts(ctx, ch.def, ch.api, defaultResources)
	})
}
