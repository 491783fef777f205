package crowd_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeindex/kubeindex/demo/crowd"
	"github.com/kubeindex/kubeindex/demo/fakeapi"
	"github.com/kubeindex/kubeindex/internal/table"
)

func fixedClock() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }

func populated(t *testing.T, pods int) (*crowd.Crowd, *fakeapi.Server) {
	t.Helper()
	api := fakeapi.New(fakeapi.Options{Seed: 1, Now: fixedClock})
	c := crowd.New(crowd.Options{Seed: 1, Pods: pods, Now: fixedClock})
	nodes := []crowd.Node{{"node-1", "10.0.0.11"}, {"node-2", "10.0.0.12"}, {"node-3", "10.0.0.13"}}
	if err := c.Populate(api, nodes, pods); err != nil {
		t.Fatal(err)
	}
	return c, api
}

// strictPod decodes a stored pod as a corev1.Pod, refusing unknown
// fields: the crowd renders its JSON by hand, and a typo must fail here.
func strictPod(t *testing.T, raw []byte) *corev1.Pod {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var p corev1.Pod
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("a crowd pod is not a Pod: %v\n%s", err, raw)
	}
	return &p
}

// TestPopulate: the pods are well-formed Pods, spread over namespaces and
// nodes, each in a state kubectl prints as the crowd means it, with unique
// names and addresses, all labelled simulated.
func TestPopulate(t *testing.T) {
	t.Parallel()
	const n = 5000 // three namespaces
	c, api := populated(t, n)
	printer := table.ForResource(schema.GroupResource{Resource: "pods"})
	statuses, namespaces, nodes, ips := map[string]int{}, map[string]int{}, map[string]int{}, map[string]bool{}
	restarted, count := 0, 0
	api.Each("pods", func(_ uint64, raw []byte) {
		count++
		p := strictPod(t, raw)
		if !c.Owns(p.Namespace) || p.Annotations["kubeindex.dev/simulated"] != "true" || p.UID == "" || p.CreationTimestamp.IsZero() {
			t.Fatalf("pod %s/%s: namespace not the crowd's, or not labelled simulated, or no uid or creationTimestamp", p.Namespace, p.Name)
		}
		row, err := printer.Row(raw, fixedClock())
		if err != nil {
			t.Fatal(err)
		}
		statuses[row.Cells[2].(string)]++
		namespaces[p.Namespace]++
		nodes[p.Spec.NodeName]++
		if p.Status.PodIP != "" {
			if ips[p.Status.PodIP] {
				t.Errorf("address %s given twice", p.Status.PodIP)
			}
			ips[p.Status.PodIP] = true
		}
		if p.Status.ContainerStatuses[0].RestartCount > 0 {
			restarted++
		}
	})
	if count != n {
		t.Fatalf("%d pods; want %d", count, n)
	}
	// Pending pods print ContainerCreating, and evicted ones the reason
	// their app container terminated with, as kubectl prints them.
	for _, s := range []string{"Running", "ContainerCreating", "CrashLoopBackOff", "Error"} {
		if statuses[s] == 0 {
			t.Errorf("no pod is %s: %v", s, statuses)
		}
	}
	if statuses["Running"] < n*3/4 || len(namespaces) != 3 || len(nodes) != 3 || restarted < n/10 {
		t.Errorf("statuses %v, namespaces %v, nodes %v, %d restarted", statuses, namespaces, nodes, restarted)
	}
	var nsCount int
	api.Each("namespaces", func(uint64, []byte) { nsCount++ })
	if nsCount != 3 {
		t.Errorf("%d namespaces stored; want 3", nsCount)
	}
}

// TestStepChangesPods: churn changes pods through the API server's
// events (each a well-formed pod), keeps the number of pods, and is
// deterministic for a seed.
func TestStepChangesPods(t *testing.T) {
	t.Parallel()
	run := func() (string, int) {
		c, api := populated(t, 2000)
		before := api.ResourceVersion()
		for range 300 {
			if err := c.Step(); err != nil {
				t.Fatal(err)
			}
		}
		if api.ResourceVersion() == before {
			t.Fatal("300 steps changed nothing")
		}
		var digest bytes.Buffer
		count := 0
		api.Each("pods", func(_ uint64, raw []byte) {
			count++
			p := strictPod(t, raw)
			digest.WriteString(p.Name + p.ResourceVersion + string(p.Status.Phase))
		})
		return digest.String(), count
	}
	a, n := run()
	b, _ := run()
	if n != 2000 {
		t.Errorf("%d pods after churn; want 2000 (a replacement keeps the count)", n)
	}
	if a != b {
		t.Error("two crowds with the same seed churned differently")
	}
}

func TestPopulateRefusesBadInput(t *testing.T) {
	t.Parallel()
	api := fakeapi.New(fakeapi.Options{})
	c := crowd.New(crowd.Options{Pods: 10})
	if err := c.Populate(api, nil, 10); err == nil {
		t.Error("pods without nodes: no error")
	}
	if err := c.Populate(api, []crowd.Node{{"n", "10.0.0.1"}}, -1); err == nil {
		t.Error("-1 pods: no error")
	}
}
