package e2e

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// TestKubeMetadataInformer: a metadata-only informer (client-go's metadata
// client, as controller-runtime's OnlyMetadata and kube-controller-manager's
// garbage collector use it) on /k8s holds what the API server lists, under
// churn, as a dynamic informer beside it does; and it receives metadata,
// not whole objects: the bytes each read from kubeindex are counted.
func TestKubeMetadataInformer(t *testing.T) {
	c := cluster.StartForTest(t)
	cs, dyn := c.Clients(t)
	seeded := cluster.SeedForTest(t, cs, dyn, cluster.SeedOptions{})
	ch := &churner{cs: cs, namespaces: seeded.Namespaces, nodes: []string{seeded.Nodes[0].Name, seeded.Nodes[1].Name}}
	k := startKubeAPIKubeindex(t, c.Kubeconfig)

	var metaBytes, wholeBytes atomic.Int64
	mc, err := metadata.NewForConfig(countingConfig(k.restConfig(), &metaBytes))
	if err != nil {
		t.Fatal(err)
	}
	kdyn, err := dynamic.NewForConfig(countingConfig(k.restConfig(), &wholeBytes))
	if err != nil {
		t.Fatal(err)
	}
	infs := []*informerUnderTest{metadataPodInformer("metadata", mc), dynamicPodInformer("dynamic", kdyn, "")}
	runCtx, stop := context.WithCancel(context.Background())
	for _, inf := range infs {
		go inf.informer.RunWithContext(runCtx)
	}
	t.Cleanup(stop)
	if err := waitSynced(t.Context(), converge, infs); err != nil {
		t.Fatal(err)
	}
	checkInformers(t, cs, infs, "the first sync")
	ch.run(t, 30)
	checkInformers(t, cs, infs, "pods were created, relabelled and deleted under them")
	for _, inf := range infs {
		if s := inf.lw.stats(); s.Events == 0 {
			t.Errorf("%s: no watch event: %+v", inf.name, s)
		}
	}
	m, w := metaBytes.Load(), wholeBytes.Load()
	t.Logf("read from /k8s by a pods informer through the sync and 30 churn steps: metadata-only %d bytes, whole objects %d bytes (%.1f×)",
		m, w, float64(w)/float64(m))
	if m*2 > w {
		t.Errorf("the metadata-only informer read %d bytes, the whole-object one %d: not metadata only", m, w)
	}
}

// metadataPodInformer is an informer of pods' PartialObjectMetadata through
// client-go's metadata client, listing then watching.
func metadataPodInformer(name string, mc metadata.Interface) *informerUnderTest {
	pods := mc.Resource(podsGVR)
	lw := newObservedLW(
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return pods.List(ctx, o) },
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return pods.Watch(ctx, o) },
		true)
	return &informerUnderTest{name: name, lw: lw,
		informer: cache.NewSharedIndexInformer(lw, &metav1.PartialObjectMetadata{}, 0, cache.Indexers{})}
}

// countingConfig is cfg with every response body's bytes added to n.
func countingConfig(cfg *rest.Config, n *atomic.Int64) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt, n} }
	return cfg
}

type countingTransport struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(r)
	if err == nil {
		resp.Body = countingBody{resp.Body, c.n}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}
