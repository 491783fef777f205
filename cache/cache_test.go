package cache_test

import (
	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
	"github.com/kubeindex/kubeindex/ipowner"

	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/tidwall/gjson"
)

// simState is the oracle's view: key → resourceVersion.
func simState(f *cachetest.Fixture, plural string) map[string]string {
	out := map[string]string{}
	for _, raw := range f.Sim.Objects(plural) {
		m := gjson.GetManyBytes(raw, "metadata.namespace", "metadata.name", "metadata.resourceVersion")
		key := m[1].Str
		if m[0].Str != "" {
			key = m[0].Str + "/" + key
		}
		out[key] = m[2].Str
	}
	return out
}

func TestCacheMatchesAPIServer(t *testing.T) {
	f := cachetest.Start(t, cachetest.DefaultSpecs()...)
	for _, st := range f.Cache.Resources() {
		t.Run(st.Name, func(t *testing.T) {
			want := simState(f, st.Plural)
			if len(want) == 0 {
				t.Fatalf("the demo has no %s: the comparison would prove nothing", st.Name)
			}
			cachetest.Eventually(t, "the cache equals the API server", func() bool {
				return maps.Equal(cachetest.State(t, f.Cache, st.Name, cache.ListQuery{}), simState(f, st.Plural))
			})
			st, _ := f.Cache.ResourceStatus(st.Name)
			if int(st.Count) != len(want) || !st.Synced || !st.WatchConnected || st.Stale {
				t.Errorf("status %+v; expect count %d, synced, connected, fresh", st.Freshness, len(want))
			}
		})
	}
}

func TestObjectsAreCompact(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	res, _ := f.Cache.List("pods", cache.ListQuery{})
	for _, o := range res.Items {
		r := gjson.ParseBytes(o.Raw())
		if r.Get("metadata.managedFields").Exists() {
			t.Fatalf("%s kept managedFields", o.Key())
		}
		if r.Get("kind").Str != "Pod" || r.Get("apiVersion").Str != "v1" {
			t.Fatalf("%s lacks kind/apiVersion: %s", o.Key(), o.Raw()[:80])
		}
	}
}

func podJSON(ns, name, node, phase string, ips ...string) []byte {
	podIPs := "["
	for i, ip := range ips {
		if i > 0 {
			podIPs += ","
		}
		podIPs += fmt.Sprintf(`{"ip":%q}`, ip)
	}
	podIPs += "]"
	first := ""
	if len(ips) > 0 {
		first = ips[0]
	}
	return fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":%q,"labels":{"app":"probe"}},
		"spec":{"nodeName":%q,"containers":[{"name":"c","image":"probe:1"}]},
		"status":{"phase":%q,"podIP":%q,"podIPs":%s}}`, name, ns, node, phase, first, podIPs)
}

func TestAddUpdateDeleteReachIndexes(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	c := f.Cache
	if err := f.Sim.Apply("pods", podJSON("team-a", "probe", "node-9", "Running", "10.200.0.1", "fd00:200::1")); err != nil {
		t.Fatal(err)
	}
	cachetest.Eventually(t, "the new pod is found by IP", func() bool {
		res, err := c.LookupIP("10.200.0.1")
		return err == nil && len(res.Items) == 1 && res.Items[0].Key() == "team-a/probe" && res.Match == ipowner.MatchPod
	})
	for _, spelling := range []string{"fd00:200::1", "FD00:200:0:0:0:0:0:1", "fd00:0200::0001"} {
		if res, err := c.LookupIP(spelling); err != nil || res.Items[0].Key() != "team-a/probe" {
			t.Errorf("IPv6 spelling %q: %v", spelling, err)
		}
	}
	byNode, _ := c.List("pods", cache.ListQuery{Index: "node", Value: "node-9"})
	byImage, _ := c.List("pods", cache.ListQuery{Index: "image", Value: "probe:1"})
	if len(byNode.Items) != 1 || len(byImage.Items) != 1 {
		t.Errorf("node index %d, image index %d; expect 1 each", len(byNode.Items), len(byImage.Items))
	}

	// Update: the pod moves to another IP; the old one must stop finding it.
	if err := f.Sim.Apply("pods", podJSON("team-a", "probe", "node-9", "Running", "10.200.0.2")); err != nil {
		t.Fatal(err)
	}
	cachetest.Eventually(t, "the index follows the update", func() bool {
		_, errOld := c.LookupIP("10.200.0.1")
		res, errNew := c.LookupIP("10.200.0.2")
		return errors.Is(errOld, ipowner.ErrNotFound) && errNew == nil && len(res.Items) == 1
	})

	if err := f.Sim.Delete("pods", "team-a", "probe"); err != nil {
		t.Fatal(err)
	}
	cachetest.Eventually(t, "the delete removes the pod everywhere", func() bool {
		_, errIP := c.LookupIP("10.200.0.2")
		_, _, errGet := c.Get("pods", "team-a", "probe")
		byNode, _ := c.List("pods", cache.ListQuery{Index: "node", Value: "node-9"})
		return errors.Is(errIP, ipowner.ErrNotFound) && errors.Is(errGet, cache.ErrNotFound) && len(byNode.Items) == 0
	})
}

// TestDeleteWhileDisconnected drives client-go's tombstone path: the pod is
// deleted while the watch is down and its history is gone, so the informer
// only learns of it by relisting (DeletedFinalStateUnknown).
func TestDeleteWhileDisconnected(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	c := f.Cache
	before := cachetest.State(t, c, "pods", cache.ListQuery{})
	victim := slices.Sorted(maps.Keys(before))[0]
	ns, name, _ := cutKey(victim)

	f.Sim.SetUnavailable(true)
	f.Sim.DropWatches()
	cachetest.Eventually(t, "the watch is seen as down and stale", func() bool {
		st, _ := c.ResourceStatus("pods")
		return !st.WatchConnected && st.Stale
	})
	if _, _, err := c.Get("pods", ns, name); err != nil {
		t.Fatalf("during the outage the cache must keep answering: %v", err)
	}
	if err := f.Sim.Delete("pods", ns, name); err != nil {
		t.Fatal(err)
	}
	f.Sim.CompactHistory()
	f.Sim.SetUnavailable(false)

	cachetest.Eventually(t, "the cache converges after the outage", func() bool {
		st, _ := c.ResourceStatus("pods")
		return st.WatchConnected && !st.Stale && maps.Equal(cachetest.State(t, c, "pods", cache.ListQuery{}), simState(f, "pods"))
	})
	if _, _, err := c.Get("pods", ns, name); !errors.Is(err, cache.ErrNotFound) {
		t.Errorf("pod deleted during the outage: Get = %v; expect not found", err)
	}
	st, _ := c.ResourceStatus("pods")
	if int(st.Count) != len(simState(f, "pods")) {
		t.Errorf("count %d after tombstone; expect %d", st.Count, len(simState(f, "pods")))
	}
}

func cutKey(k string) (ns, name string, ok bool) {
	for i := range k {
		if k[i] == '/' {
			return k[:i], k[i+1:], true
		}
	}
	return "", k, false
}

func TestChurnConverges(t *testing.T) {
	f := cachetest.Start(t, cachetest.DefaultSpecs()...)
	for range 200 {
		f.Sim.Step()
	}
	for _, st := range f.Cache.Resources() {
		cachetest.Eventually(t, st.Name+" equals the API server after churn", func() bool {
			return maps.Equal(cachetest.State(t, f.Cache, st.Name, cache.ListQuery{}), simState(f, st.Plural))
		})
	}
}
