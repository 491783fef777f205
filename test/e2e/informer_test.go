package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kubeindex/kubeindex/test/cluster"
)

var podsGVR = corev1.SchemeGroupVersion.WithResource("pods")

// TestKubeInformers runs client-go informers on pods with kubeindex as
// their server: a typed SharedIndexInformer and a dynamic one (list then
// watch), and a typed one with client-go's WatchListClient feature (a
// streaming list: sendInitialEvents, then the initial-events-end bookmark,
// and no list at all); each over all pods and over one node's
// (fieldSelector=spec.nodeName, the per-node agent). Each must hold exactly
// what the API server lists with the same selector: after the first sync,
// after pods are created, relabelled and deleted under it, after a watch
// resumed from a resourceVersion kubeindex no longer holds got 410 Expired
// and the informer relisted, and after kubeindex restarts under it (with
// changes while it was down: the new process does not hold the informer's
// resourceVersion either).
func TestKubeInformers(t *testing.T) {
	c := cluster.StartForTest(t)
	cs, dyn := c.Clients(t)
	seeded := cluster.SeedForTest(t, cs, dyn, cluster.SeedOptions{})
	ctx := t.Context()
	ch := &churner{cs: cs, namespaces: seeded.Namespaces, nodes: []string{seeded.Nodes[0].Name, seeded.Nodes[1].Name}}

	// A resourceVersion from before kubeindex starts, with changes after it:
	// no kubeindex started later holds it in its history.
	before, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	staleRV := before.ResourceVersion
	ch.run(t, 3)

	k := startKubeAPIKubeindex(t, c.Kubeconfig)
	addr := k.hostPort(t)
	enableWatchListClient(t)
	kcs, err := kubernetes.NewForConfig(k.restConfig())
	if err != nil {
		t.Fatal(err)
	}
	kdyn, err := dynamic.NewForConfig(k.restConfig())
	if err != nil {
		t.Fatal(err)
	}
	node := "spec.nodeName=" + seeded.Nodes[0].Name
	infs := []*informerUnderTest{
		typedPodInformer("typed", kcs, "", false),
		dynamicPodInformer("dynamic", kdyn, ""),
		typedPodInformer("watchlist", kcs, "", true),
		typedPodInformer("typed "+node, kcs, node, false),
		dynamicPodInformer("dynamic "+node, kdyn, node),
		typedPodInformer("watchlist "+node, kcs, node, true),
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, inf := range infs {
			go inf.informer.RunWithContext(runCtx)
		}
		<-runCtx.Done()
	}()
	t.Cleanup(func() { stop(); <-done })
	if err := waitSynced(ctx, converge, infs); err != nil {
		t.Fatal(err)
	}
	checkInformers(t, cs, infs, "the first sync")

	ch.run(t, 30)
	checkInformers(t, cs, infs, "pods were created, relabelled and deleted under them")

	eventOnEveryWatch(t, ch, infs)
	was := map[string]lwStats{}
	for _, inf := range infs {
		was[inf.name] = inf.lw.stats()
		inf.lw.resumeFromStale(staleRV)
	}
	eventually(t, converge, "410 Expired for a watch from resourceVersion "+staleRV, func() error {
		for _, inf := range infs {
			if s := inf.lw.stats(); s.Expired <= was[inf.name].Expired {
				return fmt.Errorf("%s: no 410 since the watch resumed from %s: %+v", inf.name, staleRV, s)
			}
		}
		return nil
	})
	ch.run(t, 6)
	checkInformers(t, cs, infs, "a 410 made them relist")
	for _, inf := range infs {
		s := inf.lw.stats()
		switch {
		case inf.watchList && s.InitialEvents <= was[inf.name].InitialEvents:
			t.Errorf("%s: no new streaming list after the 410: %+v", inf.name, s)
		case !inf.watchList && s.Lists <= was[inf.name].Lists:
			t.Errorf("%s: no list after the 410: %+v", inf.name, s)
		}
	}

	// With an event on its current watch, the reflector takes the end of
	// the watch for a server going away and watches again from its last
	// resourceVersion, against the new process (not relisting by itself).
	eventOnEveryWatch(t, ch, infs)
	for _, inf := range infs {
		was[inf.name] = inf.lw.stats()
	}
	k.stop(t)
	ch.run(t, 6)
	startKubeAPIKubeindex(t, c.Kubeconfig, "--listen", addr)
	ch.run(t, 6)
	checkInformers(t, cs, infs, "kubeindex restarted under them, with changes while it was down")
	for _, inf := range infs {
		// The new process's history starts at its first list, after the
		// pods deleted while it was down: it cannot resume the informers'
		// watches and must answer 410, unless a watch came while it was
		// not yet synced and its error made the informer relist anyway.
		// Equality above is what matters; this says which happened.
		s := inf.lw.stats()
		t.Logf("%s after the restart: %d more 410s, %d more lists, %d more streaming lists", inf.name,
			s.Expired-was[inf.name].Expired, s.Lists-was[inf.name].Lists, s.InitialEvents-was[inf.name].InitialEvents)
	}

	for _, inf := range infs {
		s := inf.lw.stats()
		if inf.watchList && (s.Lists != 0 || s.InitialEvents == 0) {
			t.Errorf("%s: %d lists and %d streaming lists, want only streaming lists: kubeindex's sendInitialEvents did not satisfy client-go, which fell back to listing", inf.name, s.Lists, s.InitialEvents)
		}
		t.Logf("%s: %+v", inf.name, s)
	}
}

