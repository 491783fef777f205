package cache_test

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
	"github.com/kubeindex/kubeindex/ipowner"
)

func keysOf(items []*cache.Object) []string {
	var out []string
	for _, o := range items {
		out = append(out, o.Key())
	}
	return out
}

func TestNamespaceScope(t *testing.T) {
	f := cachetest.Start(t, cachetest.DefaultSpecs()...)
	c := f.Cache
	all, err := c.List("pods", cache.ListQuery{})
	if err != nil {
		t.Fatal(err)
	}
	byNS := map[string][]string{}
	for _, o := range all.Items {
		byNS[o.Namespace()] = append(byNS[o.Namespace()], o.Key())
	}
	namespaces := slices.Sorted(maps.Keys(byNS))
	if len(namespaces) < 3 {
		t.Fatalf("the demo has pods in %v: too few to test with", namespaces)
	}
	a, b := namespaces[0], namespaces[1]
	tests := []struct {
		name string
		q    cache.ListQuery
		want []string
	}{
		{"nil: no restriction", cache.ListQuery{}, keysOf(all.Items)},
		{"empty: nothing", cache.ListQuery{Namespaces: []string{}}, nil},
		{"one", cache.ListQuery{Namespaces: []string{a}}, byNS[a]},
		{"two, unsorted, repeated", cache.ListQuery{Namespaces: []string{b, a, b}}, append(slices.Clone(byNS[a]), byNS[b]...)},
		{"with a namespace inside", cache.ListQuery{Namespace: b, Namespaces: []string{a, b}}, byNS[b]},
		{"with a namespace outside", cache.ListQuery{Namespace: b, Namespaces: []string{a}}, nil},
		{"unknown namespace", cache.ListQuery{Namespaces: []string{"nowhere"}}, nil},
		{"paged", cache.ListQuery{Namespaces: []string{a, b}, Limit: 1}, byNS[a][:1]},
	}
	for _, tt := range tests {
		res, err := c.List("pods", tt.q)
		if err != nil || !slices.Equal(keysOf(res.Items), tt.want) {
			t.Errorf("%s: %v %v; expect %v", tt.name, keysOf(res.Items), err, tt.want)
		}
	}
	// With an index: the index narrows, the scope filters.
	node, _ := c.IndexValues("pods", "node", 1, "")
	v := node.Values[0].Value
	every, _ := c.List("pods", cache.ListQuery{Index: "node", Value: v})
	scoped, _ := c.List("pods", cache.ListQuery{Index: "node", Value: v, Namespaces: []string{a}})
	for _, o := range every.Items {
		if in := slices.Contains(keysOf(scoped.Items), o.Key()); in != (o.Namespace() == a) {
			t.Errorf("index %s=%s, scope %s: %s included %v", "node", v, a, o.Key(), in)
		}
	}

	known := c.Namespaces()
	for _, ns := range namespaces {
		if !slices.Contains(known, ns) {
			t.Errorf("Namespaces() %v lacks %s, which holds pods", known, ns)
		}
	}
	if slices.Contains(known, "") || !slices.IsSorted(known) {
		t.Errorf("Namespaces() %v: expect sorted, without the cluster scope", known)
	}
	nsObjs, _ := c.List("namespaces", cache.ListQuery{})
	for _, o := range nsObjs.Items {
		if !slices.Contains(known, o.Name()) {
			t.Errorf("Namespaces() lacks the Namespace object %s", o.Name())
		}
	}
}

func TestResolve(t *testing.T) {
	f := cachetest.Start(t, cachetest.DefaultSpecs()...)
	for name, want := range map[string]string{"pods": "pods", "po": "pods", "Pod": "pods", "deploy": "deployments.apps", "deployments.apps": "deployments.apps"} {
		r, err := f.Cache.Resolve(name)
		if err != nil || r.GroupResource() != want {
			t.Errorf("Resolve(%q) = %v %v; expect %s", name, r.GroupResource(), err, want)
		}
	}
	if _, err := f.Cache.Resolve("widgets"); !errors.Is(err, cache.ErrUnknownResource) {
		t.Errorf("Resolve(widgets): %v", err)
	}
}

func TestIPLookupVisible(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	c := f.Cache
	values, _ := c.IndexValues("pods", "ip", 0, "")
	checked := 0
	for _, v := range values.Values {
		full, err := c.LookupIP(v.Value)
		if err != nil || len(full.Pods) < 2 {
			continue
		}
		checked++
		keep := full.Pods[len(full.Pods)-1].Namespace
		part, err := c.LookupAddress(ipowner.Query{IP: v.Value, Visible: func(_ ipowner.Kind, ns string) bool { return ns == keep }})
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range part.Pods {
			if p.Namespace != keep || part.Items[i].Name() != p.Name {
				t.Fatalf("%s: kept %s/%s (item %s)", v.Value, p.Namespace, p.Name, part.Items[i].Name())
			}
		}
		if len(part.Pods) == 1 && part.Pods[0].Active() && !part.Pods[0].HostNetwork && part.Match != ipowner.MatchPod {
			t.Errorf("%s: one active pod left, match %s; expect pod", v.Value, part.Match)
		}
		_, err = c.LookupAddress(ipowner.Query{IP: v.Value, Visible: func(ipowner.Kind, string) bool { return false }})
		_, unused := c.LookupIP("10.255.255.254")
		if !errors.Is(err, ipowner.ErrNotFound) || err.Error() != strings.Replace(unused.Error(), "10.255.255.254", v.Value, 1) {
			t.Errorf("%s restricted to nothing: %v; expect the not-found of an unused address (%v)", v.Value, err, unused)
		}
	}
	if checked == 0 {
		t.Fatal("the demo has no address with two pods")
	}
}

func TestHostileQueryValues(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	for _, q := range []cache.ListQuery{
		{LabelSelector: "app=web\x00,tier=x"},
		{Namespace: "\xff"},
		{Namespace: strings.Repeat("a", 64)},
		{Namespace: "a/b"},
	} {
		if _, err := f.Cache.List("pods", q); !errors.Is(err, cache.ErrInvalid) {
			t.Errorf("%#v: %v; expect ErrInvalid", q, err)
		}
		if _, err := f.Cache.Watch("pods", cache.WatchQuery{Namespace: q.Namespace, LabelSelector: q.LabelSelector, Snapshot: true}, make(chan struct{}, 1)); !errors.Is(err, cache.ErrInvalid) {
			t.Errorf("watch %#v: %v; expect ErrInvalid", q, err)
		}
	}
}
