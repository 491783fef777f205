package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// protobufConfig is cfg as kube-controller-manager configures its clients:
// protobuf for requests, protobuf then JSON accepted.
func protobufConfig(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return cfg
}

// jsonConfig is cfg asking for JSON only: client-go's typed clients
// prefer protobuf by default since 1.36.
func jsonConfig(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeJSON
	cfg.AcceptContentTypes = runtime.ContentTypeJSON
	return cfg
}

// protobufLists are the lists TestKubeProtobuf compares: a path under the
// API root and the typed client whose REST client decodes it.
var protobufLists = []struct {
	path   string
	client func(kubernetes.Interface) rest.Interface
}{
	{"/api/v1/pods", func(c kubernetes.Interface) rest.Interface { return c.CoreV1().RESTClient() }},
	{"/api/v1/services", func(c kubernetes.Interface) rest.Interface { return c.CoreV1().RESTClient() }},
	{"/api/v1/nodes", func(c kubernetes.Interface) rest.Interface { return c.CoreV1().RESTClient() }},
	{"/api/v1/namespaces", func(c kubernetes.Interface) rest.Interface { return c.CoreV1().RESTClient() }},
	{"/apis/apps/v1/deployments", func(c kubernetes.Interface) rest.Interface { return c.AppsV1().RESTClient() }},
	{"/apis/apps/v1/replicasets", func(c kubernetes.Interface) rest.Interface { return c.AppsV1().RESTClient() }},
}

// TestKubeProtobuf: a client-go configured for protobuf, as
// kube-controller-manager's are, gets from /k8s what it gets from the API
// server, decoded: lists of several kinds, a get, and typed pod informers
// (list then watch, a streaming watch list, and one node's pods) under
// churn; the answers are protobuf with the API server's Content-Type, and a
// custom resource is JSON only, as on the API server (406 for a client
// that accepts protobuf only), its metadata served in protobuf.
func TestKubeProtobuf(t *testing.T) {
	c := cluster.StartForTest(t)
	cs, dyn := c.Clients(t)
	seeded := cluster.SeedForTest(t, cs, dyn, cluster.SeedOptions{})
	k := startKubeAPIKubeindex(t, c.Kubeconfig)
	api := kubernetes.NewForConfigOrDie(protobufConfig(c.RESTConfig()))
	kpb := kubernetes.NewForConfigOrDie(protobufConfig(k.restConfig()))
	ctx := t.Context()

	for _, l := range protobufLists {
		eventually(t, converge, "the protobuf list "+l.path+" equal to the API server's", func() error {
			want, err := l.client(api).Get().AbsPath(l.path).Do(ctx).Get()
			if err != nil {
				return stopPolling{err}
			}
			got, err := l.client(kpb).Get().AbsPath(l.path).Do(ctx).Get()
			if err != nil {
				return stopPolling{err}
			}
			if fmt.Sprintf("%T", got) != fmt.Sprintf("%T", want) {
				return stopPolling{fmt.Errorf("%s: decoded as %T, want %T", l.path, got, want)}
			}
			return sameItems(want, got)
		})
	}
	pod := seeded.Pods[0]
	want, err := api.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want.ManagedFields = nil
	eventually(t, converge, "a protobuf get equal to the API server's", func() error {
		got, err := kpb.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d := cmp.Diff(want, got); d != "" {
			return fmt.Errorf("get %s/%s (-API server +kubeindex):\n%s", pod.Namespace, pod.Name, d)
		}
		return nil
	})

	checkProtobufContentTypes(t, c, k, pod.Namespace+"/pods/"+pod.Name)

	ch := &churner{cs: cs, namespaces: seeded.Namespaces, nodes: []string{seeded.Nodes[0].Name, seeded.Nodes[1].Name}}
	enableWatchListClient(t)
	node := "spec.nodeName=" + seeded.Nodes[0].Name
	infs := []*informerUnderTest{
		typedPodInformer("protobuf", kpb, "", false),
		typedPodInformer("protobuf watchlist", kpb, "", true),
		typedPodInformer("protobuf "+node, kpb, node, false),
	}
	runCtx, stop := context.WithCancel(context.Background())
	for _, inf := range infs {
		go inf.informer.RunWithContext(runCtx)
	}
	t.Cleanup(stop)
	if err := waitSynced(ctx, converge, infs); err != nil {
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
}

// sameItems compares two lists' items, less the managedFields kubeindex
// strips.
func sameItems(want, got runtime.Object) error {
	wi, err := meta.ExtractList(want)
	if err != nil {
		return stopPolling{err}
	}
	gi, err := meta.ExtractList(got)
	if err != nil {
		return stopPolling{err}
	}
	for _, o := range wi {
		if a, err := meta.Accessor(o); err == nil {
			a.SetManagedFields(nil)
		}
	}
	if len(wi) != len(gi) {
		return fmt.Errorf("%d items, the API server's list has %d", len(gi), len(wi))
	}
	for i := range wi {
		if !equality.Semantic.DeepEqual(wi[i], gi[i]) {
			return fmt.Errorf("item %d (-API server +kubeindex):\n%s", i, cmp.Diff(wi[i], gi[i]))
		}
	}
	return nil
}

// checkProtobufContentTypes asks both servers the same raw requests and
// requires the same status and Content-Type, and a protobuf body (the
// "k8s\x00" magic) where the API server's is one.
func checkProtobufContentTypes(t *testing.T, c *cluster.Cluster, k *kubeindex, podPath string) {
	t.Helper()
	apiHTTP, err := rest.HTTPClientFor(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	const pb = "application/vnd.kubernetes.protobuf"
	widgets := "/apis/" + cluster.WidgetGVR.Group + "/" + cluster.WidgetGVR.Version + "/" + cluster.WidgetGVR.Resource
	for _, r := range []struct{ path, accept string }{
		{"/api/v1/namespaces/" + podPath, pb},
		{"/api/v1/pods", pb},
		{"/api/v1/pods?watch=true&timeoutSeconds=1", pb},
		{"/api/v1/pods", pb + ";as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"},
		{"/api/v1/pods?watch=true&timeoutSeconds=1", pb + ";as=PartialObjectMetadata;g=meta.k8s.io;v=v1"},
		{"/api/v1/pods", pb + ";as=Table;g=meta.k8s.io;v=v1"},
		{widgets, pb},
		{widgets, pb + ", application/json"},
		{widgets, pb + ";as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"},
	} {
		want := rawGet(t, apiHTTP, c.Host+r.path, r.accept)
		got := rawGet(t, http.DefaultClient, k.URL+k8sPrefix+r.path, r.accept)
		if got.code != want.code || got.contentType != want.contentType || got.protobuf != want.protobuf {
			t.Errorf("GET %s as %q: kubeindex %+v, the API server %+v", r.path, r.accept, got, want)
		}
	}
}

type rawAnswer struct {
	code        int
	contentType string
	protobuf    bool // the body begins with the protobuf magic (a watch: after the frame's length)
}

func rawGet(t *testing.T, client *http.Client, url, accept string) rawAnswer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	head := make([]byte, 64)
	n, _ := readFull(resp, head)
	body := string(head[:n])
	return rawAnswer{code: resp.StatusCode, contentType: resp.Header.Get("Content-Type"),
		protobuf: strings.HasPrefix(body, "k8s\x00") || strings.Contains(body, "k8s\x00")}
}

func readFull(resp *http.Response, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := resp.Body.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
