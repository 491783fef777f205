package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// searchNS holds the objects TestSearchAgreesWithAPIServer searches.
const searchNS = "search-e2e"

// searchFacts is an object as the search oracle reads it: from the API
// server's typed list, never from kubeindex.
type searchFacts struct {
	resource, namespace, name string
	labels                    map[string]string
	addrs                     [][2]string // address, the field it is read from
}

// oracleSearchHits is the search docs/query.md describes, written plainly:
// each object once by its best match; ordered by rank, resource,
// namespace, name.
func oracleSearchHits(objs []searchFacts, q string) []string {
	q = strings.TrimSpace(q)
	whole, err := netip.ParseAddr(q)
	isAddr := err == nil
	text := strings.ToLower(q)
	rank := func(s string) (int, bool) {
		s = strings.ToLower(s)
		switch {
		case s == text:
			return 0, true
		case strings.HasPrefix(s, text):
			return 1, true
		case strings.Contains(s, text):
			return 2, true
		}
		return 0, false
	}
	type hit struct {
		rank, match int
		key, value  string
		o           searchFacts
	}
	var hits []hit
	for _, o := range objs {
		var cands []hit
		if r, ok := rank(o.name); ok {
			cands = append(cands, hit{r, 0, "metadata.name", o.name, o})
		}
		for _, a := range o.addrs {
			addr := netip.MustParseAddr(a[0])
			switch {
			case isAddr && addr == whole.Unmap():
				cands = append(cands, hit{0, 1, a[1], addr.String(), o})
			case !isAddr:
				if r, ok := rank(addr.String()); ok {
					cands = append(cands, hit{r, 1, a[1], addr.String(), o})
				}
			}
		}
		for k, v := range o.labels {
			if r, ok := rank(v); ok {
				cands = append(cands, hit{r, 2, "metadata.labels." + strings.ReplaceAll(k, ".", `\.`), v, o})
			}
		}
		if len(cands) > 0 {
			hits = append(hits, slices.MinFunc(cands, func(a, b hit) int {
				return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.match, b.match), strings.Compare(a.key, b.key), strings.Compare(a.value, b.value))
			}))
		}
	}
	slices.SortFunc(hits, func(a, b hit) int {
		return cmp.Or(cmp.Compare(a.rank, b.rank), strings.Compare(a.o.resource, b.o.resource),
			strings.Compare(a.o.namespace, b.o.namespace), strings.Compare(a.o.name, b.o.name))
	})
	var out []string
	for _, h := range hits {
		out = append(out, fmt.Sprintf("%s %s %s/%s %s %s=%s", []string{"exact", "prefix", "substring"}[h.rank], h.o.resource,
			h.o.namespace, h.o.name, []string{"name", "ip", "label"}[h.match], h.key, h.value))
	}
	return out
}

// searchPages walks a search through kubeindex, limit hits a page, and
// checks that every page gives the same total.
func searchPages(t *testing.T, k *kubeindex, params url.Values, limit int) ([]string, error) {
	t.Helper()
	params = maps(params)
	params.Set("limit", fmt.Sprint(limit))
	var out []string
	total := -1
	for page := 0; page < 1000; page++ {
		var res struct {
			Total    int    `json:"total"`
			Continue string `json:"continue"`
			Items    []struct {
				Resource, Namespace, Name, Rank, Match, Key, Value string
				Object                                             struct {
					Metadata metav1.ObjectMeta `json:"metadata"`
					Spec     any               `json:"spec"`
				} `json:"object"`
			} `json:"items"`
		}
		if err := k.getJSON("/api/v1/search?"+params.Encode(), &res); err != nil {
			return nil, err
		}
		if total >= 0 && res.Total != total {
			return nil, fmt.Errorf("page %d: total %d, %d before", page, res.Total, total)
		}
		total = res.Total
		for _, it := range res.Items {
			if it.Object.Metadata.Name != it.Name || it.Object.Spec != nil {
				return nil, fmt.Errorf("%s/%s: the projected object is not the hit's, or shows its spec", it.Namespace, it.Name)
			}
			out = append(out, fmt.Sprintf("%s %s %s/%s %s %s=%s", it.Rank, it.Resource, it.Namespace, it.Name, it.Match, it.Key, it.Value))
		}
		if res.Continue == "" {
			if len(out) != total {
				return nil, fmt.Errorf("%d hits in all pages; total says %d", len(out), total)
			}
			return out, nil
		}
		params.Set("continue", res.Continue)
	}
	return nil, fmt.Errorf("no last page")
}

