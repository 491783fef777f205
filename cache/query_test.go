package cache_test

import (
	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
	"github.com/kubeindex/kubeindex/ipowner"

	"errors"
	"slices"
	"testing"
)

func TestLookupIPKinds(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	c := f.Cache
	values, err := c.IndexValues("pods", "ip", 0, "")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[ipowner.Match]int{}
	for _, v := range values.Values {
		res, err := c.LookupIP(v.Value)
		if err != nil {
			t.Fatalf("%s is an index value but LookupIP says %v", v.Value, err)
		}
		if len(res.Items) != v.Count || len(res.Pods) != v.Count {
			t.Fatalf("%s: %d items, %d pods; the index counts %d", v.Value, len(res.Items), len(res.Pods), v.Count)
		}
		for i, p := range res.Pods {
			if res.Items[i].Name() != p.Name {
				t.Fatalf("%s: pods and items out of order", v.Value)
			}
		}
		seen[res.Match]++
		switch res.Match {
		case ipowner.MatchHostNetwork:
			for _, p := range res.Pods {
				if p.Active() && !p.HostNetwork {
					t.Errorf("%s: hostNetwork match includes a pod network pod %s", v.Value, p.Name)
				}
			}
			if v.Count < 2 {
				t.Errorf("%s: hostNetwork IP shared by only %d pod", v.Value, v.Count)
			}
		case ipowner.MatchPod:
			if !res.Pods[0].Active() || res.Pods[0].HostNetwork {
				t.Errorf("%s: the owning pod must come first: %+v", v.Value, res.Pods)
			}
			if len(res.Pods) > 1 && res.Pods[1].Active() && !res.Pods[1].HostNetwork {
				t.Errorf("%s: two active pods but match is pod", v.Value)
			}
		}
	}
	// The demo generates every case; a lookup table missing one proves less.
	for _, m := range []ipowner.Match{ipowner.MatchPod, ipowner.MatchHostNetwork} {
		if seen[m] == 0 {
			t.Errorf("no IP classified %q among %d values", m, len(values.Values))
		}
	}
	reused := false
	for _, v := range values.Values {
		res, _ := c.LookupIP(v.Value)
		if res.Match == ipowner.MatchPod && len(res.Pods) == 2 && !res.Pods[1].Active() {
			reused = true
		}
	}
	if !reused {
		t.Error("no reused IP (a running and a completed pod) found; the demo generates one")
	}
}

func TestLookupIPErrors(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	if _, err := f.Cache.LookupIP("10.255.255.254"); !errors.Is(err, ipowner.ErrNotFound) {
		t.Errorf("unknown IP: %v; expect ipowner.ErrNotFound", err)
	}
	for _, bad := range []string{"web-0", "10.1.2", "", "1.2.3.4.5"} {
		if _, err := f.Cache.LookupIP(bad); !errors.Is(err, ipowner.ErrInvalid) {
			t.Errorf("LookupIP(%q): %v; expect ipowner.ErrInvalid", bad, err)
		}
	}
	g := cachetest.Start(t, cache.Spec{Resource: "pods"})
	if _, err := g.Cache.LookupIP("10.0.0.1"); !errors.Is(err, cache.ErrUnknownIndex) {
		t.Errorf("pods without a podIP index: %v; expect cache.ErrUnknownIndex", err)
	}
}

func TestListPagingCoversEverythingOnce(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	all, _ := f.Cache.List("pods", cache.ListQuery{})
	var got []string
	token := ""
	for page := 0; ; page++ {
		res, err := f.Cache.List("pods", cache.ListQuery{Limit: 7, Continue: token})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Items) > 7 {
			t.Fatalf("page of %d items with limit 7", len(res.Items))
		}
		for _, o := range res.Items {
			got = append(got, o.Key())
		}
		if res.Continue == "" {
			if res.Remaining != 0 {
				t.Errorf("last page says %d remain", res.Remaining)
			}
			break
		}
		token = res.Continue
	}
	var want []string
	for _, o := range all.Items {
		want = append(want, o.Key())
	}
	if !slices.Equal(got, want) || !slices.IsSorted(want) {
		t.Errorf("paged keys differ from the full, sorted list:\n got %v\nwant %v", got, want)
	}
}

