package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// TestKubeTiered runs a second kubeindex whose kubeconfig points at the
// first one's Kubernetes API, so the second's informers (client-go's own
// reflector: discovery, lists, watches, a CRD) read nothing but kubeindex.
// Both must give the API server's answers (lists, objects, IP lookups) and
// streams that follow the API server's changes; a client-go informer on the
// second tier's Kubernetes API too. This is how caches fan out in tiers.
func TestKubeTiered(t *testing.T) {
	c := cluster.StartForTest(t)
	cs, dyn := c.Clients(t)
	seeded := cluster.SeedForTest(t, cs, dyn, cluster.SeedOptions{})
	api := newAPIServer(t, c)
	ctx := t.Context()

	first := startKubeAPIKubeindex(t, c.Kubeconfig)
	second := startKubeAPIKubeindex(t, kubeconfigFor(t, first.URL+k8sPrefix))
	tiers := map[string]*kubeindex{"first": first, "second": second}

	ns := seeded.Namespaces[0]
	byNS := url.Values{"namespace": {ns}}
	streams := map[string]*sseView{}
	for name, k := range tiers {
		streams[name] = subscribeSSE(t, k, "/api/v1/pods?watch=true&"+byNS.Encode())
	}
	kcs, err := kubernetes.NewForConfig(second.restConfig())
	if err != nil {
		t.Fatal(err)
	}
	infs := []*informerUnderTest{typedPodInformer("on the second tier", kcs, "", false)}
	runCtx, stop := context.WithCancel(context.Background())
	go infs[0].informer.RunWithContext(runCtx)
	t.Cleanup(stop)
	if err := waitSynced(ctx, converge, infs); err != nil {
		t.Fatal(err)
	}

	agree := func(what string) {
		t.Helper()
		eventually(t, converge, what, func() error {
			var errs []error
			for name, k := range tiers {
				if err := sameAnswers(ctx, k, api, cs, seeded); err != nil {
					errs = append(errs, fmt.Errorf("%s kubeindex: %w", name, err))
				}
				want, err := api.list(ctx, podsR, ns, nil)
				if err != nil {
					return err
				}
				if err := streams[name].matches(want); err != nil {
					errs = append(errs, fmt.Errorf("%s kubeindex's stream of %s: %w", name, ns, err))
				}
			}
			return errors.Join(errs...)
		})
		checkInformers(t, cs, infs, what)
	}
	agree("both tiers to sync")

	ch := &churner{cs: cs, namespaces: []string{ns}, nodes: []string{seeded.Nodes[0].Name, seeded.Nodes[1].Name}}
	ch.run(t, 20)
	agree("pods were created, relabelled and deleted")
}

// sameAnswers is nil when k answers as the API server does: lists of every
// cached resource, the seeded objects, and the lookup of every seeded IP.
func sameAnswers(ctx context.Context, k *kubeindex, api *apiServer, cs kubernetes.Interface, seeded *cluster.Seeded) error {
	for _, r := range []resource{podsR, servicesR, nodesR, namespacesR, deploymentsR, replicasetsR, widgetsR} {
		if err := sameList(ctx, k, api, r, "", nil, nil); err != nil {
			return err
		}
	}
	for _, p := range seeded.Pods[:3] {
		if err := sameObject(ctx, k, api, podsR, p.Namespace, p.Name); err != nil {
			return err
		}
	}
	for _, w := range seeded.Widgets[:2] {
		if err := sameObject(ctx, k, api, widgetsR, w.GetNamespace(), w.GetName()); err != nil {
			return err
		}
	}
	for ip := range seeded.PodsByIP() {
		if _, err := sameIPLookup(ctx, k, cs, ip); err != nil {
			return err
		}
	}
	return nil
}