// apiSearchFacts reads the namespace's pods and Services, and the nodes,
// from the API server.
func apiSearchFacts(t *testing.T, ctx context.Context, c *cluster.Cluster) (namespaced, nodes []searchFacts) {
	t.Helper()
	cs, _ := c.Clients(t)
	pods, err := cs.CoreV1().Pods(searchNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		f := searchFacts{resource: "pods", namespace: p.Namespace, name: p.Name, labels: p.Labels}
		for _, ip := range p.Status.PodIPs {
			f.addrs = append(f.addrs, [2]string{ip.IP, "status.podIPs"})
		}
		namespaced = append(namespaced, f)
	}
	svcs, err := cs.CoreV1().Services(searchNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range svcs.Items {
		f := searchFacts{resource: "services", namespace: s.Namespace, name: s.Name, labels: s.Labels}
		for _, ip := range s.Spec.ClusterIPs {
			if ip != corev1.ClusterIPNone {
				f.addrs = append(f.addrs, [2]string{ip, "spec.clusterIPs"})
			}
		}
		for _, ip := range s.Spec.ExternalIPs {
			f.addrs = append(f.addrs, [2]string{ip, "spec.externalIPs"})
		}
		namespaced = append(namespaced, f)
	}
	ns, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns.Items {
		f := searchFacts{resource: "nodes", name: n.Name, labels: n.Labels}
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP {
				f.addrs = append(f.addrs, [2]string{a.Address, "status.addresses"})
			}
		}
		nodes = append(nodes, f)
	}
	return namespaced, nodes
}

// TestSearchAgreesWithAPIServer creates pods and Services with varied
// names, labels and addresses on a real API server, then searches them
// through kubeindex (names, label values, whole addresses and parts of
// them, paged) and compares every answer with the same search computed
// over the API server's own lists.
func TestSearchAgreesWithAPIServer(t *testing.T) {
	c := cluster.StartForTest(t)
	cs, _ := c.Clients(t)
	ctx := t.Context()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: searchNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.CoreV1().Namespaces().Delete(context.Background(), searchNS, metav1.DeleteOptions{}) })
	if _, err := cs.CoreV1().ServiceAccounts(searchNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	words := []string{"web", "db", "api"}
	for i := range 12 {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("srch-%s-%d", words[i%3], i), Namespace: searchNS,
				Labels: map[string]string{"app": []string{"Web", "db", "front-web"}[i%3], "app.kubernetes.io/part-of": "srch-" + words[(i+1)%3]}},
			Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "c", Image: "registry.example/app:1"}}},
		}
		created, err := cs.CoreV1().Pods(searchNS).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ips := []corev1.PodIP{{IP: fmt.Sprintf("10.60.0.%d", i+1)}}
		if i%4 == 0 {
			ips = append(ips, corev1.PodIP{IP: fmt.Sprintf("fd00:60::%x", i+1)})
		}
		created.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ips[0].IP, PodIPs: ips}
		if _, err := cs.CoreV1().Pods(searchNS).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i, name := range []string{"srch-web", "srch-db", "frontend"} {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: searchNS, Labels: map[string]string{"app": words[i]}},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
		}
		if i == 2 {
			svc.Spec.ExternalIPs = []string{"10.60.0.4"} // shares a pod's address
		}
		if _, err := cs.CoreV1().Services(searchNS).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	k := startKubeindex(t, "--kubeconfig", c.Kubeconfig)
	namespaced, nodes := apiSearchFacts(t, ctx, c)
	inNS := url.Values{"namespace": {searchNS}}
	eventually(t, converge, "kubeindex finds every object of the namespace", func() error {
		got, err := searchPages(t, k, url.Values{"namespace": {searchNS}, "q": {"e"}}, 100)
		if expect := oracleSearchHits(namespaced, "e"); err == nil && !slices.Equal(got, expect) {
			err = fmt.Errorf("got %q; expect %q", got, expect)
		}
		return err
	})

	var clusterIP string
	for _, o := range namespaced {
		if o.resource == "services" && o.name == "srch-db" {
			clusterIP = o.addrs[0][0]
		}
	}
	for _, q := range []string{"srch", "WEB", "front", "srch-db", "10.60.0.4", "10.60.0.1", "10.60.0", ".0.1", "fd00:60::", "FD00:60::5",
		"fd00:60:0:0::1", clusterIP, clusterIP[:len(clusterIP)-1], "nothing-matches"} {
		expect := oracleSearchHits(namespaced, q)
		for _, limit := range []int{3, 1000} {
			p := maps(inNS)
			p.Set("q", q)
			got, err := searchPages(t, k, p, limit)
			if err != nil {
				t.Fatalf("search %q: %v", q, err)
			}
			if !slices.Equal(got, expect) {
				t.Errorf("search %q, pages of %d:\n got    %q\n expect %q", q, limit, got, expect)
			}
		}
	}

	// Nodes: a node's address, whole and in part, and its name, against
	// every node the API server lists.
	created, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "srch-node", Labels: map[string]string{"pool": "srch"}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.CoreV1().Nodes().Delete(context.Background(), "srch-node", metav1.DeleteOptions{}) })
	created.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.62.0.1"},
		{Type: corev1.NodeExternalIP, Address: "203.0.113.62"}, {Type: corev1.NodeHostName, Address: "srch-node"}}
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, converge, "kubeindex has the node's addresses", func() error {
		got, err := searchPages(t, k, url.Values{"q": {"10.62.0.1"}, "resources": {"nodes"}}, 10)
		if err == nil && len(got) != 1 {
			err = fmt.Errorf("got %q", got)
		}
		return err
	})
	_, nodes = apiSearchFacts(t, ctx, c)
	var node searchFacts
	for _, n := range nodes {
		if n.name == "srch-node" {
			node = n
		}
	}
	addr := node.addrs[0][0]
	for _, q := range []string{addr, addr[:len(addr)-1], "203.0.113", node.name, "SRCH"} {
		got, err := searchPages(t, k, url.Values{"q": {q}, "resources": {"nodes"}}, 2)
		if err != nil {
			t.Fatalf("search %q of nodes: %v", q, err)
		}
		if expect := oracleSearchHits(nodes, q); !slices.Equal(got, expect) {
			t.Errorf("search %q of nodes:\n got    %q\n expect %q", q, got, expect)
		}
	}
}

