package cache_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
	"github.com/kubeindex/kubeindex/ipowner"
)

func names(l cache.IPLookup) string {
	var out []string
	for _, p := range l.Pods {
		out = append(out, "pod:"+p.Namespace+"/"+p.Name)
	}
	for _, s := range l.Services {
		out = append(out, "svc:"+s.Namespace+"/"+s.Name+":"+string(s.Role))
	}
	for _, n := range l.Nodes {
		out = append(out, "node:"+n.Name+":"+string(n.Role))
	}
	return strings.Join(out, " ")
}

func apply(t *testing.T, f *cachetest.Fixture, resource, obj string) {
	t.Helper()
	if err := f.Sim.Apply(resource, []byte(obj)); err != nil {
		t.Fatal(err)
	}
}

// TestOwnersOfEveryKind: given the demo cluster with pods, Services and
// Nodes cached, when an address is looked up, then every object holding it
// answers with its role, and a port picks among holders that share it.
func TestOwnersOfEveryKind(t *testing.T) {
	f := cachetest.Start(t, cachetest.DefaultSpecs()...)
	apply(t, f, "services", `{"metadata":{"namespace":"edge","name":"web"},"spec":{"type":"LoadBalancer","clusterIP":"10.96.200.1","clusterIPs":["10.96.200.1"],`+
		`"externalIPs":["192.0.2.10"],"ports":[{"port":80}]},"status":{"loadBalancer":{"ingress":[{"ip":"203.0.113.5"}]}}}`)
	apply(t, f, "services", `{"metadata":{"namespace":"edge","name":"tls"},"spec":{"clusterIP":"10.96.200.2","externalIPs":["192.0.2.10"],"ports":[{"port":443}]}}`)
	apply(t, f, "services", `{"metadata":{"namespace":"edge","name":"dns"},"spec":{"clusterIP":"10.96.200.3","ports":[{"port":53,"protocol":"UDP"}]}}`)
	apply(t, f, "services", `{"metadata":{"namespace":"edge","name":"headless"},"spec":{"clusterIP":"None","ports":[{"port":80}]}}`)
	cachetest.Eventually(t, "the services are cached", func() bool {
		l, err := f.Cache.LookupIP("10.96.200.3")
		return err == nil && len(l.Services) == 1
	})
	podIP := firstPodIP(t, f.Cache)
	tests := []struct {
		name     string
		q        ipowner.Query
		match    ipowner.Match
		via      string
		holders  string // a prefix of names(...)
		declared string // "", "true", "false": the port answer
	}{
		{"a ClusterIP", ipowner.Query{IP: "10.96.0.1"}, ipowner.MatchService, "", "svc:default/kubernetes:clusterIP", ""},
		{"a load balancer address", ipowner.Query{IP: "203.0.113.5"}, ipowner.MatchService, "", "svc:edge/web:loadBalancer", ""},
		{"an external IP two Services share", ipowner.Query{IP: "192.0.2.10"}, ipowner.MatchAmbiguous, "", "svc:edge/tls:externalIP svc:edge/web:externalIP", ""},
		{"the shared external IP by port", ipowner.Query{IP: "192.0.2.10", Port: ipowner.Port{Number: 443, Protocol: "TCP"}}, ipowner.MatchService, "port", "svc:edge/tls:externalIP", "true"},
		{"a port no Service declares", ipowner.Query{IP: "192.0.2.10", Port: ipowner.Port{Number: 8443, Protocol: "TCP"}}, ipowner.MatchAmbiguous, "", "svc:edge/tls:externalIP svc:edge/web:externalIP", "false"},
		{"the protocol counts", ipowner.Query{IP: "10.96.200.3", Port: ipowner.Port{Number: 53, Protocol: "TCP"}}, ipowner.MatchService, "", "svc:edge/dns:clusterIP", "false"},
		{"a node address", ipowner.Query{IP: "10.0.0.12"}, ipowner.MatchHostNetwork, "", "pod:kube-system/kube-proxy", ""},
		{"a node address by a port one pod declares", ipowner.Query{IP: "10.0.0.12", Port: ipowner.Port{Number: 9100, Protocol: "TCP"}}, ipowner.MatchPod, "port", "pod:kube-system/node-exporter-b9jgt node:node-2:nodeInternal", "true"},
		{"a port both hostNetwork pods declare", ipowner.Query{IP: "10.0.0.12", Port: ipowner.Port{Number: 9090, Protocol: "TCP"}}, ipowner.MatchHostNetwork, "", "pod:kube-system/kube-proxy", "true"},
		{"a port nobody declares", ipowner.Query{IP: "10.0.0.12", Port: ipowner.Port{Number: 1, Protocol: "TCP"}}, ipowner.MatchHostNetwork, "", "pod:kube-system/kube-proxy", "false"},
		{"a pod's own address ignores the port", ipowner.Query{IP: podIP, Port: ipowner.Port{Number: 1, Protocol: "TCP"}}, ipowner.MatchPod, "", "pod:", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := f.Cache.LookupAddress(tt.q)
			if err != nil {
				t.Fatal(err)
			}
			declared := ""
			if l.Port != nil {
				declared = fmt.Sprint(l.Port.Declared)
			}
			if l.Match != tt.match || l.Via != tt.via || !strings.HasPrefix(names(l), tt.holders) || declared != tt.declared {
				t.Errorf("match %s via %q holders %q port declared %q; expect %s via %q holders %q... declared %q",
					l.Match, l.Via, names(l), declared, tt.match, tt.via, tt.holders, tt.declared)
			}
			if len(l.Items) != len(l.Pods) || len(l.ServiceItems) != len(l.Services) || len(l.NodeItems) != len(l.Nodes) {
				t.Errorf("objects do not follow the summaries: %d/%d %d/%d %d/%d", len(l.Items), len(l.Pods),
					len(l.ServiceItems), len(l.Services), len(l.NodeItems), len(l.Nodes))
			}
		})
	}
	if l, err := f.Cache.LookupIP("10.0.0.12"); err != nil || !strings.HasSuffix(names(l), "node:node-2:nodeInternal") {
		t.Errorf("a node address names the node after its hostNetwork pods: %q, %v", names(l), err)
	}
}