// eventOnEveryWatch churns until every informer's current watch has passed
// an event on. Else the reflector takes the watch's end for a broken watch
// ("very short watch") and relists by itself, instead of resuming from its
// resourceVersion, which is what the test is about.
func eventOnEveryWatch(t *testing.T, ch *churner, infs []*informerUnderTest) {
	t.Helper()
	ch.run(t, 4)
	eventually(t, converge, "an event on every informer's watch", func() error {
		for _, inf := range infs {
			if inf.lw.stats().Events == 0 {
				return fmt.Errorf("%s: no event on its current watch", inf.name)
			}
		}
		return nil
	})
}

// checkInformers waits until every informer holds what the API server lists
// with the informer's selector.
func checkInformers(t *testing.T, cs kubernetes.Interface, infs []*informerUnderTest, after string) {
	t.Helper()
	eventually(t, converge, "informers equal to the API server after "+after, func() error {
		var errs []error
		for _, inf := range infs {
			l, err := cs.CoreV1().Pods("").List(t.Context(), metav1.ListOptions{FieldSelector: inf.fieldSelector})
			if err != nil {
				return stopPolling{err}
			}
			want := make([]listEntry, 0, len(l.Items))
			for _, p := range l.Items {
				want = append(want, listEntry{p.Namespace + "/" + p.Name, p.ResourceVersion})
			}
			sortEntries(want)
			got, err := storeEntries(inf.informer.GetStore())
			if err != nil {
				return stopPolling{err}
			}
			if d := cmp.Diff(want, got); d != "" {
				errs = append(errs, fmt.Errorf("informer %s (%+v) differs from the API server (-API server +informer):\n%s", inf.name, inf.lw.stats(), d))
			}
		}
		return errors.Join(errs...)
	})
}

// typedPodInformer is a typed SharedIndexInformer on pods with kubeindex as
// its server; watchList says whether it syncs by streaming lists.
func typedPodInformer(name string, cs kubernetes.Interface, fieldSelector string, watchList bool) *informerUnderTest {
	pods := cs.CoreV1().Pods("")
	lw := newObservedLW(
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = fieldSelector
			return pods.List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = fieldSelector
			return pods.Watch(ctx, o)
		},
		!watchList)
	return &informerUnderTest{
		name: name, lw: lw, fieldSelector: fieldSelector, watchList: watchList,
		informer: cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{}),
	}
}

// dynamicPodInformer is an informer of unstructured pods through the
// dynamic client, listing then watching.
func dynamicPodInformer(name string, dyn dynamic.Interface, fieldSelector string) *informerUnderTest {
	pods := dyn.Resource(podsGVR)
	lw := newObservedLW(
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = fieldSelector
			return pods.List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = fieldSelector
			return pods.Watch(ctx, o)
		},
		true)
	return &informerUnderTest{
		name: name, lw: lw, fieldSelector: fieldSelector,
		informer: cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, cache.Indexers{}),
	}
}

// enableWatchListClient turns client-go's WatchListClient feature on for
// the test (it is on by default in this client-go; KUBE_FEATURE_WatchListClient
// could turn it off). Reflectors read it when they start; those that must
// list opt out one by one (observedLW.noWatchList).
func enableWatchListClient(t *testing.T) {
	gates := clientfeatures.FeatureGates()
	if gates.Enabled(clientfeatures.WatchListClient) {
		return
	}
	clientfeatures.ReplaceFeatureGates(forcedGate{gates, clientfeatures.WatchListClient})
	t.Cleanup(func() { clientfeatures.ReplaceFeatureGates(gates) })
}

type forcedGate struct {
	clientfeatures.Gates
	on clientfeatures.Feature
}

func (g forcedGate) Enabled(f clientfeatures.Feature) bool {
	return f == g.on || g.Gates.Enabled(f)
}

// churner creates, relabels and deletes pods in the seeded namespaces, on
// two nodes, as a cluster's workloads would: step i creates pod churn-i,
// relabels churn-(i-1) and deletes churn-(i-3).
type churner struct {
	cs         kubernetes.Interface
	namespaces []string
	nodes      []string
	next       int
}

func (c *churner) pod(i int) (ns, name string) {
	return c.namespaces[i%len(c.namespaces)], fmt.Sprintf("churn-%d", i)
}

// run takes steps steps, failing the test on any error.
func (c *churner) run(t *testing.T, steps int) {
	t.Helper()
	ctx := t.Context()
	for range steps {
		i := c.next
		c.next++
		ns, name := c.pod(i)
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"churn": "new"}},
			Spec: corev1.PodSpec{
				NodeName:   c.nodes[i%len(c.nodes)],
				Containers: []corev1.Container{{Name: "c", Image: "example.com/churn:1"}},
			},
		}
		if _, err := c.cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if i >= 1 {
			ns, name := c.pod(i - 1)
			patch := fmt.Appendf(nil, `{"metadata":{"labels":{"churn":"relabelled-%d"}}}`, i)
			if _, err := c.cs.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if i >= 3 {
			ns, name := c.pod(i - 3)
			// Zero grace: no kubelet would ever finish a graceful delete.
			if err := c.cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
				t.Fatal(err)
			}
		}
	}
}