// TestFieldsColumnsAgreeWithAPIServerTable: a column in fields= is the
// cell the API server's own Table output prints for the object (what
// kubectl get shows), for pods whose readiness, restarts and states vary.
func TestFieldsColumnsAgreeWithAPIServerTable(t *testing.T) {
	const ns = "fields-e2e"
	c := cluster.StartForTest(t)
	cs, _ := c.Clients(t)
	ctx := t.Context()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("cols-", i), Namespace: ns},
			Spec: corev1.PodSpec{NodeName: fmt.Sprint("node-", i%2), Containers: []corev1.Container{{Name: "a", Image: "a:1"}, {Name: "b", Image: "b:1"}}}}
		created, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status = corev1.PodStatus{Phase: []corev1.PodPhase{corev1.PodRunning, corev1.PodPending, corev1.PodFailed}[i%3],
			PodIP: fmt.Sprintf("10.63.0.%d", i+1), PodIPs: []corev1.PodIP{{IP: fmt.Sprintf("10.63.0.%d", i+1)}}}
		for j, name := range []string{"a", "b"} {
			st := corev1.ContainerStatus{Name: name, Image: name + ":1", Ready: (i+j)%2 == 0, RestartCount: int32(i * j)}
			if st.Ready {
				st.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: created.CreationTimestamp}}
			} else {
				st.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
			}
			created.Status.ContainerStatuses = append(created.Status.ContainerStatuses, st)
		}
		if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	k := startKubeindex(t, "--kubeconfig", c.Kubeconfig)
	raw, err := cs.CoreV1().RESTClient().Get().Namespace(ns).Resource("pods").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatal(err)
	}
	expect := map[string]map[string]any{} // pod → column key → cell
	for _, row := range table.Rows {
		var meta metav1.PartialObjectMetadata
		if err := json.Unmarshal(row.Object.Raw, &meta); err != nil {
			t.Fatal(err)
		}
		cells := map[string]any{}
		for i, def := range table.ColumnDefinitions {
			cells[strings.ReplaceAll(strings.ToLower(def.Name), " ", "-")] = row.Cells[i]
		}
		expect[meta.Name] = cells
	}
	keys := []string{"ready", "status", "restarts", "ip", "node", "nominated-node", "readiness-gates"}
	eventually(t, converge, "kubeindex's columns are the API server's Table cells", func() error {
		var l struct {
			Items []struct {
				Metadata metav1.ObjectMeta          `json:"metadata"`
				Columns  map[string]json.RawMessage `json:"columns"`
			} `json:"items"`
		}
		if err := k.getJSON("/api/v1/pods?namespace="+ns+"&fields="+strings.Join(keys, ",")+",age", &l); err != nil {
			return err
		}
		if len(l.Items) != len(expect) {
			return fmt.Errorf("%d pods; the API server's Table has %d", len(l.Items), len(expect))
		}
		for _, it := range l.Items {
			for _, key := range keys {
				want, _ := json.Marshal(expect[it.Metadata.Name][key])
				if string(it.Columns[key]) != string(want) {
					return fmt.Errorf("%s: column %s is %s; the API server's Table prints %s", it.Metadata.Name, key, it.Columns[key], want)
				}
			}
			if len(it.Columns["age"]) < 3 { // a printed age such as "5s"; its second may differ from the Table's
				return fmt.Errorf("%s: age %s", it.Metadata.Name, it.Columns["age"])
			}
		}
		return nil
	})
}
