package e2e

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// fleetSlot is how one cluster took part in an answer across clusters.
type fleetSlot struct {
	Cluster, State, Reason string
	Status                 int
}

// fleetUnion: the list across clusters, walked page by page in an order
// naming the cluster, and its counts grouped by cluster and phase are
// the union of what each API server lists itself.
func fleetUnion(t *testing.T, k *kubeindex, apis map[string]kubernetes.Interface) {
	type pod struct{ cluster, ns, name, phase string }
	eventually(t, converge, "the list across clusters equal to the API servers' union", func() error {
		var want []pod
		counts := map[string]int{}
		for name := range apis {
			list, err := apis[name].CoreV1().Pods("").List(t.Context(), metav1.ListOptions{})
			if err != nil {
				return stopPolling{err}
			}
			for _, p := range list.Items {
				want = append(want, pod{name, p.Namespace, p.Name, string(p.Status.Phase)})
				counts[name+"/"+string(p.Status.Phase)]++
			}
		}
		slices.SortFunc(want, func(a, b pod) int {
			return cmp.Or(strings.Compare(a.ns, b.ns), strings.Compare(a.name, b.name), -strings.Compare(a.cluster, b.cluster))
		})
		var got []pod
		q := url.Values{"sort": {"namespace,name,-cluster"}, "limit": {"40"}}
		for {
			var page struct {
				Metadata struct{ Continue string }
				Clusters []fleetSlot
				Items    []struct {
					Cluster string
					Object  struct {
						Metadata struct{ Namespace, Name string }
						Status   struct{ Phase string }
					}
				}
			}
			if err := k.getJSON("/api/v1/pods?"+q.Encode(), &page); err != nil {
				return err
			}
			if len(page.Clusters) != len(apis) || slices.ContainsFunc(page.Clusters, func(s fleetSlot) bool { return s.Status != 200 || apis[s.Cluster] == nil }) {
				return fmt.Errorf("slots %+v; expect one 200 for each of %d clusters", page.Clusters, len(apis))
			}
			for _, it := range page.Items {
				got = append(got, pod{it.Cluster, it.Object.Metadata.Namespace, it.Object.Metadata.Name, it.Object.Status.Phase})
			}
			if page.Metadata.Continue == "" {
				break
			}
			q.Set("continue", page.Metadata.Continue)
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("across clusters %d pods, the API servers %d", len(got), len(want))
		}
		var c struct {
			Total  int
			Groups []struct {
				Values []any
				Count  int
			}
		}
		if err := k.getJSON("/api/v1/resources/pods/counts?groupBy=cluster,status.phase", &c); err != nil {
			return err
		}
		gotCounts := map[string]int{}
		for _, g := range c.Groups {
			gotCounts[fmt.Sprint(g.Values[0])+"/"+fmt.Sprint(g.Values[1])] = g.Count
		}
		if c.Total != len(want) || fmt.Sprint(gotCounts) != fmt.Sprint(counts) {
			return fmt.Errorf("counts %d %v; the API servers %d %v", c.Total, gotCounts, len(want), counts)
		}
		return nil
	})
}

// fleetStatusCounts: GET /api/v1/resources/pods/counts?groupBy=cluster,status
// counts each cluster's pods by the STATUS column that kubectl prints
// against that cluster's API server.
func fleetStatusCounts(t *testing.T, k *kubeindex, apis map[string]*kubectlCmd) {
	t.Helper()
	eventually(t, converge, "counts by cluster and status equal to the API servers' STATUS columns", func() error {
		want, total := map[string]int{}, 0
		for name, kc := range apis {
			out, _, err := kc.run("get", "pods", "-A", "--no-headers")
			if err != nil {
				return stopPolling{err}
			}
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				// NAMESPACE NAME READY STATUS RESTARTS AGE
				if f := strings.Fields(line); len(f) >= 4 {
					want[name+"/"+f[3]]++
					total++
				}
			}
		}
		var c struct {
			Total    int
			Clusters []fleetSlot
			Groups   []struct {
				Values []any
				Count  int
			}
		}
		if err := k.getJSON("/api/v1/resources/pods/counts?groupBy=cluster,status", &c); err != nil {
			return err
		}
		got := map[string]int{}
		for _, g := range c.Groups {
			got[fmt.Sprint(g.Values[0])+"/"+fmt.Sprint(g.Values[1])] = g.Count
		}
		if c.Total != total || fmt.Sprint(got) != fmt.Sprint(want) || len(c.Clusters) != len(apis) {
			return fmt.Errorf("counts %d %v (slots %+v); the API servers %d %v", c.Total, got, c.Clusters, total, want)
		}
		return nil
	})
}
