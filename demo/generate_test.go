package demo

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func parse(objs [][]byte) []gjson.Result {
	out := make([]gjson.Result, len(objs))
	for i, b := range objs {
		out[i] = gjson.ParseBytes(b)
	}
	return out
}

func TestGeneratedShape(t *testing.T) {
	t.Parallel()
	opts := Options{Seed: 42, Namespaces: 3, Nodes: 4, DeploymentsPerNamespace: 2, Now: fixedClock}
	c := newCluster(t, opts)
	count := func(r string) int { return len(c.Objects(r)) }
	if count(Namespaces) != 4+3 || count(Nodes) != 4 || count(Deployments) != 3*2+1 ||
		count(ReplicaSets) != 3*2+1 || count(Services) != 3*2+2 {
		t.Errorf("counts: ns %d nodes %d deploy %d rs %d svc %d", count(Namespaces), count(Nodes),
			count(Deployments), count(ReplicaSets), count(Services))
	}
	for _, r := range []string{Namespaces, Nodes, Pods, Services, Deployments, ReplicaSets} {
		for _, o := range parse(c.Objects(r)) {
			min := 1
			if r == Pods || r == Deployments || r == ReplicaSets || r == Nodes {
				min = 2
			}
			if n := len(o.Get("metadata.managedFields").Array()); n < min {
				t.Errorf("%s %s has %d managedFields", r, o.Get("metadata.name"), n)
			}
			if o.Get("metadata.uid").Str == "" || o.Get("metadata.resourceVersion").Str == "" {
				t.Errorf("%s %s lacks uid or resourceVersion", r, o.Get("metadata.name"))
			}
		}
	}
	for _, p := range parse(c.Objects(Pods)) {
		cs := p.Get("spec.containers").Array()
		if len(cs) != 2 {
			t.Fatalf("pod %s has %d containers", p.Get("metadata.name"), len(cs))
		}
		for _, path := range []string{"image", "env.0.name", "ports.0.containerPort", "readinessProbe", "resources.requests.cpu", "volumeMounts.0.mountPath"} {
			if !cs[0].Get(path).Exists() {
				t.Errorf("pod %s container lacks %s", p.Get("metadata.name"), path)
			}
		}
	}
	for _, s := range parse(c.Objects(Services)) {
		if s.Get("spec.clusterIP").Str == "" || s.Get("metadata.name").Str != "kubernetes" && !s.Get("spec.selector").Exists() {
			t.Errorf("service %s: %s", s.Get("metadata.name"), s.Get("spec"))
		}
	}
}

func TestOwnership(t *testing.T) {
	t.Parallel()
	c := newCluster(t, Options{Seed: 9, Now: fixedClock})
	for range 100 {
		c.Step()
	}
	uids := map[string]gjson.Result{}
	for _, r := range []string{Deployments, ReplicaSets} {
		for _, o := range parse(c.Objects(r)) {
			uids[o.Get("metadata.uid").Str] = o
		}
	}
	for _, rs := range parse(c.Objects(ReplicaSets)) {
		ref := rs.Get("metadata.ownerReferences.0")
		dep, ok := uids[ref.Get("uid").Str]
		if !ok || ref.Get("kind").Str != "Deployment" || !ref.Get("controller").Bool() || dep.Get("metadata.name").Str != ref.Get("name").Str {
			t.Errorf("replicaset %s owner %s", rs.Get("metadata.name"), ref)
		}
	}
	live := map[string]int{}
	for _, p := range parse(c.Objects(Pods)) {
		ref := p.Get("metadata.ownerReferences.0")
		if !slices.Contains([]string{"ReplicaSet", "DaemonSet", "Job"}, ref.Get("kind").Str) {
			t.Errorf("pod %s owner %s", p.Get("metadata.name"), ref)
		}
		if ref.Get("kind").Str != "ReplicaSet" {
			continue
		}
		rs, ok := uids[ref.Get("uid").Str]
		if !ok || rs.Get("metadata.labels.pod-template-hash").Str != p.Get("metadata.labels.pod-template-hash").Str {
			t.Errorf("pod %s: owner %s not a replicaset of the same template", p.Get("metadata.name"), ref)
		}
		if !p.Get("metadata.deletionTimestamp").Exists() {
			live[ref.Get("uid").Str]++
		}
	}
	for _, rs := range parse(c.Objects(ReplicaSets)) {
		if want := int(rs.Get("spec.replicas").Int()); live[rs.Get("metadata.uid").Str] != want {
			t.Errorf("replicaset %s: %d live pods, spec.replicas %d", rs.Get("metadata.name"), live[rs.Get("metadata.uid").Str], want)
		}
	}
}

