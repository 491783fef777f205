package e2e

import (
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// converge bounds how long kubeindex may take to reflect what the API server
// already has: a watch event, or its first answers after /readyz.
const converge = 30 * time.Second

// customConfig is a user's --config: pods with a label and an image-path
// index besides the IP index, and the Widget CRD with gjson indexes on a
// scalar and an array.
const customConfig = `resources:
- resource: pods
  indexes:
  - {name: ip, type: podIP}
  - {name: node, type: nodeName}
  - {name: app, label: app}
  - {name: image, path: "spec.containers.#.image"}
- resource: nodes
- resource: widgets.example.com
  indexes:
  - {name: color, path: spec.color}
  - {name: tag, path: spec.tags}
`

func writeFile(t testing.TB, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// agreeEnv is what every part of TestAgreesWithAPIServer compares: a
// seeded cluster, its API server as the oracle, and two kubeindexes over
// it, one with the default configuration (def) and one with customConfig.
type agreeEnv struct {
	c           *cluster.Cluster
	cs          *kubernetes.Clientset
	dyn         *dynamic.DynamicClient
	seeded      *cluster.Seeded
	api         *apiServer
	def, custom *kubeindex
}

// TestAgreesWithAPIServer runs kubeindex with its default configuration and
// with a custom one against a seeded cluster, and compares every kind of
// answer with the API server's. Each subtest is a function below, named
// after it; Changes (changes_test.go) runs last, as it changes the cluster.
func TestAgreesWithAPIServer(t *testing.T) {
	c := cluster.StartForTest(t)
	cs, dyn := c.Clients(t)
	e := &agreeEnv{
		c: c, cs: cs, dyn: dyn,
		seeded: cluster.SeedForTest(t, cs, dyn, cluster.SeedOptions{}),
		api:    newAPIServer(t, c),
		def:    startKubeindex(t, "--kubeconfig", c.Kubeconfig),
		custom: startKubeindex(t, "--kubeconfig", c.Kubeconfig, "--config", writeFile(t, "config.yaml", customConfig)),
	}
	t.Run("GetByKey", e.testGetByKey)
	t.Run("Lists", e.testLists)
	t.Run("LookupByIP", e.testLookupByIP)
	t.Run("Counts", e.testCounts)
	t.Run("CustomIndexes", e.testCustomIndexes)
	t.Run("Changes", func(t *testing.T) { testChanges(t, e) })
}

// testGetByKey: GET by key is the API server's GET less managedFields,
// byte for byte once decoded, for every seeded object.
func (e *agreeEnv) testGetByKey(t *testing.T) {
	ctx, seeded := t.Context(), e.seeded
	type key struct {
		r        resource
		ns, name string
	}
	var ks []key
	for _, p := range seeded.Pods {
		ks = append(ks, key{podsR, p.Namespace, p.Name})
	}
	for _, n := range seeded.Nodes {
		ks = append(ks, key{nodesR, "", n.Name})
	}
	for _, d := range seeded.Deployments {
		ks = append(ks, key{deploymentsR, d.Namespace, d.Name})
	}
	for _, rs := range seeded.ReplicaSets {
		ks = append(ks, key{replicasetsR, rs.Namespace, rs.Name})
	}
	for _, s := range seeded.Services {
		ks = append(ks, key{servicesR, s.Namespace, s.Name})
	}
	for _, ns := range append([]string{seeded.SystemNamespace}, seeded.Namespaces...) {
		ks = append(ks, key{namespacesR, "", ns})
	}
	for _, k := range ks {
		eventually(t, converge, "GET "+k.r.kiPath(k.ns, k.name), func() error {
			return sameObject(ctx, e.def, e.api, k.r, k.ns, k.name)
		})
	}
	for _, w := range seeded.Widgets {
		eventually(t, converge, "GET widget "+w.GetName(), func() error {
			return sameObject(ctx, e.custom, e.api, widgetsR, w.GetNamespace(), w.GetName())
		})
	}
	for _, p := range seeded.Pods[:3] {
		eventually(t, converge, "GET pod with the custom config", func() error {
			return sameObject(ctx, e.custom, e.api, podsR, p.Namespace, p.Name)
		})
	}
	if r := e.def.get(t, podsR.kiPath(seeded.Namespaces[0], "no-such-pod")); r.code != http.StatusNotFound {
		t.Errorf("GET of a missing pod: %d, want 404: %s", r.code, r.body)
	}
}

// testLists: lists with namespace and label selectors are the API
// server's lists: the same objects at the same resourceVersions.
func (e *agreeEnv) testLists(t *testing.T) {
	ctx, seeded := t.Context(), e.seeded
	ns0 := seeded.Namespaces[0]
	mine := cluster.SeedLabel + "=" + seeded.Prefix
	type listCase struct {
		r         resource
		namespace string
		selector  string
	}
	var cases []listCase
	for _, r := range defaultResources {
		cases = append(cases, listCase{r, "", ""}, listCase{r, "", mine})
		if r.namespaced {
			cases = append(cases, listCase{r, ns0, ""}, listCase{r, ns0, "app=web"})
		}
	}
	cases = append(cases,
		listCase{podsR, "", "app in (web,api)," + mine},
		listCase{podsR, "", "app!=web," + mine},
		listCase{podsR, seeded.SystemNamespace, "app=node-agent"},
		listCase{nodesR, "", "topology.kubernetes.io/zone=zone-a," + mine},
		listCase{namespacesR, "", "team=team-b"},
	)
	for _, lc := range cases {
		kq, aq := url.Values{}, url.Values{}
		if lc.namespace != "" {
			kq.Set("namespace", lc.namespace)
		}
		if lc.selector != "" {
			kq.Set("labelSelector", lc.selector)
			aq.Set("labelSelector", lc.selector)
		}
		eventually(t, converge, "list "+lc.r.ki+" "+kq.Encode(), func() error {
			return sameList(ctx, e.def, e.api, lc.r, lc.namespace, kq, aq)
		})
	}
	for _, q := range []url.Values{{}, {"namespace": {ns0}}, {"labelSelector": {"color=red"}}} {
		aq := url.Values{"labelSelector": q["labelSelector"]}
		eventually(t, converge, "list widgets "+q.Encode(), func() error {
			return sameList(ctx, e.custom, e.api, widgetsR, q.Get("namespace"), q, aq)
		})
	}
}

// testLookupByIP: every seeded address, looked up both ways, is what the
// API server's field selector (and status.podIPs) says; the interesting
// ones are also pinned down by name in subtests, so that the seed cannot
// quietly lose them.
func (e *agreeEnv) testLookupByIP(t *testing.T) {
	ctx, seeded, def := t.Context(), e.seeded, e.def
	t.Run("EveryAddress", func(t *testing.T) {
		for ip := range seeded.PodsByIP() {
			eventually(t, converge, "lookup of "+ip, func() error {
				_, err := sameIPLookup(ctx, def, e.cs, ip)
				return err
			})
		}
	})

	// A Running pod owns a reused IP; the Succeeded pod that had it
	// follows, inactive.
	t.Run("ReusedIP", func(t *testing.T) {
		got := lookup(t, def, seeded.ReusedIP)
		if got.Match != "pod" || len(got.Pods) != 2 || !got.Pods[0].Active || got.Pods[0].Phase != "Running" ||
			got.Pods[1].Active || got.Pods[1].Phase != "Succeeded" {
			t.Errorf("reused IP %s: got %+v, want match pod, the Running pod then the Succeeded one", seeded.ReusedIP, got)
		}
	})

	// A node's address: every hostNetwork pod on the node, none owning it.
	t.Run("NodeAddress", func(t *testing.T) {
		for node, ip := range seeded.NodeIPs {
			got := lookup(t, def, ip)
			if got.Match != "hostNetwork" || len(got.Pods) < 2 {
				t.Errorf("node %s IP %s: match %q with %d pods, want hostNetwork with several", node, ip, got.Match, len(got.Pods))
			}
			for _, p := range got.Pods {
				if !p.HostNetwork {
					t.Errorf("node IP %s: pod %s/%s is not hostNetwork", ip, p.Namespace, p.Name)
				}
			}
		}
	})

	// Dual-stack: the secondary (IPv6) address finds its pod, in any
	// spelling, which the API server's field selector cannot do.
	t.Run("DualStack", func(t *testing.T) {
		var dual *corev1.Pod
		for _, p := range seeded.Pods {
			if len(p.Status.PodIPs) == 2 {
				dual = p
				break
			}
		}
		if dual == nil {
			t.Fatal("the seed has no dual-stack pod")
		}
		v6 := dual.Status.PodIPs[1].IP
		if !netip.MustParseAddr(v6).Is6() {
			t.Fatalf("pod %s: second IP %s is not IPv6", podKey(dual), v6)
		}
		for _, spelling := range []string{v6, expandIPv6(v6)} {
			got := lookup(t, def, spelling)
			if got.Match != "pod" || !slices.Equal(got.keys(), []string{podKey(dual)}) {
				t.Errorf("lookup of %s: %q %v, want pod %s", spelling, got.Match, got.keys(), podKey(dual))
			}
		}
		v4 := lookup(t, def, dual.Status.PodIPs[0].IP)
		if !slices.Equal(v4.keys(), []string{podKey(dual)}) {
			t.Errorf("lookup of %s: %v, want %s", dual.Status.PodIPs[0].IP, v4.keys(), podKey(dual))
		}
	})

	// The custom configuration has an IP index too.
	t.Run("CustomConfig", func(t *testing.T) {
		eventually(t, converge, "lookup with the custom config", func() error {
			_, err := sameIPLookup(ctx, e.custom, e.cs, seeded.ReusedIP)
			return err
		})
	})

	t.Run("Errors", func(t *testing.T) {
		for ip, code := range map[string]int{"192.0.2.254": http.StatusNotFound, "not-an-ip": http.StatusBadRequest} {
			if r := def.get(t, "/api/v1/ip/"+ip); r.code != code {
				t.Errorf("/api/v1/ip/%s: %d, want %d: %s", ip, r.code, code, r.body)
			}
		}
	})
}

// testCounts: the object counts of /api/v1/resources are the API server's.
func (e *agreeEnv) testCounts(t *testing.T) {
	ctx := t.Context()
	eventually(t, converge, "default counts to match", func() error {
		return sameCounts(ctx, e.def, e.api, defaultResources)
	})
	eventually(t, converge, "custom counts to match", func() error {
		return sameCounts(ctx, e.custom, e.api, []resource{podsR, nodesR, widgetsR})
	})
}

// indexCase is one custom index and the values the API server's objects
// give it: value → namespace/name keys.
type indexCase struct {
	r      resource
	index  string
	values map[string][]string
}

// testCustomIndexes: custom indexes (label, gjson path on pods; a scalar
// and an array path on a CRD) answer what filtering the API server's list
// says, one subtest per index.
func (e *agreeEnv) testCustomIndexes(t *testing.T) {
	for _, ic := range e.customIndexCases(t) {
		t.Run(ic.r.ki+"/"+ic.index, func(t *testing.T) { e.sameIndex(t, ic) })
	}
}

// customIndexCases computes, from the API server's lists, what each index
// of customConfig must hold.
func (e *agreeEnv) customIndexCases(t *testing.T) []indexCase {
	ctx := t.Context()
	widgets, err := e.dyn.Resource(cluster.WidgetGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := e.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	widgetValues := func(field string) map[string][]string {
		m := map[string][]string{}
		for _, w := range widgets.Items {
			vals, _, _ := unstructured.NestedFieldNoCopy(w.Object, "spec", field)
			switch v := vals.(type) {
			case string:
				m[v] = append(m[v], w.GetNamespace()+"/"+w.GetName())
			case []any:
				for _, s := range v {
					m[s.(string)] = append(m[s.(string)], w.GetNamespace()+"/"+w.GetName())
				}
			}
		}
		return m
	}
	podValues := func(of func(*corev1.Pod) []string) map[string][]string {
		m := map[string][]string{}
		for i := range pods.Items {
			for _, v := range of(&pods.Items[i]) {
				m[v] = append(m[v], podKey(&pods.Items[i]))
			}
		}
		return m
	}
	return []indexCase{
		{widgetsR, "color", widgetValues("color")},
		{widgetsR, "tag", widgetValues("tags")},
		{podsR, "app", podValues(func(p *corev1.Pod) []string {
			if v, ok := p.Labels["app"]; ok {
				return []string{v}
			}
			return nil
		})},
		{podsR, "image", podValues(func(p *corev1.Pod) []string {
			var out []string
			for _, c := range p.Spec.Containers {
				if !slices.Contains(out, c.Image) {
					out = append(out, c.Image)
				}
			}
			return out
		})},
	}
}

// sameIndex compares the custom kubeindex's index ic (its values with
// counts, and the lookup of each value) with what the API server says.
func (e *agreeEnv) sameIndex(t *testing.T, ic indexCase) {
	want := ic.values
	if len(want) < 2 {
		t.Fatalf("%s index %s: the seed gives only %d values", ic.r.ki, ic.index, len(want))
	}
	var values struct {
		Values []struct {
			Value string `json:"value"`
			Count int    `json:"count"`
		} `json:"values"`
	}
	if err := e.custom.getJSON("/api/v1/resources/"+ic.r.ki+"/indexes/"+ic.index, &values); err != nil {
		t.Fatal(err)
	}
	gotCounts, wantCounts := map[string]int{}, map[string]int{}
	for _, v := range values.Values {
		gotCounts[v.Value] = v.Count
	}
	for v, ks := range want {
		wantCounts[v] = len(ks)
		slices.Sort(ks)
		got, err := e.custom.list(ic.r, url.Values{"index": {ic.index}, "value": {v}})
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(ks, keys(got)); d != "" {
			t.Errorf("%s?index=%s&value=%s (-API server +kubeindex):\n%s", ic.r.ki, ic.index, v, d)
		}
	}
	if d := cmp.Diff(wantCounts, gotCounts); d != "" {
		t.Errorf("values of index %s/%s (-API server +kubeindex):\n%s", ic.r.ki, ic.index, d)
	}
}

// lookup asks kubeindex who has ip, expecting an answer.
func lookup(t *testing.T, k *kubeindex, ip string) ipLookup {
	t.Helper()
	var got ipLookup
	if err := k.getJSON("/api/v1/ip/"+url.PathEscape(ip), &got); err != nil {
		t.Fatal(err)
	}
	return got
}
