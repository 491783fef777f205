package demo

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// TestPodsGrowsTheCluster: Options.Pods makes a cluster of that many pods,
// the scenario's and a crowd's in namespaces of their own, on one node per
// 500 pods; the whole cluster churns, and every pod stays labelled
// simulated.
func TestPodsGrowsTheCluster(t *testing.T) {
	t.Parallel()
	c := newCluster(t, Options{Seed: 7, Pods: 4000, Now: fixedClock})
	if n := len(c.Objects(Pods)); n != 4000 {
		t.Fatalf("%d pods; want 4000", n)
	}
	if n := len(c.Objects(Nodes)); n != 8 {
		t.Errorf("%d nodes; want 8 (one per 500 pods)", n)
	}
	namespaces := map[string]bool{}
	for _, o := range parse(c.Objects(Namespaces)) {
		namespaces[o.Get("metadata.name").Str] = true
	}
	before := map[string]string{}
	for _, p := range parse(c.Objects(Pods)) {
		ns := p.Get("metadata.namespace").Str
		if !namespaces[ns] {
			t.Fatalf("pod %s/%s: its namespace does not exist", ns, p.Get("metadata.name"))
		}
		if p.Get(`metadata.annotations.kubeindex\.dev/simulated`).Str != "true" {
			t.Fatalf("pod %s/%s is not labelled simulated", ns, p.Get("metadata.name"))
		}
		before[ns+"/"+p.Get("metadata.name").Str] = p.Get("metadata.resourceVersion").Str
	}
	for range 200 {
		if err := c.Step(); err != nil {
			t.Fatal(err)
		}
	}
	crowdChanged, scenarioChanged := 0, 0
	for _, p := range parse(c.Objects(Pods)) {
		k := p.Get("metadata.namespace").Str + "/" + p.Get("metadata.name").Str
		if before[k] == p.Get("metadata.resourceVersion").Str {
			continue
		}
		if strings.HasPrefix(k, "kube-system/") || isScenarioNamespace(p) {
			scenarioChanged++
		} else {
			crowdChanged++
		}
	}
	if crowdChanged == 0 || scenarioChanged == 0 {
		t.Errorf("after 200 steps, %d crowd pods and %d scenario pods changed; want both to churn", crowdChanged, scenarioChanged)
	}
}

func isScenarioNamespace(p gjson.Result) bool {
	switch p.Get("metadata.namespace").Str {
	case "shop", "payments", "search", "media", "default":
		return true
	}
	return false
}

func TestPodsOutOfRange(t *testing.T) {
	t.Parallel()
	for _, n := range []int{-1, MaxPods + 1} {
		if _, err := New(Options{Pods: n}); err == nil {
			t.Errorf("Pods: %d: no error", n)
		}
	}
}