// TestOnlyPodsAnswerAsBefore: with only pods cached, a Service address is
// nobody's, worded as always, and a node address lists no node.
func TestOnlyPodsAnswerAsBefore(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	_, err := f.Cache.LookupIP("10.96.0.1")
	if !errors.Is(err, ipowner.ErrNotFound) || !strings.HasPrefix(err.Error(), "no pod has IP") {
		t.Errorf("a ClusterIP with only pods cached: %v; expect the pods-only not-found", err)
	}
	l, err := f.Cache.LookupIP("10.0.0.12")
	if err != nil || l.Match != ipowner.MatchHostNetwork || len(l.Nodes) != 0 || len(l.Services) != 0 {
		t.Errorf("a node address with only pods cached: %s %q, %v", l.Match, names(l), err)
	}
}

func firstPodIP(t *testing.T, c *cache.Cache) string {
	t.Helper()
	values, err := c.IndexValues("pods", "ip", 0, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range values.Values {
		if l, err := c.LookupIP(v.Value); err == nil && l.Match == ipowner.MatchPod && len(l.Pods) == 1 {
			return v.Value
		}
	}
	t.Fatal("no address with one pod")
	return ""
}

// TestPortNarrowsAtAMomentAsNow: given the demo's node address shared by
// hostNetwork pods, when a port one of them declares is asked about now
// and at a moment, then both answers name that pod and the node: the
// history narrows as a lookup of now does, and keeps the node.
func TestPortNarrowsAtAMomentAsNow(t *testing.T) {
	f := cachetest.Start(t, cachetest.DefaultSpecs()...)
	q := ipowner.Query{IP: "10.0.0.12", Port: ipowner.Port{Number: 9100, Protocol: "TCP"}}
	now, err := f.Cache.LookupAddress(q)
	if err != nil {
		t.Fatal(err)
	}
	q.At = time.Now()
	then, err := f.Cache.LookupAddress(q)
	if err != nil {
		t.Fatal(err)
	}
	var owners []string
	for _, o := range then.History.Owners {
		owners = append(owners, o.Kind.String()+":"+o.Namespace+"/"+o.Name)
	}
	slices.Sort(owners)
	want := []string{"Node:/node-2", "Pod:kube-system/node-exporter-b9jgt"}
	if names(now) != "pod:kube-system/node-exporter-b9jgt node:node-2:nodeInternal" || !slices.Equal(owners, want) ||
		then.Match != now.Match || then.Via != now.Via {
		t.Errorf("now: %s via %q %q; at a moment: %s via %q %v; expect both %v", now.Match, now.Via, names(now), then.Match, then.Via, owners, want)
	}
}

// TestOwnerTableAgreesWithStores: given the demo cluster's churn and
// random writes of pods (hostNetwork or not, completed or not), Services
// and nodes reusing a few addresses, and an outage during which objects
// are deleted and recreated under the same names (so the informers learn
// of it by relisting: tombstones and changes of UID), when the cache has
// caught up, then every address answers, with and without a port, what a
// scan of the informers' stores answers: the owner table is kept by the
// handler on every add, update and delete.
func TestOwnerTableAgreesWithStores(t *testing.T) {
	f := cachetest.Start(t, cachetest.DefaultSpecs()...)
	rng := rand.New(rand.NewPCG(15, 1))
	pool := []string{"10.250.0.1", "10.250.0.2", "10.250.0.3", "fd00:250::1", "10.0.0.12"}
	pick := func() string { return pool[rng.IntN(len(pool))] }
	write := func() {
		name := fmt.Sprintf("x%d", rng.IntN(4))
		ns := []string{"team-a", "team-b"}[rng.IntN(2)]
		switch rng.IntN(4) {
		case 0, 1:
			phase := []string{"Running", "Pending", "Succeeded"}[rng.IntN(3)]
			apply(t, f, "pods", fmt.Sprintf(`{"metadata":{"namespace":%q,"name":%q},"spec":{"nodeName":"node-1","hostNetwork":%t,`+
				`"containers":[{"name":"c","ports":[{"containerPort":9100}]}]},"status":{"phase":%q,"podIP":%q,"podIPs":[{"ip":%q}]}}`,
				ns, name, rng.IntN(2) == 0, phase, pick(), pick()))
		case 2:
			apply(t, f, "services", fmt.Sprintf(`{"metadata":{"namespace":%q,"name":%q},"spec":{"clusterIP":"None","externalIPs":[%q],"ports":[{"port":9100}]}}`,
				ns, name, pick()))
		case 3:
			apply(t, f, "nodes", fmt.Sprintf(`{"metadata":{"name":"extra-%s"},"status":{"addresses":[{"type":"InternalIP","address":%q}]}}`, name, pick()))
		}
	}
	remove := func() {
		kind := []string{"pods", "services", "nodes"}[rng.IntN(3)]
		ns, name := []string{"team-a", "team-b"}[rng.IntN(2)], fmt.Sprintf("x%d", rng.IntN(4))
		if kind == "nodes" {
			ns, name = "", "extra-"+name
		}
		f.Sim.Delete(kind, ns, name) // not there: nothing to do
	}
	for range 60 {
		write()
		if rng.IntN(3) == 0 {
			remove()
		}
		f.Sim.Step()
	}
	f.Sim.SetUnavailable(true)
	for range 30 {
		remove()
		write()
	}
	f.Sim.CompactHistory()
	f.Sim.SetUnavailable(false)

	var diff string
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(diff)
		}
	})
	cachetest.Eventually(t, "every address answers what the stores hold", func() bool {
		ips := slices.Concat(pool, f.Cache.StoreAddresses(), f.Cache.OwnerTableAddresses())
		for _, ip := range ips {
			for _, q := range []ipowner.Query{{IP: ip}, {IP: ip, Port: ipowner.Port{Number: 9100, Protocol: "TCP"}}} {
				got, gotErr := f.Cache.LookupAddress(q)
				want, wantErr := f.Cache.ScanAddress(q)
				if d := cache.DiffAnswers(got, want); d != "" || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
					diff = fmt.Sprintf("%s port %d: %s (errors %v, %v)", ip, q.Port.Number, d, gotErr, wantErr)
					return false
				}
			}
		}
		return true
	})
}
