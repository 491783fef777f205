package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// shardRanges splits the hash space into n equal shardRange selectors
// over field, as KEP-5866's examples split it.
func shardRanges(field string, n int) []string {
	out := make([]string, n)
	step := ^uint64(0)/uint64(n) + 1
	for i := range n {
		end := "0x10000000000000000"
		if i < n-1 {
			end = fmt.Sprintf("0x%016x", uint64(i+1)*step)
		}
		out[i] = fmt.Sprintf("shardRange(%s, '0x%016x', '%s')", field, uint64(i)*step, end)
	}
	return out
}

// TestKubeShardSelector: shardSelector lists through /k8s equal the API
// server's own (its ShardedListAndWatch gate is on in the test cluster),
// over the UID and over the namespace, in JSON and protobuf, and partition
// the pods (each in exactly one of N shards); N sharded informers on /k8s
// (list then watch) each hold what the API server's shard holds under
// churn, and their events partition too: no pod's event reaches two
// shards. A bad selector is a 400 carrying the API server's message.
func TestKubeShardSelector(t *testing.T) {
	c := cluster.StartForTest(t)
	cs, dyn := c.Clients(t)
	seeded := cluster.SeedForTest(t, cs, dyn, cluster.SeedOptions{})
	k := startKubeAPIKubeindex(t, c.Kubeconfig)
	ctx := t.Context()
	kcs := kubernetes.NewForConfigOrDie(jsonConfig(k.restConfig()))
	kpb := kubernetes.NewForConfigOrDie(protobufConfig(k.restConfig()))

	for _, field := range []string{"object.metadata.uid", "object.metadata.namespace"} {
		sels := shardRanges(field, 4)
		eventually(t, converge, "shards over "+field+" equal to the API server's", func() error {
			all, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
			if err != nil {
				return stopPolling{err}
			}
			seen := map[string]int{}
			var errs []error
			for i, sel := range sels {
				want, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{ShardSelector: sel})
				if err != nil {
					return stopPolling{err}
				}
				if want.ShardInfo == nil {
					return stopPolling{errors.New("the API server ignores shardSelector: is its ShardedListAndWatch gate on?")}
				}
				for _, client := range []kubernetes.Interface{kcs, kpb} {
					got, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{ShardSelector: sel})
					if err != nil {
						return stopPolling{err}
					}
					if d := cmp.Diff(podEntries(want.Items), podEntries(got.Items)); d != "" {
						errs = append(errs, fmt.Errorf("shard %d (-API server +kubeindex):\n%s", i, d))
					}
					if got.ShardInfo == nil || *got.ShardInfo != *want.ShardInfo {
						errs = append(errs, fmt.Errorf("shard %d: shardInfo %+v, the API server's %+v", i, got.ShardInfo, want.ShardInfo))
					}
				}
				for _, p := range want.Items {
					seen[p.Namespace+"/"+p.Name]++
				}
			}
			for _, p := range all.Items {
				if n := seen[p.Namespace+"/"+p.Name]; n != 1 {
					errs = append(errs, fmt.Errorf("%s/%s in %d shards", p.Namespace, p.Name, n))
				}
			}
			return errors.Join(errs...)
		})
	}

	sels := shardRanges("object.metadata.uid", 3)
	var infs []*informerUnderTest
	events := make([]map[string]int, len(sels)) // per shard: events per pod UID (names repeat across tests)
	var mu sync.Mutex
	for i, sel := range sels {
		inf := shardedPodInformer(fmt.Sprintf("shard %d", i), kcs, sel)
		events[i] = map[string]int{}
		counts := events[i]
		inf.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { mu.Lock(); counts[string(o.(*corev1.Pod).UID)]++; mu.Unlock() },
			UpdateFunc: func(_, o any) { mu.Lock(); counts[string(o.(*corev1.Pod).UID)]++; mu.Unlock() },
		})
		infs = append(infs, inf)
	}
	runCtx, stop := context.WithCancel(context.Background())
	for _, inf := range infs {
		go inf.informer.RunWithContext(runCtx)
	}
	t.Cleanup(stop)
	if err := waitSynced(ctx, converge, infs); err != nil {
		t.Fatal(err)
	}
	ch := &churner{cs: cs, namespaces: seeded.Namespaces, nodes: []string{seeded.Nodes[0].Name, seeded.Nodes[1].Name}}
	ch.run(t, 30)
	eventually(t, converge, "sharded informers equal to the API server's shards", func() error {
		var errs []error
		for i, inf := range infs {
			want, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{ShardSelector: sels[i]})
			if err != nil {
				return stopPolling{err}
			}
			got, err := storeEntries(inf.informer.GetStore())
			if err != nil {
				return stopPolling{err}
			}
			if d := cmp.Diff(podEntries(want.Items), got); d != "" {
				errs = append(errs, fmt.Errorf("%s (-API server +informer):\n%s", inf.name, d))
			}
		}
		return errors.Join(errs...)
	})
	stop()
	mu.Lock()
	defer mu.Unlock()
	for i := range events {
		for uid := range events[i] {
			for j := range events {
				if j != i && events[j][uid] > 0 {
					t.Errorf("pod %s: events in shards %d and %d", uid, i, j)
				}
			}
		}
		t.Logf("shard %d: %d pods had events, %+v", i, len(events[i]), infs[i].lw.stats())
	}

	rec := rawGet(t, http.DefaultClient, k.URL+k8sPrefix+"/api/v1/pods?shardSelector=shardRange(object.metadata.uid,'0x0','0x1')", "application/json")
	if rec.code != 400 {
		t.Errorf("a selector with short hex values: %+v", rec)
	}
}

func podEntries(items []corev1.Pod) []listEntry {
	out := make([]listEntry, 0, len(items))
	for _, p := range items {
		out = append(out, listEntry{p.Namespace + "/" + p.Name, p.ResourceVersion})
	}
	sortEntries(out)
	return out
}

// shardedPodInformer is a typed pods informer on one shard.
func shardedPodInformer(name string, cs kubernetes.Interface, shard string) *informerUnderTest {
	pods := cs.CoreV1().Pods("")
	lw := newObservedLW(
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.ShardSelector = shard
			return pods.List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.ShardSelector = shard
			return pods.Watch(ctx, o)
		},
		true)
	return &informerUnderTest{name: name, lw: lw, informer: cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})}
}
