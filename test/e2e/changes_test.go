package e2e

import (
	"fmt"
	"net/url"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
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

// testChanges makes creates, updates and deletes through the API server
// and waits, with a deadline, for kubeindex to show each of them.
func testChanges(t *testing.T, c *cluster.Cluster, seeded *cluster.Seeded, def, custom *kubeindex) {
	cs, dyn := c.Clients(t)
	api := newAPIServer(t, c)
	ctx := t.Context()
	ns := seeded.Namespaces[0]
	pods := cs.CoreV1().Pods(ns)
	kis := []*kubeindex{def, custom}
	key := ns + "/e2e-probe"
	label := func(app string) url.Values {
		return url.Values{"labelSelector": {"app=" + app}}
	}

	// Create.
	pod, err := pods.Create(ctx, probePod(ns, "e2e-probe", map[string]string{"app": "probe"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Pods(ns).Delete(ctx, "e2e-probe", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
	})
	for _, k := range kis {
		eventually(t, converge, "the created pod", func() error {
			if err := sameObject(ctx, k, api, podsR, ns, "e2e-probe"); err != nil {
				return err
			}
			return sameList(ctx, k, api, podsR, "", label("probe"), label("probe"))
		})
	}
	eventually(t, converge, "the created pod in the label index", func() error {
		return indexHas(custom, podsR, "app", "probe", key)
	})

	// Status update, as a kubelet would: a dual-stack address.
	pod.Status = corev1.PodStatus{
		Phase:  corev1.PodRunning,
		PodIP:  probeIPv4,
		PodIPs: []corev1.PodIP{{IP: probeIPv4}, {IP: probeIPv6}},
	}
	if pod, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, ip := range []string{probeIPv4, probeIPv6} {
		eventually(t, converge, "the probe's address "+ip, func() error {
			got, err := sameIPLookup(ctx, def, cs, ip)
			if err == nil && !slices.Equal(got.keys(), []string{key}) {
				err = fmt.Errorf("lookup of %s: %v, want %s", ip, got.keys(), key)
			}
			return err
		})
	}

	// Status update changing the address: the old one is free.
	pod.Status.PodIP = probeIPv4Next
	pod.Status.PodIPs = []corev1.PodIP{{IP: probeIPv4Next}}
	if pod, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, ip := range []string{probeIPv4, probeIPv6, probeIPv4Next} {
		eventually(t, converge, "the lookup of "+ip+" after the address changed", func() error {
			_, err := sameIPLookup(ctx, def, cs, ip)
			return err
		})
	}
	if got := lookup(t, def, probeIPv4Next); !slices.Equal(got.keys(), []string{key}) || got.Match != "pod" {
		t.Errorf("lookup of %s: %q %v, want pod %s", probeIPv4Next, got.Match, got.keys(), key)
	}

	// Relabel.
	patch := []byte(`{"metadata":{"labels":{"app":"probe2"}}}`)
	if _, err = pods.Patch(ctx, "e2e-probe", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, k := range kis {
		eventually(t, converge, "the relabelled pod", func() error {
			if err := sameObject(ctx, k, api, podsR, ns, "e2e-probe"); err != nil {
				return err
			}
			if err := sameList(ctx, k, api, podsR, "", label("probe"), label("probe")); err != nil {
				return err
			}
			return sameList(ctx, k, api, podsR, "", label("probe2"), label("probe2"))
		})
	}
	eventually(t, converge, "the label index to follow the relabel", func() error {
		if err := indexHas(custom, podsR, "app", "probe"); err != nil {
			return err
		}
		return indexHas(custom, podsR, "app", "probe2", key)
	})

	// A spec update of another resource.
	d := seeded.Deployments[0]
	scale := []byte(`{"spec":{"replicas":5}}`)
	if _, err := cs.AppsV1().Deployments(d.Namespace).Patch(ctx, d.Name, types.MergePatchType, scale, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, converge, "the scaled deployment", func() error {
		return sameObject(ctx, def, api, deploymentsR, d.Namespace, d.Name)
	})

	// A custom resource: create, change the indexed field, delete.
	widgets := dyn.Resource(cluster.WidgetGVR).Namespace(ns)
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
		if err := sameObject(ctx, custom, api, widgetsR, ns, "e2e-widget"); err != nil {
			return err
		}
		return indexHas(custom, widgetsR, "tag", "e2e-tag", wkey)
	})
	recolor := []byte(`{"spec":{"color":"blue","tags":["e2e-tag2"]}}`)
	if _, err := widgets.Patch(ctx, "e2e-widget", types.MergePatchType, recolor, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, converge, "the widget's indexes to follow the change", func() error {
		if err := sameObject(ctx, custom, api, widgetsR, ns, "e2e-widget"); err != nil {
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

	// Deletes: the probe, a seeded pod with an address, a service, a node.
	victim := seeded.Pods[1]
	victimIP := victim.Status.PodIP
	now := metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}
	for _, del := range []func() error{
		func() error { return pods.Delete(ctx, "e2e-probe", now) },
		func() error { return cs.CoreV1().Pods(victim.Namespace).Delete(ctx, victim.Name, now) },
		func() error {
			s := seeded.Services[0]
			return cs.CoreV1().Services(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{})
		},
		func() error {
			return cs.CoreV1().Nodes().Delete(ctx, seeded.Nodes[len(seeded.Nodes)-1].Name, metav1.DeleteOptions{})
		},
	} {
		if err := del(); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range kis {
		eventually(t, converge, "the deleted pods to go", func() error {
			if err := absent(k, podsR, ns, "e2e-probe"); err != nil {
				return err
			}
			if err := absent(k, podsR, victim.Namespace, victim.Name); err != nil {
				return err
			}
			return sameList(ctx, k, api, podsR, "", label("probe2"), label("probe2"))
		})
	}
	for _, ip := range []string{probeIPv4Next, victimIP} {
		eventually(t, converge, "the deleted pods' addresses to be free", func() error {
			_, err := sameIPLookup(ctx, def, cs, ip)
			return err
		})
	}
	eventually(t, converge, "the label index to drop the deleted pod", func() error {
		return indexHas(custom, podsR, "app", "probe2")
	})
	eventually(t, converge, "the deleted service and node to go", func() error {
		s := seeded.Services[0]
		if err := absent(def, servicesR, s.Namespace, s.Name); err != nil {
			return err
		}
		return absent(def, nodesR, "", seeded.Nodes[len(seeded.Nodes)-1].Name)
	})
	eventually(t, converge, "counts after the changes", func() error {
		return sameCounts(ctx, def, api, defaultResources)
	})
}