func TestNetworkingCases(t *testing.T) {
	t.Parallel()
	c := newCluster(t, Options{Seed: 4, Now: fixedClock})
	check := func(t *testing.T) {
		nodeIPs := map[string][]string{}
		for _, n := range parse(c.Objects(Nodes)) {
			for _, a := range n.Get(`status.addresses.#(type=="InternalIP")#.address`).Array() {
				nodeIPs[n.Get("metadata.name").Str] = append(nodeIPs[n.Get("metadata.name").Str], a.Str)
			}
		}
		byIP := map[string][]gjson.Result{}
		var dual, hostShared, reuse int
		for _, p := range parse(c.Objects(Pods)) {
			ip := p.Get("status.podIP").Str
			if ip != "" {
				byIP[ip] = append(byIP[ip], p)
			}
			var ips []string
			for _, x := range p.Get("status.podIPs.#.ip").Array() {
				ips = append(ips, x.Str)
			}
			node := p.Get("spec.nodeName").Str
			if p.Get("status.hostIP").Str != nodeIPs[node][0] {
				t.Errorf("pod %s hostIP %s, node %s has %v", p.Get("metadata.name"), p.Get("status.hostIP"), node, nodeIPs[node])
			}
			if p.Get("spec.hostNetwork").Bool() && !slices.Equal(ips, nodeIPs[node]) {
				t.Errorf("hostNetwork pod %s has %v, node %v", p.Get("metadata.name"), ips, nodeIPs[node])
			}
			if len(ips) == 2 && netip.MustParseAddr(ips[0]).Is4() && netip.MustParseAddr(ips[1]).Is6() {
				dual++
			}
		}
		for ip, pods := range byIP {
			var active, completed, host int
			for _, p := range pods {
				switch {
				case p.Get("spec.hostNetwork").Bool():
					host++
				case p.Get("status.phase").Str == "Succeeded":
					completed++
				default:
					active++
				}
			}
			if active > 1 {
				t.Errorf("IP %s held by %d running pods", ip, active)
			}
			if host > 1 {
				hostShared++
			}
			if completed > 0 && active > 0 {
				reuse++
			}
		}
		if dual == 0 || hostShared == 0 || reuse == 0 {
			t.Errorf("dual-stack pods %d, shared host IPs %d, reused IPs %d: want each > 0", dual, hostShared, reuse)
		}
	}
	t.Run("generated", check)
	for range 200 {
		c.Step()
	}
	t.Run("after churn", check)
	ipv6 := 0
	for _, p := range parse(c.Objects(Pods)) {
		for _, x := range p.Get("status.podIPs.#.ip").Array() {
			if strings.HasPrefix(x.Str, "fd00:10:244:") {
				ipv6++
			}
		}
	}
	if ipv6 == 0 {
		t.Error("no pod IPv6 address in fd00:10:244::/48")
	}
}

func TestDeterministic(t *testing.T) {
	t.Parallel()
	a, b := newCluster(t, Options{Seed: 5, Now: fixedClock}), newCluster(t, Options{Seed: 5, Now: fixedClock})
	other := newCluster(t, Options{Seed: 6, Now: fixedClock})
	equal := func(x, y *TestCluster) bool {
		for _, r := range []string{Namespaces, Nodes, Pods, Services, Deployments, ReplicaSets} {
			if !slices.EqualFunc(x.Objects(r), y.Objects(r), func(p, q []byte) bool { return string(p) == string(q) }) {
				return false
			}
		}
		return x.ResourceVersion() == y.ResourceVersion()
	}
	if !equal(a, b) {
		t.Fatal("same seed, different clusters")
	}
	if equal(a, other) {
		t.Fatal("different seeds, same cluster")
	}
	for range 100 {
		a.Step()
		b.Step()
	}
	if !equal(a, b) {
		t.Fatal("same seed, different churn")
	}
}