func TestListFilters(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	c := f.Cache
	all, _ := c.List("pods", cache.ListQuery{})
	ns := all.Items[0].Namespace()
	byNS, _ := c.List("pods", cache.ListQuery{Namespace: ns})
	for _, o := range byNS.Items {
		if o.Namespace() != ns {
			t.Fatalf("namespace filter %s returned %s", ns, o.Key())
		}
	}
	if len(byNS.Items) == 0 || len(byNS.Items) == len(all.Items) {
		t.Fatalf("namespace filter returned %d of %d: proves nothing", len(byNS.Items), len(all.Items))
	}
	sel, _ := c.List("pods", cache.ListQuery{LabelSelector: "k8s-app in (kube-proxy,node-exporter)"})
	for _, o := range sel.Items {
		if name := o.Name(); name[:4] != "kube" && name[:4] != "node" {
			t.Errorf("label selector returned %s", o.Key())
		}
	}
	if len(sel.Items) == 0 {
		t.Error("label selector matched nothing")
	}
	notSel, _ := c.List("pods", cache.ListQuery{LabelSelector: "!k8s-app"})
	if len(notSel.Items)+len(withKey(c, "k8s-app")) != len(all.Items) {
		t.Errorf("!k8s-app and k8s-app do not partition the pods")
	}
}

func withKey(c *cache.Cache, key string) []*cache.Object {
	res, _ := c.List("pods", cache.ListQuery{LabelSelector: key})
	return res.Items
}

func TestQueryErrors(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec(), cache.Spec{Resource: "nodes"})
	c := f.Cache
	nodePage, _ := c.List("nodes", cache.ListQuery{Limit: 1})
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"bad selector", listErr(c, "pods", cache.ListQuery{LabelSelector: "app in ("}), cache.ErrInvalid},
		{"bad continue", listErr(c, "pods", cache.ListQuery{Continue: "!!!"}), cache.ErrInvalid},
		{"continue of another resource", listErr(c, "pods", cache.ListQuery{Continue: nodePage.Continue}), cache.ErrInvalid},
		{"index without value", listErr(c, "pods", cache.ListQuery{Index: "ip"}), cache.ErrInvalid},
		{"unknown index", listErr(c, "pods", cache.ListQuery{Index: "nope", Value: "x"}), cache.ErrUnknownIndex},
		{"bad IP for IP index", listErr(c, "pods", cache.ListQuery{Index: "ip", Value: "x"}), cache.ErrInvalid},
		{"namespace on cluster-scoped", listErr(c, "nodes", cache.ListQuery{Namespace: "a"}), cache.ErrInvalid},
		{"unknown resource", listErr(c, "widgets", cache.ListQuery{}), cache.ErrUnknownResource},
		{"get namespaced without namespace", getErr(c, "pods", "", "x"), cache.ErrInvalid},
		{"get cluster-scoped with namespace", getErr(c, "nodes", "a", "x"), cache.ErrInvalid},
		{"get missing", getErr(c, "pods", "a", "x"), cache.ErrNotFound},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, tt.want) {
			t.Errorf("%s: got %v; expect %v", tt.name, tt.err, tt.want)
		}
	}
}

func listErr(c *cache.Cache, r string, q cache.ListQuery) error { _, err := c.List(r, q); return err }
func getErr(c *cache.Cache, r, ns, n string) error              { _, _, err := c.Get(r, ns, n); return err }

func TestAliases(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec(), cache.Spec{Resource: "apps/v1/deployments"})
	for _, alias := range []string{"pods", "pod", "po", "Pod", "deployments", "deployments.apps", "deploy", "deployment"} {
		if _, err := f.Cache.ResourceStatus(alias); err != nil {
			t.Errorf("alias %q: %v", alias, err)
		}
	}
}

func TestNamespaceRestriction(t *testing.T) {
	f := cachetest.Start(t, cache.Spec{Resource: "pods", Namespaces: []string{"kube-system", "default"}, Indexes: cachetest.PodSpec().Indexes})
	res, err := f.Cache.List("pods", cache.ListQuery{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range res.Items {
		if o.Namespace() != "kube-system" && o.Namespace() != "default" {
			t.Fatalf("restricted cache holds %s", o.Key())
		}
	}
	want := 0
	for k := range simState(f, "pods") {
		if ns, _, _ := cutKey(k); ns == "kube-system" || ns == "default" {
			want++
		}
	}
	if len(res.Items) != want || want == 0 {
		t.Errorf("%d pods cached; the API server has %d in those namespaces", len(res.Items), want)
	}
	if _, _, err := f.Cache.Get("pods", res.Items[0].Namespace(), res.Items[0].Name()); err != nil {
		t.Error(err)
	}
}

func TestNotSyncedAnswers503(t *testing.T) {
	f := cachetest.New(t, cachetest.PodSpec()) // never started
	if _, err := f.Cache.List("pods", cache.ListQuery{}); !errors.Is(err, cache.ErrNotSynced) {
		t.Errorf("List before sync: %v; expect cache.ErrNotSynced, not an empty list", err)
	}
	if _, _, err := f.Cache.Get("pods", "a", "b"); !errors.Is(err, cache.ErrNotSynced) {
		t.Errorf("Get before sync: %v", err)
	}
	if f.Cache.Ready() {
		t.Error("Ready before sync")
	}
}
